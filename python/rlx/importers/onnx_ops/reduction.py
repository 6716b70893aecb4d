"""ONNX reductions: ReduceMean / Sum / Max / Min / Prod, the norms and log-sums built on a
sum (ReduceL1 / L2 / SumSquare / LogSum / LogSumExp), Softmax, LogSoftmax, CumSum."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import normalize, shape_vector
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
)
from rlx.ir.types import DType

REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
          "ReduceProd": "prod"}
SUM_BASED = {"ReduceL1": ("abs", None), "ReduceL2": ("square", "sqrt"),
             "ReduceSumSquare": ("square", None), "ReduceLogSum": (None, "log"),
             "ReduceLogSumExp": ("exp", "log")}
"""Reductions that are a sum between an elementwise map and a map of the result."""
AXES_INPUT_SINCE = {"ReduceSum": 13}
"""The opset version from which the axes are input 1 (an attribute before): 18 for the
other reductions."""


def reduce_axes(node: Node, rank: int, given: Sequence[int] | None) -> list[int] | None:
    """The reduced axes; None means none at all (``noop_with_empty_axes``)."""
    if given is None or len(given) == 0:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted(normalize_axes(node, given, rank))


def _given_axes(node: Node, inputs: Sequence[np.ndarray | None] | None = None
                ) -> list[int] | None:
    if node.version < AXES_INPUT_SINCE.get(node.op_type, 18):
        return node.ints("axes")
    if inputs is not None:
        axes = inputs[1] if len(inputs) > 1 else None
        return None if axes is None else [int(a) for a in axes]
    return [int(a) for a in node.static(1, "the axes")] if node.has(1) else None


def reduce(node: Node, x: HirValue, kind: str, axes: list[int], keep: bool) -> HirValue:
    """``rlx_mir.reduce``; integer means are sums divided by the count (truncated); bool
    max is "any" (a count of trues > 0), bool min "all" (no false): both right for an
    empty set too."""
    if not axes:
        return x
    if x.dtype == DType.I1 and kind in ("max", "min"):
        flags = x if kind == "max" else node.mir("compare", [x, node.scalar(False, x)],
                                                 kind="eq")
        count = node.mir("reduce", [node.cast(flags, DType.I32)], kind="sum", axes=axes,
                         keep_dim=keep)
        return node.mir("compare", [count, node.scalar(0, count)],
                        kind="gt" if kind == "max" else "eq")
    if kind == "mean" and not x.dtype.is_float:
        count = math.prod(x.shape[a] for a in axes)  # type: ignore[misc]
        total = node.mir("reduce", [x], kind="sum", axes=axes, keep_dim=keep)
        return node.mir("binary", [total, node.scalar(count, x)], kind="div")
    return node.mir("reduce", [x], kind=kind, axes=axes, keep_dim=keep)


@converter(*REDUCE, const_inputs=(1,))
def convert_reduce(node: Node) -> list[Value]:
    x = node.tensor(0)
    axes = reduce_axes(node, len(x.shape), _given_axes(node))
    if axes is None:
        return [x]
    if node.op_type == "ReduceMean" and not x.dtype.is_float and any(
            x.shape[a] is None for a in axes):
        node.fail("the integer mean over a dynamic dim")
    return [reduce(node, x, REDUCE[node.op_type], axes, bool(node.attr("keepdims", 1)))]


def _unary(node: Node, x: HirValue, kind: str) -> HirValue:
    if kind == "square":
        return node.mir("binary", [x, x], kind="mul")
    return node.mir("activation", [x], kind=kind)


@converter(*SUM_BASED, const_inputs=(1,))
def convert_sum_based(node: Node) -> list[Value]:
    """``post(Σ pre(x))`` over the axes (with no axes and ``noop_with_empty_axes``, the
    maps alone, as ONNX's reference computes it). ReduceLogSumExp subtracts the max
    first: ``m + log(Σ exp(x - m))``, no overflow for large x."""
    x = node.tensor(0)
    pre, post = SUM_BASED[node.op_type]
    if not x.dtype.is_float and (post is not None or pre == "exp"):
        node.fail(f"input 0 is {x.dtype}; {node.op_type} takes a float tensor")
    axes = reduce_axes(node, len(x.shape), _given_axes(node)) or []
    keep = bool(node.attr("keepdims", 1))
    if node.op_type == "ReduceLogSumExp":
        if not axes:
            return [x]
        m = node.mir("reduce", [x], kind="max", axes=axes, keep_dim=True)
        x = node.mir("binary", [x, m], kind="sub")
        shift = m if keep else node.mir("reduce", [m], kind="max", axes=axes, keep_dim=False)
    y = reduce(node, x if pre is None else _unary(node, x, pre), "sum", axes, keep)
    if node.op_type == "ReduceLogSumExp":
        return [node.mir("binary", [_unary(node, y, "log"), shift], kind="add")]
    return [y if post is None else _unary(node, y, post)]


@folder(*REDUCE)
def fold_reduce(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is not None and is_symbolic(x) and x.ndim == 1 and node.op_type in (
            "ReduceProd", "ReduceSum") and not node.attr("keepdims", 1):
        total = math.prod(x) if node.op_type == "ReduceProd" else sum(x)
        return [shape_vector([normalize(total)]).reshape(())]
    if x is None or is_symbolic(x) or any(a is not None and is_symbolic(a)
                                          for a in inputs[1:]):
        return None
    axes = reduce_axes(node, x.ndim, _given_axes(node, inputs))
    if axes is None:
        return [x]
    fn = {"mean": np.mean, "sum": np.sum, "max": np.max, "min": np.min,
          "prod": np.prod}[REDUCE[node.op_type]]
    out = fn(x, axis=tuple(axes), keepdims=bool(node.attr("keepdims", 1)))
    return [np.asarray(out).astype(x.dtype)]


def _softmax_axis(node: Node, rank: int) -> int:
    default = -1 if node.version >= 13 else 1
    return normalize_axes(node, [node.attr("axis", default)], rank, "axis")[0]


def log_softmax(node: Node, x: HirValue, axis: int) -> HirValue:
    """``s - log(Σ exp(s))`` with ``s = x - max(x)``: no log of an underflowed 0."""
    m = node.mir("reduce", [x], kind="max", axes=[axis], keep_dim=True)
    s = node.mir("binary", [x, m], kind="sub")
    total = node.mir("reduce", [node.mir("activation", [s], kind="exp")], kind="sum",
                     axes=[axis], keep_dim=True)
    return node.mir("binary", [s, node.mir("activation", [total], kind="log")], kind="sub")


@converter("Softmax", "LogSoftmax")
def convert_softmax(node: Node) -> list[Value]:
    """From opset 13 along one axis; before, over all dims from ``axis`` on (the input
    viewed as 2-D)."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; {node.op_type} takes a float tensor")
    rank = len(x.shape)
    axis = _softmax_axis(node, rank)
    flat = x
    if node.version < 13 and axis != rank - 1:
        if not x.type.is_static:
            node.fail(f"{node.op_type}-{node.version} over several dims of a dynamic tensor")
        flat = node.reshape(x, [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])
        axis = 1
    if node.op_type == "Softmax":
        y = node.mir("softmax", [flat], axis=axis)
    else:
        y = log_softmax(node, flat, axis)
    return [y if flat is x else node.reshape(y, list(x.shape))]


@converter("CumSum", const_inputs=(1,), since=11)
def convert_cumsum(node: Node) -> list[Value]:
    """``rlx_mir.cumsum``; ``reverse`` reads the axis backwards before and after."""
    x = node.tensor(0)
    rank = len(x.shape)
    axis_arr = node.static(1, "the axis")
    axis = normalize_axes(node, [int(np.asarray(axis_arr).reshape(-1)[0])], rank, "axis")[0]
    reverse = bool(node.attr("reverse", 0))
    if reverse and x.shape[axis] is None:
        node.fail("a reverse cumulative sum over a dynamic dim")

    def flip(v: HirValue) -> HirValue:
        n = v.shape[axis]
        if n is None or n <= 1:
            return v
        starts = [n - 1 if a == axis else 0 for a in range(rank)]
        sizes = [n if a == axis else -1 for a in range(rank)]
        strides = [-1 if a == axis else 1 for a in range(rank)]
        return node.mir("slice", [v], starts=starts, sizes=sizes, strides=strides)

    y = flip(x) if reverse else x
    y = node.mir("cumsum", [y], axis=axis, exclusive=bool(node.attr("exclusive", 0)))
    return [flip(y) if reverse else y]
