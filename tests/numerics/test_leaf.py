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
