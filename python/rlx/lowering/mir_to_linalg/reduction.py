"""mir-to-linalg for reductions: reduce, argmax, softmax, cumsum."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG
from rlx.lowering.mir_to_linalg.contraction import accumulator
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
    """One reduction generic carrying (best value, its index). An element replaces the
    carried pair when it is larger, equal with a smaller index, or NaN where the carried
    value is not (or a NaN with a smaller index): a total order, so the result does not
    depend on the order IREE reduces in. The init (lowest value, index 0) stands for
    element 0, which it never beats."""
    x = op["x"]
    r = emit.rank(x)
    axis = op.attrs["axis"] % r
    kept = [i for i in range(r) if i != axis]
    t = emit.elem(x)
    i32 = ir.IntegerType.get_signless(32)
    ss = emit.sizes(x)
    best = emit.filled([ss[i] for i in kept], t, _init_value("max", t))
    index = emit.filled([ss[i] for i in kept], i32, 0)

    def body(v: ir.Value, m: ir.Value, idx: ir.Value) -> list[ir.Value]:
        i = arith.index_cast(i32, emit.loop_index(axis))
        earlier = arith.cmpi(arith.CmpIPredicate.slt, i, idx)
        if emit.is_float(t):
            greater = arith.cmpf(arith.CmpFPredicate.OGT, v, m)
            equal = arith.cmpf(arith.CmpFPredicate.OEQ, v, m)
            v_nan = arith.cmpf(arith.CmpFPredicate.UNO, v, v)
            m_nan = arith.cmpf(arith.CmpFPredicate.UNO, m, m)
            m_num = arith.xori(m_nan, arith.constant(ir.IntegerType.get_signless(1), 1))
            nan_wins = arith.andi(v_nan, arith.ori(m_num, earlier))
        else:
            greater = arith.cmpi(arith.CmpIPredicate.sgt, v, m)
            equal = arith.cmpi(arith.CmpIPredicate.eq, v, m)
            nan_wins = None
        take = arith.ori(greater, arith.andi(equal, earlier))
        if nan_wins is not None:
            take = arith.ori(take, nan_wins)
        return [arith.select(take, v, m), arith.select(take, i, idx)]

    iters = [emit.REDUCTION if i == axis else emit.PARALLEL for i in range(r)]
    out = emit.generic([x], [best, index], [emit.identity(r), emit.amap(r, kept),
                                            emit.amap(r, kept)], iters, body)[1]
    if op.attrs["keep_dim"]:
        out = emit.reshape(out, [1 if i == axis else ss[i] for i in range(r)])
    return [out]


@MIR_TO_LINALG.register("softmax")
def lower_softmax(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``linalg.softmax`` (max-subtracted), in f32 for 16-bit inputs."""
    x = op["x"]
    t = emit.elem(x)
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
