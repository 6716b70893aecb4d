"""ONNX ops that pick positions: ArgMax, ArgMin, TopK, Hardmax, OneHot, EyeLike.

ArgMax is ``rlx_mir.argmax`` (the first maximum; NaN counts as the largest, as numpy's);
ArgMin is the argmax of an order-reversing map (``-x`` for floats, ``~x`` for integers, so
INT_MIN does not overflow); unsigned integers are first mapped to signed ones of the same
order (the sign bit flipped). ``select_last_index`` flips the axis, takes the first, and
maps the index back. The one-hot ops compare an index with an ``iota``.
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
    np_dtype,
)
from rlx.importers.onnx_ops.shape import FOLD_MAX_ELEMENTS, reshape_to
from rlx.ir.types import DType


def _along(node: Node, d: SymDim, axis: int, rank: int) -> HirValue:
    """``[0 .. d - 1]`` (i64) shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    iota = node.sizes.iota(d, DType.I64, node.fail)
    shape = [1] * rank
    shape[axis] = d  # type: ignore[call-overload]
    return node.as_tensor(reshape_to(node, iota, shape))


def _flip(node: Node, x: HirValue, axis: int) -> HirValue:
    """``x`` reversed along ``axis`` (gathered at ``n - 1 - i``)."""
    d = node.dims_of(x)[axis]
    n = node.sizes.scalar(d, DType.I64, node.fail)
    last = node.mir("binary", [n, np.asarray(1, np.int64)], kind="sub")
    index = node.mir("binary", [last, node.sizes.iota(d, DType.I64, node.fail)], kind="sub")
    return node.known(node.mir("gather", [x, index], axis=axis), node.dims_of(x))


def _sign_flipped(node: Node, x: HirValue) -> HirValue:
    """``x`` with its sign bit flipped: unsigned order as signed order, and back."""
    low = np.iinfo(np_dtype(x.dtype)).min
    return node.mir("binary", [x, node.scalar(low, x)], kind="xor")


def _ordered(node: Node, x: HirValue, reverse: bool) -> HirValue:
    """A tensor whose signed order is ``x``'s order (reversed for ``reverse``)."""
    if x.dtype == DType.I1:
        x = node.cast(x, DType.I8)
    if node.unsigned(0):
        x = _sign_flipped(node, x)
    if not reverse:
        return x
    if x.dtype.is_float:
        return node.mir("activation", [x], kind="neg")
    return node.mir("binary", [x, node.scalar(-1, x)], kind="xor")


@converter("ArgMax", "ArgMin", since=1)
def convert_arg_max(node: Node) -> list[Value]:
    x = node.tensor(0)
    if x.dtype.is_float8:
        node.fail(f"input 0 is {x.dtype}: cast it to a wider float first")
    rank = len(x.shape)
    axis = normalize_axes(node, [node.attr("axis", 0)], rank, "axis")[0]
    keep = bool(node.attr("keepdims", 1))
    last = bool(node.attr("select_last_index", 0))
    v = _ordered(node, x, node.op_type == "ArgMin")
    if last:
        v = _flip(node, v, axis)
    index = node.cast(node.mir("argmax", [v], axis=axis, keep_dim=keep), DType.I64)
    if last:
        n = node.sizes.scalar(node.dims_of(x)[axis], DType.I64, node.fail)
        index = node.mir("binary", [node.mir("binary", [n, np.asarray(1, np.int64)],
                                             kind="sub"), index], kind="sub")
    return [index]


@converter("TopK", const_inputs=(1,), since=10)
def convert_top_k(node: Node) -> list[Value]:
    """``rlx_mir.topk``: the ``K`` largest (``largest = 0``: smallest) along ``axis``,
    sorted (also for ``sorted = 0``, which leaves the order to the implementation), equal
    values in index order, indices as int64. Unsigned inputs are mapped to signed ones of
    the same order first (and back)."""
    x = node.tensor(0)
    k = int(np.asarray(node.static(1, "K")).reshape(-1)[0])
    axis = normalize_axes(node, [node.attr("axis", -1)], len(x.shape), "axis")[0]
    size = node.dims(0)[axis]
    if k < 1 or (isinstance(size, int) and k > size):
        node.fail(f"K = {k}: expected 1 .. {size} (the size of axis {axis})")
    if x.dtype == DType.I1 or x.dtype.is_float8:
        node.fail(f"input 0 is {x.dtype}: TopK takes numbers")
    unsigned = node.unsigned(0)
    values, indices = node.h.mir_multi("topk", [_sign_flipped(node, x) if unsigned else x],
                                       k=k, axis=axis, largest=bool(node.attr("largest", 1)))
    if unsigned:
        values = _sign_flipped(node, values)
    dims = [k if i == axis else d for i, d in enumerate(node.dims(0))]
    return [node.known(values, dims), node.known(node.cast(indices, DType.I64), dims)]


@converter("Hardmax", since=13)
def convert_hardmax(node: Node) -> list[Value]:
    """1 at the first maximum along ``axis``, 0 elsewhere, in the input's type."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; Hardmax takes a float tensor")
    rank = len(x.shape)
    axis = normalize_axes(node, [node.attr("axis", -1)], rank, "axis")[0]
    first = node.cast(node.mir("argmax", [x], axis=axis, keep_dim=True), DType.I64)
    hit = node.mir("compare", [_along(node, node.dims_of(x)[axis], axis, rank), first],
                   kind="eq")
    return [node.mir("where", [hit, node.scalar(1.0, x), node.scalar(0.0, x)])]


@converter("OneHot", const_inputs=(1,), since=9)
def convert_one_hot(node: Node) -> list[Value]:
    """``values[1]`` where the position along the new ``axis`` is the index (a negative one
    counts from ``depth``; floats truncate), ``values[0]`` elsewhere (an index outside
    ``[-depth, depth)`` gives a row of ``values[0]``)."""
    depth = int(np.asarray(node.static(1, "the depth")).reshape(-1)[0])
    if depth <= 0:
        node.fail(f"depth {depth}: expected a positive size")
    indices = node.tensor(0)
    rank = len(indices.shape) + 1
    axis = normalize_axes(node, [node.attr("axis", -1)], rank, "axis")[0]
    index = node.cast(indices, DType.I64, "source" if node.unsigned(0) else None)
    negative = node.mir("compare", [index, np.asarray(0, np.int64)], kind="lt")
    index = node.mir("where", [negative, node.mir("binary", [
        index, np.asarray(depth, np.int64)], kind="add"), index])
    dims = node.dims_of(indices)
    index = node.as_tensor(reshape_to(node, index, [*dims[:axis], 1, *dims[axis:]]))
    positions = np.arange(depth, dtype=np.int64).reshape(
        [depth if k == axis else 1 for k in range(rank)])
    hit = node.mir("compare", [index, positions], kind="eq")
    values = node.value(2)
    if isinstance(values, np.ndarray):
        flat = values.reshape(-1)
        off, on = flat[0], flat[1]
        return [node.mir("where", [hit, np.asarray(on), np.asarray(off)])]
    values = node.tensor(2)
    pick = [node.reshape(node.mir("slice", [values], starts=[k], sizes=[1], strides=[1]), [])
            for k in (0, 1)]
    return [node.mir("where", [hit, pick[1], pick[0]])]


@folder("OneHot")
def fold_one_hot(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """Known indices and depth: the one-hot array, also of values that are sizes (CANINE's
    repeats, ``[1, 1, s % 4 + 4, 1]``, a OneHot of the size ``s % 4 + 4``)."""
    indices, depth, values = (inputs + [None] * 3)[:3]
    if indices is None or depth is None or values is None or is_symbolic(indices) or (
            is_symbolic(depth)):
        return None
    d = int(np.asarray(depth).reshape(-1)[0])
    rank = indices.ndim + 1
    axis = int(node.attr("axis", -1))
    axis += rank if axis < 0 else 0
    if d <= 0 or not 0 <= axis < rank or indices.size * d > FOLD_MAX_ELEMENTS:
        return None  # the converter says why
    index = np.trunc(indices).astype(np.int64) if indices.dtype.kind == "f" else (
        indices.astype(np.int64))
    index = np.expand_dims(np.where(index < 0, index + d, index), axis)
    positions = np.arange(d).reshape([d if k == axis else 1 for k in range(rank)])
    flat = values.reshape(-1)
    out = np.where(index == positions, flat[1], flat[0])
    return [out if is_symbolic(values) else out.astype(values.dtype)]


@converter("EyeLike", since=9)
def convert_eye_like(node: Node) -> list[Value]:
    """Ones on the ``k``-th diagonal of a 2-D tensor shaped like the input (of its type,
    or ``dtype``'s); a constant when the shape is static."""
    from rlx.importers.onnx_ops.elementwise import target_dtype

    info = node.info(0)
    if info.rank != 2:
        node.fail(f"input {info}: expected a 2-D tensor")
    dtype = target_dtype(node, node.attr("dtype")) if node.attr("dtype") is not None else (
        info.dtype)
    k = int(node.attr("k", 0))
    if info.is_static:
        eye = np.eye(*info.shape, k=k)  # type: ignore[misc]
        return [eye.astype(bool) if dtype == DType.I1 else eye.astype(np_dtype(dtype))]
    rows, cols = node.dims(0)
    diagonal = node.mir("binary", [_along(node, cols, 1, 2), _along(node, rows, 0, 2)],
                        kind="sub")
    hit = node.mir("compare", [diagonal, np.asarray(k, np.int64)], kind="eq")
    return [node.cast(hit, dtype)]
