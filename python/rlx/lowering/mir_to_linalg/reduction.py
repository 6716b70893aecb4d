"""mir-to-linalg for reductions: reduce, argmax, softmax, cumsum."""

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
