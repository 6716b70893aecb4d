"""mir-to-linalg for normalization: rms_norm, layer_norm.

A row reduction (f32 accumulation; f64 for f64) and one elementwise generic that applies it; IREE
fuses the two. On targets with data tiling the input first passes a compute barrier:
without it IREE folds a residual sum feeding the norm into the previous matmul's
accumulator and then fails on the oversized fused dispatch (cpu-performance-anchors, 3.3).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


def row_sum(x: ir.Value, fn: emit.Body) -> ir.Value:
    """``Σ_last fn(x)`` in the accumulation type, shape ``x.shape[:-1]``."""
    r = emit.rank(x)
    acc_t = emit.acc_type(emit.elem(x))
    init = emit.filled(emit.sizes(x)[:-1], acc_t, 0.0)
    maps = [emit.identity(r), emit.amap(r, list(range(r - 1)))]
    iters = [emit.PARALLEL] * (r - 1) + [emit.REDUCTION]
    return emit.generic([x], [init], maps, iters,
                        lambda v, acc: arith.addf(acc, fn(emit.convert(v, acc_t))))[0]


def inv_width(x: ir.Value) -> ir.Value:
    """``1 / D`` (in the accumulation type) for the last dim of ``x``."""
    acc_t = emit.acc_type(emit.elem(x))
    width = emit.dim(x, -1)
    if isinstance(width, int):
        return emit.scalar(1.0 / width, acc_t)
    as_i64 = arith.index_cast(ir.IntegerType.get_signless(64), width)
    return arith.divf(emit.scalar(1.0, acc_t), arith.sitofp(acc_t, as_i64))


def rms_norm(ctx: LoweringContext, x: ir.Value, gamma: ir.Value, beta: ir.Value,
             eps: float) -> ir.Value:
    """``x * rsqrt(mean(x²) + eps) * gamma + beta`` over the last dim."""
    if ctx.options.compute_barriers:
        x = emit.barrier(x)
    r = emit.rank(x)
    ss = row_sum(x, lambda v: arith.mulf(v, v))
    scale = inv_width(x)
    out_t = emit.elem(x)
    acc_t = emit.acc_type(out_t)
    eps_v = emit.scalar(eps, acc_t)

    def body(v: ir.Value, s: ir.Value, g: ir.Value, b: ir.Value, _: ir.Value) -> ir.Value:
        inv = math.rsqrt(arith.addf(arith.mulf(s, scale), eps_v))
        y = arith.addf(arith.mulf(arith.mulf(emit.convert(v, acc_t), inv),
                                  emit.convert(g, acc_t)), emit.convert(b, acc_t))
        return emit.convert(y, out_t)

    maps = [emit.identity(r), emit.amap(r, list(range(r - 1))), emit.amap(r, [r - 1]),
            emit.amap(r, [r - 1]), emit.identity(r)]
    init = emit.empty(emit.sizes(x), out_t)
    return emit.generic([x, ss, gamma, beta], [init], maps, [emit.PARALLEL] * r, body)[0]


@MIR_TO_LINALG.register("rms_norm")
def lower_rms_norm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [rms_norm(ctx, op["x"], op["gamma"], op["beta"], op.attrs["eps"])]


@MIR_TO_LINALG.register("layer_norm")
def lower_layer_norm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Two passes: the mean, then the mean of squared deviations (biased variance). The
    input passes a compute barrier as rms_norm's does: fused with the ops before it (a
    Whisper encoder's conv front end, transposed and added to its position table), IREE
    3.13's llvm-cpu codegen exceeds its stack limit."""
    x, gamma, beta = op["x"], op["gamma"], op["beta"]
    if ctx.options.compute_barriers:
        x = emit.barrier(x)
    r = emit.rank(x)
    scale = inv_width(x)
    out_t = emit.elem(x)
    acc_t = emit.acc_type(out_t)
    mean = emit.map_elementwise([row_sum(x, lambda v: v)], acc_t,
                                lambda s: arith.mulf(s, scale))
    rows = emit.amap(r, list(range(r - 1)))
    centered_sq = emit.generic(
        [x, mean], [emit.filled(emit.sizes(x)[:-1], acc_t, 0.0)],
        [emit.identity(r), rows, rows], [emit.PARALLEL] * (r - 1) + [emit.REDUCTION],
        lambda v, m, acc: arith.addf(acc, _sq(arith.subf(emit.convert(v, acc_t), m))))[0]
    eps_v = emit.scalar(op.attrs["eps"], acc_t)

    def body(v: ir.Value, m: ir.Value, var: ir.Value, g: ir.Value, b: ir.Value,
             _: ir.Value) -> ir.Value:
        inv = math.rsqrt(arith.addf(arith.mulf(var, scale), eps_v))
        y = arith.mulf(arith.mulf(arith.subf(emit.convert(v, acc_t), m), inv),
                       emit.convert(g, acc_t))
        return emit.convert(arith.addf(y, emit.convert(b, acc_t)), out_t)

    maps = [emit.identity(r), rows, rows, emit.amap(r, [r - 1]), emit.amap(r, [r - 1]),
            emit.identity(r)]
    init = emit.empty(emit.sizes(x), out_t)
    return [emit.generic([x, mean, centered_sq, gamma, beta], [init], maps,
                         [emit.PARALLEL] * r, body)[0]]


def _sq(v: ir.Value) -> ir.Value:
    return arith.mulf(v, v)
