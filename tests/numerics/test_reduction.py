"""Numerics of the reduction MIR ops: reduce (every kind, keep_dim, several axes),
softmax, cumsum (inclusive and exclusive)."""

from __future__ import annotations

import pytest
from harness import TARGETS, check_module

import rlx
from rlx.dialects.enums import REDUCE_OPS


def reductions(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("reductions")
    x = h.input("x", (3, None, 8), dtype)
    outs = [h.mir("reduce", [x], kind=k, axes=[-1], keep_dim=False) for k in REDUCE_OPS]
    outs.append(h.mir("reduce", [x], kind="sum", axes=[0, 2], keep_dim=True))
    outs.append(h.mir("reduce", [x], kind="mean", axes=[1], keep_dim=True))
    outs += [h.mir("softmax", [x], axis=-1), h.mir("softmax", [x], axis=1)]
    outs += [h.mir("cumsum", [x], axis=1, exclusive=False),
             h.mir("cumsum", [x], axis=2, exclusive=True)]
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_reductions(target: str, dtype: str) -> None:
    check_module(reductions(dtype), target, dyn=5)
