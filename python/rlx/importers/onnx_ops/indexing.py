"""ONNX indexing ops: Slice and Gather (folded at import time when their inputs are known)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
)
from rlx.importers.onnx_ops.shape import empty

# --------------------------------------------------------------------------------------
# Slice
# --------------------------------------------------------------------------------------


def slice_range(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice's clamping: (first index, count) of ``start:end:step`` on ``dim``."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, max(0, -(-(start - end) // -step))


def _slice_args(node: Node, rank: int, inputs: Sequence[np.ndarray | None] | None = None
                ) -> tuple[list[int], list[int], list[int], list[int]]:
    """(starts, ends, axes, steps), from attributes (version < 10) or inputs 1-4."""
    if node.version < 10:
        starts, ends = node.ints("starts") or [], node.ints("ends") or []
        axes = node.ints("axes") or list(range(len(starts)))
        steps = [1] * len(starts)
    else:
        def get(i: int, what: str) -> list[int] | None:
            if inputs is not None:
                v = inputs[i] if i < len(inputs) else None
                return None if v is None else [int(a) for a in v]
            return [int(a) for a in node.static(i, what)] if node.has(i) else None

        starts, ends = get(1, "the starts") or [], get(2, "the ends") or []
        axes = get(3, "the axes") or list(range(len(starts)))
        steps = get(4, "the steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        node.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        node.fail(f"steps {steps}: a step of 0")
    return starts, ends, normalize_axes(node, axes, rank), steps


BIG = 1 << 62


@converter("Slice", const_inputs=(1, 2, 3, 4))
def convert_slice(node: Node) -> list[Value]:
    x = node.tensor(0)
    shape = list(x.shape)
    rank = len(shape)
    starts, ends, axes, steps = _slice_args(node, rank)
    first, sizes, strides = [0] * rank, [-1] * rank, [1] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        dim = shape[axis]
        if dim is None:
            if start == 0 and end >= BIG and step == 1:
                continue
            node.fail(f"slicing dynamic dim {axis} of {x.type} with bounds {start}:{end}:"
                      f"{step} (only the whole dim)")
        first[axis], sizes[axis] = slice_range(dim, start, end, step)
        strides[axis] = step
    cut = [a for a in range(rank) if sizes[a] != -1 and not (
        first[a] == 0 and sizes[a] == shape[a] and strides[a] == 1)]
    if not cut:
        return [x]
    if 0 in sizes:
        return [empty(node, [d if s == -1 else s for d, s in zip(shape, sizes, strict=True)],
                      x)]
    if len(cut) == 1 and strides[cut[0]] == 1:
        a = cut[0]
        return [node.mir("narrow", [x], axis=a, start=first[a], len=sizes[a])]
    return [node.mir("slice", [x], starts=first, sizes=sizes, strides=strides)]


@folder("Slice")
def fold_slice(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is None or any(a is not None and is_symbolic(a) for a in inputs[1:]):
        return None
    if node.version >= 10 and (len(inputs) < 3 or inputs[1] is None or inputs[2] is None):
        return None
    starts, ends, axes, steps = _slice_args(node, x.ndim, inputs)
    index: list[slice | np.ndarray] = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        first, count = slice_range(x.shape[axis], start, end, step)
        index[axis] = first + np.arange(count) * step
    out = x
    for axis, idx in enumerate(index):
        if isinstance(idx, np.ndarray):
            out = np.take(out, idx, axis=axis)
    return [out]


# --------------------------------------------------------------------------------------
# Gather
# --------------------------------------------------------------------------------------


@converter("Gather")
def convert_gather(node: Node) -> list[Value]:
    """``rlx_mir.gather``; negative indices count from the end (fixed up at import time
    for constant indices, by a compare / add / where otherwise)."""
    data = node.tensor(0)
    axis = normalize_axes(node, [node.attr("axis", 0)], len(data.shape), "axis")[0]
    dim = data.shape[axis]
    idx_const = node.maybe_const(1)
    if idx_const is not None:
        if dim is not None and idx_const.size and (
                idx_const.min() < -dim or idx_const.max() >= dim):
            node.fail(f"indices {idx_const.min()}..{idx_const.max()} outside [-{dim}, {dim})")
        fixed = np.where(idx_const < 0, idx_const + (dim or 0), idx_const)
        return [node.mir("gather", [data, fixed.astype(idx_const.dtype)], axis=axis)]
    idx = node.tensor(1)
    if dim is None:
        node.fail("run-time indices into a dynamic dim (negative indices need its size)")
    negative = node.mir("compare", [idx, node.scalar(0, idx)], kind="lt")
    wrapped = node.mir("binary", [idx, node.scalar(dim, idx)], kind="add")
    return [node.mir("gather", [data, node.mir("where", [negative, wrapped, idx])],
                     axis=axis)]


@folder("Gather")
def fold_gather(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    data, idx = inputs[0], inputs[1]
    if data is None or idx is None or is_symbolic(idx):
        return None
    axis = node.attr("axis", 0) % max(data.ndim, 1)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take(data, idx, axis=axis)]
