"""Numerics of the data-movement MIR ops: reshape (static and dynamic), transpose,
narrow (also from the end), slice (strided, backwards, kept dynamic axes, strided up to
the end of a dynamic axis), pad, concat, expand, gather (embedding, f32-encoded and
per-batch indices), write_rows (rows of a cache replaced at device-side positions: a
decode's one row per slot, a prompt's dynamic rows into one slot, overlapping writes, slot
and row indices out of range on both sides), scatter (ScatterND's replace and combine),
barrier (the identity), dim and iota (a dynamic size as data)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TARGETS, check_module, make_inputs

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
        h.mir("narrow", [x], axis=1, start=-3, len=2),
        h.mir("slice", [x], starts=[1, 0, 23], sizes=[1, -1, 6], strides=[1, 1, -4]),
        h.mir("slice", [s], starts=[0, 1], sizes=[2, 3], strides=[3, 2]),
        h.mir("slice", [s], starts=[3, 5], sizes=[4, 0], strides=[-1, -1]),
        # up to the end (of the dynamic axis too) with a stride: x[:, 1::2, :-1:3]
        h.mir("slice", [x], starts=[0, 1, 0], sizes=[-1, -1, -2], strides=[1, 2, 3]),
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
        h.mir("barrier", [x]),
    ]
    table = h.param("table", (10, 24), dtype)
    ids_f = h.input("ids_f", (2, None), "f32")
    ids_i = h.input("ids_i", (3,), "i64")
    outs.append(h.mir("gather", [table, ids_f], axis=0))
    outs.append(h.mir("gather", [s, ids_i], axis=1))
    pick = h.input("pick", (2, 1), "i32")
    outs.append(h.mir("gather", [x, pick], axis=1, batch_dims=1))
    outs += _writes(h, x, dtype)
    h.set_outputs(outs)
    return h


def _writes(h: rlx.HirModule, x: rlx.HirValue, dtype: str) -> list[rlx.HirValue]:
    """write_rows into ``cache [3, 6, 24]``: one row per slot at ``pos`` (a decode step;
    positions below 0 and past the end are clamped), the rows of ``x [2, dyn, 24]`` at
    ``slot2`` / ``pos2`` (dyn = 5 rows; the second write starts at row 4, so its rows past
    the end land on row 5, and overlaps the first when the slots agree)."""
    cache = h.input("cache", (3, 6, 24), dtype)
    row = h.input("row", (3, 1, 24), dtype)
    return [h.mir("write_rows", [cache, row, h.input("slots", (3,), "i32"),
                                 h.input("pos", (3,), "i32")]),
            h.mir("write_rows", [cache, x, h.input("slot2", (2,), "i64"),
                                 h.input("pos2", (2,), "i64")])]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_shape_ops(target: str, dtype: str) -> None:
    inputs = {"ids_f": np.array([[0.0, 3.7, 9.2, 12.0, -1.0]] * 2, np.float32),
              "ids_i": np.array([5, 0, 2], np.int64),
              "pick": np.array([[4], [1]], np.int32),
              "slots": np.array([0, 1, 2], np.int32), "pos": np.array([-3, 5, 9], np.int32),
              "slot2": np.array([7, 2] if dtype == "f32" else [-1, 0], np.int64),
              "pos2": np.array([0, 4], np.int64)}
    check_module(shapes(dtype), target, dyn=5, inputs=inputs)


@pytest.mark.parametrize("target", TARGETS)
def test_scatter(target: str) -> None:
    """scatter (ScatterND): whole rows (K = 1) replaced, with a negative index and one out
    of range on each side (clamped); single elements (K = 2) added, a position repeated so
    two updates accumulate; slices of a 3-D tensor (K = 2) by max and mul; integer data
    by min; a dynamic number of updates. Against the reference, and the first result also
    against numpy's fancy indexing written out by hand (wrap, clamp, last write wins)."""
    h = rlx.HirModule("scatter")
    data = h.input("data", (6, 4), "f32")
    rows, new = h.input("rows", (None, 1), "i64"), h.input("new", (None, 4), "f32")
    cells, vals = h.input("cells", (5, 2), "i32"), h.input("vals", (5,), "f32")
    cube = h.input("cube", (3, 4, 5), "f32")
    at, slab = h.input("at", (2, 2), "i64"), h.input("slab", (2, 5), "f32")
    ints, pos, iv = (h.input("ints", (8,), "i32"), h.input("pos", (3, 1), "i32"),
                     h.input("iv", (3,), "i32"))
    h.set_outputs([
        h.mir("scatter", [data, rows, new]),
        h.mir("scatter", [data, cells, vals], reduction="add"),
        h.mir("scatter", [cube, at, slab], reduction="max"),
        h.mir("scatter", [cube, at, slab], reduction="mul"),
        h.mir("scatter", [ints, pos, iv], reduction="min"),
    ])
    rng = np.random.default_rng(2)
    inputs = {
        "rows": np.array([[1], [-1], [3], [9], [-8]], np.int64),
        "new": rng.standard_normal((5, 4)).astype(np.float32),
        "cells": np.array([[0, 0], [5, 3], [0, 0], [-2, 1], [2, -4]], np.int32),
        "vals": rng.standard_normal(5).astype(np.float32),
        "at": np.array([[2, 1], [0, -1]], np.int64),
        "slab": rng.standard_normal((2, 5)).astype(np.float32),
        "ints": np.arange(8, dtype=np.int32) * 3,
        "pos": np.array([[7], [0], [7]], np.int32), "iv": np.array([5, -4, 30], np.int32),
    }
    got = check_module(h, target, dyn=5, inputs=inputs)
    want = make_inputs(h, np.random.default_rng(0), 5, inputs)["data"].copy()
    # rows 1, -1 (5), 3, 9 (clamped to 5: the last write there wins), -8 (-2: clamped to 0)
    want[[1, 5, 3, 5, 0]] = inputs["new"]
    want[5] = inputs["new"][3]
    np.testing.assert_array_equal(got[0], want)
