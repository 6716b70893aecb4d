"""HIR quantized-weight block: dequant_matmul."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import BLOCK_FLOAT_TYPES, QUANT_SCHEMES, scheme_display
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import AttrValues, Check, enum_attr, int_attr, opt
from rlx.ir.types import DType, TensorInfo


def _legacy(a: AttrValues) -> bool:
    scheme = a["scheme"]
    return scheme in QUANT_SCHEMES and not QUANT_SCHEMES[scheme].gguf


SCHEME = enum_attr("scheme", tuple(QUANT_SCHEMES), "weight format")
BLOCK_SIZE = int_attr("block_size", "weights per scale along K (legacy schemes; nvfp4: 16)",
                      when=_legacy)
OPERANDS = ["x", "w", opt("scale", _legacy), opt("zp", _legacy)]


def dequant_matmul_result(c: Check) -> TensorInfo:
    """Shared rule of HIR and MIR ``dequant_matmul``; returns the result type."""
    scheme = QUANT_SCHEMES[c.attr("scheme")]
    x = c.min_rank("x", 2)
    c.dtype("x", BLOCK_FLOAT_TYPES)
    k = x.shape[-1]
    if k is None:
        c.fail("operand 'x' dim -1", "a static contraction size K", str(x))
    c.rank("w", 2)
    c.dtype("w", {DType.I8})
    if scheme.gguf:
        if None in c["w"].shape:    # the lowering repacks the rows at their static sizes
            c.fail("operand 'w'", "a static shape [N, ROWBYTES] (a GGUF tensor's rows)",
                   str(c["w"]))
        if k % scheme.block_elems:
            c.fail("operand 'x' dim -1", f"a multiple of {scheme.block_elems} (the "
                   f"{scheme.name} block size)", f"K = {k}")
        c.dim("w", 1, scheme.row_bytes(k), f"bytes per row for K = {k}: {k} / "
              f"{scheme.block_elems} blocks * {scheme.block_bytes} bytes")
        return x.with_shape((*x.shape[:-1], c["w"].shape[0]))
    bs = c.attr("block_size")
    if scheme.name == "nvfp4" and bs != 16:
        c.fail("attribute 'block_size'", "16 (nvfp4 scales 16 weights along K)", str(bs))
    if bs <= 0 or k % bs:
        c.fail("attribute 'block_size'", f"a positive divisor of K = {k}", str(bs))
    if scheme.name == "nvfp4":
        c.dim("w", 0, k, "K = 'x' dim -1")
        packed = c["w"].shape[1]
        if packed is None:
            c.fail("operand 'w' dim 1", "a static size (N / 2 bytes of nibble pairs)",
                   str(c["w"]))
        n = packed * 2
        c.rank("scale", 2)
        c.dtype("scale", {DType.I8})
        c.shape("scale", (k // bs, n), "[K / 16, N] FP8-E4M3 block scales")
        c.dtype("zp", {DType.F32})
        c.shape("zp", (1,), "[1] f32 global scale")
    else:
        n = checks.weight_kn(c, "w", k, "K = 'x' dim -1")
        for name in ("scale", "zp"):
            c.dtype(name, {DType.F32})
            c.shape(name, (k // bs, n), f"[K / block_size, N] per-block {name}")
        n = n.size
    return x.with_shape((*x.shape[:-1], n))


@HIR.op(
    "dequant_matmul",
    operands=OPERANDS,
    attrs=[SCHEME, BLOCK_SIZE],
    label=lambda a: f"dequant_matmul({scheme_display(a['scheme'], a.get('block_size'))})",
)
def dequant_matmul(c: Check) -> list[TensorInfo]:
    """Matmul with quantized weights, dequantized on the fly.

    GGUF schemes (``gguf_q4_0`` ... ``gguf_q6_k``, ``gguf_q8_k``, ``gguf_f16``,
    ``gguf_bf16``) take ``x [..., K]`` and ``w``: the GGML tensor's raw bytes, one row per
    output feature, ``tensor<N x ROWBYTES x i8>`` with ``ROWBYTES = K / block * block_bytes``;
    ``y = x wᵀ``. Legacy schemes take ``[x, w_q, scale, zp]`` with ``block_size``:
    ``int8``: ``w_q [K, N]`` i8, ``scale``/``zp`` ``[K / bs, N]`` f32,
    ``w = (q - zp) * scale``; ``nvfp4``: ``w_q [K, N / 2]`` i8 (two E2M1 nibbles per byte,
    low nibble first along N), ``scale [K / 16, N]`` i8 E4M3 block scales, ``zp [1]`` f32
    global scale. Result ``[..., N]`` in the element type of ``x``.

    Example::

        %y = "rlx_hir.dequant_matmul"(%x, %w) {scheme = "gguf_q4_k"}
            : (tensor<1x4096xf32>, tensor<4096x2304xi8>) -> tensor<1x4096xf32>
    """
    return [dequant_matmul_result(c)]
