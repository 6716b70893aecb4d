"""mir-to-linalg for data movement: reshape, transpose, narrow, slice, pad, concat, expand,
gather, write_rows, scatter, barrier; dim and iota (sizes as data)."""

from __future__ import annotations

from fractions import Fraction

from iree.compiler import ir
from iree.compiler.dialects import arith, tensor

from rlx.dialects.schema import Decoded
from rlx.lowering import emit, guards
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("reshape")
def lower_reshape(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Copied dims (``-2 - k``) are the input's; the ``-1`` is the element count over the
    other sizes. Where the sizes, as products of the input's dynamic dims, line up in groups
    (:func:`_reshape_groups`), one collapse and / or one expand by those groups; else
    through 1-D (:func:`.emit.reshape`)."""
    x = op["x"]
    new_shape = list(op.attrs["new_shape"])
    new: list[emit.Size] = [emit.dim(x, -2 - d) if d <= -2 else d for d in new_shape]
    if -1 in new:
        i = new.index(-1)
        static = emit.static_shape(op.op.results[0])[i]
        copied = [-2 - d for d in new_shape if d <= -2]
        rest = emit.product([s for k, s in enumerate(emit.sizes(x)) if k not in copied])
        known = emit.product([d for d in new_shape if d > 0])
        assert isinstance(known, int)
        new[i] = static if static is not None else emit.div_sizes(rest, known)
    src = emit.static_shape(x)
    if None not in src:
        return [emit.reshape(x, new)]
    groups = _reshape_groups(src, new_shape)
    if groups is None:
        if src == [s if isinstance(s, int) else None for s in new]:   # not the same sizes
            flat = emit.collapse(x, [list(range(len(src)))])
            return [emit.expand(flat, [list(range(len(new)))], new)]
        return [emit.reshape(x, new)]
    if all(len(g) == 1 for g, _ in groups) and all(len(g) == 1 for _, g in groups):
        return [x]
    y = x
    if any(len(g) > 1 for g, _ in groups):
        if (ctx.options.data_tiling or ctx.options.compute_barriers) and any(
                len(g) > 1 and None in [src[k] for k in g] for g, _ in groups):
            y = emit.barrier(y)
        y = emit.collapse(y, [g for g, _ in groups])
    if any(len(g) > 1 for _, g in groups):
        y = emit.expand(y, [g for _, g in groups], new)
    return [y]


_Term = tuple[Fraction, tuple[int, ...]]
"""A size as ``c · Π s_k``: a factor (a fraction in the ``-1`` of ``[4 b, s] -> [-1, 4, s]``:
``b = s_0 / 4``, whole at run time, as the reshape's guard checks) and the input's dynamic
dims ``k`` it multiplies."""


def _times(a: _Term, b: _Term) -> _Term:
    return a[0] * b[0], tuple(sorted(a[1] + b[1]))


def _over(b: _Term, a: _Term) -> _Term | None:
    """``b / a`` where ``a``'s dynamic dims are among ``b``'s, else None."""
    rest = list(b[1])
    for k in a[1]:
        if k not in rest:
            return None
        rest.remove(k)
    return b[0] / a[0], tuple(rest)


def _divides(a: _Term, b: _Term) -> bool:
    q = _over(b, a)
    return q is not None and q[0].denominator == 1


def _reshape_groups(src: list[int | None], new_shape: list[int]
                    ) -> list[tuple[list[int], list[int]]] | None:
    """Pairs of (input dims, result dims) of equal products, in order, that together cover
    both shapes, with the sizes known as :data:`_Term`: an input's dynamic dim ``k`` is
    ``s_k``, a copied dim its input's, the ``-1`` the input's product over the others'
    (None if that is not a :data:`_Term`). Then the reshape is a collapse of each pair's
    input dims and an expand into its result dims: no trip through 1-D, whose dynamic
    delinearization IREE's codegen rejected in front of a data-tiled batch matmul
    (``[b, 4, s, 8] -> [4 b, s, 8]`` of DeBERTa's exported attention: "no basis element
    may be statically non-positive"). None where they do not line up."""
    if 0 in src or 0 in new_shape:
        return None
    one = Fraction(1)
    ins: list[_Term] = [(one, (k,)) if s is None else (Fraction(s), ())
                        for k, s in enumerate(src)]
    outs: list[_Term | None] = [ins[-2 - d] if d <= -2 else None if d == -1 else (
        Fraction(d), ()) for d in new_shape]
    if None in outs:
        total: _Term = (one, ())
        for t in ins:
            total = _times(total, t)
        known: _Term = (one, ())
        for t in outs:
            if t is not None:
                known = _times(known, t)
        inferred = _over(total, known)
        if inferred is None:
            return None
        outs[outs.index(None)] = inferred
    dst = [t for t in outs if t is not None]
    pairs: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(ins) and j < len(dst):
        gi, gj, a, b = [i], [j], ins[i], dst[j]
        i, j = i + 1, j + 1
        while a != b:
            if _divides(a, b) and i < len(ins):
                a, i = _times(a, ins[i]), i + 1
                gi.append(i - 1)
            elif _divides(b, a) and j < len(dst):
                b, j = _times(b, dst[j]), j + 1
                gj.append(j - 1)
            else:
                return None
        pairs.append((gi, gj))
    for k in range(i, len(ins)):                  # trailing unit dims join the last pair
        if ins[k] != (one, ()) or not pairs:
            return None
        pairs[-1][0].append(k)
    for k in range(j, len(dst)):
        if dst[k] != (one, ()) or not pairs:
            return None
        pairs[-1][1].append(k)
    return pairs


@MIR_TO_LINALG.register("transpose")
def lower_transpose(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [emit.transpose(op["x"], op.attrs["perm"])]


@MIR_TO_LINALG.register("narrow")
def lower_narrow(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``tensor.extract_slice``; a negative start is ``dim + start`` (a ``tensor.dim`` on a
    dynamic axis)."""
    a = op.attrs
    x, start = op["x"], a["start"]
    if start < 0:
        start = emit.sub_sizes(emit.dim(x, a["axis"]), -start)
    return [emit.narrow(x, a["axis"], start, a["len"])]


@MIR_TO_LINALG.register("dynamic_slice")
def lower_dynamic_slice(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """The bounds read from their 0-d tensors (``tensor.extract``), clamped into the axis
    (``s = clamp(start, 0, n)``, ``e = clamp(end, s, n)``: the extract_slice below stays
    inside ``x`` whatever the bounds hold), then one ``tensor.extract_slice``."""
    x = op["x"]
    axis = op.attrs["axis"] % emit.rank(x)
    n = emit.as_value(emit.dim(x, axis))
    idx = ir.IndexType.get()

    def bound(v: ir.Value, low: ir.Value) -> ir.Value:
        i = arith.index_cast(idx, tensor.extract(v, []))
        return arith.minsi(arith.maxsi(i, low), n)

    start = bound(op["start"], emit.index(0))
    end = bound(op["end"], start)
    offsets: list[emit.Size] = [0] * emit.rank(x)
    sizes = list(emit.sizes(x))
    offsets[axis] = start
    sizes[axis] = arith.subi(end, start)
    return [emit.extract_slice(x, offsets, sizes)]


@MIR_TO_LINALG.register("slice")
def lower_slice(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Positive strides: one strided ``tensor.extract_slice``. With a negative stride, one
    generic over the result that reads ``x[start + i * stride]`` (a reversing indexing map
    breaks IREE's SPIR-V tiling)."""
    x = op["x"]
    a = op.attrs
    # a size -1 - k reads x[start : dim - k : stride] (the verifier holds stride > 0 and
    # start + k <= dim): ceil((dim - start - k) / stride) entries, the last below dim - k
    sizes = [emit.ceil_div_sizes(emit.sub_sizes(emit.dim(x, axis), start - 1 - size), stride)
             if size < 0 else size for axis, (start, size, stride) in enumerate(
                 zip(a["starts"], a["sizes"], a["strides"], strict=True))]
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
    if not isinstance(limit, int) or limit == 0:
        # the clamp into [0, limit - 1] relies on limit >= 1 wherever an index is read:
        # checked at run time (an empty axis with indices would read before the table)
        empty = arith.cmpi(arith.CmpIPredicate.eq, emit.as_value(limit), emit.index(0))
        count = emit.product(i_sizes)
        if not isinstance(count, int):
            empty = arith.andi(empty, arith.cmpi(arith.CmpIPredicate.ne, count,
                                                 emit.index(0)))
        if not (isinstance(count, int) and count == 0):
            guards.check(op, empty, f"operand 'table' dim {axis}",
                         "at least 1 (a row for each index to read; indices are clamped "
                         "into the axis)")

    def body(i: ir.Value, _: ir.Value) -> ir.Value:
        loops = [emit.loop_index(k) for k in range(n)]
        coords = [*loops[:axis], _as_index(i, limit), *loops[axis + n_idx:]]
        return tensor.extract(table, coords)

    return [emit.generic([indices], [init], [idx_map, emit.identity(n)],
                         [emit.PARALLEL] * n, body)[0]]


def _row_indices(slot: ir.Value, pos: ir.Value, new: ir.Value, cache: ir.Value
                 ) -> ir.Value:
    """``[N, T, 2] i32``: ``(slot[n], pos[n] + t)`` per row written, each clamped into the
    cache (``[0, B - 1]``, ``[0, C - 1]``), computed in i64 so ``pos + t`` cannot wrap."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    n, t = emit.dim(new, 0), emit.dim(new, 1)
    limits = [arith.index_cast(i64, emit.as_value(emit.sub_sizes(emit.dim(cache, a), 1)))
              for a in (0, 1)]
    zero = arith.constant(i64, 0)
    one_d = emit.amap(3, [0])

    def body(s: ir.Value, p: ir.Value, _: ir.Value) -> ir.Value:
        t_i = arith.index_cast(i64, emit.loop_index(1))
        row = arith.addi(emit.convert(p, i64), t_i)
        is_slot = arith.cmpi(arith.CmpIPredicate.eq, emit.loop_index(2), emit.index(0))
        v = arith.select(is_slot, emit.convert(s, i64), row)
        hi = arith.select(is_slot, limits[0], limits[1])
        return arith.trunci(i32, arith.minsi(arith.maxsi(v, zero), hi))

    init = emit.empty([n, t, 2], i32)
    return emit.generic([slot, pos], [init], [one_d, one_d, emit.identity(3)],
                        [emit.PARALLEL] * 3, body)[0]


@MIR_TO_LINALG.register("write_rows")
def lower_write_rows(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One ``iree_linalg_ext.scatter`` of the ``N * T`` rows into the cache, at indices
    computed on the device. The relation relied on: every index the scatter writes at is
    inside the cache (slot in ``[0, B)``, row in ``[0, C)``); it is enforced by clamping
    each index in :func:`_row_indices`, so no size check at run time is needed (a
    ``pos`` past the end writes row ``C - 1``, never past the buffer).

    Why a scatter: IREE (3.13) makes it one dispatch that updates the cache's buffer in
    place (``rw`` on the imported argument, no copy of the cache), with the indices read
    on the device; ``tensor.insert_slice`` at an offset taken from a tensor is in place
    too but is one dispatch per slot, and a ``where`` over the whole cache (the previous
    form) writes every row of it each call. ``unique_indices(false)``: two writes may
    overlap (a clamped index, a repeated slot); IREE then runs the batch loops in order,
    so the last write wins as documented."""
    cache, new = op["cache"], op["new"]
    indices = emit.barrier(_row_indices(op["slot"], op["pos"], new, cache))
    if not isinstance(cache.owner, ir.Block):
        # a cache computed here (a prefill's zeroed one), not a function argument: IREE
        # 3.13 fused its fill into the scatter and then wrote wrong rows on llvm-cpu (a
        # GGUF F16 model's K sliced from a packed QKV; tests/test_models_gguf.py) and
        # failed on SPIR-V ("uses 1152921504606846848 bytes of shared memory"); behind a
        # barrier the fill is its own dispatch and the scatter updates its result in place
        cache = emit.barrier(cache)
    if ctx.options.target != "llvm-cpu":
        # on the GPU targets IREE 3.13 folds the producer of `new` (RoPE's pair-shaped
        # generic) into the scatter, reshaping the whole cache to it, and SPIR-V codegen
        # then asks for 2^60 bytes of shared memory: `new` (S rows) is materialized first
        new = emit.barrier(new)
    scatter = ir.Operation.create(
        "iree_linalg_ext.scatter", results=[cache.type], operands=[new, indices, cache],
        attributes={"dimension_map": ir.DenseI64ArrayAttr.get([0, 1]),
                    "unique_indices": ir.BoolAttr.get(False)},
        regions=1)
    t = emit.elem(cache)
    block = scatter.regions[0].blocks.append(t, t)
    with ir.InsertionPoint(block):
        ir.Operation.create("iree_linalg_ext.yield", operands=[block.arguments[0]])
    return [scatter.result]


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


@MIR_TO_LINALG.register("barrier")
def lower_barrier(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """A compute barrier where matmuls are data-tiled (or barriers are on, or the op says
    ``always``); else ``x``."""
    x = op["x"]
    if op.attrs.get("always") or ctx.options.data_tiling or ctx.options.compute_barriers:
        return [emit.barrier(x)]
    return [x]


def _scatter_positions(indices: ir.Value, data: ir.Value) -> ir.Value:
    """``[N, K] i32``: each coordinate of ``indices`` (viewed as ``[N, K]``) plus its dim of
    ``data`` where negative, then clamped into ``[0, dim - 1]``, computed in i64. The
    clamp is what keeps every write inside ``data`` (the relation the scatter relies on)."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    k = emit.static_shape(indices)[-1]
    assert isinstance(k, int)
    lead = emit.product(emit.sizes(indices)[:-1])
    flat = emit.reshape(indices, [lead, k])
    dims = [arith.index_cast(i64, emit.as_value(emit.dim(data, a))) for a in range(k)]
    zero, one = arith.constant(i64, 0), arith.constant(i64, 1)

    def body(i: ir.Value, _: ir.Value) -> ir.Value:
        axis = emit.loop_index(1)
        size = dims[0]
        for a in range(1, k):
            is_a = arith.cmpi(arith.CmpIPredicate.eq, axis, emit.index(a))
            size = arith.select(is_a, dims[a], size)
        v = emit.convert(i, i64)
        v = arith.select(arith.cmpi(arith.CmpIPredicate.slt, v, zero), arith.addi(v, size), v)
        v = arith.minsi(arith.maxsi(v, zero), arith.subi(size, one))
        return arith.trunci(i32, v)

    init = emit.empty([lead, k], i32)
    return emit.generic([flat], [init], [emit.identity(2), emit.identity(2)],
                        [emit.PARALLEL] * 2, body)[0]


SCATTER_COMBINE = {"add": emit.add, "mul": emit.mul, "max": emit.maximum,
                   "min": emit.minimum}


@MIR_TO_LINALG.register("scatter")
def lower_scatter(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One ``iree_linalg_ext.scatter`` of the ``N`` update slices (``updates`` viewed as
    ``[N, *data.shape[K:]]``) at the positions of :func:`_scatter_positions` (clamped into
    ``data``; the updates' sizes are the verifier's relations, checked at run time). The
    positions, and ``data`` and ``updates`` when they are computed here, reach the scatter
    through compute barriers: IREE 3.13 folds their producers into it and then miscompiles
    or fails (see :func:`lower_write_rows`; updates transposed by a dynamo export's
    ``index_put`` asked for a 2^59-byte stack on llvm-cpu);
    ``unique_indices(false)``, so repeated positions apply in order (``none``: the last
    one wins)."""
    data, updates = op["data"], op["updates"]
    positions = _scatter_positions(op["indices"], data)
    k = emit.static_shape(op["indices"])[-1]
    assert isinstance(k, int)
    lead = emit.product(emit.sizes(op["indices"])[:-1])
    slices = emit.reshape(updates, [lead, *emit.sizes(data)[k:]])
    if any(not isinstance(d, int) or d == 0 for d in emit.sizes(data)[:k]):
        # an empty indexed dim has no position to clamp to: no update is applied (the
        # relation the clamp relies on, dim >= 1, checked here at run time)
        empty = None
        for d in emit.sizes(data)[:k]:
            zero = arith.cmpi(arith.CmpIPredicate.eq, emit.as_value(d), emit.index(0))
            empty = zero if empty is None else arith.ori(empty, zero)
        n = arith.select(empty, emit.index(0), emit.as_value(lead))
        positions = emit.extract_slice(positions, [0, 0], [n, k])
        slices = emit.extract_slice(slices, [0] * emit.rank(slices),
                                    [n, *emit.sizes(slices)[1:]])
    positions = emit.barrier(positions)
    if not isinstance(data.owner, ir.Block):
        data = emit.barrier(data)
    if not isinstance(slices.owner, ir.Block):  # a transpose fused in: a 2^59-byte stack
        slices = emit.barrier(slices)
    scatter = ir.Operation.create(
        "iree_linalg_ext.scatter", results=[data.type], operands=[slices, positions, data],
        attributes={"dimension_map": ir.DenseI64ArrayAttr.get(list(range(k))),
                    "unique_indices": ir.BoolAttr.get(False)},
        regions=1)
    t = emit.elem(data)
    block = scatter.regions[0].blocks.append(t, t)
    with ir.InsertionPoint(block):
        update, current = block.arguments[0], block.arguments[1]
        reduction = op.attrs.get("reduction") or "none"
        out = update if reduction == "none" else SCATTER_COMBINE[reduction](current, update)
        ir.Operation.create("iree_linalg_ext.yield", operands=[out])
    return [scatter.result]
