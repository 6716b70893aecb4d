"""numpy reference of ``dequant_matmul``, written from the spec (section 2.11) and ggml's block
layouts; it shares no code with the lowering.

GGUF weights are the tensor's raw bytes, one row per output feature (``[N, ROWBYTES]``, any
8-bit dtype); each row is ``K / block`` blocks laid out as ggml's ``block_*`` structs, and the
elements of a block come out in the order of ggml's ``dequantize_row_*``. Values are computed
in float32 in ggml's order of operations (scale products first, then ``scale * q - min``),
so they equal the ``gguf`` package's dequantization bit for bit; the matmul is float64.

Legacy schemes are ``[K, N]``: ``int8`` is ``w = (q - zp) * scale`` per ``block_size`` rows;
``nvfp4`` is ``E2M1[nibble] * E4M3FN(scale byte) * global`` with two nibbles per byte along N
(low nibble first) and 16 rows per scale (an E4M3FN NaN byte decodes to 0, as RLX does).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

F32 = np.float32
U8 = np.uint8


def _u8(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(U8)


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian f16 at byte ``at`` of every block, as float32 ``[..., 1]``."""
    return blocks[..., at:at + 2].copy().view(np.float16).astype(F32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """``qs [..., n]`` -> ``[..., 2n]``: the low nibbles of all bytes, then the high ones."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def _crumbs(qs: np.ndarray) -> np.ndarray:
    """``qs [..., 32]`` -> ``[..., 128]``: bits 0-1 of every byte, then bits 2-3, 4-5, 6-7."""
    return np.concatenate([(qs >> s) & 3 for s in (0, 2, 4, 6)], axis=-1)


def _bits(qh: np.ndarray, count: int) -> np.ndarray:
    """``qh [..., n]`` -> ``[..., count * n]``: bit 0 of every byte, then bit 1, ..."""
    return np.concatenate([(qh >> b) & 1 for b in range(count)], axis=-1)


# -- per-scheme block decoders: blocks [B, block_bytes] uint8 -> [B, block_elems] float32 --


def _q4_0(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 2:18]).astype(np.int16) - 8
    return _f16(b, 0) * q.astype(F32)


def _q4_1(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 4:20]).astype(F32)
    return _f16(b, 0) * q + _f16(b, 2)


def _q5_high(b: np.ndarray, at: int) -> np.ndarray:
    """The 32 fifth bits of a Q5_0 / Q5_1 block: bit e of the little-endian u32 at ``at``."""
    return _bits(b[:, at:at + 4], 8).reshape(-1, 8, 4).transpose(0, 2, 1).reshape(-1, 32)


def _q5_0(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 6:22]) | (_q5_high(b, 2) << 4)
    return _f16(b, 0) * (q.astype(np.int16) - 16).astype(F32)


def _q5_1(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 8:24]) | (_q5_high(b, 4) << 4)
    return _f16(b, 0) * q.astype(F32) + _f16(b, 2)


def _q8_0(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * b[:, 2:34].view(np.int8).astype(F32)


def _q2_k(b: np.ndarray) -> np.ndarray:
    """scales[16] | qs[64] | d | dmin; 16 groups of 16, each with a 4-bit scale and min."""
    sc = b[:, 0:16]
    d, dmin = _f16(b, 80), _f16(b, 82)
    dl = d * (sc & 15).astype(F32)
    ml = dmin * (sc >> 4).astype(F32)
    q = np.concatenate([_crumbs(b[:, 16 + 32 * h:48 + 32 * h]) for h in range(2)], axis=-1)
    q = q.reshape(-1, 16, 16).astype(F32)
    return (dl[:, :, None] * q - ml[:, :, None]).reshape(-1, 256)


def _k_scales_6bit(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits from 12 bytes (ggml get_scale_min_k4)."""
    sc = np.empty((*s.shape[:-1], 8), U8)
    mn = np.empty_like(sc)
    for j in range(4):
        sc[:, j] = s[:, j] & 63
        mn[:, j] = s[:, j + 4] & 63
        sc[:, j + 4] = (s[:, j + 8] & 15) | ((s[:, j] >> 6) << 4)
        mn[:, j + 4] = (s[:, j + 8] >> 4) | ((s[:, j + 4] >> 6) << 4)
    return sc, mn


def _q3_k(b: np.ndarray) -> np.ndarray:
    """hmask[32] | qs[64] | scales[12] | d; 16 groups of 16 with signed 6-bit scales."""
    raw = b[:, 96:108]
    low = np.concatenate([raw[:, 0:8] & 15, raw[:, 0:8] >> 4], axis=-1)
    high = np.concatenate([(raw[:, 8:12] >> s) & 3 for s in (0, 2, 4, 6)], axis=-1)
    sc = ((low | (high << 4)).astype(np.int16) - 32).astype(F32)
    dl = _f16(b, 108) * sc
    low2 = np.concatenate([_crumbs(b[:, 32 + 32 * h:64 + 32 * h]) for h in range(2)], axis=-1)
    hbit = _bits(b[:, 0:32], 8)
    q = low2.astype(np.int16) - 4 * (1 - hbit.astype(np.int16))
    return (dl[:, :, None] * q.reshape(-1, 16, 16).astype(F32)).reshape(-1, 256)


def _q4_k(b: np.ndarray) -> np.ndarray:
    """d | dmin | scales[12] | qs[128]; 8 groups of 32, 6-bit scales and mins."""
    sc, mn = _k_scales_6bit(b[:, 4:16])
    a = _f16(b, 0) * sc.astype(F32)
    m = _f16(b, 2) * mn.astype(F32)
    q = np.concatenate([_nibbles(b[:, 16 + 32 * p:48 + 32 * p]) for p in range(4)], axis=-1)
    return (a[:, :, None] * q.reshape(-1, 8, 32).astype(F32) - m[:, :, None]).reshape(-1, 256)


def _q5_k(b: np.ndarray) -> np.ndarray:
    """d | dmin | scales[12] | qh[32] | qs[128]; group j's fifth bits are bit j of qh."""
    sc, mn = _k_scales_6bit(b[:, 4:16])
    a = _f16(b, 0) * sc.astype(F32)
    m = _f16(b, 2) * mn.astype(F32)
    low = np.concatenate([_nibbles(b[:, 48 + 32 * p:80 + 32 * p]) for p in range(4)], axis=-1)
    q = (low | (_bits(b[:, 16:48], 8) << 4)).reshape(-1, 8, 32).astype(F32)
    return (a[:, :, None] * q - m[:, :, None]).reshape(-1, 256)


def _q6_k(b: np.ndarray) -> np.ndarray:
    """ql[128] | qh[64] | scales[16] (SIGNED) | d; two halves of 128."""
    halves = []
    for h in range(2):
        ql = b[:, 64 * h:64 * h + 64]
        qh = b[:, 128 + 32 * h:160 + 32 * h]
        low = _nibbles(ql)                      # 128: low nibbles of ql[0..63], then high
        high = _crumbs(qh)                      # 128: bits 0-1 of qh[0..31], then 2-3, ...
        halves.append(low | (high << 4))
    q = (np.concatenate(halves, axis=-1).astype(np.int16) - 32).astype(F32)
    a = _f16(b, 208) * b[:, 192:208].view(np.int8).astype(F32)
    return (a[:, :, None] * q.reshape(-1, 16, 16)).reshape(-1, 256)


def _q8_k(b: np.ndarray) -> np.ndarray:
    """d (f32) | qs[256] | bsums (ignored)."""
    d = b[:, 0:4].copy().view(F32)
    return d * b[:, 4:260].view(np.int8).astype(F32)


def _f16_elems(b: np.ndarray) -> np.ndarray:
    return b.copy().view(np.float16).astype(F32)


def _bf16_elems(b: np.ndarray) -> np.ndarray:
    return (b.copy().view(np.uint16).astype(np.uint32) << 16).view(F32)


DECODERS: dict[str, tuple[int, int, Callable[[np.ndarray], np.ndarray]]] = {
    "gguf_f16": (1, 2, _f16_elems),
    "gguf_bf16": (1, 2, _bf16_elems),
    "gguf_q4_0": (32, 18, _q4_0),
    "gguf_q4_1": (32, 20, _q4_1),
    "gguf_q5_0": (32, 22, _q5_0),
    "gguf_q5_1": (32, 24, _q5_1),
    "gguf_q8_0": (32, 34, _q8_0),
    "gguf_q2_k": (256, 84, _q2_k),
    "gguf_q3_k": (256, 110, _q3_k),
    "gguf_q4_k": (256, 144, _q4_k),
    "gguf_q5_k": (256, 176, _q5_k),
    "gguf_q6_k": (256, 210, _q6_k),
    "gguf_q8_k": (256, 292, _q8_k),
}
"""scheme -> (elements per block, bytes per block, block decoder)."""


def dequantize_gguf(raw: np.ndarray, scheme: str) -> np.ndarray:
    """Raw GGUF bytes ``[N, ROWBYTES]`` -> float32 weights ``[N, K]`` (ggml element order)."""
    elems, nbytes, decode = DECODERS[scheme]
    raw = _u8(raw)
    n, row = raw.shape
    if row % nbytes:
        raise ValueError(f"{scheme}: {row} bytes per row is not a multiple of {nbytes}")
    blocks = raw.reshape(-1, nbytes)
    return decode(blocks).reshape(n, row // nbytes * elems)


E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], F32)


def e4m3fn(byte: np.ndarray) -> np.ndarray:
    """OCP FP8 E4M3FN: bias 7, subnormals (m/8)·2⁻⁶, no infinities; NaN (S.1111.111) -> 0."""
    u = _u8(byte).astype(np.int32)
    sign = np.where(u >> 7, -1.0, 1.0)
    e, m = (u >> 3) & 15, u & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    mag = np.where((e == 15) & (m == 7), 0.0, mag)
    return (sign * mag).astype(F32)


def dequantize_legacy(w_q: np.ndarray, scale: np.ndarray, zp: np.ndarray, *, scheme: str,
                      block_size: int) -> np.ndarray:
    """Legacy weights -> float64 ``[K, N]``."""
    if scheme == "int8":
        q = np.asarray(w_q).view(np.int8).astype(np.float64)
        rep = np.repeat(np.asarray(scale, np.float64), block_size, axis=0)
        zero = np.repeat(np.asarray(zp, np.float64), block_size, axis=0)
        return (q - zero) * rep
    if scheme == "nvfp4":
        u = _u8(w_q)
        nib = np.stack([u & 15, u >> 4], axis=-1).reshape(u.shape[0], -1)
        scales = np.repeat(e4m3fn(scale).astype(np.float64), block_size, axis=0)
        glob = float(np.asarray(zp, np.float64).reshape(-1)[0])
        return E2M1[nib].astype(np.float64) * scales * glob
    raise ValueError(f"unknown legacy scheme {scheme!r}")


def dequant_matmul(x: np.ndarray, w: np.ndarray, scale: np.ndarray | None = None,
                   zp: np.ndarray | None = None, *, scheme: str,
                   block_size: int | None = None) -> np.ndarray:
    """``x [..., K]`` times the dequantized weights: ``x Wᵀ`` (GGUF) or ``x W`` (legacy)."""
    x = np.asarray(x, np.float64)
    if scheme in DECODERS:
        return x @ dequantize_gguf(w, scheme).astype(np.float64).T
    if scale is None or zp is None or block_size is None:
        raise ValueError(f"{scheme}: needs scale, zp and block_size")
    return x @ dequantize_legacy(w, scale, zp, scheme=scheme, block_size=block_size)


__all__ = ["DECODERS", "E2M1", "dequant_matmul", "dequantize_gguf", "dequantize_legacy",
           "e4m3fn"]
