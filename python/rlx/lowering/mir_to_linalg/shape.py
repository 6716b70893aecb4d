"""mir-to-linalg for data movement: reshape, transpose, narrow, slice, pad, concat, expand,
gather; dim and iota (sizes as data)."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, tensor

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("reshape")
def lower_reshape(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Copied dims (``-2 - k``) are the input's; the ``-1`` is the element count over the
    other sizes."""
    x = op["x"]
    new: list[emit.Size] = [emit.dim(x, -2 - d) if d <= -2 else d
                            for d in op.attrs["new_shape"]]
    if -1 in new:
        i = new.index(-1)
        static = emit.static_shape(op.op.results[0])[i]
        copied = [-2 - d for d in op.attrs["new_shape"] if d <= -2]
        rest = emit.product([s for k, s in enumerate(emit.sizes(x)) if k not in copied])
        known = emit.product([d for d in op.attrs["new_shape"] if d > 0])
        assert isinstance(known, int)
        new[i] = static if static is not None else emit.div_sizes(rest, known)
    return [emit.reshape(x, new)]


@MIR_TO_LINALG.register("transpose")
def lower_transpose(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [emit.transpose(op["x"], op.attrs["perm"])]


@MIR_TO_LINALG.register("narrow")
def lower_narrow(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    a = op.attrs
    return [emit.narrow(op["x"], a["axis"], a["start"], a["len"])]


@MIR_TO_LINALG.register("slice")
def lower_slice(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Positive strides: one strided ``tensor.extract_slice``. With a negative stride, one
    generic over the result that reads ``x[start + i * stride]`` (a reversing indexing map
    breaks IREE's SPIR-V tiling)."""
    x = op["x"]
    a = op.attrs
    sizes = [emit.sub_sizes(emit.dim(x, axis), start - 1 - size) if size < 0 else size
             for axis, (start, size) in enumerate(zip(a["starts"], a["sizes"], strict=True))]
    if min(a["strides"]) > 0:
        return [emit.extract_slice(x, list(a["starts"]), sizes, list(a["strides"]))]
    n = emit.rank(x)

    def body(_: ir.Value) -> ir.Value:
        coords = []
        for axis, (start, stride) in enumerate(zip(a["starts"], a["strides"], strict=True)):
            i = emit.loop_index(axis)
            if stride != 1:
                i = arith.muli(i, emit.index(stride))
            coords.append(arith.addi(i, emit.index(start)) if start else i)
        return tensor.extract(x, coords)

    init = emit.empty(sizes, emit.elem(x))
    return [emit.generic([], [init], [emit.identity(n)], [emit.PARALLEL] * n, body)[0]]


@MIR_TO_LINALG.register("pad")
def lower_pad(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    value = emit.scalar(op.attrs["value"], emit.elem(x))
    return [emit.pad(x, op.attrs["low"], op.attrs["high"], value)]


@MIR_TO_LINALG.register("concat")
def lower_concat(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [emit.concat(op.variadic, op.attrs["axis"])]


@MIR_TO_LINALG.register("expand")
def lower_expand(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    target = list(op.attrs["target_shape"])
    offset = len(target) - emit.rank(x)
    out: emit.Sizes = [emit.dim(x, i - offset) if t == -1 else t for i, t in enumerate(target)]
    return [emit.map_elementwise([x], emit.elem(x), lambda v: v, out)]


def _as_index(v: ir.Value, size: emit.Size) -> ir.Value:
    """An index value from an f32-encoded or integer index, clamped to ``[0, size - 1]``."""
    i64 = ir.IntegerType.get_signless(64)
    as_int = arith.fptosi(i64, v) if emit.is_float(v.type) else emit.convert(v, i64)
    idx = arith.index_cast(emit.index_type(), as_int)
    hi = arith.subi(emit.as_value(size), emit.index(1))
    return arith.minsi(arith.maxsi(idx, emit.index(0)), hi)


@MIR_TO_LINALG.register("gather")
def lower_gather(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One generic over the result: each element reads its index, then the table."""
    table, indices = op["table"], op["indices"]
    axis = op.attrs["axis"] % emit.rank(table)
    batch = op.attrs["batch_dims"]
    t_sizes, i_sizes = emit.sizes(table), emit.sizes(indices)
    out_sizes = [*t_sizes[:axis], *i_sizes[batch:], *t_sizes[axis + 1:]]
    n = len(out_sizes)
    n_idx = emit.rank(indices) - batch
    idx_map = emit.amap(n, [*range(batch), *range(axis, axis + n_idx)])
    init = emit.empty(out_sizes, emit.elem(table))
    limit = t_sizes[axis]

    def body(i: ir.Value, _: ir.Value) -> ir.Value:
        loops = [emit.loop_index(k) for k in range(n)]
        coords = [*loops[:axis], _as_index(i, limit), *loops[axis + n_idx:]]
        return tensor.extract(table, coords)

    return [emit.generic([indices], [init], [idx_map, emit.identity(n)],
                         [emit.PARALLEL] * n, body)[0]]


@MIR_TO_LINALG.register("dim")
def lower_dim(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``tensor.dim`` cast to ``i64``, filled into a 0-d tensor: IREE resolves the dim to
    the function's inputs, so no work is queued for it."""
    x = op["x"]
    i64 = ir.IntegerType.get_signless(64)
    size = emit.as_value(emit.dim(x, op.attrs["axis"] % emit.rank(x)))
    return [emit.fill(arith.index_cast(i64, size), emit.empty([], i64))]


@MIR_TO_LINALG.register("iota")
def lower_iota(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One parallel generic that writes its loop index, behind a compute barrier: its own
    dispatch. Fused into a consumer (an embedding gather, then a layer norm), IREE 3.13's
    SPIR-V codegen fails on it ("failed to legalize operation 'memref.alloc'" of a
    workgroup ``memref<1xindex>``)."""
    x = op["x"]
    i64 = ir.IntegerType.get_signless(64)
    init = emit.empty([emit.dim(x, op.attrs["axis"] % emit.rank(x))], i64)

    def body(_: ir.Value) -> ir.Value:
        return arith.index_cast(i64, emit.loop_index(0))

    return [emit.barrier(emit.generic([], [init], [emit.identity(1)], [emit.PARALLEL],
                                      body)[0])]
