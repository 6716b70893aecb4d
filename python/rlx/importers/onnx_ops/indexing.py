"""ONNX indexing ops: Slice, Gather, GatherElements, GatherND (folded at import time when
their inputs are known), Trilu, and the scatters (ScatterND, ScatterElements, Scatter,
TensorScatter) as ``rlx_mir.scatter``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import sympy

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize, same
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
)
from rlx.importers.onnx_ops.shape import empty, reshape_to
from rlx.importers.views import flat_position, from_end
from rlx.ir.types import DType

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


def _slice_args(node: Node, rank: int, inputs: Sequence[np.ndarray | None] | None = None,
                sizes: bool = False) -> tuple[list, list, list[int], list[int]]:
    """(starts, ends, axes, steps), from attributes (version < 10) or inputs 1-4."""
    if node.version < 10:
        starts, ends = node.ints("starts") or [], node.ints("ends") or []
        axes = node.ints("axes") or list(range(len(starts)))
        steps = [1] * len(starts)
    else:
        def get(i: int, what: str) -> list | None:
            if inputs is not None:
                v = inputs[i] if i < len(inputs) else None
                return None if v is None else [int(a) for a in v]
            if not node.has(i):
                return None
            if sizes and i in (1, 2):  # starts and ends may be dynamic sizes
                return [normalize(a) for a in node.const(i, what).reshape(-1)]
            return [int(a) for a in node.static(i, what)]

        starts, ends = get(1, "the starts") or [], get(2, "the ends") or []
        axes = get(3, "the axes") or list(range(len(starts)))
        steps = get(4, "the steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        node.fail(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    if 0 in steps:
        node.fail(f"steps {steps}: a step of 0")
    return starts, ends, normalize_axes(node, axes, rank), steps


TO_THE_END = 10**9
"""A static Slice end at or past this, on a dynamic axis, is the axis' end: what exporters
write for "to the end" (torch 2**63 - 1, tf2onnx 10**9 or 2**31 - 1). The slice differs
from ``x[start:]`` only on an axis of more than 10**9 entries."""


def gather(node: Node, table: Value, index: Value, *, axis: int, batch_dims: int = 0
           ) -> HirValue:
    """``rlx_mir.gather``; a boolean table is gathered as i8 (IREE 3.13 miscompiles a
    gather from an ``i1`` tensor fused with the ops around it: wrong elements read)."""
    t = node.as_tensor(table)
    if t.dtype != DType.I1:
        return node.mir("gather", [t, index], axis=axis, batch_dims=batch_dims)
    y = node.mir("gather", [node.cast(t, DType.I8), index], axis=axis, batch_dims=batch_dims)
    return node.mir("compare", [y, np.asarray(0, np.int8)], kind="ne")


@converter("Slice", const_inputs=(1, 2, 3, 4))
def convert_slice(node: Node) -> list[Value]:
    x = node.tensor(0)
    shape = list(x.shape)
    rank = len(shape)
    starts, ends, axes, steps = _slice_args(node, rank, sizes=True)
    first, sizes, strides = [0] * rank, [-1] * rank, [1] * rank
    dynamic = []
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        dim = shape[axis]
        if dim is None or not (is_static(start) and is_static(end)):
            dynamic.append((start, end, axis, step))
            continue
        first[axis], sizes[axis] = slice_range(dim, int(start), int(end), step)
        strides[axis] = step
    cut = [a for a in range(rank) if sizes[a] != -1 and not (
        first[a] == 0 and sizes[a] == shape[a] and strides[a] == 1)]
    y: Value = x
    if 0 in sizes:
        dims = [d if s == -1 else s for d, s in zip(shape, sizes, strict=True)]
        if None not in dims:
            return [empty(node, dims, x)]
        # nothing of a tensor with dynamic dims (the pass-through half of a rotary embedding
        # over the whole head: Phi-3's q[..., rotary_dim:]), for a Concat to drop
        a = sizes.index(0)
        y_dims = node.dims_of(x)
        y_dims[a] = 0
        return [node.known(node.mir("narrow", [x], axis=a, start=0, len=0), y_dims)]
    if len(cut) == 1 and strides[cut[0]] == 1:
        a = cut[0]
        y = node.mir("narrow", [x], axis=a, start=first[a], len=sizes[a])
    elif cut:
        y = node.mir("slice", [x], starts=first, sizes=sizes, strides=strides)
    if y is not x:
        y_dims = node.dims_of(x)
        for a in cut:
            y_dims[a] = sizes[a]
        y = node.known(y, y_dims)
    for start, end, axis, step in dynamic:
        y = _dynamic_slice(node, y, axis, start, end, step)
    return [y]


def _dynamic_slice(node: Node, x: HirValue, axis: int, start: SymDim, end: SymDim,
                   step: int) -> HirValue:
    """``x[start:end:step]`` along ``axis`` where the dim or a bound is a dynamic size: a
    ``slice`` up to ``k`` before the end when that is what it is (any positive step: a
    Funnel Transformer's ``x[:, ::2]``), else (step 1) a ``narrow`` for a static window or
    a ``dynamic_slice`` of bounds computed at run time."""
    dims = node.dims_of(x)
    d = dims[axis]
    if is_static(start) and int(start) < 0:
        start = normalize(d + int(start))
    if is_static(end) and int(end) >= TO_THE_END:
        end = d
    elif is_static(end) and int(end) < 0:
        end = normalize(d + int(end))
    before_end = normalize(sympy.simplify(sympy.sympify(d) - sympy.sympify(end)))
    to_the_end = is_static(start) and int(start) >= 0 and is_static(before_end) and int(
        before_end) >= 0
    if step > 0 and x.shape[axis] is None and to_the_end:
        if int(start) == 0 and int(before_end) == 0 and step == 1:
            return x
        rank = len(x.shape)
        starts = [int(start) if a == axis else 0 for a in range(rank)]
        sizes = [-1 - int(before_end) if a == axis else -1 for a in range(rank)]
        strides = [step if a == axis else 1 for a in range(rank)]
        y = node.mir("slice", [x], starts=starts, sizes=sizes, strides=strides)
        count = sympy.sympify(d) - start - before_end
        return node.known(y, [normalize(sympy.ceiling(count / step)) if a == axis else dims[a]
                              for a in range(rank)])
    if step != 1:
        node.fail(f"a slice with step {step} over a dynamic size ({d}) from {start} to "
                  f"{end}: rlx slices a dynamic axis with a step from a static start to a "
                  "static distance before its end")
    if x.shape[axis] is None and is_static(start) and is_static(end) and 0 <= int(
            start) <= int(end):
        # a static window of a dynamic axis: narrow checks at run time that the axis
        # reaches the end (ONNX would clamp a shorter axis; the call fails instead)
        y = node.mir("narrow", [x], axis=axis, start=int(start), len=int(end) - int(start))
        return node.known(y, [int(end) - int(start) if a == axis else dims[a]
                              for a in range(len(dims))])
    # bounds the model computes from its sizes (a chunk of a dynamic axis: ceil(S / k)
    # rows, the last piece shorter): a dynamic_slice, which clamps them into the axis as
    # ONNX does; its length is end - start when that provably stays inside the axis, else
    # a size of its own (counted at run time)
    y = node.mir("dynamic_slice", [x, node.sizes.scalar(start, DType.I64, node.fail),
                                   node.sizes.scalar(end, DType.I64, node.fail)], axis=axis)
    count: SymDim | None = normalize(sympy.simplify(sympy.sympify(end) - start))
    inside = (sympy.sympify(end) - sympy.sympify(d)).is_nonpositive and (
        sympy.sympify(count).is_nonnegative) and sympy.sympify(start).is_nonnegative
    return node.known(y, [(count if inside else None) if a == axis else dims[a]
                          for a in range(len(dims))])


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
        return [gather(node, data, fixed.astype(idx_const.dtype), axis=axis)]
    idx = node.tensor(1)
    return [gather(node, data, from_end(node, idx, node.dims(0)[axis]), axis=axis)]


@folder("Gather")
def fold_gather(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    data, idx = inputs[0], inputs[1]
    if data is None or idx is None or is_symbolic(idx):
        return None
    axis = node.attr("axis", 0) % max(data.ndim, 1)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take(data, idx, axis=axis)]


# --------------------------------------------------------------------------------------
# GatherElements, GatherND, Trilu
# --------------------------------------------------------------------------------------


@converter("GatherElements", since=11)
def convert_gather_elements(node: Node) -> list[Value]:
    """``y[i, j, k] = data[i, idx[i, j, k], k]`` (axis 1): the axis moved last, the other
    dims flattened into one batch dim, one ``gather`` with ``batch_dims = 1``."""
    data, idx = node.tensor(0), node.tensor(1)
    d_dims, i_dims = node.dims(0), node.dims(1)
    rank = len(d_dims)
    if len(i_dims) != rank:
        node.fail(f"indices of rank {len(i_dims)} for data of rank {rank}")
    axis = normalize_axes(node, [node.attr("axis", 0)], rank, "axis")[0]
    for a in range(rank):
        if a != axis and not (same(d_dims[a], i_dims[a])):
            node.fail(f"indices dim {a} ({i_dims[a]}) differs from the data's ({d_dims[a]}): "
                      "rlx gathers elements along one axis of equal-shaped operands")
    perm = [a for a in range(rank) if a != axis] + [axis]
    moved = perm != list(range(rank))

    def last(v: HirValue) -> HirValue:
        return node.mir("transpose", [v], perm=perm) if moved else v

    idx = from_end(node, idx, d_dims[axis])
    table = reshape_to(node, last(data), [math.prod(d_dims[a] for a in perm[:-1]),
                                           d_dims[axis]])
    index = reshape_to(node, last(idx), [math.prod(i_dims[a] for a in perm[:-1]),
                                          i_dims[axis]])
    y = gather(node, table, index, axis=1, batch_dims=1)
    y = reshape_to(node, y, [i_dims[a] for a in perm])
    if moved:
        y = node.mir("transpose", [y], perm=[perm.index(a) for a in range(rank)])
    return [node.known(y, i_dims)]


@folder("GatherElements")
def fold_gather_elements(node: Node, inputs: list[np.ndarray | None]
                         ) -> list[np.ndarray] | None:
    data, idx = inputs[0], inputs[1]
    if data is None or idx is None or is_symbolic(idx) or is_symbolic(data):
        return None
    axis = node.attr("axis", 0) % data.ndim
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take_along_axis(data, idx, axis=axis)]


@converter("GatherND", since=11)
def convert_gather_nd(node: Node) -> list[Value]:
    """``y[b..., i...] = data[b..., idx[b..., i..., 0], ..., idx[b..., i..., q-1]]`` over the
    ``batch_dims`` leading dims ``b`` shared by data and indices: the first ``batch_dims +
    q`` dims of the data flattened, one ``gather`` of the row-major flat index (the batch
    position counted by iotas)."""
    data, idx = node.tensor(0), node.tensor(1)
    d_dims, i_dims = node.dims(0), node.dims(1)
    b = int(node.attr("batch_dims", 0))
    q = i_dims[-1]
    if b < 0 or b >= min(len(d_dims), len(i_dims)):
        node.fail(f"batch_dims {b} for data of rank {len(d_dims)} and indices of rank "
                  f"{len(i_dims)}")
    if not is_static(q) or int(q) > len(d_dims) - b or int(q) < 1:
        node.fail(f"indices of last dim {q} for data of rank {len(d_dims)} and "
                  f"batch_dims {b}")
    q = int(q)
    lead = i_dims[:-1]

    parts = []
    for j in range(b):  # the batch position, row-major over the shared leading dims
        at = node.sizes.iota(lead[j], idx.dtype, node.fail)
        parts.append(reshape_to(node, at, [lead[j] if a == j else 1
                                           for a in range(len(lead))]))
    for k in range(q):
        part = node.mir("narrow", [idx], axis=len(i_dims) - 1, start=k, len=1)
        parts.append(from_end(node, reshape_to(node, node.known(part, [*lead, 1]), lead),
                              d_dims[b + k]))
    flat = flat_position(node, parts, d_dims[:b + q])
    table = reshape_to(node, data, [math.prod(d_dims[:b + q]), *d_dims[b + q:]])
    y = gather(node, table, flat, axis=0)
    return [node.known(y, [*lead, *d_dims[b + q:]])]


SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _scatter(node: Node, data: HirValue, positions: HirValue, updates: HirValue
             ) -> HirValue:
    """``rlx_mir.scatter`` with the node's ``reduction``; booleans scatter as i8."""
    reduction = node.attr("reduction", "none")
    if reduction not in SCATTER_REDUCTIONS:
        node.fail(f"reduction {reduction!r}: expected one of {', '.join(SCATTER_REDUCTIONS)}")
    if updates.dtype != data.dtype:
        node.fail(f"updates are {updates.dtype}, data is {data.dtype}: expected one type")
    if data.dtype == DType.I1:
        if reduction != "none":
            node.fail(f"reduction {reduction!r} of booleans is not supported")
        out = node.mir("scatter", [node.cast(data, DType.I8), positions,
                                   node.cast(updates, DType.I8)])
        return node.mir("compare", [out, node.scalar(0, out)], kind="ne")
    if node.unsigned(0) and reduction in ("max", "min"):
        node.fail(f"reduction {reduction!r} of unsigned integers is not supported")
    return node.mir("scatter", [data, positions, updates], reduction=reduction)


@converter("ScatterND", since=11)
def convert_scatter_nd(node: Node) -> list[Value]:
    """``out[indices[b]] = updates[b]`` (or combined by ``reduction``): each position a
    ``K``-coordinate index into data's first ``K`` dims; negative coordinates count from
    the end, and ``rlx_mir.scatter`` clamps every coordinate into data (no write outside
    it, whatever the indices hold)."""
    data, positions = node.tensor(0), node.tensor(1)
    if positions.dtype not in (DType.I32, DType.I64):
        node.fail(f"indices are {positions.dtype}: expected int32 or int64")
    if not positions.shape or positions.shape[-1] is None:
        node.fail(f"indices {positions.type}: the last dim (K) must be static")
    y = _scatter(node, data, positions, node.tensor(2))
    return [node.known(y, node.dims(0))]


@converter("ScatterElements", since=11)
@converter("Scatter", since=9)
def convert_scatter_elements(node: Node) -> list[Value]:
    """``out[..., indices[i, j, ...], ...] = updates[i, j, ...]`` along ``axis``: each
    element's full position (its own coordinates, the index in place of the axis') stacked
    into ``[*indices.shape, rank]``, then one ``rlx_mir.scatter``."""
    data, idx, updates = node.tensor(0), node.tensor(1), node.tensor(2)
    rank = len(data.shape)
    i_dims = node.dims(1)
    if len(i_dims) != rank or len(updates.shape) != rank:
        node.fail(f"indices {idx.type} and updates {updates.type}: expected the data's rank "
                  f"{rank}")
    if idx.dtype not in (DType.I32, DType.I64):
        node.fail(f"indices are {idx.dtype}: expected int32 or int64")
    axis = normalize_axes(node, [node.attr("axis", 0)], rank, "axis")[0]
    idx = node.cast(idx, DType.I64)
    zeros = node.mir("binary", [idx, np.asarray(0, np.int64)], kind="mul")
    coords = []
    for a in range(rank):
        if a == axis:
            c = idx
        else:
            line = node.sizes.iota(i_dims[a], DType.I64, node.fail)
            shape = [i_dims[a] if k == a else 1 for k in range(rank)]
            c = node.mir("binary", [zeros, node.as_tensor(reshape_to(node, line, shape))],
                         kind="add")
            c = node.known(c, i_dims)
        coords.append(node.as_tensor(reshape_to(node, c, [*i_dims, 1])))
    positions = node.mir("concat", coords, axis=rank) if rank > 1 else coords[0]
    y = _scatter(node, data, positions, updates)
    return [node.known(y, node.dims(0))]


@converter("TensorScatter", since=24)
def convert_tensor_scatter(node: Node) -> list[Value]:
    """A KV cache's update: ``present[p..., write_indices[p0] + t, ...] = update[p..., t,
    ...]`` for ``t`` along ``axis`` (modulo the cache's length for ``mode = circular``),
    as one ``rlx_mir.scatter`` of the update's slices after ``axis`` at positions over the
    dims up to it (a position past the cache is clamped into it, never written outside)."""
    cache, update = node.tensor(0), node.tensor(1)
    rank = len(cache.shape)
    axis = normalize_axes(node, [node.attr("axis", -2)], rank, "axis")[0]
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        node.fail(f"mode {mode!r}: expected 'linear' or 'circular'")
    if axis == 0 or len(update.shape) != rank:
        node.fail(f"axis {axis} of past_cache {cache.type}, update {update.type}: expected "
                  "the sequence axis after the batch axis, update of the cache's rank")
    grid = node.dims(1)[:axis + 1]
    lines = []
    for a, d in enumerate(grid):
        line = node.sizes.iota(d, DType.I64, node.fail)
        lines.append(node.as_tensor(reshape_to(node, line, [d if k == a else 1
                                                            for k in range(axis + 1)])))
    zeros = lines[0]
    for line in lines[1:]:
        zeros = node.mir("binary", [zeros, line], kind="add")
    zeros = node.known(node.mir("binary", [zeros, np.asarray(0, np.int64)], kind="mul"),
                       grid)
    seq = lines[axis]
    if node.has(2):
        start = node.cast(node.tensor(2), DType.I64)
        start = node.as_tensor(reshape_to(node, start, [grid[0], *[1] * axis]))
        seq = node.mir("binary", [start, seq], kind="add")
    if mode == "circular":
        length = node.sizes.scalar(node.dims(0)[axis], DType.I64, node.fail)
        wrapped = node.mir("binary", [seq, length], kind="rem")
        seq = node.mir("binary", [node.mir("binary", [wrapped, length], kind="add"), length],
                       kind="rem")
    coords = []
    for a in range(axis + 1):
        c = node.known(node.mir("binary", [zeros, seq if a == axis else lines[a]],
                                kind="add"), grid)
        coords.append(node.as_tensor(reshape_to(node, c, [*grid, 1])))
    positions = node.mir("concat", coords, axis=axis + 1)
    y = node.mir("scatter", [cache, positions, update])
    return [node.known(y, node.dims(0))]


@converter("Trilu", const_inputs=(1,), since=14)
def convert_trilu(node: Node) -> list[Value]:
    """Keep ``j - i >= k`` (upper) or ``j - i <= k`` (lower) of the last two dims; the
    rest is 0."""
    x = node.tensor(0)
    dims = node.dims(0)
    if len(dims) < 2:
        node.fail(f"input {x.type}: Trilu needs rank >= 2")
    k = int(node.static(1, "k").reshape(-1)[0]) if node.has(1) else 0
    rows = node.sizes.iota(dims[-2], DType.I64, node.fail)
    cols = node.sizes.iota(dims[-1], DType.I64, node.fail)
    rows = reshape_to(node, rows, [dims[-2], 1])
    cols = reshape_to(node, cols, [1, dims[-1]])
    diff = node.mir("binary", [cols, rows], kind="sub")
    keep = node.mir("compare", [diff, np.asarray(k, np.int64)],
                    kind="ge" if node.attr("upper", 1) else "le")
    return [node.mir("where", [keep, x, node.scalar(0, x)])]


@folder("Trilu")
def fold_trilu(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is None or is_symbolic(x) or (len(inputs) > 1 and inputs[1] is not None
                                       and is_symbolic(inputs[1])):
        return None
    k = int(inputs[1].reshape(-1)[0]) if len(inputs) > 1 and inputs[1] is not None else 0
    return [np.triu(x, k) if node.attr("upper", 1) else np.tril(x, k)]


@converter("ReverseSequence", since=10)
def convert_reverse_sequence(node: Node) -> list[Value]:
    """Each batch entry's first ``lens[b]`` steps reversed, the rest kept:
    ``y[t, b] = x[lens[b] - 1 - t, b]`` for ``t < lens[b]``, else ``x[t, b]``; the batch and
    time axes moved first, the other dims flattened, one ``gather`` with ``batch_dims = 1``.
    A length past the time axis (which ONNX forbids) reads within it: the index is clamped
    to ``[0, T - 1]``."""
    x, lens = node.tensor(0), node.tensor(1)
    dims = node.dims(0)
    rank = len(dims)
    t_axis, b_axis = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
    if rank < 2 or {t_axis, b_axis} != {0, 1}:
        node.fail(f"time_axis {t_axis} and batch_axis {b_axis} of a rank-{rank} input: "
                  "expected 0 and 1, one each")
    if len(lens.shape) != 1 or not lens.dtype.is_int:
        node.fail(f"sequence_lens {lens.type}: expected a 1-D integer tensor")
    steps, batch, rest = dims[t_axis], dims[b_axis], dims[2:]
    table = x if b_axis == 0 else node.mir("transpose", [x], perm=[1, 0, *range(2, rank)])
    table = reshape_to(node, table, [batch, steps, math.prod(rest)])
    t = reshape_to(node, node.sizes.iota(steps, DType.I64, node.fail), [1, steps])
    n = reshape_to(node, node.cast(lens, DType.I64), [batch, 1])
    back = node.mir("binary", [node.mir("binary", [n, np.asarray(1, np.int64)], kind="sub"),
                               t], kind="sub")
    inside = node.mir("compare", [t, n], kind="lt")
    last = node.mir("binary", [node.sizes.scalar(steps, DType.I64, node.fail),
                               np.asarray(1, np.int64)], kind="sub")
    index = node.mir("binary", [node.mir("binary", [node.mir("where", [inside, back, t]),
                                                    last], kind="min"),
                                np.asarray(0, np.int64)], kind="max")
    y = reshape_to(node, gather(node, table, index, axis=1, batch_dims=1), [batch, steps, *rest])
    if b_axis == 1:
        y = node.mir("transpose", [y], perm=[1, 0, *range(2, rank)])
    return [node.known(node.as_tensor(y), dims)]
