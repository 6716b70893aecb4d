"""mir-to-linalg for reductions: reduce, argmax, topk, softmax, cumsum."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.contraction import accumulator
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


def _init_value(kind: str, t: ir.Type) -> float | int:
    if kind in ("sum", "mean"):
        return 0
    if kind == "prod":
        return 1
    if emit.is_float(t):
        return float("-inf") if kind == "max" else float("inf")
    width = ir.IntegerType(t).width
    return -(2 ** (width - 1)) if kind == "max" else 2 ** (width - 1) - 1


COMBINE = {"sum": emit.add, "mean": emit.add, "prod": emit.mul, "max": emit.maximum,
           "min": emit.minimum}


@MIR_TO_LINALG.register("reduce")
def lower_reduce(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    kind = op.attrs["kind"]
    r = emit.rank(x)
    axes = sorted(a % r for a in op.attrs["axes"])
    kept = [i for i in range(r) if i not in axes]
    t = emit.elem(x)
    acc_t = accumulator(t) if kind in ("sum", "mean", "prod") else t
    ss = emit.sizes(x)
    init = emit.filled([ss[i] for i in kept], acc_t, _init_value(kind, acc_t))
    combine = COMBINE[kind]
    iters = [emit.REDUCTION if i in axes else emit.PARALLEL for i in range(r)]
    out = emit.generic([x], [init], [emit.identity(r), emit.amap(r, kept)], iters,
                       lambda v, acc: combine(acc, emit.convert(v, acc_t)))[0]
    if kind == "mean":
        count = emit.product([ss[i] for i in axes])
        if isinstance(count, int):
            inv = emit.scalar(1.0 / count, acc_t)
        else:
            n = arith.index_cast(ir.IntegerType.get_signless(64), count)
            inv = arith.divf(emit.scalar(1.0, acc_t), arith.sitofp(acc_t, n))
        out = emit.map_elementwise([out], acc_t, lambda v: arith.mulf(v, inv))
    out = emit.convert_tensor(out, t)
    if op.attrs["keep_dim"]:
        out = emit.reshape(out, [1 if i in axes else ss[i] for i in range(r)])
    return [out]


@MIR_TO_LINALG.register("argmax")
def lower_argmax(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    out = argmax_along(x, op.attrs["axis"] % emit.rank(x), ctx.options.llvmgpu)
    if op.attrs["keep_dim"]:
        ss = emit.sizes(x)
        axis = op.attrs["axis"] % emit.rank(x)
        out = emit.reshape(out, [1 if i == axis else ss[i] for i in range(emit.rank(x))])
    return [out]


def argmax_along(x: ir.Value, axis: int, fence: bool = False) -> ir.Value:
    """The first index of the largest element along ``axis`` (i32, the axis dropped).

    Reductions with plain combiners, which IREE vectorizes: the maximum ``m`` of the
    non-NaN elements, then (one generic, two results) the first index whose element equals
    ``m`` and the first index of a NaN; a NaN wins. (One generic carrying (value, index)
    through a select chain was not vectorized: 263 us for 49152 logits. ``maximumf``'s NaN
    propagation is not used: SPIR-V's max drops NaNs.)

    ``fence`` (on LLVMGPU targets): ``x`` is fenced from its producer and the maximum from
    the index search. Fused, an argmax of several rows of a real vocabulary (4 x 49152: a
    batched decode's ``next``) crashed IREE 3.13's NVPTX instruction selection
    ("SmallVector unable to grow"; one row compiled), and the batched prefill's, its rows
    gathered from the logits in the same dispatch, failed to distribute."""
    if fence:
        x = emit.barrier(x)
    r = emit.rank(x)
    kept = [i for i in range(r) if i != axis]
    t = emit.elem(x)
    is_float = emit.is_float(t)
    i32 = ir.IntegerType.get_signless(32)
    none = 2 ** 31 - 1
    ss = emit.sizes(x)
    iters = [emit.REDUCTION if i == axis else emit.PARALLEL for i in range(r)]
    out_ss = [ss[i] for i in kept]
    lowest = _init_value("max", t)

    def numbers_max(v: ir.Value, m: ir.Value) -> ir.Value:
        if is_float:
            v = arith.select(arith.cmpf(arith.CmpFPredicate.UNO, v, v), emit.scalar(lowest, t), v)
        return emit.maximum(m, v)

    best = emit.generic([x], [emit.filled(out_ss, t, lowest)],
                        [emit.identity(r), emit.amap(r, kept)], iters, numbers_max)[0]

    def first(v: ir.Value, m: ir.Value, *found: ir.Value) -> list[ir.Value]:
        i = arith.index_cast(i32, emit.loop_index(axis))
        miss = emit.scalar(none, i32)
        eq = (arith.cmpf(arith.CmpFPredicate.OEQ, v, m) if is_float
              else arith.cmpi(arith.CmpIPredicate.eq, v, m))
        out = [arith.minsi(found[0], arith.select(eq, i, miss))]
        if is_float:
            nan = arith.cmpf(arith.CmpFPredicate.UNO, v, v)
            out.append(arith.minsi(found[1], arith.select(nan, i, miss)))
        return out

    if fence:
        best = emit.barrier(best)
    inits = [emit.filled(out_ss, i32, none) for _ in range(2 if is_float else 1)]
    found = emit.generic([x, best], inits,
                         [emit.identity(r), emit.amap(r, kept)] + [emit.amap(r, kept)] * len(inits),
                         iters, first)
    out = found[0]
    if is_float:
        out = emit.map_elementwise(
            found, i32, lambda eq, nan: arith.select(
                arith.cmpi(arith.CmpIPredicate.ne, nan, emit.scalar(none, i32)), nan, eq))
    return out


_FUSIBLE = frozenset(f"rlx_mir.{name}" for name in (
    "binary", "compare", "where", "cast", "activation", "unary", "expand", "reshape",
    "transpose"))
"""MIR ops IREE fuses into a consumer's dispatch (elementwise, broadcasts, data movement)."""


def _feeds_others(consumer: ir.Operation) -> bool:
    """Whether an op that computes ``consumer``'s input through fusible ops
    (:data:`_FUSIBLE`) also has a use outside that chain and ``consumer``: a value IREE
    would fuse into the consumer's dispatch and store from it as a second result (a
    relative-position bias that every layer adds to its scores: MPNet's export)."""
    chain: set[ir.Operation] = {_operation(consumer)}
    todo = [consumer.operands[0]]
    while todo:
        owner = todo.pop().owner
        if isinstance(owner, ir.Block):
            continue
        op = _operation(owner)
        if op.name not in _FUSIBLE or op in chain:
            continue
        chain.add(op)
        todo.extend(op.operands)
    return any(_operation(use.owner) not in chain for op in chain - {_operation(consumer)}
               for result in op.results for use in result.uses)


def _operation(owner: ir.Operation | ir.OpView) -> ir.Operation:
    return owner.operation if isinstance(owner, ir.OpView) else owner


@MIR_TO_LINALG.register("softmax")
def lower_softmax(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``linalg.softmax`` (max-subtracted), in f32 for 16-bit inputs; behind a compute
    barrier where its input's fusible producers also feed other ops (:func:`_feeds_others`):
    IREE 3.13 fused them into the softmax's dispatch as a second stored result and then,
    over dynamic sizes, asked for a stack buffer of a dynamic size ("'memref.alloca' op
    stack allocation size overflows 64 bits"), and over static ones (scores plus a
    broadcast mask, also an output: ONNX Attention's ``qk_matmul_output``) stored outside
    the distributed loops ("'vector.store' op write affecting operations on global
    resources are restricted to workgroup distributed contexts")."""
    x = op["x"]
    t = emit.elem(x)
    if _feeds_others(op.op):
        x = emit.barrier(x)
    y = emit.softmax(emit.convert_tensor(x, accumulator(t)), op.attrs["axis"])
    return [emit.convert_tensor(y, t)]


@MIR_TO_LINALG.register("cumsum")
def lower_cumsum(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``y[i] = Σ_{j <= i} x[j]`` (``j < i`` if exclusive) as one masked reduction generic."""
    x = op["x"]
    r = emit.rank(x)
    axis = op.attrs["axis"] % r
    t = emit.elem(x)
    acc_t = accumulator(t)
    exclusive = op.attrs["exclusive"]
    ss = emit.sizes(x)
    # loops: the result dims, then j (the reduction along `axis`)
    n = r + 1
    src = [r if i == axis else i for i in range(r)]
    init = emit.filled(ss, acc_t, 0.0 if emit.is_float(acc_t) else 0)
    pred = arith.CmpIPredicate.ult if exclusive else arith.CmpIPredicate.ule

    def body(v: ir.Value, acc: ir.Value) -> ir.Value:
        keep = arith.cmpi(pred, emit.loop_index(r), emit.loop_index(axis))
        zero = emit.scalar(0, acc_t)
        return emit.add(acc, arith.select(keep, emit.convert(v, acc_t), zero))

    out = emit.generic([x], [init], [emit.amap(n, src), emit.amap(n, list(range(r)))],
                       [emit.PARALLEL] * r + [emit.REDUCTION], body)[0]
    return [emit.convert_tensor(out, t)]


def _flip_negative(bits: ir.Value) -> ir.Value:
    """The magnitude bits flipped where the sign bit is set: float bits to a signed
    integer of the same order, and back (the map is its own inverse)."""
    t = bits.type
    magnitude = arith.ConstantOp(t, (1 << (ir.IntegerType(t).width - 1)) - 1).result
    negative = arith.cmpi(arith.CmpIPredicate.slt, bits, arith.ConstantOp(t, 0).result)
    return arith.select(negative, arith.xori(bits, magnitude), bits)


def _float_layout(t: ir.Type) -> tuple[ir.Type, ir.Type]:
    """(the float type keys are made in: f64 or f32, its same-width integer)."""
    wide = ir.F64Type.get() if isinstance(t, ir.F64Type) else emit.f32()
    return wide, ir.IntegerType.get_signless(64 if isinstance(wide, ir.F64Type) else 32)


def _sort_key(v: ir.Value, largest: bool) -> ir.Value:
    """An i64 whose signed order is ``v``'s (``largest``) or its reverse: a float's bits
    through :func:`_flip_negative` (``-0`` first made ``+0``, so the two are equal; a
    positive NaN is above every number, as its bits are), an integer sign-extended;
    reversed by ``~``. No element's key is i64's minimum (the outputs' initial key) but
    i64's own minimum, for ``largest``, and its maximum otherwise."""
    i64 = ir.IntegerType.get_signless(64)
    if emit.is_float(v.type):
        wide, bits_t = _float_layout(v.type)
        f = emit.convert(v, wide) if v.type != wide else v
        f = arith.addf(f, emit.scalar(0.0, wide))  # -0 + 0 = +0
        key = emit.convert(_flip_negative(arith.bitcast(bits_t, f)), i64)
    else:
        key = emit.convert(v, i64)
    return key if largest else arith.xori(key, arith.ConstantOp(i64, -1).result)


def _from_key(key: ir.Value, t: ir.Type, largest: bool) -> ir.Value:
    """:func:`_sort_key` undone (exactly: the value came from ``t``)."""
    if not largest:
        key = arith.xori(key, arith.ConstantOp(key.type, -1).result)
    if not emit.is_float(t):
        return emit.convert(key, t)
    wide, bits_t = _float_layout(t)
    f = arith.bitcast(wide, _flip_negative(emit.convert(key, bits_t)))
    return f if t == wide else emit.convert(f, t)


@MIR_TO_LINALG.register("topk")
def lower_topk(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One ``iree_linalg_ext.topk`` over i64 sort keys (:func:`_sort_key`) and the i32
    positions along ``axis``, its outputs starting at i64's minimum key (below every
    element's: ``-inf`` elements are kept like any other) with a strict ``sgt`` (an equal
    key does not displace the one before it: the lower index stays first); the kept keys
    are turned back into values. ``k <= n`` is the verifier's relation, checked at run
    time where the axis is dynamic."""
    x = op["x"]
    r = emit.rank(x)
    axis = op.attrs["axis"] % r
    k, largest = op.attrs["k"], bool(op.attrs["largest"])
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    ss = emit.sizes(x)
    # the keys and positions behind compute barriers: fused into the topk over a dynamic
    # dim, IREE 3.13 asked for a 2^56-byte stack on llvm-cpu
    keys = emit.barrier(emit.map_elementwise([x], i64, lambda v: _sort_key(v, largest), ss))
    positions = emit.barrier(emit.generic(
        [], [emit.empty(ss, i32)], [emit.identity(r)], [emit.PARALLEL] * r,
        lambda _: arith.index_cast(i32, emit.loop_index(axis)))[0])
    out_ss = [k if i == axis else s for i, s in enumerate(ss)]
    top_keys = emit.filled(out_ss, i64, -(1 << 63))
    top_pos = emit.filled(out_ss, i32, 0)
    result_types = [top_keys.type, top_pos.type]
    topk = ir.Operation.create(
        "iree_linalg_ext.topk", results=result_types,
        operands=[keys, positions, top_keys, top_pos],
        attributes={"dimension": ir.IntegerAttr.get(i64, axis),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 2])},
        regions=1)
    block = topk.regions[0].blocks.append(i64, i64)
    with ir.InsertionPoint(block):
        before = arith.cmpi(arith.CmpIPredicate.sgt, block.arguments[0], block.arguments[1])
        ir.Operation.create("iree_linalg_ext.yield", operands=[before])
    values = emit.map_elementwise([topk.results[0]], emit.elem(x),
                                  lambda key: _from_key(key, emit.elem(x), largest), out_ss)
    return [values, topk.results[1]]
