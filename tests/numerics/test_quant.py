"""Numerics of dequant_matmul (hir_to_mir/quant.py, mir_to_linalg/quant/).

- GGUF: the weights IREE dequantizes equal ``gguf.quants.dequantize`` bit for bit, on random
  blocks in which every bit position is both set and clear somewhere (f16 scale fields are
  set to finite values of sane magnitude). The weights are read through the matmul itself:
  with ``x = I`` (prefill-shaped, llvm-cpu) or a one-hot ``x`` per column (decode-shaped,
  the dequant fused into the matvec; llvm-cpu and Vulkan), products with 1.0 and sums with
  0.0 are exact, except that an accumulator starting at +0.0 turns a -0.0 weight into +0.0,
  so zeros are compared without their sign. Q8_K, which the gguf package cannot dequantize,
  is compared with the numpy reference (itself checked against gguf for the other schemes).
- Legacy int8 / NVFP4 against the numpy reference written from the spec.
- Matmul results (leading and dynamic dims, f16 activations) within the dtype tolerance.
- One dispatch per decode-shaped (M = 1) dequant_matmul on llvm-cpu, CUDA and Vulkan (a
  GPU's target; lavapipe's dequantizes in a dispatch of its own); prefill shapes compile
  for Vulkan and CUDA, and every GGUF scheme runs on lavapipe at real models' row widths,
  prefill- and decode-shaped.

Modules are compiled with ``--iree-opt-const-expr-max-size-increase-threshold=0``: the test
weights are small enough that IREE would otherwise hoist the whole dequantization into an
initializer, and these tests are about the form that runs per call for real layer sizes
(the repacking of the raw bytes is still hoisted: it never grows the data).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from harness import DEVICE, TARGETS, check_module, require
from iree.compiler.tools.binaries import find_tool

import rlx
from rlx import reference
from rlx.cache import CompileCache
from rlx.compiler import TargetConfig, int_dot_of, vector_bits_of
from rlx.dialects.builder import HirValue
from rlx.dialects.enums import QUANT_SCHEMES
from rlx.ir.diagnostics import CompileError, LoweringError
from rlx.ir.types import DType
from rlx.lowering.mir_to_linalg.quant.gemv_batched import DYNAMIC_M
from rlx.lowering.mir_to_linalg.quant.gemv_kernels import (
    HALF_PLANE,
    M1_ONLY,
    MAX_BATCH,
    Kernel,
    kernel_for,
    workgroup_rows,
)
from rlx.lowering.registry import LoweringOptions
from rlx.reference import ops as ref_ops
from rlx.reference import quant as ref
from rlx.reference.tolerance import TOLERANCES, assert_close

NO_HOIST = ["--iree-opt-const-expr-max-size-increase-threshold=0"]
GGUF_SCHEMES = [s for s, q in QUANT_SCHEMES.items() if q.gguf]
F16_FIELDS = {"gguf_q4_0": [0], "gguf_q4_1": [0, 2], "gguf_q5_0": [0], "gguf_q5_1": [0, 2],
              "gguf_q8_0": [0], "gguf_q2_k": [80, 82], "gguf_q3_k": [108],
              "gguf_q4_k": [0, 2], "gguf_q5_k": [0, 2], "gguf_q6_k": [208]}
"""Byte offsets of the f16 scale fields of each block type (ggml's block structs)."""


def _finite_f16(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """f16 bit patterns with random sign and mantissa and exponents in [2⁻¹², 2⁻³]."""
    sign = rng.integers(0, 2, shape, dtype=np.uint16) << 15
    exp = rng.integers(3, 13, shape, dtype=np.uint16) << 10
    mant = rng.integers(0, 1024, shape, dtype=np.uint16)
    return (sign | exp | mant).astype(np.uint16)


def _half_bits(scheme: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """F16 / BF16 bit patterns: random sign and mantissa, normal exponents within ±2⁸. (BF16
    exponent 0 would be an f32 denormal, which IREE's CPU code flushes to zero.)"""
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << 15
    if scheme == "gguf_f16":
        exp, mant = rng.integers(7, 24, shape, dtype=np.uint32), rng.integers(0, 1 << 10, shape)
        return (sign | (exp << 10) | mant.astype(np.uint32)).astype(np.uint16)
    exp, mant = rng.integers(119, 136, shape, dtype=np.uint32), rng.integers(0, 1 << 7, shape)
    return (sign | (exp << 7) | mant.astype(np.uint32)).astype(np.uint16)


def random_blocks(scheme: str, rows: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``[rows, ROWBYTES]`` int8 of random blocks: every bit random except scale fields."""
    q = QUANT_SCHEMES[scheme]
    if scheme in ("gguf_f16", "gguf_bf16"):
        return _half_bits(scheme, (rows, k), rng).view(np.int8).reshape(rows, -1)
    blocks = rng.integers(0, 256, (rows, k // q.block_elems, q.block_bytes), dtype=np.uint8)
    for at in F16_FIELDS.get(scheme, []):
        blocks[:, :, at:at + 2] = _finite_f16(blocks.shape[:2], rng).view(np.uint8).reshape(
            *blocks.shape[:2], 2)
    if scheme == "gguf_q8_k":
        d = (rng.standard_normal(blocks.shape[:2]) * 1e-2).astype(np.float32)
        blocks[:, :, 0:4] = d.view(np.uint8).reshape(*blocks.shape[:2], 4)
    return blocks.reshape(rows, -1).view(np.int8)


def random_bits_cover(scheme: str, raw: np.ndarray) -> None:
    """Every bit of every non-scale byte of the block is set in some block, clear in another."""
    q = QUANT_SCHEMES[scheme]
    blocks = raw.view(np.uint8).reshape(-1, q.block_bytes)
    fixed = {b for at in F16_FIELDS.get(scheme, []) for b in (at, at + 1)}
    if scheme == "gguf_q8_k":
        fixed = set(range(4))
    free = [b for b in range(q.block_bytes) if b not in fixed]
    ors = np.bitwise_or.reduce(blocks[:, free], axis=0)
    ands = np.bitwise_and.reduce(blocks[:, free], axis=0)
    assert np.all(ors == 0xFF), f"{scheme}: some bit is never set"
    assert np.all(ands == 0), f"{scheme}: some bit is never clear"


def oracle(scheme: str, raw: np.ndarray) -> np.ndarray:
    """float32 ``[N, K]``: gguf's dequantization (Q8_K: the spec reference)."""
    if scheme == "gguf_q8_k":
        return ref.dequantize_gguf(raw, scheme)
    qtype = gguf.GGMLQuantizationType[scheme.removeprefix("gguf_").upper()]
    n = raw.shape[0]
    return np.asarray(gguf.quants.dequantize(raw.view(np.uint8), qtype), np.float32).reshape(n, -1)


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal bit patterns, -0.0 counted as +0.0."""
    g = (np.asarray(got, np.float32) + np.float32(0)).view(np.uint32)
    w = (np.asarray(want, np.float32) + np.float32(0)).view(np.uint32)
    bad = np.argwhere(g != w)
    assert not len(bad), (f"{what}: {len(bad)} of {g.size} weights differ, first at "
                          f"{bad[0].tolist()}: {got[tuple(bad[0])]!r} vs {want[tuple(bad[0])]!r}")


def gguf_module(k: int, rows: int, m: int | None, schemes: list[str]) -> rlx.HirModule:
    h = rlx.HirModule("gguf")
    x = h.input("x", (m, k))
    h.set_outputs([h.dequant_matmul(x, h.param(s, (rows, QUANT_SCHEMES[s].row_bytes(k)), "i8"),
                                    scheme=s) for s in schemes])
    return h


def legacy_weights(k: int, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """int8 (block 32) and NVFP4 operands; the NVFP4 scales take all 256 byte values."""
    scale_bytes = np.resize(np.arange(256, dtype=np.uint8), (k // 16, n))
    rng.shuffle(scale_bytes.reshape(-1))
    return {
        "i8.w": rng.integers(-128, 128, (k, n), dtype=np.int8),
        "i8.s": (rng.random((k // 32, n)) * 0.02 + 1e-3).astype(np.float32),
        "i8.z": rng.integers(-8, 8, (k // 32, n)).astype(np.float32),
        "fp4.w": rng.integers(0, 256, (k, n // 2), dtype=np.uint8).view(np.int8),
        "fp4.s": scale_bytes.view(np.int8),
        "fp4.g": np.array([0.37], np.float32),
    }


def all_schemes_module(k: int, rows: int, m: int | None, x_shape: tuple[int | None, ...]
                       | None = None, dtype: str = "f32") -> rlx.HirModule:
    """Every GGUF scheme (weights named after them, ``rows`` output features) and the two
    legacy ones (``rows`` too), on one input ``x``."""
    h = rlx.HirModule("quant")
    x = h.input("x", x_shape or (m, k), dtype)
    outs = [h.dequant_matmul(x, h.param(s, (rows, QUANT_SCHEMES[s].row_bytes(k)), "i8"),
                             scheme=s) for s in GGUF_SCHEMES]
    outs += [h.dequant_matmul(x, h.param("i8.w", (k, rows), "i8"),
                              h.param("i8.s", (k // 32, rows)), h.param("i8.z", (k // 32, rows)),
                              scheme="int8", block_size=32),
             h.dequant_matmul(x, h.param("fp4.w", (k, rows // 2), "i8"),
                              h.param("fp4.s", (k // 16, rows), "i8"), h.param("fp4.g", (1,)),
                              scheme="nvfp4", block_size=16)]
    h.set_outputs(outs)
    return h


def all_weights(k: int, rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    weights = {s: random_blocks(s, rows, k, rng) for s in GGUF_SCHEMES}
    weights.update(legacy_weights(k, rows, rng))
    return weights


def check_weights(columns: list[np.ndarray], weights: dict[str, np.ndarray], what: str) -> None:
    """``columns[i]``: the weights IREE computed for output i of :func:`all_schemes_module`
    (``[N, K]`` for GGUF, ``[K, N]`` for legacy): GGUF and NVFP4 bit for bit, int8 within
    the f32 tolerance (``(q - zp) * s`` rounds twice in f32, once in the float64 reference)."""
    for s, w in zip(GGUF_SCHEMES, columns, strict=False):
        assert_same_bits(w, oracle(s, weights[s]), f"{s} {what}")
    int8, fp4 = columns[len(GGUF_SCHEMES):]
    want8 = ref.dequantize_legacy(weights["i8.w"], weights["i8.s"], weights["i8.z"],
                                  scheme="int8", block_size=32)
    want4 = ref.dequantize_legacy(weights["fp4.w"], weights["fp4.s"], weights["fp4.g"],
                                  scheme="nvfp4", block_size=16)
    assert_close(int8.T, want8, "f32", f"int8 {what}")
    assert_same_bits(fp4.T, want4.astype(np.float32), f"nvfp4 {what}")


def one_hot_columns(prog: rlx.runtime.Program, k: int, outputs: int) -> list[np.ndarray]:
    """Call a decode-shaped (x [1, K]) module once per k with a one-hot x: output i's
    column k is weight column k."""
    cols: list[list[np.ndarray]] = [[] for _ in range(outputs)]
    for i in range(k):
        x = np.zeros((1, k), np.float32)
        x[0, i] = 1.0
        for c, y in zip(cols, prog.main(x), strict=True):
            c.append(y[0])
    return [np.stack(c, axis=1) for c in cols]


def test_reference_matches_gguf() -> None:
    """The spec reference equals gguf's dequantization (so it can stand in for Q8_K)."""
    rng = np.random.default_rng(1)
    for s in GGUF_SCHEMES:
        if s == "gguf_q8_k":
            continue
        raw = random_blocks(s, 8, 512, rng)
        assert_same_bits(ref.dequantize_gguf(raw, s), oracle(s, raw), s)


def test_weights_bit_exact_cpu_prefill() -> None:
    """llvm-cpu, x = I (M = K: the dequant runs as its own dispatch): every scheme. (The
    prefill kernels, whose Q4_K weight is ``S · f - M`` with one rounding, are off here;
    their results are checked in test_gemv_kernels_prefill.)"""
    k, rows = 512, 32
    weights = all_weights(k, rows, np.random.default_rng(0))
    for s in GGUF_SCHEMES:
        if s not in ("gguf_f16", "gguf_bf16"):
            random_bits_cover(s, weights[s])
    h = all_schemes_module(k, rows, k)
    prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu", extra_flags=NO_HOIST,
                                        prefill_kernels=False), "local-task", weights)
    outs = prog.main(np.eye(k, dtype=np.float32))
    check_weights([y.T for y in outs], weights, "on llvm-cpu (prefill)")


@pytest.mark.parametrize("target", TARGETS)
def test_weights_bit_exact_decode(target: str) -> None:
    """M = 1 (the dequant fused into the matvec): weight column k from a one-hot x, every k,
    every scheme. (llvm-cpu's GEMV kernels, which never form a weight, are off here; their
    results are checked in test_gemv_kernels.)"""
    require(target)
    k, rows = 256, 64
    weights = all_weights(k, rows, np.random.default_rng(2))
    for s in GGUF_SCHEMES:
        if s not in ("gguf_f16", "gguf_bf16"):
            random_bits_cover(s, weights[s])
    h = all_schemes_module(k, rows, 1)
    options = {"gemv_kernels": False} if target == "llvm-cpu" else {}
    prog = rlx.runtime.load(rlx.compile(h, target, extra_flags=NO_HOIST, **options),
                            DEVICE[target], weights)
    columns = one_hot_columns(prog, k, len(h.outputs))
    check_weights(columns, weights, f"on {target} (decode)")


def test_e4m3fn_reference_every_byte() -> None:
    """The reference E4M3FN decoder on all 256 bytes against the OCP definition."""
    got = ref.e4m3fn(np.arange(256, dtype=np.uint8))
    special = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0,
               0x7E: 448.0, 0x7F: 0.0, 0xFF: 0.0}   # 0x7F / 0xFF: NaN decodes to 0 (RLX)
    assert {b: float(got[b]) for b in special} == special
    assert np.array_equal(got[0x80:0xFF], -got[0x00:0x7F])


def test_matmul_numerics_cpu() -> None:
    """Every scheme on a random ``x [2, ?, K]`` (leading and dynamic dims) against the
    float64 reference."""
    k, rows = 512, 24
    weights = all_weights(k, rows, np.random.default_rng(4))
    check_module(all_schemes_module(k, rows, None, (2, None, k)), "llvm-cpu", dyn=3,
                 params=weights, extra_flags=NO_HOIST)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_numerics_decode(target: str) -> None:
    """Every scheme on a random decode-shaped x against the float64 reference."""
    k, rows = 256, 40
    weights = all_weights(k, rows, np.random.default_rng(5))
    check_module(all_schemes_module(k, rows, 1), target, params=weights, extra_flags=NO_HOIST)


def test_matmul_f16_activations() -> None:
    """f16 x: f32 accumulation, one rounding of the result to f16 (M = 3: Q8_0 and Q4_K
    through the batched GEMV kernels)."""
    k, rows = 256, 16
    weights = all_weights(k, rows, np.random.default_rng(6))
    check_module(all_schemes_module(k, rows, 3, dtype="f16"), "llvm-cpu", params=weights,
                 extra_flags=NO_HOIST)


GPU_OPTIONS = {"vulkan": {"vulkan_target": "ampere"}}
"""A GPU's Vulkan target (not lavapipe's llvmpipe, whose decode dequantizes apart)."""


def flow_exports(h: rlx.HirModule, target: str) -> list[str]:
    """The dispatch exports of @main at --compile-to=flow (no GPU needed): the dispatches of
    ``main$async``, whose body the synchronous ``main`` calls (rlx.lowering.exports)."""
    options = GPU_OPTIONS.get(target, {})
    text = rlx.compile(h, target, emit="linalg", extra_flags=NO_HOIST, **options)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "m.mlir"
        src.write_text(text)
        flags = TargetConfig(target, **options).flags()
        proc = subprocess.run([find_tool("iree-compile"), str(src), *flags, *NO_HOIST,
                               "--compile-to=flow"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    exports = re.findall(r"flow\.executable\.export public @([\w$]+)", proc.stdout)
    return [e for e in exports if e.startswith("main$async_")]  # the body: main calls it


KERNEL_SCHEMES = ("gguf_q8_0", "gguf_q4_k", "gguf_q5_0", "gguf_q4_0", "gguf_q6_k", "gguf_q5_k",
                  "gguf_f16", "gguf_bf16", "gguf_q5_1", "gguf_q4_1")
SUPERBLOCK = ("gguf_q4_k", "gguf_q5_k", "gguf_q6_k")
HALF = ("gguf_f16", "gguf_bf16")


def test_gemv_kernels() -> None:
    """llvm-cpu's hand-written decode GEMVs (Q8_0, Q4_K; Q5_0 and Q4_0 through the Q8_0
    kernel, widened to bytes; Q6_K from planes of the file's size; Q5_K through the Q4_K
    kernel with a fifth bit; F16 and BF16 values as in the file; Q5_1 and Q4_1 through the
    Q8_0 kernel with a min, widened to unsigned bytes) against the float64
    reference on blocks in which every bit is set and clear somewhere (F16 / BF16: random
    finite values), at row counts that give workgroups of 4, 8, 12, 20, 24 and 32 rows
    (gemv_kernels.workgroup_rows: any multiple of 4), K from one to four Q4_K superblocks
    and Q8_0 / Q5_0 at a 135M model's K = 576; the kernels are checked to be what ran."""
    rng = np.random.default_rng(7)
    h = rlx.HirModule("kernels")
    shapes = {"gguf_q8_0": ((4, 576), (48, 1536), (96, 1536), (128, 2048)),
              "gguf_q4_k": ((4, 256), (48, 512), (80, 1024), (128, 768)),
              "gguf_q5_0": ((4, 576), (48, 576), (96, 1536)),
              "gguf_q4_0": ((8, 512), (48, 1536)),
              "gguf_q6_k": ((4, 256), (48, 512), (96, 1536)),
              "gguf_q5_k": ((4, 256), (48, 512), (80, 1024)),
              "gguf_f16": ((4, 576), (48, 1536)),
              "gguf_bf16": ((8, 512), (48, 576)),
              "gguf_q5_1": ((4, 576), (48, 576)),
              "gguf_q4_1": ((48, 512),)}
    xs = {k: h.input(f"x{k}", (1, k)) for k in (256, 512, 576, 768, 1024, 1536, 2048)}
    weights = {}
    outs = []
    for s in KERNEL_SCHEMES:
        for rows, k in shapes[s]:
            name = f"{s}.{rows}x{k}"
            weights[name] = random_blocks(s, rows, k, rng)
            if rows >= 40 and s not in HALF:     # enough blocks to cover every bit
                random_bits_cover(s, weights[name])
            outs.append(h.dequant_matmul(xs[k], h.param(name, weights[name].shape, "i8"),
                                         scheme=s))
    h.set_outputs(outs)
    assert {workgroup_rows(r, k) for s in KERNEL_SCHEMES for r, k in shapes[s]} == {
        4, 8, 12, 20, 24, 32}
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    assert len(re.findall(r"flow\.dispatch @rlx_gemv_", linalg)) == len(outs)
    check_module(h, "llvm-cpu", params=weights)


@pytest.mark.parametrize("bits", [256, "host"])
def test_gemv_kernels_batched(bits: int | str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels for M = 2 .. MAX_BATCH rows of x (a batched decode step: x [M, K] or
    [1, M, K], y [M, N]; gemv_batched: a row tile dequantized once per chunk, multiplied
    with two rows of x at a time, or up to four with 16 lanes) against the float64
    reference on blocks that set every bit, every scheme, M odd (the last pass repeats row
    M - 1) and even, K of one chunk or several (K = 576: chunks of 6 blocks), with a
    residual add taken in (M = 4 and 3); M = MAX_BATCH + 1 runs the prefill form. With 8
    lanes (256-bit vectors, forced) and with what this machine has (16 lanes where it has
    AVX-512: the CPUs of CI). The kernels are checked to be what ran."""
    host = rlx.compiler.vector_bits_of("host", ())
    wide = "w" if bits == "host" and host == 512 else ""
    if bits == 256:
        monkeypatch.setattr(rlx.compiler, "vector_bits_of", lambda cpu, flags: 256)
    rng = np.random.default_rng(11)
    h = rlx.HirModule("batched")
    cases = [("gguf_q8_0", 3, 48, 576), ("gguf_q8_0", 8, 96, 1536), ("gguf_q4_k", 5, 48, 512),
             ("gguf_q4_k", 2, 80, 1024), ("gguf_q5_0", 7, 48, 576), ("gguf_q4_0", 4, 48, 1536),
             ("gguf_q6_k", 3, 48, 512), ("gguf_q6_k", 8, 96, 1536)]
    weights, outs = {}, []
    for s, m, rows, k in cases:
        name = f"{s}.{rows}x{k}"
        weights[name] = random_blocks(s, rows, k, rng)
        random_bits_cover(s, weights[name])
        x = h.input(f"x{len(outs)}", (1, m, k) if m == 4 else (m, k))
        outs.append(h.dequant_matmul(x, h.param(name, weights[name].shape, "i8"), scheme=s))
    for s, m in (("gguf_q4_k", 4), ("gguf_q8_0", 3)):         # r + W x, one dispatch
        r = h.input(f"r{m}", (m, 48))
        w = h.param(f"{s}.add", (48, QUANT_SCHEMES[s].row_bytes(512)), "i8")
        weights[f"{s}.add"] = random_blocks(s, 48, 512, rng)
        outs.append(h.mir("binary", [r, h.dequant_matmul(h.input(f"xr{m}", (m, 512)), w,
                                                          scheme=s)], kind="add"))
    big = h.param("big", (48, QUANT_SCHEMES["gguf_q8_0"].row_bytes(576)), "i8")
    weights["big"] = random_blocks("gguf_q8_0", 48, 576, rng)
    outs.append(h.dequant_matmul(h.input("x9", (MAX_BATCH + 1, 576)), big, scheme="gguf_q8_0"))
    h.set_outputs(outs)
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    ran = re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg)
    assert ran == [f"{s.removeprefix('gguf_')}_{rows}x{k}_m{m}{wide}"
                   for s, m, rows, k in cases] + [
        f"q4_k_48x512_m4{wide}_add", f"q8_0_48x512_m3{wide}_add", f"q8_0_48x576_mdyn{wide}"], ran
    check_module(h, "llvm-cpu", params=weights)


@pytest.mark.parametrize(("bits", "columns"), [(256, 16), ("host", 16), ("host", 32)])
def test_gemv_kernels_prefill(bits: int | str, columns: int,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefill form (x [1, S, K] with S dynamic, over the decode planes) against the
    float64 reference for every scheme it takes (F16, BF16, Q8_0, Q5_0, Q4_0, Q4_K, Q6_K), at
    S = 1, under one block, across blocks with a remainder (33, 67: blocks of 64 rows, passes
    of 16 or 8) and a pass that repeats its last row, and a residual add taken in; the
    kernels are checked to be what ran. With 8 lanes (forced) and with what this machine has
    (16 lanes where it has AVX-512): the outer-product form (gemm_prefill, x packed [T, K, 6]
    with 8 lanes, [T, K, 16] with 16) where a workgroup's rows are a multiple of 16 (48, 16,
    64, 32 rows here), the dot form (gemv_batched) where not (12, 40). On 16 lanes also in
    column blocks of 32 (``prefill_columns=32``, x packed [T, K, 8]) where N has them: F16
    with a chunk of 3 blocks (K = 96), Q8_0, Q4_0, and Q4_K / Q6_K, whose superblock's
    ``wtT`` is built in two spans (the residual add among them)."""
    host = rlx.compiler.vector_bits_of("host", ())
    wide = "w" if bits == "host" and host == 512 else ""
    if bits == 256:
        monkeypatch.setattr(rlx.compiler, "vector_bits_of", lambda cpu, flags: 256)
    rng = np.random.default_rng(23)
    h = rlx.HirModule("prefill")
    cases = [("gguf_f16", 48, 576), ("gguf_bf16", 16, 256), ("gguf_q8_0", 64, 1536),
             ("gguf_q8_0", 12, 576), ("gguf_q5_0", 48, 576), ("gguf_q4_0", 32, 512),
             ("gguf_q4_k", 48, 512), ("gguf_q6_k", 40, 512), ("gguf_f16", 32, 96),
             ("gguf_q6_k", 32, 768)]
    weights, outs = {}, []
    for s, rows, k in cases:
        name = f"{s}.{rows}x{k}"
        weights[name] = random_blocks(s, rows, k, rng)
        if s not in HALF_PLANE:
            random_bits_cover(s, weights[name])
        x = h.input(f"x{len(outs)}", (1, None, k))
        outs.append(h.dequant_matmul(x, h.param(name, weights[name].shape, "i8"), scheme=s))
    r = h.input("r", (1, None, 64))
    weights["add"] = random_blocks("gguf_q4_k", 64, 512, rng)
    w = h.param("add", weights["add"].shape, "i8")
    outs.append(h.mir("binary", [r, h.dequant_matmul(h.input("xr", (1, None, 512)), w,
                                                      scheme="gguf_q4_k")], kind="add"))
    h.set_outputs(outs)
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg", prefill_columns=columns)

    def suffix(rows: int) -> str:
        return wide + ("c32" if wide and columns == 32 and rows % 32 == 0 else "")

    ran = re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg)
    assert sorted(ran) == sorted([f"{s.removeprefix('gguf_')}_{rows}x{k}_mdyn{suffix(rows)}"
                                  for s, rows, k in cases] + [f"q4_k_64x512_mdyn{suffix(64)}_add"])

    def per_pass(rows: int) -> str:                  # the outer form's packed x, per K
        return "8" if suffix(rows).endswith("c32") else "16" if wide else "6"
    assert set(re.findall(r"tensor<\?x(\d+)x(\d+)xf32>", linalg)) == {
        (str(k), per_pass(rows)) for s, rows, k in [*cases, ("", 64, 512)] if rows % 16 == 0}
    check_module(h, "llvm-cpu", params=weights, dyn=(1, 5, 33, 67), prefill_columns=columns)


def hoisted_rows(scheme: str, k: int) -> int:
    """The most rows (a multiple of 4) whose widening to bytes IREE still hoists at K: a
    Q5_0 / Q4_0 weight (Q6_K batched or q8) runs its kernel up to there
    (gemv_kernels.kernel_for)."""
    return (LoweringOptions.hoist_growth // (k - QUANT_SCHEMES[scheme].row_bytes(k))) // 4 * 4


def test_gemv_kernels_smallest_and_large_shapes() -> None:
    """Every kernel at its smallest legal shape (N = 4 rows, one workgroup of one tile; K =
    one block: 32 for Q8_0 / Q5_0 / Q4_0 / F16 / BF16, 256 for Q4_K / Q5_K / Q6_K) and at
    K = 4096 with many workgroups (Q8_0 / Q4_K / Q5_K / Q6_K / F16: 4096 rows, BF16 1024;
    Q5_0 / Q4_0: the most rows still hoisted), against the float64 reference; the kernels
    are checked to be what ran."""
    rng = np.random.default_rng(17)
    h = rlx.HirModule("kernel_bounds")
    xs = {k: h.input(f"x{k}", (1, k)) for k in (32, 256, 4096)}
    shapes = [(s, 4, 256 if s in SUPERBLOCK else 32) for s in KERNEL_SCHEMES]
    shapes += [(s, 4096 if s in (*SUPERBLOCK, "gguf_q8_0", "gguf_f16") else
                1024 if s == "gguf_bf16" else hoisted_rows(s, 4096), 4096)
               for s in KERNEL_SCHEMES]
    weights, outs = {}, []
    for s, rows, k in shapes:
        name = f"{s}.{rows}x{k}"
        weights[name] = random_blocks(s, rows, k, rng)
        outs.append(h.dequant_matmul(xs[k], h.param(name, weights[name].shape, "i8"), scheme=s))
    h.set_outputs(outs)
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    ran = re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg)
    assert ran == [f"{s.removeprefix('gguf_')}_{rows}x{k}" for s, rows, k in shapes], ran
    check_module(h, "llvm-cpu", params=weights)


@pytest.mark.parametrize(("scheme", "n", "k", "rows", "message"), [
    ("gguf_q2_k", 8, 256, 4, "expected a scheme of gguf_q8_0, .*found 'gguf_q2_k'"),
    ("gguf_q8_0", 8, 48, 4, "rlx_gemv_q8_0_8x48: expected K a positive multiple of 32, found 48"),
    ("gguf_q4_k", 8, 128, 4, "expected K a positive multiple of 256, found 128"),
    ("gguf_q6_k", 12, 256, 8, "expected rows per workgroup a multiple of 4 dividing N = 12, "
                              "found 8"),
    ("gguf_q8_0", 12, 32, 6, "a multiple of 4 dividing N = 12, found 6"),
    ("gguf_q5_k", 8, 32768 + 256, 8, r"expected K <= 32768 \(its S on the stack\), found "
                                     "K = 33024"),
])
def test_gemv_kernel_shapes_the_bounds_rest_on(scheme: str, n: int, k: int, rows: int,
                                               message: str) -> None:
    """A kernel is built only for the shapes its bounds argument covers (gemv_kernels'
    docstring): whole blocks along K, whole tiles of rows per workgroup, N a whole number
    of workgroups; the exact Q4_K / Q5_K kernel a K whose S buffer fits the stack, and
    kernel_for leaves a larger one to the fused form."""
    with pytest.raises(LoweringError, match=message):
        Kernel(scheme, n, k, rows)
    assert kernel_for("gguf_q4_k", 1, 8, 32768 + 256, LoweringOptions(gemv_kernels=True)) is None
    assert kernel_for("gguf_q4_k", 1, 8, 32768, LoweringOptions(gemv_kernels=True)) is not None


def test_batched_kernel_rows_the_bounds_rest_on() -> None:
    """A kernel takes 1 .. MAX_BATCH rows of x, the RMSNorm / SwiGLU prologues one row only
    (their stack buffer holds one x); kernel_for picks a kernel for M = 1 .. MAX_BATCH and
    leaves a larger or dynamic M to the prefill form."""
    for batch in (-1, MAX_BATCH + 1):
        with pytest.raises(LoweringError, match=f"expected 1 to {MAX_BATCH} rows of x "
                                                f"\\(or 0: dynamic\\), found {batch}"):
            Kernel("gguf_q8_0", 8, 32, 4, batch=batch)
    with pytest.raises(LoweringError, match="for a dynamic M, found gguf_q5_k"):
        Kernel("gguf_q5_k", 8, 256, 4, batch=DYNAMIC_M)
    for extra in ({"norm_eps": 1e-5}, {"glu": True}):
        with pytest.raises(LoweringError, match="no RMSNorm or SwiGLU prologue with 2 rows"):
            Kernel("gguf_q4_k", 8, 256, 4, batch=2, **extra)
    options = LoweringOptions(gemv_kernels=True)
    picked = {m: kernel_for("gguf_q8_0", m, 64, 576, options) for m in (1, 2, 8, 9, None)}
    assert {m: k and (k.batch, k.symbol) for m, k in picked.items()} == {
        1: (1, "rlx_gemv_q8_0_64x576"), 2: (2, "rlx_gemv_q8_0_64x576_m2"),
        8: (8, "rlx_gemv_q8_0_64x576_m8"), 9: (0, "rlx_gemv_q8_0_64x576_mdyn"),
        None: (0, "rlx_gemv_q8_0_64x576_mdyn")}
    off = LoweringOptions(gemv_kernels=True, prefill_kernels=False)
    assert kernel_for("gguf_q8_0", None, 64, 576, off) is None
    q8 = LoweringOptions(gemv_kernels=True, activation_quant="q8")
    for scheme in ("gguf_q4_k", "gguf_q6_k"):
        assert kernel_for(scheme, None, 64, 256, options) is not None
    for scheme in ("gguf_q4_k", "gguf_q6_k"):   # q8: on the decode's q8 planes
        on_q8 = kernel_for(scheme, None, 64, 256, q8)
        assert on_q8 is not None
        assert on_q8.int_dot == "portable"
        assert on_q8.planes_key == kernel_for(scheme, 1, 64, 256, q8).planes_key
    for scheme in M1_ONLY:                       # no batched body: M > 1 keeps the fused form
        k = 256 if scheme == "gguf_q5_k" else 576
        assert kernel_for(scheme, 1, 64, k, options) is not None, scheme
        assert kernel_for(scheme, 2, 64, k, options) is None, scheme
        prefill = kernel_for(scheme, None, 64, k, options)
        assert (prefill is not None) == (scheme in HALF_PLANE), scheme
        with pytest.raises(LoweringError, match=f"expected M = 1 for {scheme}"):
            Kernel(scheme, 64, k, 16, batch=2)


def test_q8_decode_gemvs_take_larger_workgroups() -> None:
    """A q8 decode GEMV's workgroups quantize all of x each, so they take up to
    Q8_WEIGHTS_PER_WORKGROUP weights (a 1B model's down projection: 128 rows, not 32); the
    exact kernels and batched steps keep WEIGHTS_PER_WORKGROUP; a prefill (M dynamic) takes
    PREFILL_WEIGHTS (its chunks of x are read again for every column block of a workgroup:
    256 rows), the q8 mode's integer GEMM PREFILL_INT8_WEIGHTS (128, also where it runs a
    batched step); an even count of at least MIN_WORKGROUPS still comes first."""
    exact = LoweringOptions(gemv_kernels=True)
    q8 = LoweringOptions(gemv_kernels=True, activation_quant="q8")
    rows = {(scheme, m, o is q8): kernel_for(scheme, m, 2048, 5632, o).rows
            for scheme in ("gguf_q4_k", "gguf_q8_0") for m in (1, 2, None) for o in (exact, q8)}
    assert rows == {
        ("gguf_q4_k", 1, False): 32, ("gguf_q4_k", 1, True): 128,
        ("gguf_q4_k", 2, False): 32, ("gguf_q4_k", 2, True): 128,   # the integer GEMM's
        ("gguf_q4_k", None, False): 256, ("gguf_q4_k", None, True): 128,
        ("gguf_q8_0", 1, False): 32, ("gguf_q8_0", 1, True): 128,
        ("gguf_q8_0", 2, False): 32, ("gguf_q8_0", 2, True): 32,    # the q8 batched GEMV's
        ("gguf_q8_0", None, False): 256, ("gguf_q8_0", None, True): 128}
    assert kernel_for("gguf_q8_0", None, 2048, 5632, q8).int8_gemm
    assert workgroup_rows(16384, 3072, q8=True) == 256
    assert workgroup_rows(576, 576, q8=True) == workgroup_rows(576, 576) == 144   # 4 of them


@pytest.mark.parametrize("scheme", ["gguf_q5_0", "gguf_q4_0", "gguf_q6_k", "gguf_q5_1"])
def test_widened_kernel_only_where_hoisted(scheme: str) -> None:
    """Q5_0 / Q4_0 (Q5_1 / Q4_1 alike) run the Q8_0 kernel only where their widening to
    bytes (which grows the weight) is still hoisted into initializers by IREE: the decode
    GEMV is then one dispatch per call. Just over the bound, or under a threshold lowered
    by the user's flags, they keep the fused form, also one dispatch; a kernel there would
    re-widen the weight on every call (two dispatches). Q6_K at M = 1 reads planes of the
    file's size (no growth): its kernel runs on either side of the bound, still one
    dispatch."""
    def module(n: int, k: int) -> rlx.HirModule:
        h = rlx.HirModule("g")
        x = h.input("x", (1, k))
        w = h.param("w", (n, QUANT_SCHEMES[scheme].row_bytes(k)), "i8")
        h.set_outputs([h.dequant_matmul(x, w, scheme=scheme)])
        return h

    k = 2048
    fits = hoisted_rows(scheme, k)
    packed = scheme == "gguf_q6_k"
    for n, kernel, flags in ((fits, True, []), (fits + 4, packed, []),
                             (fits, packed, NO_HOIST)):
        linalg = rlx.compile(module(n, k), "llvm-cpu", emit="linalg", extra_flags=flags)
        assert ("@rlx_gemv_" in linalg) == kernel, (n, k, flags)
        counts = rlx.compiler.dispatch_counts(module(n, k), "llvm-cpu", extra_flags=flags)
        assert counts.stream == 1, (n, k, flags)
    with pytest.raises(rlx.CompileError, match="expected a byte count, found '1M'"):
        rlx.compile(module(fits, k), "llvm-cpu", emit="linalg", extra_flags=[
            "--iree-opt-const-expr-max-size-increase-threshold=1M"])


def test_gemv_residual_epilogue() -> None:
    """A decode GEMV whose only use is a residual add takes the residual into its kernel
    (``rlx_gemv_*_add``): either operand order, a residual computed in the module and the
    sum of another fused pair. Not fused (and still right): a residual defined after the
    GEMV, a GEMV result with a second use, an f16 activation."""
    rng = np.random.default_rng(11)
    h = rlx.HirModule("residual")
    x = h.input("x", (1, 1, 256))
    r = h.input("r", (1, 1, 64))
    weights = {}

    def add(a: HirValue, b: HirValue) -> HirValue:
        return h.mir("binary", [a, b], kind="add")

    def gemv(name: str, scheme: str, inp: HirValue) -> HirValue:
        weights[name] = random_blocks(scheme, 64, 256, rng)
        return h.dequant_matmul(inp, h.param(name, weights[name].shape, "i8"), scheme=scheme)

    a = add(r, gemv("a", "gguf_bf16", x))                    # r + W x
    b = add(gemv("b", "gguf_q4_k", x), a)                    # W x + (a fused sum)
    y = gemv("c", "gguf_q8_0", x)
    later = add(y, h.mir("binary", [r, r], kind="mul"))      # residual defined after the GEMV
    twice = gemv("d", "gguf_q4_k", x)
    both = add(twice, r)                                     # the GEMV result used twice
    x16 = h.input("x16", (1, 1, 256), "f16")
    half = add(h.input("r16", (1, 1, 64), "f16"), gemv("e", "gguf_q8_0", x16))
    h.set_outputs([b, later, both, twice, half])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    fused = re.findall(r"flow\.dispatch @(rlx_gemv_\w+_add)::", linalg)
    assert fused == ["rlx_gemv_bf16_64x256_add", "rlx_gemv_q4_k_64x256_add"], fused
    check_module(h, "llvm-cpu", params=weights)


def test_gemv_rms_norm_prologue() -> None:
    """A decode GEMV of an RMSNorm's result normalizes x in its kernel (``rlx_gemv_*_rms*``),
    also with a residual add after it; the norm itself stays only where another use needs
    it. Not fused: K above MAX_NORM_K (the stack buffer), an f16 norm."""
    rng = np.random.default_rng(12)
    h = rlx.HirModule("prologue")
    x = h.input("x", (1, 1, 256))
    weights = {}

    def gemv(name: str, scheme: str, inp: HirValue, k: int = 256) -> HirValue:
        weights[name] = random_blocks(scheme, 64, k, rng)
        return h.dequant_matmul(inp, h.param(name, weights[name].shape, "i8"), scheme=scheme)

    def norm(v: HirValue, k: int = 256, eps: float = 1e-5) -> HirValue:
        i = len(weights)
        return h.rms_norm(v, h.param(f"g{i}", (k,)), h.param(f"b{i}", (k,)), eps)

    n = norm(x)
    a = gemv("a", "gguf_f16", n)
    b = gemv("b", "gguf_q4_k", n)                            # the same norm, twice
    r = h.input("r", (1, 1, 64))
    c = h.mir("binary", [r, gemv("c", "gguf_q4_k", norm(x, eps=1e-6))], kind="add")
    shared = norm(x, eps=0.1)
    d = gemv("d", "gguf_q8_0", shared)                       # the norm also an output
    big = h.input("big", (1, 1, 8192))
    e = gemv("e", "gguf_q8_0", norm(big, 8192), 8192)        # K > MAX_NORM_K
    h16 = h.input("h16", (1, 1, 256), "f16")
    n16 = h.rms_norm(h16, h.param("g16", (256,), "f16"), h.param("b16", (256,), "f16"))
    f = gemv("f", "gguf_q8_0", n16)
    h.set_outputs([a, b, c, d, shared, e, f])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    kernels = re.findall(r"flow\.dispatch @(rlx_gemv_\w+)::", linalg)
    assert kernels == ["rlx_gemv_f16_64x256_rms3727c5ac", "rlx_gemv_q4_k_64x256_rms3727c5ac",
                       "rlx_gemv_q4_k_64x256_rms358637bd_add",
                       "rlx_gemv_q8_0_64x256_rms3dcccccd", "rlx_gemv_q8_0_64x8192",
                       "rlx_gemv_q8_0_64x256"], kernels
    check_module(h, "llvm-cpu", params=weights)


def test_gemv_swiglu_prologue() -> None:
    """A decode GEMV of ``silu(gu[:K]) * gu[K:]`` (a SwiGLU FFN's down projection after a
    packed gate / up projection) computes its x in the kernel (``rlx_gemv_*_glu``), also with
    a residual add and after a gate / up GEMV that is itself a kernel; the SwiGLU ops stay
    only where another use needs them. Not fused: the halves swapped, slices of two
    different tensors, K above MAX_NORM_K, an f16 gate / up."""
    rng = np.random.default_rng(13)
    h = rlx.HirModule("glu")
    x = h.input("x", (1, 1, 256))
    weights = {}

    def gemv(name: str, scheme: str, inp: HirValue, n: int, k: int) -> HirValue:
        weights[name] = random_blocks(scheme, n, k, rng)
        return h.dequant_matmul(inp, h.param(name, weights[name].shape, "i8"), scheme=scheme)

    def half(v: HirValue, i: int, k: int) -> HirValue:
        return h.mir("slice", [v], starts=[0, 0, i * k], sizes=[-1, -1, k], strides=[1, 1, 1])

    def glu(gate: HirValue, up: HirValue) -> HirValue:
        return h.mir("binary", [h.mir("activation", [gate], kind="silu"), up], kind="mul")

    gu = gemv("gu", "gguf_q8_0", x, 512, 256)                # a kernel itself
    a = gemv("a", "gguf_q4_k", glu(half(gu, 0, 256), half(gu, 1, 256)), 64, 256)
    act = glu(half(gu, 0, 256), half(gu, 1, 256))
    r = h.input("r", (1, 1, 64))
    b = h.mir("binary", [gemv("b", "gguf_f16", act, 64, 256), r], kind="add")
    swapped = gemv("c", "gguf_q8_0", glu(half(gu, 1, 256), half(gu, 0, 256)), 64, 256)
    other = h.input("other", (1, 1, 512))
    mixed = gemv("d", "gguf_q8_0", glu(half(gu, 0, 256), half(other, 1, 256)), 64, 256)
    big = h.input("big", (1, 1, 16384))
    e = gemv("e", "gguf_q8_0", glu(half(big, 0, 8192), half(big, 1, 8192)), 64, 8192)
    gu16 = h.input("gu16", (1, 1, 512), "f16")
    f = gemv("f", "gguf_q8_0", glu(half(gu16, 0, 256), half(gu16, 1, 256)), 64, 256)
    h.set_outputs([a, b, act, swapped, mixed, e, f])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    kernels = re.findall(r"flow\.dispatch @(rlx_gemv_\w+)::", linalg)
    assert kernels == ["rlx_gemv_q8_0_512x256", "rlx_gemv_q4_k_64x256_glu",
                       "rlx_gemv_f16_64x256_glu_add", "rlx_gemv_q8_0_64x256",
                       "rlx_gemv_q8_0_64x256", "rlx_gemv_q8_0_64x8192",
                       "rlx_gemv_q8_0_64x256"], kernels
    big_gu = 4 * rng.standard_normal((1, 1, 16384)).astype(np.float32)
    check_module(h, "llvm-cpu", params=weights, inputs={"big": big_gu})


@pytest.mark.parametrize("target", ["llvm-cpu", "vulkan", "cuda"])
def test_one_dispatch_per_decode_gemv(target: str) -> None:
    """Each M = 1 dequant_matmul is one dispatch of @main (the repacking is in initializers):
    a matvec with the dequant fused in, or on llvm-cpu one of rlx's GEMV kernels (Q8_0,
    Q4_K, Q5_K, Q6_K from planes of the file's size, F16 / BF16 values as in the file; not Q4_0 /
    Q5_0 widened to bytes: the growth threshold is 0 here)."""
    h = all_schemes_module(512, 64, 1)
    main = flow_exports(h, target)
    kernels = []
    if target == "llvm-cpu":
        kernels = re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", rlx.compile(
            h, target, emit="linalg", extra_flags=NO_HOIST))
        assert kernels == ["f16_64x512", "q8_0_64x512", "q4_k_64x512", "q5_k_64x512",
                           "q6_k_64x512", "bf16_64x512"], kernels  # no widening
    assert len(main) + len(kernels) == len(h.outputs), main
    if target == "llvm-cpu":
        assert all("matvec_like" in e for e in main), main
        return
    # BF16 is converted in the contraction body (integer ops), which IREE files as a
    # "reduction"; every other scheme is a matvec with its dequant fused in.
    assert sorted("matvec_like" in e for e in main) == [False] + [True] * (len(main) - 1), main
    assert any("reduction" in e and "xi16x" in e for e in main), main


REAL_WIDTHS = (576, 1536, 2048, 4096)
"""Row widths K of real models' weights: SmolLM2-135M (576, and its FFN down projection's
1536, where rlx-generate on the Q4_1 file overflowed Vulkan's shared memory), LLaMA-1B-sized
(2048), 7B (4096)."""


@pytest.mark.vulkan
@pytest.mark.parametrize("k", REAL_WIDTHS)
def test_vulkan_prefill_and_decode_at_real_row_widths(k: int) -> None:
    """Every GGUF scheme whose blocks divide K, prefill-shaped (M dynamic, run at 3) and
    decode-shaped (M = 1), with rows K wide: compiles within llvmpipe's 32 KiB of shared
    memory and runs on lavapipe against the float64 reference. (Fused, the prefill
    contraction staged an 8 x K f32 tile of the weight in shared memory: 49152 bytes at
    K = 1536, 131072 at 4096; and on lavapipe the fused decode matvec did not finish in
    minutes for K >= 512: rule.separate_dequant.)"""
    require("vulkan")
    schemes = [s for s in GGUF_SCHEMES if k % QUANT_SCHEMES[s].block_elems == 0]
    rows = 256
    rng = np.random.default_rng(k)
    weights = {s: random_blocks(s, rows, k, rng) for s in schemes}
    h = rlx.HirModule("real_widths")
    xs = [h.input("x", (None, k)), h.input("x1", (1, k))]
    h.set_outputs([h.dequant_matmul(x, h.param(s, (rows, QUANT_SCHEMES[s].row_bytes(k)),
                                                "i8"), scheme=s)
                   for x in xs for s in schemes])
    check_module(h, "vulkan", dyn=3, params=weights, extra_flags=NO_HOIST)


def test_prefill_compiles_for_vulkan_and_cuda() -> None:
    """Every scheme with a dynamic M compiles for Vulkan and CUDA (sm_80; Hopper through
    the sm_89-derived target): the vmfb holds the target's executables. Not run on lavapipe
    in CI: it takes tens of seconds to compile each of these shaders (the decode-shaped ones
    above run)."""
    h = all_schemes_module(256, 32, None)
    assert b"vulkan-spirv-fb" in rlx.compile(h, "vulkan")
    assert b"cuda-nvptx-fb" in rlx.compile(h, "cuda")
    assert b"cuda-nvptx-fb" in rlx.compile(all_schemes_module(256, 32, 1), "cuda",
                                            cuda_arch="sm_90")


# --- activation_quant="q8": 8-bit activations, integer dot products (gemv_q8) ---------------

Q8_CASES = (("gguf_q8_0", 48, 576), ("gguf_q4_k", 48, 512), ("gguf_q5_0", 16, 576),
            ("gguf_q4_0", 8, 512), ("gguf_q6_k", 48, 512), ("gguf_q5_k", 48, 768))
"""Plain GEMVs of the q8 test module; then a residual epilogue (Q4_K 48 x 512), an RMSNorm
prologue (Q8_0 16 x 576) and a SwiGLU prologue (Q4_K 16 x 512)."""
Q8_FORMS = {"host": {}, "portable": {"cpu": "generic"}}
"""The q8 module compiled for this CPU (its int_dot: vnni, avx2 or portable) and for LLVM's
generic x86-64 (the portable form)."""


def q8_activations(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x [K]`` as ggml's ``q8_0`` quantizes it (f32 arithmetic as the kernel's: ``d =
    amax / 127``, ``q = round-half-even(x · (1 / d))``, 0 where ``d = 0``): the dequantized
    ``x̃`` (f64) and each block's half step ``amax / 254`` (f64)."""
    b = np.asarray(x, np.float32).reshape(-1, 32)
    amax = np.abs(b).max(1)
    d = amax / np.float32(127)
    inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, np.float32(1)), np.float32(0))
    q = np.rint(b * inv[:, None].astype(np.float32))
    assert np.abs(q).max() <= 127
    return (q.astype(np.float64) * d[:, None]).reshape(-1), amax.astype(np.float64) / 254


def q8_bound(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``[N]``: the most by which quantizing ``x [K]`` moves ``w [N, K] · x``: ``Σ_b (amax_b /
    254) Σ_(i in b) |w_i|``, times ``1 + 2^-16`` (the rounding of ``1 / d`` and of ``x / d``:
    gemv_q8's docstring)."""
    _, half = q8_activations(x)
    return np.abs(w).reshape(len(w), -1, 32).sum(2) @ half * (1 + 2.0 ** -16)


def q4_k_mins(raw: np.ndarray) -> np.ndarray:
    """``[N, K]``: each Q4_K weight's ``dmin · m`` (what the weight is with its 4-bit value
    zeroed, negated), from gguf's dequantization of the blocks with ``qs`` cleared."""
    blocks = raw.view(np.uint8).reshape(len(raw), -1, 144).copy()
    blocks[:, :, 16:] = 0
    return -oracle("gguf_q4_k", blocks.reshape(len(raw), -1).view(np.int8)).astype(np.float64)


@pytest.fixture(scope="module")
def q8_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The q8 module (:data:`Q8_CASES`, a residual epilogue, RMSNorm and SwiGLU prologues), its
    inputs (a block of zeros, a block with an outlier), weights covering every bit, and per
    form of :data:`Q8_FORMS` the kernels that ran, their outputs and the assembly."""
    rng = np.random.default_rng(13)
    h = rlx.HirModule("q8")
    weights: dict[str, np.ndarray] = {}
    xs = {k: h.input(f"x{k}", (1, k)) for k in (512, 576, 768)}

    def gemv(name: str, scheme: str, x: HirValue, n: int, k: int) -> HirValue:
        weights[name] = random_blocks(scheme, n, k, rng)
        if n >= 40:
            random_bits_cover(scheme, weights[name])
        return h.dequant_matmul(x, h.param(name, weights[name].shape, "i8"), scheme=scheme)

    outs = [gemv(s, s, xs[k], n, k) for s, n, k in Q8_CASES]
    r = h.input("r", (1, 48))
    outs.append(h.mir("binary", [r, gemv("add", "gguf_q4_k", xs[512], 48, 512)], kind="add"))
    gamma, beta = h.param("gamma", (576,)), h.param("beta", (576,))
    outs.append(gemv("norm", "gguf_q8_0", h.rms_norm(xs[576], gamma, beta, 1e-5), 16, 576))
    gu = h.input("gu", (1, 1, 1024))
    g, u = (h.mir("slice", [gu], starts=[0, 0, 512 * i], sizes=[-1, -1, 512],
                  strides=[1, 1, 1]) for i in range(2))
    act = h.mir("binary", [h.mir("activation", [g], kind="silu"), u], kind="mul")
    outs.append(gemv("glu", "gguf_q4_k", act, 16, 512))
    h.set_outputs(outs)
    weights["gamma"] = rng.standard_normal(576).astype(np.float32)
    weights["beta"] = (0.1 * rng.standard_normal(576)).astype(np.float32)
    feeds = {"x512": rng.standard_normal((1, 512)).astype(np.float32),
             "x576": rng.standard_normal((1, 576)).astype(np.float32),
             "x768": rng.standard_normal((1, 768)).astype(np.float32),
             "r": rng.standard_normal((1, 48)).astype(np.float32),
             "gu": rng.standard_normal((1, 1, 1024)).astype(np.float32)}
    feeds["x576"][0, :32] = 0.0                          # d = 0: q = 0
    feeds["x512"][0, 40] = 50.0                          # one block's step 50 / 127
    runs: dict[str, object] = {"h": h, "weights": weights, "feeds": feeds,
                               "want": reference.evaluate(h, feeds, weights)}
    for form, options in Q8_FORMS.items():
        dump = tmp_path_factory.mktemp(f"q8_{form}")
        flags = [f"--iree-hal-dump-executable-files-to={dump}"]
        linalg = rlx.compile(h, "llvm-cpu", emit="linalg", activation_quant="q8", **options)
        prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu", activation_quant="q8",
                                            extra_flags=flags, **options), "local-task", weights)
        runs[form] = {"kernels": re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg),
                      "got": [np.asarray(y) for y in prog.main(**feeds)],
                      "asm": "\n".join(p.read_text() for p in dump.glob("*.s"))}
    return runs


def _q8_wants(runs: dict[str, object]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Per output: (its ``x``, its weight in f64, ``W x̃`` (+ r) for the quantized ``x̃``, or
    None for the RMSNorm and SwiGLU prologues, whose f32 ``x`` the kernel computes: rounding
    ties of the quantization may fall otherwise than from numpy's)."""
    weights, feeds = runs["weights"], runs["feeds"]
    assert isinstance(weights, dict)
    assert isinstance(feeds, dict)
    out = []
    for s, _, k in Q8_CASES:
        w = oracle(s, weights[s]).astype(np.float64)
        x = feeds[f"x{k}"][0]
        out.append((x, w, w @ q8_activations(x)[0]))
    w = oracle("gguf_q4_k", weights["add"]).astype(np.float64)
    x = feeds["x512"][0]
    out.append((x, w, feeds["r"][0] + w @ q8_activations(x)[0]))
    normed = ref_ops.rms_norm(feeds["x576"], weights["gamma"], weights["beta"], eps=1e-5)[0]
    out.append((normed, oracle("gguf_q8_0", weights["norm"]).astype(np.float64), None))
    g, u = (feeds["gu"][0, 0, 512 * i:512 * (i + 1)].astype(np.float64) for i in range(2))
    out.append((g / (1 + np.exp(-g)) * u, oracle("gguf_q4_k", weights["glu"]).astype(
        np.float64), None))
    return out


def assert_within_q8_bound(got: np.ndarray, want: np.ndarray, x: np.ndarray, w: np.ndarray,
                           what: str) -> None:
    """``|got - want| <= q8_bound + the f32 tolerance`` per output (``want``: the exact
    float64 result)."""
    rtol, atol = TOLERANCES[DType.F32]
    slack = q8_bound(x, w) + atol + rtol * np.abs(want).max()
    excess = np.abs(np.asarray(got, np.float64).reshape(-1) - want.reshape(-1)) - slack
    assert excess.max() <= 0, (f"{what}: {int((excess > 0).sum())} outputs beyond the q8 "
                               f"bound, worst by {excess.max():.3g}")


@pytest.mark.parametrize("form", list(Q8_FORMS))
def test_gemv_kernels_q8(q8_runs: dict[str, object], form: str) -> None:
    """activation_quant="q8": each kernel (Q8_0 with every byte, -128 included; Q4_K, its mins
    through the activation block sums; Q5_0 / Q4_0 widened; Q6_K and Q5_K from the file's
    bytes, every bit of them set somewhere; a residual epilogue;
    RMSNorm and SwiGLU prologues) is what ran, in the CPU's dot-product form, and equals
    ``W x̃`` (x̃: x quantized as ggml's q8_0 in numpy) within the f32 tolerance, and the exact
    float64 ``W x`` within the derived bound ``Σ_b amax_b / 254 Σ |w|`` plus the f32
    tolerance."""
    run = q8_runs[form]
    assert isinstance(run, dict)
    dot = TargetConfig(activation_quant="q8", **Q8_FORMS[form]).lowering.int_dot
    assert form == "host" or dot == "portable"
    assert run["kernels"] == [f"{s.removeprefix('gguf_')}_{n}x{k}_q8{dot}"
                              for s, n, k in Q8_CASES] + [
        f"q4_k_48x512_q8{dot}_add", f"q8_0_16x576_q8{dot}_rms3727c5ac",
        f"q4_k_16x512_q8{dot}_glu"], run["kernels"]
    want = q8_runs["want"]
    assert isinstance(want, list)
    for i, ((x, w, quantized), got, exact) in enumerate(zip(_q8_wants(q8_runs), run["got"],
                                                             want, strict=True)):
        if quantized is not None:
            assert_close(got.reshape(-1), quantized, "f32", f"output {i} vs W x̃ ({form})")
        assert_within_q8_bound(got, exact, x, w, f"output {i} vs W x ({form})")


def test_q8_checks_reject_wrong_scales_and_offsets(q8_runs: dict[str, object]) -> None:
    """The q8 checks fail for what a wrong scale or offset would compute: the f32 check
    against ``W x̃`` rejects x̃ with one block's scale 1% off, the exact ``W x`` (not
    quantized), Q4_K's mins 1% off; the bound against ``W x`` rejects a Q8_0 weight scale
    25% off and Q4_K without its mins."""
    run = q8_runs["host"]
    assert isinstance(run, dict)
    weights = q8_runs["weights"]
    assert isinstance(weights, dict)
    (x8, w8, _), (x4, w4, _) = _q8_wants(q8_runs)[:2]
    got8, got4 = (run["got"][i].reshape(-1) for i in (0, 1))
    q8x, _ = q8_activations(x8)
    off = q8x.copy()
    off[32:64] *= 1.01
    mins = q4_k_mins(weights["gguf_q4_k"])
    wrong = {"x̃ block scale": (got8, w8 @ off), "unquantized x": (got8, w8 @ x8),
             "Q4_K mins": (got4, (w4 - 0.01 * mins) @ q8_activations(x4)[0])}
    for what, (got, want) in wrong.items():
        with pytest.raises(AssertionError):
            assert_close(got, want, "f32", what)
    for what, (got, want, x, w) in {"Q8_0 scale": (got8, 1.25 * w8 @ x8, x8, w8),
                                    "Q4_K mins": (got4, (w4 + mins) @ x4, x4, w4)}.items():
        with pytest.raises(AssertionError):
            assert_within_q8_bound(got, want, x, w, what)


def test_q8_dot_instructions() -> None:
    """The q8 kernels' block dot product is the one the target CPU has (chosen at compile
    time, rlx.compiler.int_dot_of): ``vpdpbusd`` for a VNNI CPU (Sapphire Rapids: compiled,
    its assembly read, not run here), ``vpmaddubsw`` + ``vpmaddwd`` for AVX2 (Zen 3), neither
    in the portable form; the exact mode has none of them."""
    h = gguf_module(256, 16, 1, ["gguf_q8_0", "gguf_q4_k"])
    with tempfile.TemporaryDirectory() as tmp:
        asm = {}
        for cpu, quant in (("sapphirerapids", "q8"), ("znver3", "q8"), ("znver3", None)):
            dump = Path(tmp) / f"{cpu}{quant}"
            rlx.compile(h, "llvm-cpu", cpu=cpu, activation_quant=quant,
                        extra_flags=[f"--iree-hal-dump-executable-files-to={dump}"])
            asm[cpu, quant] = "\n".join(p.read_text() for p in dump.glob("*.s"))
    assert len(re.findall(r"\bvpdpbusd\b", asm["sapphirerapids", "q8"])) == 4 + 8
    assert len(re.findall(r"\bvpmaddubsw\b", asm["znver3", "q8"])) == 4 + 8
    assert not re.search(r"\bvpdpbusd\b", asm["znver3", "q8"])
    assert not re.search(r"\bvpmaddubsw\b|\bvpdpbusd\b", asm["znver3", None])


def test_activation_quant_options() -> None:
    """activation_quant: default off (LoweringOptions and kernels exact), part of the
    lowering options the compile cache keys on, llvm-cpu with the GEMV kernels only; the q8
    kernel for M = 1 and the kernels' schemes only; the dot product per CPU name."""
    exact, q8 = TargetConfig().lowering, TargetConfig(activation_quant="q8").lowering
    assert exact.activation_quant is None
    assert q8.activation_quant == "q8"
    with tempfile.TemporaryDirectory() as tmp:            # the compile cache's key
        store = CompileCache(Path(tmp))
        keys = {store.key("module", c.flags(), vars(c.lowering)) for c in (
            TargetConfig(), TargetConfig(activation_quant="q8"))}
    assert len(keys) == 2
    assert kernel_for("gguf_q4_k", 1, 64, 512, exact).int_dot is None      # type: ignore[union-attr]
    assert kernel_for("gguf_q4_k", 1, 64, 512, q8).int_dot == q8.int_dot   # type: ignore[union-attr]
    # a batched step: Q8_0 / Q5_0 / Q4_0 the batched q8 GEMV at M <= 4 (one pass), and
    # above where the prefill's integer GEMM does not run (AVX2, a row count not of whole
    # column blocks) or where the CPU chose it (Zen 4: K <= 1536); past its stack (M K >
    # 16384) the GEMM, else the f32 batched body; Q4_K the GEMM where it runs, Q6_K the f32
    # body
    for cpu, int8 in (("znver4", True), ("generic", True), ("znver3", False)):
        opts = TargetConfig(cpu=cpu, activation_quant="q8").lowering
        for scheme, n, m, k in (("gguf_q4_k", 64, 3, 512), ("gguf_q8_0", 64, 8, 512),
                                ("gguf_q8_0", 64, 3, 512), ("gguf_q5_0", 72, 8, 512),
                                ("gguf_q8_0", 64, 8, 4096), ("gguf_q4_k", 72, 3, 512),
                                ("gguf_q6_k", 64, 3, 512)):
            kern = kernel_for(scheme, m, n, k, opts)
            assert kern is not None
            gemm = int8 and n % 16 == 0 and scheme != "gguf_q6_k"
            byte = scheme in ("gguf_q8_0", "gguf_q5_0") and m * k <= 16384
            wide = m <= 4 or k <= opts.batched_q8_gemv_k     # the CPU's choice above 4
            want = ("gemv" if byte and (wide or not gemm) else "gemm" if gemm else "f32")
            got = ("gemm" if kern.int8_gemm else "gemv" if kern.int_dot is not None else "f32")
            assert (got, kern.batch == m) == (want, want != "gemm"), (cpu, scheme, n, m, k)
        assert not kernel_for("gguf_q8_0", 8, 64, 512, TargetConfig(cpu=cpu).lowering
                              ).int8_gemm  # type: ignore[union-attr]
    assert kernel_for("gguf_q6_k", 1, 64, 512, q8).int_dot == q8.int_dot   # type: ignore[union-attr]
    big = hoisted_rows("gguf_q6_k", 2048) + 4       # too large for a widened plane
    for options in (exact, q8):                     # M = 1: planes of the file's size
        kern = kernel_for("gguf_q6_k", 1, big, 2048, options)
        assert kern is not None
        assert kern.int_dot == (q8.int_dot if options is q8 else None)
        assert kern.q6_k_packed == (options is exact)
    assert kernel_for("gguf_q6_k", 2, big, 2048, exact) is None   # batched: widened only
    five = kernel_for("gguf_q5_k", 1, 64, 512, q8)  # Q4_K's q8 body with the qh bytes
    assert five is not None
    assert five.int_dot == q8.int_dot
    half = kernel_for("gguf_f16", 1, 64, 512, q8)   # no q8 body: the exact kernel
    assert half is not None
    assert half.int_dot is None
    assert kernel_for("gguf_q5_k", 2, 64, 512, q8) is None   # no batched body
    assert kernel_for("gguf_q3_k", 1, 64, 512, q8) is None   # no kernel
    for bad in ({"target": "vulkan"}, {"gemv_kernels": False}):
        with pytest.raises(CompileError, match="activation_quant"):
            TargetConfig(activation_quant="q8", **bad)  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="expected None or one of q8"):
        TargetConfig(activation_quant="q4")
    assert [int_dot_of(c, ()) for c in ("sapphirerapids", "znver4", "znver3", "generic")] == [
        "vnni", "vnni", "avx2", "portable"]
    assert int_dot_of("generic", ("--iree-llvmcpu-target-cpu-features=+avx2,+fma",)) == "avx2"
    # the batched kernels' lane count: 16 only where the CPU has AVX-512F
    assert [vector_bits_of(c, ()) for c in ("sapphirerapids", "znver4", "znver3",
                                            "alderlake", "generic")] == [512, 512, 256, 256,
                                                                         256]
    assert vector_bits_of("generic", ("--iree-llvmcpu-target-cpu-features=+avx512f",)) == 512
    wide = TargetConfig(cpu="znver5").lowering
    assert kernel_for("gguf_q8_0", 8, 64, 576, wide).lanes == 16  # type: ignore[union-attr]
    assert kernel_for("gguf_q8_0", 1, 64, 576, wide).lanes == 8   # type: ignore[union-attr]
    assert kernel_for("gguf_q8_0", 8, 64, 576, TargetConfig(cpu="znver3").lowering
                      ).lanes == 8  # type: ignore[union-attr]
    with pytest.raises(LoweringError, match="8-bit activations"):
        Kernel("gguf_q6_k", 64, 512, 16, batch=3, int_dot="avx2")
    # the prefetch hints of the decode kernels: Intel CPUs (by name, or the host's vendor) and
    # AMD Zen 4 / 5 (znver4 / 5, or an AMD family 25 / 26 host with AVX-512) only
    assert [TargetConfig(cpu=c).lowering.prefetch_bytes for c in (
        "sapphirerapids", "skylake", "znver4", "znver3", "znver5", "x86-64-v3", "generic")] == [
        4096, 4096, 4096, 0, 4096, 0, 0]
    assert [TargetConfig(cpu=c).lowering.prefetch_half for c in ("znver4", "znver5")] == [
        False, True]
    assert TargetConfig(cpu="znver4", gemv_prefetch=512).lowering.prefetch_bytes == 512
    zen4 = TargetConfig(cpu="znver4").lowering        # F16 / BF16: no hints there (slower)
    assert [kernel_for(s, 1, 64, 576, zen4).prefetch  # type: ignore[union-attr]
            for s in ("gguf_q8_0", "gguf_f16", "gguf_bf16")] == [4096, 0, 0]
    assert kernel_for("gguf_f16", 1, 64, 576, TargetConfig(  # type: ignore[union-attr]
        cpu="znver4", gemv_prefetch=4096).lowering).prefetch == 4096
    assert kernel_for("gguf_f16", 1, 64, 576, TargetConfig(  # type: ignore[union-attr]
        cpu="sapphirerapids").lowering).prefetch == 4096
    assert TargetConfig(cpu="sapphirerapids", gemv_kernels=False).lowering.prefetch_bytes == 0
    intel = TargetConfig(cpu="sapphirerapids").lowering
    assert kernel_for("gguf_q8_0", 8, 64, 576, intel).prefetch == 4096  # type: ignore[union-attr]
    assert kernel_for("gguf_q8_0", None, 64, 576, intel   # a prefill's: none
                      ).prefetch == 0  # type: ignore[union-attr]
    for bad in (100, -64, 1 << 20, True):
        with pytest.raises(CompileError, match="gemv_prefetch: expected bytes"):
            TargetConfig(gemv_prefetch=bad)
    # an 8-row batched step of Q8_0 in the q8 mode: on AMD Zen 4 / 5 the batched q8 GEMV
    # (passes of 4 rows) where K <= 1536 / 2048, measured faster there; elsewhere, and at
    # larger K, the GEMM
    assert [TargetConfig(cpu=c, activation_quant="q8").lowering.batched_q8_gemv_k for c in (
        "znver4", "znver5", "sapphirerapids", "znver3", "generic")] == [1536, 2048, 0, 0, 0]
    assert TargetConfig(cpu="znver4").lowering.batched_q8_gemv_k == 0     # the exact mode
    zen4, zen5 = (TargetConfig(cpu=c, activation_quant="q8").lowering for c in ("znver4",
                                                                             "znver5"))
    assert [kernel_for("gguf_q8_0", 8, 64, k, o).int8_gemm  # type: ignore[union-attr]
            for k, o in ((576, zen4), (1536, zen4), (2048, zen4), (576, zen5), (2048, zen5),
                         (4096, zen5))] == [False, False, True, False, False, True]
    assert [kernel_for("gguf_q8_0", 5, 64, k, zen5).int8_gemm  # type: ignore[union-attr]
            for k in (2048, 2560)] == [False, True]    # 5 rows of 2560 fit the stack: K decides
    for bad in (-1, True, 1.5):
        with pytest.raises(LoweringError, match="batched_q8_gemv_k: expected a non-negative"):
            LoweringOptions(batched_q8_gemv_k=bad)  # type: ignore[arg-type]
    # the exact prefill's column blocks: 32 on Intel CPUs with AVX-512 and AMD Zen 5 where N
    # has them, 16 elsewhere (Zen 3 / 4, AVX2, the q8 mode's integer GEMM, N not a multiple
    # of 32)
    assert [TargetConfig(cpu=c).lowering.prefill_columns for c in (
        "sapphirerapids", "skylake", "znver4", "znver5", "generic")] == [32, 32, 16, 32, 16]
    columns = [(kern.columns, kern.rows % kern.columns)  # type: ignore[union-attr]
               for kern in (kernel_for("gguf_q8_0", None, 64, 576, intel),
                            kernel_for("gguf_q8_0", None, 48, 576, intel),
                            kernel_for("gguf_q8_0", None, 64, 576, TargetConfig(
                                cpu="sapphirerapids", activation_quant="q8").lowering),
                            kernel_for("gguf_f16", None, 64, 576, TargetConfig(
                                cpu="skylake").lowering),
                            kernel_for("gguf_f16", None, 64, 576, TargetConfig(
                                cpu="znver4", prefill_columns=32).lowering))]
    assert columns == [(32, 0), (16, 0), (16, 0), (16, 0), (32, 0)], columns
    with pytest.raises(CompileError, match="prefill_columns: expected one of 16, 32, found 8"):
        TargetConfig(prefill_columns=8)
    with pytest.raises(LoweringError, match="expected column blocks of 16, or 32 for an exact "
                                            "prefill on 16 lanes"):
        Kernel("gguf_q8_0", 64, 576, 32, batch=DYNAMIC_M, columns=32, lanes=8)
    with pytest.raises(LoweringError, match="expected column blocks of 32 for f32 weights, "
                                            "found 16"):     # f32: a prefill in 32 columns
        Kernel("f32", 64, 576, 32, batch=DYNAMIC_M, columns=16, lanes=16)
    for batch in (1, 4):                                     # ... a prefill only
        with pytest.raises(LoweringError, match="expected column blocks of 16, or 32 for an "
                                                "exact prefill on 16 lanes"):
            Kernel("f32", 64, 576, 32, batch=batch, columns=32, lanes=16)
    # a q8 prefill of whole column blocks: the integer GEMM (gemm_q8) where the CPU has VNNI on
    # 512-bit vectors (or in the portable form); AVX2 and AVX-VNNI (256-bit) CPUs keep the f32
    # product, Q8_0 on its exact kernel's planes
    for cpu, int8 in (("sapphirerapids", True), ("znver4", True), ("generic", True),
                      ("znver3", False), ("alderlake", False)):
        options = TargetConfig(cpu=cpu, activation_quant="q8").lowering
        for scheme in ("gguf_q8_0", "gguf_q4_k", "gguf_q6_k"):
            kern = kernel_for(scheme, None, 64, 512, options)
            assert kern is not None
            assert kern.int8_gemm == int8, (cpu, scheme)
            assert (kern.int_dot is None) == (scheme == "gguf_q8_0" and not int8), (cpu, scheme)
        assert not kernel_for("gguf_q8_0", None, 72, 512, options).int8_gemm  # type: ignore[union-attr]


PREFILL_Q8_CASES = (("gguf_q4_k", 48, 512), ("gguf_q4_k", 40, 1024), ("gguf_q8_0", 32, 512),
                    ("gguf_q5_0", 16, 576), ("gguf_q6_k", 48, 512), ("gguf_q6_k", 40, 256))
"""Prefill GEMMs of the q8-mode test: whole column blocks of 16 rows (48, 32, 16) and not
(40: the dot form)."""


def _prefill_q8_kernel(s: str, rows: int, k: int, form: str) -> tuple[str, bool]:
    """The kernel a q8-mode prefill of ``s`` runs in ``form`` (of :data:`Q8_FORMS`), and
    whether it is the integer GEMM (gemm_q8: VNNI on 512-bit vectors, or the portable form)."""
    options = TargetConfig(activation_quant="q8", **Q8_FORMS[form]).lowering
    dot, wide = options.int_dot, "w" if options.vector_bits == 512 else ""
    int8 = rows % 16 == 0 and (dot == "portable" or (dot == "vnni" and wide == "w"))
    name = f"{s.removeprefix('gguf_')}_{rows}x{k}_mdyn{wide}"
    if int8:
        return f"{name}_q8{dot}_i8mm", True
    return (f"{name}_q8{dot}" if s in ("gguf_q4_k", "gguf_q6_k") else name), False


BATCHED_Q8_CASES = ((("gguf_q8_0", 32, 512), 2, True), (("gguf_q4_0", 40, 512), 5, False),
                    (("gguf_q4_k", 48, 512), 8, False), (("gguf_q6_k", 48, 512), 3, False))
"""Batched steps (static M; with a residual ``r [M, N]`` taken in) of the q8-mode test: Q8_0
(M <= 4) and Q4_0 (40 rows: no integer GEMM; two passes of 4 + 1 rows) run the batched q8
GEMV (gemv_q8_batched) in every form, Q4_K the integer GEMM where a prefill does
(gemv_kernels.batched_int8), Q6_K the f32 batched body."""


def _batched_q8(s: str, rows: int, form: str) -> bool:
    """Whether a batched step of ``s`` quantizes ``x`` in ``form``: the batched q8 GEMV
    (Q8_0 / Q5_0 / Q4_0, ``M K <= 16384``: every case here), or the integer GEMM."""
    return s in ("gguf_q8_0", "gguf_q5_0", "gguf_q4_0") or (
        s == "gguf_q4_k" and _prefill_q8_kernel(s, rows, 512, form)[1])


def _check_batched_q8(outs: Sequence[Any], feeds: dict[str, np.ndarray],
                      weights: dict[str, np.ndarray], form: str) -> None:
    """A batched step's ``y [M, N]`` (plus ``r``): ``W x̃`` row by row (each row of ``x``
    quantized as the decode's q8 kernel does) within the f32 tolerance, ``W x`` within the
    q8 bound, and not the f32 product, where :func:`_batched_q8`; else (Q6_K; Q4_K on an
    AVX2 CPU) ``W x``, the f32 product."""
    for j, (((s, rows, k), m, res), y) in enumerate(zip(BATCHED_Q8_CASES, outs, strict=True)):
        got, x = np.asarray(y).astype(np.float64), feeds[f"xb{j}"]
        w = oracle(s, weights[f"{s}.{rows}x{k}"]).astype(np.float64)
        base = feeds[f"rb{j}"].astype(np.float64) if res else 0.0
        exact, what = x.astype(np.float64) @ w.T + base, f"{s} {rows}x{k}, batched M = {m} ({form})"
        assert got.shape == (m, rows), what
        if not _batched_q8(s, rows, form):
            assert_close(got, exact, "f32", what)
            continue
        assert_close(got, np.stack([w @ q8_activations(row)[0] for row in x]) + base, "f32",
                     f"{what} vs W x̃")
        for v in range(m):
            assert_within_q8_bound(got[v] - (base[v] if res else 0.0), exact[v] - (
                base[v] if res else 0.0), x[v], w, f"{what}, row {v}, vs W x")
        with pytest.raises(AssertionError):   # x was quantized: not the f32 product
            assert_close(got, exact, "f32", what)


@pytest.mark.parametrize("form", list(Q8_FORMS))
def test_gemv_kernels_prefill_q8_mode(form: str) -> None:
    """Under activation_quant="q8" a prefill whose workgroups are whole column blocks of 16
    rows runs the integer GEMM (gemm_q8: x quantized by a dispatch of its own, the decode's
    planes repacked a chunk at a time) where the CPU has its dot product (VNNI on 512-bit
    vectors; the portable form, compiled for LLVM's generic x86-64, on every machine): each
    row of y equals W x̃ (x̃: that row quantized as ggml's q8_0, in numpy) within the f32
    tolerance, and the exact W x within the q8 bound, and is not the f32 product. On an AVX2
    CPU, and where the rows are not whole column blocks (40), the prefill dequantizes the q8
    planes (Q4_K, Q6_K; Q8_0's are the exact ones) and is the exact f32 product. Q4_K, Q8_0,
    Q5_0, Q6_K (every bit of their weights set somewhere), a residual add taken in, S = 1, 7
    and 70 rows (several passes, the last one repeating its final row). A weight read by a
    decode and a prefill has one set of planes."""
    rng = np.random.default_rng(9)
    weights = {}
    for s, rows, k in PREFILL_Q8_CASES:
        weights[f"{s}.{rows}x{k}"] = random_blocks(s, rows, k, rng)
        random_bits_cover(s, weights[f"{s}.{rows}x{k}"])
    weights["add"] = random_blocks("gguf_q4_k", 48, 512, rng)
    for (s, rows, k), _, _ in BATCHED_Q8_CASES:
        if f"{s}.{rows}x{k}" not in weights:
            weights[f"{s}.{rows}x{k}"] = random_blocks(s, rows, k, rng)
            random_bits_cover(s, weights[f"{s}.{rows}x{k}"])

    def module(decode: bool) -> rlx.HirModule:
        h = rlx.HirModule("prefill_q8")
        outs, ws = [], {}
        for s, rows, k in PREFILL_Q8_CASES:
            x = h.input(f"x{len(outs)}", (1, None, k))
            w = ws[s, rows, k] = h.param(f"{s}.{rows}x{k}", weights[f"{s}.{rows}x{k}"].shape,
                                         "i8")
            outs.append(h.dequant_matmul(x, w, scheme=s))
        if decode:           # the q8 decode of a weight a prefill reads
            outs.append(h.dequant_matmul(h.input("xdecode", (1, 1, k)), w, scheme=s))
        else:                # r + W x, one dispatch
            add = h.param("add", weights["add"].shape, "i8")
            y = h.dequant_matmul(h.input("xr", (1, None, 512)), add, scheme="gguf_q4_k")
            outs.append(h.mir("binary", [h.input("r", (1, None, 48)), y], kind="add"))
            for j, (case, m, res) in enumerate(BATCHED_Q8_CASES):   # batched, static M
                x = h.input(f"xb{j}", (m, case[2]))
                s, rows, k = case
                w = ws.get(case) or h.param(f"{s}.{rows}x{k}", weights[f"{s}.{rows}x{k}"].shape,
                                            "i8")
                y = h.dequant_matmul(x, w, scheme=s)
                outs.append(h.mir("binary", [h.input(f"rb{j}", (m, case[1])), y], kind="add")
                            if res else y)
        h.set_outputs(outs)
        return h

    options = {"activation_quant": "q8", **Q8_FORMS[form]}
    dot = TargetConfig(**options).lowering.int_dot   # type: ignore[arg-type]
    kernels = [_prefill_q8_kernel(s, rows, k, form) for s, rows, k in PREFILL_Q8_CASES]
    linalg = rlx.compile(module(True), "llvm-cpu", emit="linalg", **options)
    assert re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg) == [
        name for name, _ in kernels] + [f"q6_k_40x256_q8{dot}"]
    assert len(re.findall(r"util\.global private @planes\.gguf_q6_k\.40x256\.", linalg)) == 4
    add_name, add_int8 = _prefill_q8_kernel("gguf_q4_k", 48, 512, form)
    h = module(False)
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg", **options)
    assert f"@rlx_gemv_{add_name}_add::" in linalg
    wide = "w" if TargetConfig(**options).lowering.vector_bits == 512 else ""  # type: ignore[arg-type]
    for gemv in (f"q8_0_32x512_m2{wide}_q8{dot}_add", f"q4_0_40x512_m5{wide}_q8{dot}"):
        assert f"@rlx_gemv_{gemv}::" in linalg, gemv      # the batched q8 GEMV
    prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu", **options), "local-task", weights)
    for seq in (1, 7, 70):
        feeds = {f"x{i}": rng.standard_normal((1, seq, k)).astype(np.float32)
                 for i, (_, _, k) in enumerate(PREFILL_Q8_CASES)}
        feeds["xr"] = rng.standard_normal((1, seq, 512)).astype(np.float32)
        feeds["r"] = rng.standard_normal((1, seq, 48)).astype(np.float32)
        for j, (case, m, res) in enumerate(BATCHED_Q8_CASES):
            feeds[f"xb{j}"] = rng.standard_normal((m, case[2])).astype(np.float32)
            if res:
                feeds[f"rb{j}"] = rng.standard_normal((m, case[1])).astype(np.float32)
        outs = prog.main(**feeds)
        _check_batched_q8(outs[-len(BATCHED_Q8_CASES):], feeds, weights, form)
        got = [np.asarray(y)[0].astype(np.float64)
               for y in outs[:len(outs) - len(BATCHED_Q8_CASES)]]
        checks = [(f"x{i}", f"{s}.{rows}x{k}", s, int8, None) for i, ((s, rows, k), (_, int8))
                  in enumerate(zip(PREFILL_Q8_CASES, kernels, strict=True))]
        checks.append(("xr", "add", "gguf_q4_k", add_int8, feeds["r"][0]))
        for (xname, wname, s, int8, r), y in zip(checks, got, strict=True):
            w, x = oracle(s, weights[wname]).astype(np.float64), feeds[xname][0]
            base = 0.0 if r is None else r.astype(np.float64)
            exact = x.astype(np.float64) @ w.T + base
            what = f"{wname} at S = {seq} ({form})"
            if not int8:
                assert_close(y, exact, "f32", what)
                continue
            quantized = np.stack([w @ q8_activations(row)[0] for row in x]) + base
            assert_close(y, quantized, "f32", f"{what} vs W x̃")
            for v in range(seq):
                assert_within_q8_bound(y[v], exact[v], x[v], w, f"{what}, row {v}, vs W x")
            with pytest.raises(AssertionError):   # x was quantized: not the f32 product
                assert_close(y, exact, "f32", what)


def test_q8_prefill_gemm_instructions() -> None:
    """The q8 prefill GEMM's dot product is ``vpdpbusd`` on 512-bit registers for an AVX-512
    VNNI CPU (Sapphire Rapids: compiled, its assembly read), and an AVX2 CPU (Zen 3) runs no
    integer GEMM (the f32 outer form: no ``vpdpbusd``, no ``vpmaddubsw``)."""
    h = rlx.HirModule("prefill_dot")
    w = h.param("w", (64, QUANT_SCHEMES["gguf_q8_0"].row_bytes(512)), "i8")
    h.set_outputs([h.dequant_matmul(h.input("x", (1, None, 512)), w, scheme="gguf_q8_0")])
    with tempfile.TemporaryDirectory() as tmp:
        asm = {}
        for cpu in ("sapphirerapids", "znver3"):
            dump = Path(tmp) / cpu
            rlx.compile(h, "llvm-cpu", cpu=cpu, activation_quant="q8",
                        extra_flags=[f"--iree-hal-dump-executable-files-to={dump}"])
            asm[cpu] = "\n".join(p.read_text() for p in dump.glob("*.s"))
    zmm = re.findall(r"\bvpdpbusd\s+[^\n]*%zmm", asm["sapphirerapids"])
    assert len(zmm) >= 16 * 8, len(zmm)          # a pass: 16 rows x 8 quads, unrolled
    assert not re.search(r"\bvpdpbusd\b|\bvpmaddubsw\b", asm["znver3"])


def test_gemv_kernels_with_prefetch_hints() -> None:
    """``gemv_prefetch`` (LoweringOptions.prefetch_bytes: 4096 on Intel CPUs by default, 0
    elsewhere, so that the other kernel tests check one form per CPU): every ``M = 1`` body,
    exact and ``q8``, and the batched bodies (``M = 3``: the f32 one of Q8_0, Q4_K and Q6_K,
    the ``q8`` Q8_0 one), hinting 256 bytes ahead, which in these small planes runs into
    the next tile and is clamped at each plane's end, are what ran, hints included, and
    equal the float64 reference (exact: the f32 tolerance; ``q8``: its bound)."""
    rng = np.random.default_rng(13)
    batched = [("gguf_q8_0", 3), ("gguf_q4_k", 3), ("gguf_q6_k", 3)]
    q8_cases = [(s, 1) for s in ("gguf_q8_0", "gguf_q4_k", "gguf_q5_k", "gguf_q6_k")]
    for quant, cases in ((None, [(s, 1) for s in KERNEL_SCHEMES] + batched),
                         ("q8", [*q8_cases, ("gguf_q8_0", 3)])):
        h = rlx.HirModule("hints")
        xs = {m: h.input(f"x{m}", (m, 512)) for m in (1, 3)}
        weights = {f"{s}{m}": random_blocks(s, 48, 512, rng) for s, m in cases}
        h.set_outputs([h.dequant_matmul(xs[m], h.param(f"{s}{m}", weights[f"{s}{m}"].shape,
                                                       "i8"), scheme=s) for s, m in cases])
        options: dict[str, Any] = {"gemv_prefetch": 256, "activation_quant": quant}
        linalg = rlx.compile(h, "llvm-cpu", emit="linalg", **options)
        kernels = re.findall(r"stream\.executable private @(\w+) \{(.*?)\n  \}", linalg,
                             re.S)
        assert len(kernels) == len(cases), [k for k, _ in kernels]
        assert all("memref.prefetch" in body for _, body in kernels), [
            k for k, body in kernels if "memref.prefetch" not in body]
        prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu", **options), "local-task", weights)
        feeds = {m: rng.standard_normal((m, 512)).astype(np.float32) for m in (1, 3)}
        for (s, m), got in zip(cases, prog.main(feeds[1], feeds[3]), strict=True):
            w = oracle(s, weights[f"{s}{m}"]).astype(np.float64)
            for row in range(m):
                x = feeds[m][row]
                want, what = w @ x.astype(np.float64), f"{s}, M = {m}, row {row} (hints)"
                if quant:
                    assert_within_q8_bound(np.asarray(got)[row], want, x, w, f"{what}, q8")
                else:
                    assert_close(np.asarray(got)[row], want, "f32", what)
