"""Numerics of the data-movement MIR ops: reshape (static and dynamic), transpose,
narrow, slice (strided, backwards, kept dynamic axes), pad, concat, expand, gather
(embedding, f32-encoded and per-batch indices), dim and iota (a dynamic size as data)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TARGETS, check_module

import rlx


def shapes(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("shapes")
    x = h.input("x", (2, None, 24), dtype)
    s = h.input("s", (4, 6), dtype)
    outs = [
        h.mir("reshape", [x], new_shape=[2, -1, 4, 6]),
        h.mir("reshape", [x], new_shape=[-1, 24]),
        h.mir("reshape", [s], new_shape=[3, 8]),
        h.mir("reshape", [s], new_shape=[24]),
        h.mir("transpose", [x], perm=[1, 2, 0]),
        h.mir("narrow", [x], axis=2, start=5, len=7),
        h.mir("slice", [x], starts=[1, 0, 23], sizes=[1, -1, 6], strides=[1, 1, -4]),
        h.mir("slice", [s], starts=[0, 1], sizes=[2, 3], strides=[3, 2]),
        h.mir("slice", [s], starts=[3, 5], sizes=[4, 0], strides=[-1, -1]),
        h.mir("pad", [x], low=[1, 0, 2], high=[0, 0, 3], value=1.5),
        h.mir("concat", [x, x, x], axis=1),
        h.mir("concat", [s, s], axis=-1),
        h.mir("expand", [s], target_shape=[3, 4, 6]),
        h.mir("expand", [h.mir("reshape", [s], new_shape=[4, 1, 6])], target_shape=[-1, 5, -1]),
        h.mir("dim", [x], axis=1),
        h.mir("dim", [s], axis=-1),
        # an iota read twice, beside a size: iota + (seq - 1), and iota itself
        h.mir("binary", [h.mir("iota", [x], axis=1),
                         h.mir("binary", [h.mir("dim", [x], axis=1),
                                          h.constant(np.asarray(1, np.int64), "i64")],
                               kind="sub")], kind="add"),
        h.mir("iota", [x], axis=-2),
        h.mir("iota", [s], axis=0),
    ]
    table = h.param("table", (10, 24), dtype)
    ids_f = h.input("ids_f", (2, None), "f32")
    ids_i = h.input("ids_i", (3,), "i64")
    outs.append(h.mir("gather", [table, ids_f], axis=0))
    outs.append(h.mir("gather", [s, ids_i], axis=1))
    pick = h.input("pick", (2, 1), "i32")
    outs.append(h.mir("gather", [x, pick], axis=1, batch_dims=1))
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_shape_ops(target: str, dtype: str) -> None:
    inputs = {"ids_f": np.array([[0.0, 3.7, 9.2, 12.0, -1.0]] * 2, np.float32),
              "ids_i": np.array([5, 0, 2], np.int64),
              "pick": np.array([[4], [1]], np.int32)}
    check_module(shapes(dtype), target, dyn=5, inputs=inputs)
