"""ATen data movement as MIR ops: views and reshapes, permutes, expand, slices, select,
cat, split, embedding, index_select, gather and indexing by tensors (``x[i, j]``). Result
sizes come from the program (torch.export records every node's symbolic shape); a reshape
copies the input's dynamic dims."""

from __future__ import annotations

from typing import Any

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, same
from rlx.importers.torch_export.convert import Op, Value, converter
from rlx.importers.views import flat_position, from_end
from rlx.ir.types import DType

END = 1 << 62
"""A slice end at or past this is "to the end" (torch writes ``sys.maxsize``)."""


@converter("view", "_unsafe_view", "reshape", "flatten", "unflatten", "unsqueeze",
           "squeeze", "view_as", "reshape_as")
def convert_reshape(op: Op) -> Value:
    return op.reshape(op.tensor(0), op.out_dims())


@converter("permute", "transpose", "t", "swapaxes", "movedim")
def convert_permute(op: Op) -> Value:
    name = op.name
    x = op.tensor(0)
    rank = len(x.shape)
    perm = list(range(rank))
    if name == "permute":
        perm = [int(d) % rank for d in op.arg(1, "dims")]
    elif name == "t":
        perm = perm[::-1]
    elif name == "movedim":
        src, dst = int(op.arg(1, "source")) % rank, int(op.arg(2, "destination")) % rank
        perm.pop(src)
        perm.insert(dst, src)
    else:
        a, b = int(op.arg(1, "dim0")) % rank, int(op.arg(2, "dim1")) % rank
        perm[a], perm[b] = perm[b], perm[a]
    if perm == list(range(rank)):
        return x
    return op.mir("transpose", [x], perm=perm)


@converter("expand", "expand_as", "broadcast_to")
def convert_expand(op: Op) -> Value:
    x = op.tensor(0)
    return op.sizes.broadcast(x, op.dims(x), op.out_dims(), op.fail)


def _index(op: Op, v: Any, size: SymDim, default: int) -> SymDim:
    """A slice bound clamped into ``[0, size]`` (negative counts from the end)."""
    if v is None:
        return default if default == 0 else size
    if is_static(v):
        v = int(v)
        if v >= END:
            return size
        if v < 0:
            v = size + v if not is_static(size) else max(int(size) + v, 0)
        return min(v, int(size)) if is_static(size) and is_static(v) else v
    return v


@converter("slice")
def convert_slice(op: Op) -> Value:
    x = op.tensor(0)
    rank = len(x.shape)
    axis = int(op.arg(1, "dim", 0)) % rank
    size = op.dims(x)[axis]
    start = _index(op, op.arg(2, "start", None), size, 0)
    end = _index(op, op.arg(3, "end", None), size, -1)
    step = int(op.arg(4, "step", 1))
    out = op.out_dims()[axis]
    starts, sizes, strides = [0] * rank, [-1] * rank, [1] * rank
    if is_static(start) and is_static(out) and is_static(size):
        starts[axis], sizes[axis], strides[axis] = int(start), int(out), step
        return op.mir("slice", [x], starts=starts, sizes=sizes, strides=strides)
    if step != 1:
        op.fail(f"a slice with step {step} of a dynamic dim")
    if is_static(start) and same(end, size):
        starts[axis] = int(start)
        return op.mir("slice", [x], starts=starts, sizes=sizes, strides=strides)
    if is_static(start) and is_static(size - end):  # up to k before the end
        starts[axis], sizes[axis] = int(start), -1 - int(size - end)
        return op.mir("slice", [x], starts=starts, sizes=sizes, strides=strides)
    index = op.sizes.iota(out, DType.I64, op.fail)
    if not (is_static(start) and int(start) == 0):
        index = op.mir("binary", [index, op.sizes.scalar(start, DType.I64, op.fail)],
                       kind="add")
    return op.mir("gather", [x, index], axis=axis)


@converter("select")
def convert_select(op: Op) -> Value:
    x = op.tensor(0)
    axis = int(op.arg(1, "dim")) % len(x.shape)
    index = op.arg(2, "index")
    if not is_static(index):
        op.fail(f"select at a dynamic index {index}")
    picked = op.mir("narrow", [x], axis=axis, start=int(index), len=1)
    dims = op.dims(x)
    op.importer.known(picked, [1 if a == axis else d for a, d in enumerate(dims)])
    return op.reshape(picked, op.out_dims())


@converter("narrow")
def convert_narrow(op: Op) -> Value:
    x = op.tensor(0)
    axis = int(op.arg(1, "dim")) % len(x.shape)
    start, length = op.arg(2, "start"), op.arg(3, "length")
    if not (is_static(start) and is_static(length)):
        op.fail("narrow with a dynamic start or length")
    return op.mir("narrow", [x], axis=axis, start=int(start), len=int(length))


@converter("cat", "concat", "concatenate")
def convert_cat(op: Op) -> Value:
    dtype = op.out_dtype()
    sources = op.raw(0, "tensors")
    parts = [op.cast(op.as_tensor(op.value(s), s), dtype) for s in sources]
    parts = [p for p in parts if 0 not in p.shape or len(parts) == 1]
    axis = int(op.arg(1, "dim", 0)) % len(op.out_dims())
    return parts[0] if len(parts) == 1 else op.mir("concat", parts, axis=axis)


@converter("split", "split_with_sizes", "chunk", "unbind", "tensor_split")
def convert_split(op: Op) -> list[Value]:
    name = op.name
    x = op.tensor(0)
    axis_arg = 2 if name != "unbind" else 1
    axis = int(op.arg(axis_arg, "dim", 0)) % len(x.shape)
    outs: list[Value] = []
    start = 0
    for meta in op.g.val(op.node):
        length = meta.shape[axis]
        if not isinstance(length, int):
            op.fail("a split into pieces of dynamic size")
        piece = op.mir("narrow", [x], axis=axis, start=start, len=length)
        start += length
        dims = [op.dims(x)[a] if a != axis else length for a in range(len(x.shape))]
        piece = op.importer.known(piece, dims)
        if name == "unbind":
            piece = op.reshape(piece, [d for a, d in enumerate(dims) if a != axis])
        outs.append(piece)
    return outs


@converter("getitem")
def convert_getitem(op: Op) -> Value:
    seq = op.arg(0, "self")
    index = op.raw(1, "index")
    if not isinstance(seq, list | tuple) or not isinstance(index, int):
        op.fail(f"indexing {type(seq).__name__} with {index!r}")
    v = seq[index]
    if v is None:
        op.fail(f"result {index} of '{op.node.args[0]}' is not computed by rlx")  # type: ignore[str-bytes-safe]
    return v


@converter("embedding")
def convert_embedding(op: Op) -> Value:
    table = op.tensor(0, "weight")
    ids = op.tensor(1, "indices")
    return op.mir("gather", [table, ids], axis=0)


@converter("index_select")
def convert_index_select(op: Op) -> Value:
    x = op.tensor(0)
    axis = int(op.arg(1, "dim")) % len(x.shape)
    return op.mir("gather", [x, op.tensor(2, "index")], axis=axis)


@converter("gather")
def convert_gather(op: Op) -> Value:
    """``torch.gather(x, dim, index)``: ``y[i, j, k] = x[i, index[i, j, k], k]`` (dim 1),
    as one gather from ``x`` flattened, at the flat position of (the iotas of the index's
    other dims, ``index`` on ``dim``); BERT's embeddings take their ``token_type_ids``
    this way."""
    x, index = op.tensor(0), op.tensor(2, "index")
    rank = len(x.shape)
    axis = int(op.arg(1, "dim")) % rank
    x_dims, i_dims = op.dims(x), op.dims(index)
    parts = []
    for a in range(rank):
        if a == axis:
            parts.append(from_end(op, op.cast(index, DType.I64), x_dims[a]))
            continue
        iota = op.sizes.iota(i_dims[a], DType.I64, op.fail)
        parts.append(op.mir("reshape", [iota], new_shape=[-1 if b == a else 1
                                                          for b in range(rank)]))
    table = op.mir("reshape", [x], new_shape=[-1])
    return op.mir("gather", [table, flat_position(op, parts, x_dims)], axis=0)


@converter("index")
def convert_index(op: Op) -> Value:
    """``x[i0, i1, ...]`` by integer tensors (``None``: a dim taken whole), the index
    tensors broadcast against each other (``padding_mask[batch_idx, kv_idx]``, how
    transformers builds its masks): the indexed dims moved first and flattened, one gather
    of their flat position; the result's dims where torch puts them (in place of the
    indexed dims when those are adjacent, else first)."""
    x = op.tensor(0)
    rank, x_dims = len(x.shape), op.dims(x)
    indices = list(op.arg(1, "indices")) + [None] * (rank - len(op.arg(1, "indices")))
    picked = [a for a, i in enumerate(indices) if i is not None]
    if any(not isinstance(indices[a], HirValue) or not indices[a].dtype.is_int
           or indices[a].dtype == DType.I1 for a in picked):
        op.fail("indexing by other than integer tensors (a boolean mask: a data-dependent "
                "size) is not supported")
    rest = [a for a in range(rank) if a not in picked]
    perm = picked + rest
    moved = op.mir("transpose", [x], perm=perm) if perm != list(range(rank)) else x
    table = op.mir("reshape", [moved], new_shape=[-1, *(
        -2 - (len(picked) + k) if x.shape[a] is None else x.shape[a]
        for k, a in enumerate(rest))])
    flat = flat_position(op, [from_end(op, op.cast(indices[a], DType.I64), x_dims[a])
                              for a in picked], [x_dims[a] for a in picked])
    y = op.mir("gather", [table, flat], axis=0)
    front = picked[0]
    if picked != list(range(front, front + len(picked))) or front == 0:
        return y
    r = len(y.shape) - len(rest)            # adjacent: the index dims after x's first ones
    return op.mir("transpose", [y], perm=[*range(r, r + front), *range(r),
                                          *range(r + front, len(y.shape))])


__all__ = ["END"]
