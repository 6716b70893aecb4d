"""Numerics of the reduction MIR ops: reduce (every kind, keep_dim, several axes),
argmax (ties, NaN, -inf, every axis), topk (the same, largest and smallest), softmax, cumsum
(inclusive and exclusive)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import DEVICE, TARGETS, check_module

import rlx
from rlx import reference
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


def argmaxes(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("argmaxes")
    x = h.input("x", (4, None, 9), dtype)
    h.set_outputs([h.mir("argmax", [x], axis=a, keep_dim=k)
                   for a, k in ((-1, False), (1, True), (0, False))])
    return h


def argmax_input(dtype: str) -> np.ndarray:
    """Small integers (many ties), plus rows with NaNs, all -inf, and the maximum last."""
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, size=(4, 6, 9)).astype(np.dtype(dtype))
    if dtype.startswith("f"):
        x[1, 2, [3, 7]] = np.nan
        x[2, 3, :] = -np.inf
        x[3, :, 5] = np.nan
    x[0, 4, 8] = 100
    return x


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_argmax(target: str, dtype: str) -> None:
    """Against numpy's argmax (the reference): first index on ties, NaN as the largest."""
    name = {"float32": "f32", "float16": "f16", "int32": "i32"}[dtype]
    got = check_module(argmaxes(name), target, inputs={"x": argmax_input(dtype)})
    assert got[0][0, 4] == 8  # the planted maximum
    if dtype != "int32":
        assert got[0][1, 2] == 3
        assert got[0][2, 3] == 0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_topk(target: str, dtype: str) -> None:
    """topk, largest and smallest, along the last, a middle (dynamic) and the first axis,
    on argmax's input (many ties, NaN rows, an all -inf row): against the reference (a
    stable sort), values and indices exactly; and, written out by hand, the planted
    maximum first, equal values in index order, every -inf kept."""
    name = {"float32": "f32", "float16": "f16", "int32": "i32"}[dtype]
    h = rlx.HirModule("topk")
    x = h.input("x", (4, None, 9), name)
    outs = []
    for largest in (True, False):
        for axis, k in ((-1, 4), (1, 3), (0, 2)):
            outs += h.mir_multi("topk", [x], k=k, axis=axis, largest=largest)
    h.set_outputs(outs)
    x_in = argmax_input(dtype)
    program = rlx.runtime.load(rlx.compile(h, target), DEVICE[target])
    got = program.main(x=x_in)
    for k, (g, w) in enumerate(zip(got, reference.evaluate(h, {"x": x_in}, {}), strict=True)):
        np.testing.assert_array_equal(g, w, f"output {k}")  # copies: exact, NaN included
    values, indices = got[0], got[1]
    assert values[0, 4, 0] == 100
    assert indices[0, 4, 0] == 8
    row = x_in[0, 0]
    top = [int(i) for i in np.argsort(-row.astype(np.float64), kind="stable")[:4]]
    assert list(indices[0, 0]) == top
    if dtype != "int32":
        assert list(indices[2, 3]) == [0, 1, 2, 3]  # all -inf: the first four
        assert np.isneginf(values[2, 3]).all()
