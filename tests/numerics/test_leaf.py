"""Numerics of the leaf MIR ops: constants of every kind reaching compiled code (0-d,
splat, i1 masks that IREE's data tiling fuses into a matmul's consumer)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TARGETS, check_module

import rlx


@pytest.mark.parametrize("target", TARGETS)
def test_constants(target: str) -> None:
    h = rlx.HirModule("constants")
    a, b = h.input("a", (1, 2, 4, 8)), h.input("b", (1, 2, 8, 4))
    scores = h.mir("matmul", [a, b])
    causal = h.constant(np.tril(np.ones((4, 4), bool))[None, None])
    low = h.constant(np.full(1, -1e9, np.float32))
    masked = h.mir("where", [causal, scores, low])
    keep_all = h.constant(np.ones((1, 1, 4, 4), bool))
    assert "dense<true>" in str(keep_all.op)  # a splat
    everything = h.mir("where", [keep_all, scores, low])
    scalar = h.constant(np.array(2.5, np.float32))
    assert scalar.shape == ()
    h.set_outputs([h.mir("softmax", [masked], axis=-1), everything,
                   h.mir("binary", [scores, scalar], kind="mul"), scalar])
    check_module(h, target)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_matmul(target: str) -> None:
    """An i32 matmul (ONNX ``MatMulInteger``'s, after its zero points): exact integer sums
    against numpy's int64 product, batched and with a shared 2-D ``rhs``, and sums past
    2^31 that wrap as i32 does."""
    h = rlx.HirModule("imatmul")
    a, b = h.input("a", (2, None, 24), "i32"), h.input("b", (24, 7), "i32")
    c = h.input("c", (2, 24, 5), "i32")
    h.set_outputs([h.mir("matmul", [a, b]), h.mir("matmul", [a, c])])
    rng = np.random.default_rng(1)
    a_np = rng.integers(-255, 256, (2, 3, 24)).astype(np.int32)
    a_np[0, 0] = 2 ** 20  # 24 * 2^20 * 2^11 = 3 * 2^34: wraps
    b_np = rng.integers(-128, 128, (24, 7)).astype(np.int32)
    b_np[:, 0] = 2 ** 11
    c_np = rng.integers(-128, 128, (2, 24, 5)).astype(np.int32)
    got = check_module(h, target, dyn=3, inputs={"a": a_np, "b": b_np, "c": c_np})
    wide = a_np.astype(np.int64) @ b_np.astype(np.int64)
    assert wide.max() > 2 ** 31
    np.testing.assert_array_equal(got[0], wide.astype(np.int32))
    np.testing.assert_array_equal(got[1], (a_np.astype(np.int64) @ c_np).astype(np.int32))
