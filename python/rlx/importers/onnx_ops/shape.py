"""ONNX data-movement and shape ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat, Split, Expand, Tile, Pad (Slice and Gather: :mod:`.indexing`; the ops
folded at import time that make values, Constant, ConstantOfShape, Range: :mod:`.constant`).

Shape arguments (Reshape's shape, Slice's starts, ...) must be known at import time; they
may hold dynamic dims (:class:`SymDim`, from ``Shape`` of a ``?``-shaped tensor) where the
MIR op can express them (one inferred ``-1`` in a reshape, a kept dim in an expand).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.registry import (
    Node,
    SymDim,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
)
from rlx.ir.types import Dim

FOLD_MAX_ELEMENTS = 1 << 22
"""Larger results of Expand / ConstantOfShape / Range / Tile stay runtime ops."""


def symbolic(dims: Sequence[int | SymDim]) -> np.ndarray:
    """A shape vector: int64 when every entry is known, else an object array."""
    if all(isinstance(d, int | np.integer) for d in dims):
        return np.asarray(dims, dtype=np.int64).reshape(len(dims))
    out = np.empty(len(dims), dtype=object)
    for i, d in enumerate(dims):
        out[i] = d
    return out


def empty(node: Node, dims: Sequence[Dim | SymDim], like: HirValue) -> np.ndarray:
    """The (constant) result of an op whose output has no elements."""
    if not all(isinstance(d, int | np.integer) for d in dims):
        node.fail(f"an empty result with dynamic dims {list(dims)}")
    return np.zeros([int(d) for d in dims], dtype=np.asarray(node.scalar(0, like)).dtype)


def reshape_to(node: Node, x: HirValue, dims: Sequence[Dim | SymDim]) -> Value:
    """``x`` reshaped to ``dims`` (None / SymDim: dynamic); at most one dynamic dim."""
    if 0 in dims:
        return empty(node, dims, x)
    unknown = [i for i, d in enumerate(dims) if not isinstance(d, int | np.integer)]
    if len(unknown) > 1:
        node.fail(f"reshape of {x.type} to {len(unknown)} dynamic dims: rlx reshapes infer "
                  "at most one dynamic size")
    new_shape = [-1 if i in unknown else int(d) for i, d in enumerate(dims)]
    return node.reshape(x, new_shape)


# --------------------------------------------------------------------------------------
# Shape, Size
# --------------------------------------------------------------------------------------


def shape_vector(node: Node, v: Value, name: str = "?") -> list[int | SymDim]:
    if isinstance(v, HirValue):
        return [d if d is not None else SymDim(v, i, name) for i, d in enumerate(v.shape)]
    return [int(d) for d in v.shape]


def _clamp_range(start: int, end: int | None, n: int) -> tuple[int, int]:
    end = n if end is None else end
    start, end = (s + n if s < 0 else s for s in (start, end))
    return min(max(start, 0), n), min(max(end, 0), n)


@converter("Shape")
def convert_shape(node: Node) -> list[Value]:
    dims = shape_vector(node, node.value(0) if node.value(0) is not None else node.tensor(0),
                        node.proto.input[0])
    start, end = _clamp_range(node.attr("start", 0), node.attr("end"), len(dims))
    return [symbolic(dims[start:end])]


@folder("Shape")
def fold_shape(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if inputs[0] is None:
        return None
    start, end = _clamp_range(node.attr("start", 0), node.attr("end"), inputs[0].ndim)
    return [np.asarray(inputs[0].shape[start:end], dtype=np.int64)]


@converter("Size")
def convert_size(node: Node) -> list[Value]:
    t = node.info(0)
    if t.numel is None:
        node.fail(f"Size of {t}: the element count is only known at run time")
    return [np.asarray(t.numel, dtype=np.int64)]


@folder("Size")
def fold_size(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    return None if inputs[0] is None else [np.asarray(inputs[0].size, dtype=np.int64)]


# --------------------------------------------------------------------------------------
# Reshapes
# --------------------------------------------------------------------------------------


def reshape_dims(node: Node, x_shape: Sequence[Dim | SymDim], shape: np.ndarray,
                 allowzero: bool) -> list[Dim | SymDim]:
    """ONNX Reshape's target: 0 copies the input dim (unless ``allowzero``), one -1 is
    inferred (statically when the dynamic dims are copied through)."""
    out: list[int | SymDim | None] = []
    for i, s in enumerate(shape):
        if isinstance(s, SymDim):
            out.append(s)
        elif int(s) == 0 and not allowzero:
            if i >= len(x_shape):
                node.fail(f"shape {list(shape)}: entry {i} copies a dim the input lacks")
            out.append(x_shape[i])
        else:
            out.append(int(s))
    if out.count(-1) > 1:
        node.fail(f"shape {list(shape)}: at most one -1")
    if -1 not in out:
        return [None if isinstance(d, SymDim) else d for d in out]
    known = math.prod(d for d in out if isinstance(d, int) and d != -1)
    static_in = [d for d in x_shape if isinstance(d, int)]
    dynamic_in = [d for d in x_shape if not isinstance(d, int)]
    dynamic_out = [d for d in out if not isinstance(d, int)]
    if not dynamic_in:
        total = math.prod(static_in)
        if known == 0 or total % known:
            node.fail(f"cannot reshape {list(x_shape)} to {list(shape)}")
        out[out.index(-1)] = total // known
    elif len(dynamic_in) == len(dynamic_out) and all(
            _same_dim(a, b) for a, b in zip(dynamic_in, dynamic_out, strict=True)):
        total = math.prod(static_in)
        out[out.index(-1)] = total // known if known and total % known == 0 else None
    else:
        out[out.index(-1)] = None
    return [None if isinstance(d, SymDim) else d for d in out]


def _same_dim(a: object, b: object) -> bool:
    """Dynamic dims known to be equal: the same tensor's dim, or copied through."""
    if isinstance(a, SymDim) and isinstance(b, SymDim):
        return a.value.value == b.value.value and a.axis == b.axis
    return a is b


@converter("Reshape", const_inputs=(1,), since=5)
def convert_reshape(node: Node) -> list[Value]:
    x = node.tensor(0)
    in_dims = shape_vector(node, x)
    dims = reshape_dims(node, in_dims, node.const(1, "the new shape"),
                        bool(node.attr("allowzero", 0)))
    return [reshape_to(node, x, dims)]


@folder("Reshape")
def fold_reshape(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, shape = inputs[0], inputs[1]
    if x is None or shape is None or is_symbolic(shape):
        return None
    dims = [int(s) if int(s) != 0 or node.attr("allowzero", 0) else x.shape[i]
            for i, s in enumerate(shape)]
    return [x.reshape(dims)]


def _flatten_dims(node: Node, dims: Sequence[Dim | SymDim]) -> list[Dim | SymDim]:
    rank = len(dims)
    axis = node.attr("axis", 1)
    if not -rank <= axis <= rank:
        node.fail(f"axis {axis} outside [{-rank}, {rank}]")
    if axis < 0:
        axis += rank

    def prod(part: Sequence[Dim | SymDim]) -> Dim | SymDim:
        if all(isinstance(d, int) for d in part):
            return math.prod(part)  # type: ignore[arg-type]
        return part[0] if len(part) == 1 else None

    return [prod(dims[:axis]), prod(dims[axis:])]


@converter("Flatten")
def convert_flatten(node: Node) -> list[Value]:
    x = node.tensor(0)
    return [reshape_to(node, x, _flatten_dims(node, shape_vector(node, x)))]


@folder("Flatten")
def fold_flatten(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    return None if x is None else [x.reshape(_flatten_dims(node, list(x.shape)))]


def _axes(node: Node, rank: int, inputs: Sequence[np.ndarray | None] | None = None,
          since: int = 13) -> list[int] | None:
    """Axes from the attribute (before ``since``) or input 1 (None: not given)."""
    if node.version < since:
        axes = node.ints("axes")
    elif inputs is not None:
        axes = None if len(inputs) < 2 or inputs[1] is None else [int(a) for a in inputs[1]]
    else:
        axes = [int(a) for a in node.static(1, "the axes")] if node.has(1) else None
    return None if axes is None else normalize_axes(node, axes, rank)


def _squeezed(node: Node, dims: Sequence[Dim | SymDim], axes: list[int] | None
              ) -> list[Dim | SymDim]:
    if axes is None:
        if not all(isinstance(d, int) for d in dims):
            node.fail("squeezing every 1-dim of a tensor with dynamic dims")
        return [d for d in dims if d != 1]
    for a in axes:
        if dims[a] != 1 and isinstance(dims[a], int):
            node.fail(f"axis {a} has size {dims[a]}, not 1")
    return [d for i, d in enumerate(dims) if i not in axes]


def _unsqueezed(node: Node, dims: Sequence[Dim | SymDim], axes: list[int] | None
                ) -> list[Dim | SymDim]:
    if axes is None:
        node.fail("the axes are required")
    out = list(dims)
    for a in sorted(axes):
        out.insert(a, 1)
    return out


@converter("Squeeze", const_inputs=(1,))
def convert_squeeze(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = shape_vector(node, x)
    return [reshape_to(node, x, _squeezed(node, dims, _axes(node, len(dims))))]


@converter("Unsqueeze", const_inputs=(1,))
def convert_unsqueeze(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = shape_vector(node, x)
    n_axes = len(node.ints("axes") or []) if node.version < 13 else len(
        node.static(1, "the axes"))
    return [reshape_to(node, x, _unsqueezed(node, dims, _axes(node, len(dims) + n_axes)))]


@folder("Squeeze", "Unsqueeze")
def fold_squeeze(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is None or (node.version >= 13 and len(inputs) > 1 and inputs[1] is not None
                     and is_symbolic(inputs[1])):
        return None
    if node.op_type == "Squeeze":
        return [x.reshape(_squeezed(node, x.shape, _axes(node, x.ndim, inputs)))]
    n_axes = len(node.ints("axes") or []) if node.version < 13 else (
        0 if len(inputs) < 2 or inputs[1] is None else len(inputs[1]))
    dims = _unsqueezed(node, x.shape, _axes(node, x.ndim + n_axes, inputs))
    return [x.reshape(dims)]


# --------------------------------------------------------------------------------------
# Transpose, Concat, Split
# --------------------------------------------------------------------------------------


def _perm(node: Node, rank: int) -> list[int]:
    perm = node.ints("perm") or list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        node.fail(f"perm {perm} is not a permutation of 0..{rank - 1}")
    return perm


@converter("Transpose")
def convert_transpose(node: Node) -> list[Value]:
    x = node.tensor(0)
    perm = _perm(node, len(x.shape))
    if perm == list(range(len(perm))):
        return [x]
    return [node.mir("transpose", [x], perm=perm)]


@folder("Transpose")
def fold_transpose(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    return None if x is None else [np.transpose(x, _perm(node, x.ndim))]


@converter("Concat", since=4)
def convert_concat(node: Node) -> list[Value]:
    values = [node.tensor(i) for i in range(node.n_inputs) if node.has(i)]
    axis = normalize_axes(node, [node.attr("axis")], len(values[0].shape), "axis")[0]
    values = [v for v in values if v.shape[axis] != 0] or values[:1]
    if len(values) == 1:
        return [values[0]]
    return [node.mir("concat", values, axis=axis)]


@folder("Concat")
def fold_concat(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    arrays = [a for a in inputs if a is not None]
    if len(arrays) != len([i for i in range(node.n_inputs) if node.has(i)]):
        return None
    out = np.concatenate(arrays, axis=node.attr("axis"))
    return [out if any(is_symbolic(a) for a in arrays) else out.astype(arrays[0].dtype)]


def split_sizes(node: Node, dim: Dim, n_out: int) -> list[int]:
    if node.version >= 13 and node.has(1):
        sizes = [int(s) for s in node.static(1, "the split sizes")]
    elif node.version < 13 and node.ints("split"):
        sizes = node.ints("split") or []
    elif dim is None:
        node.fail("an even split of a dynamic dim")
    elif node.attr("num_outputs") is not None:
        chunk = -(-dim // node.attr("num_outputs"))
        sizes = [min(chunk, dim - i * chunk) for i in range(node.attr("num_outputs"))]
    else:
        if dim % n_out:
            node.fail(f"dim {dim} does not split evenly into {n_out} outputs")
        sizes = [dim // n_out] * n_out
    if len(sizes) != n_out or (dim is not None and sum(sizes) != dim):
        node.fail(f"split sizes {sizes} for {n_out} outputs of dim {dim}")
    return sizes


@converter("Split", const_inputs=(1,))
def convert_split(node: Node) -> list[Value]:
    x = node.tensor(0)
    axis = normalize_axes(node, [node.attr("axis", 0)], len(x.shape), "axis")[0]
    sizes = split_sizes(node, x.shape[axis], len(node.proto.output))
    outs: list[Value] = []
    start = 0
    for size in sizes:
        if size == x.shape[axis]:
            outs.append(x)
        elif size == 0:
            outs.append(empty(node, [0 if a == axis else d for a, d in enumerate(x.shape)],
                              x))
        else:
            outs.append(node.mir("narrow", [x], axis=axis, start=start, len=size))
        start += size
    return outs


# --------------------------------------------------------------------------------------
# Expand, Tile
# --------------------------------------------------------------------------------------


def expand_target(node: Node, x_shape: Sequence[Dim], shape: np.ndarray) -> list[int]:
    """ONNX Expand's bidirectional broadcast as a ``rlx_mir.expand`` target (-1 keeps a
    dim of the input)."""
    rank = max(len(x_shape), len(shape))
    xs = [1] * (rank - len(x_shape)) + list(x_shape)
    ss: list[int | SymDim] = [1] * (rank - len(shape)) + list(shape)
    target = []
    for i, (d, s) in enumerate(zip(xs, ss, strict=True)):
        keep = i >= rank - len(x_shape)
        if isinstance(s, SymDim):
            if d is not None or not keep:
                node.fail(f"expanding dim {i} ({d}) to a dynamic size")
            target.append(-1)
        elif int(s) == 1:
            target.append(-1 if keep and d is None else (1 if d is None else d))
        elif d is None or d in (1, int(s)):
            target.append(int(s))
        else:
            node.fail(f"cannot broadcast dim {i} of {list(x_shape)} to {int(s)}")
    return target


@converter("Expand", const_inputs=(1,), since=8)
def convert_expand(node: Node) -> list[Value]:
    x = node.tensor(0)
    target = expand_target(node, x.shape, node.const(1, "the shape"))
    if len(target) == len(x.shape) and all(t in (-1, d) for t, d in zip(target, x.shape,
                                                                       strict=True)):
        return [x]
    return [node.mir("expand", [x], target_shape=target)]


@folder("Expand")
def fold_expand(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, shape = inputs[0], inputs[1]
    if x is None or shape is None or is_symbolic(shape):
        return None
    out = np.broadcast_shapes(x.shape, tuple(int(s) for s in shape))
    if math.prod(out) > FOLD_MAX_ELEMENTS:
        return None
    return [np.broadcast_to(x, out).copy()]


@converter("Tile", const_inputs=(1,), since=6)
def convert_tile(node: Node) -> list[Value]:
    """``[d0, d1] x [r0, r1]``: reshape to ``[1, d0, 1, d1]``, expand to
    ``[r0, d0, r1, d1]``, reshape to ``[r0 d0, r1 d1]``."""
    x = node.tensor(0)
    reps = [int(r) for r in node.static(1, "the repeats")]
    if not x.type.is_static or len(reps) != len(x.shape):
        node.fail(f"tiling {x.type} by {reps}: needs static dims and one repeat per dim")
    interleaved = [v for d in x.shape for v in (1, d)]
    target = [v for r, d in zip(reps, x.shape, strict=True) for v in (r, d)]
    y = node.mir("expand", [node.reshape(x, interleaved)], target_shape=target)
    return [node.reshape(y, [r * d for r, d in zip(reps, x.shape, strict=True)])]


@folder("Tile")
def fold_tile(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, reps = inputs[0], inputs[1]
    if x is None or reps is None or is_symbolic(reps) or is_symbolic(x):
        return None
    if x.size * math.prod(int(r) for r in reps) > FOLD_MAX_ELEMENTS:
        return None
    return [np.tile(x, [int(r) for r in reps])]


# --------------------------------------------------------------------------------------
# Pad
# --------------------------------------------------------------------------------------


@converter("Pad", const_inputs=(1, 2, 3), since=2)
def convert_pad(node: Node) -> list[Value]:
    """Constant mode: ``rlx_mir.pad``; negative pads crop (``rlx_mir.slice``)."""
    x = node.tensor(0)
    rank = len(x.shape)
    mode = node.attr("mode", "constant")
    if mode != "constant":
        node.fail(f"mode '{mode}': rlx pads with a constant only")
    if node.version < 11:
        pads, value = node.ints("pads") or [], float(node.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in node.static(1, "the pads")]
        value_arr = node.static(2, "the pad value") if node.has(2) else np.zeros(1)
        value = float(np.asarray(value_arr).reshape(-1)[0]) if value_arr.size else 0.0
        axes = normalize_axes(node, [int(a) for a in node.static(3, "the axes")], rank) if (
            node.has(3)) else list(range(rank))
    if len(pads) != 2 * len(axes):
        node.fail(f"pads {pads}: expected {2 * len(axes)} values")
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = pads[i], pads[len(axes) + i]
    y = x
    if any(p > 0 for p in low + high):
        y = node.mir("pad", [y], low=[max(p, 0) for p in low],
                     high=[max(p, 0) for p in high], value=value)
    if any(p < 0 for p in low + high):
        shape = y.shape
        if any(shape[a] is None for a in range(rank) if low[a] < 0 or high[a] < 0):
            node.fail("negative pads on a dynamic dim")
        starts = [-min(p, 0) for p in low]
        sizes = [-1 if low[a] >= 0 and high[a] >= 0 else shape[a] + min(low[a], 0) + min(
            high[a], 0) for a in range(rank)]
        y = node.mir("slice", [y], starts=starts, sizes=sizes, strides=[1] * rank)
    return [y]
