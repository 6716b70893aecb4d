"""``rlx_mir.dequant``: rows of a GGUF tensor's raw bytes as f32 (a model's embedding kept in
the file's format: the token's rows gathered, then dequantized), every GGUF scheme, against
the float64 reference (its own block decoders), on llvm-cpu and Vulkan, with the row count
dynamic, static, and rank 1 and 3; and its verifier's errors."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TARGETS, check_module, require

import rlx
from numerics.test_quant import random_bits_cover, random_blocks
from rlx.dialects.enums import QUANT_SCHEMES

GGUF = [s for s, q in QUANT_SCHEMES.items() if q.gguf]
HALF = ("gguf_f16", "gguf_bf16")


def rows_module(rng: np.random.Generator) -> tuple[rlx.HirModule, dict[str, np.ndarray]]:
    """Every GGUF scheme's rows of ``ids`` dequantized; the whole Q8_0 table (static rows)
    and one of its rows (rank 1)."""
    h = rlx.HirModule("dequant_rows")
    ids = h.input("ids", (1, "s"), "i32")
    weights, outs = {}, []
    for scheme in GGUF:
        k = 256 if QUANT_SCHEMES[scheme].block_elems == 256 else 64
        weights[scheme] = random_blocks(scheme, 48, k, rng)
        if scheme not in HALF:                   # 48 rows: every bit set and clear
            random_bits_cover(scheme, weights[scheme])
        table = h.param(scheme, weights[scheme].shape, "i8")
        rows = h.mir("gather", [table, ids], axis=0)          # [1, s, ROWBYTES]
        outs.append(h.mir("dequant", [rows], scheme=scheme))
    q8 = h.param("gguf_q8_0", weights["gguf_q8_0"].shape, "i8")
    outs.append(h.mir("dequant", [q8], scheme="gguf_q8_0"))
    one = h.mir("gather", [q8, h.input("one", (1,), "i32")], axis=0)
    outs.append(h.mir("dequant", [h.mir("reshape", [one], new_shape=[68])], scheme="gguf_q8_0"))
    h.set_outputs(outs)
    return h, weights


@pytest.mark.parametrize("target", TARGETS)
def test_gathered_rows_dequantized(target: str) -> None:
    require(target)
    h, weights = rows_module(np.random.default_rng(3))
    inputs = {"ids": np.array([[3, 0, 47, 7, 7, 21]], np.int32), "one": np.array([5], np.int32)}
    got = check_module(h, target, params=weights, inputs=inputs)
    assert [g.shape for g in got[-2:]] == [(48, 64), (64,)]


def test_dequant_compiles_for_cuda_and_rocm() -> None:
    """No GPU here: the GPU targets are checked by compiling (the vmfb holds their code)."""
    h, _ = rows_module(np.random.default_rng(3))
    assert b"cuda-nvptx-fb" in rlx.compile(h, "cuda")
    assert b"rocm-hsaco-fb" in rlx.compile(h, "rocm")


@pytest.mark.parametrize(("shape", "dtype", "scheme", "what"), [
    ((4, 34), "f32", "gguf_q8_0", "operand 'w': expected element type i8"),
    ((4, 35), "i8", "gguf_q8_0", "operand 'w' dim -1: expected a multiple of 34"),
    ((4, 34), "i8", "int8", "attribute 'scheme': expected one of"),
])
def test_dequant_refuses(shape: tuple[int, ...], dtype: str, scheme: str, what: str) -> None:
    h = rlx.HirModule("bad")
    w = h.param("w", shape, dtype)
    with pytest.raises(rlx.VerifyError, match=what):
        h.mir("dequant", [w], scheme=scheme)
