"""mir-to-linalg for the sampling ops: repetition_penalty, top_k_filter, top_p_filter,
min_p_filter, categorical, mark_tokens.

Rows are the leading axes of ``x [..., V]``; the work is in f32 (16-bit logits are widened).
Top-k and top-p find a threshold per row without sorting: a float maps to an unsigned key
that orders like the float (``bits | 0x80000000`` for a positive float, ``~bits`` for a
negative one), and 32 steps of a bitwise search (one reduction over the row a step) build the
largest key ``t`` with ``S(t) >= target``, where ``S(t)`` sums a weight over the row's keys
``>= t``: a count of 1 per token against ``k`` (the ``k``-th largest key), the unnormalized
probability ``exp(x - max)`` against ``p * sum`` (the key where the mass from the top first
reaches ``p``). Tokens with a key ``>= t`` stay. The search costs 32 passes over the row
(unrolled, one executable) and no sort (a vocabulary of 49152 is 1.5 M compares). Each op's
result is fenced off from its consumers (``_Rows.out``).
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.reduction import argmax_along
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

GOLDEN = 0x9E3779B9
"""2^32 / phi: spreads consecutive counters and indices over the 32-bit space."""
COUNTER_OFFSET = 0x7F4A7C15
MIX_MULTIPLIERS = (0x85EBCA6B, 0xC2B2AE35)
"""MurmurHash3's 32-bit finalizer (``fmix32``): a bijection in which every input bit flips
each output bit with probability about 1/2."""


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _c(value: int) -> ir.Value:
    """An i32 constant from an unsigned 32-bit pattern."""
    value &= 0xFFFFFFFF
    return emit.scalar(value - (1 << 32) if value >= 1 << 31 else value, _i32())


def _mix(h: ir.Value) -> ir.Value:
    """fmix32 on an i32 (wrapping multiply, logical shifts)."""
    for shift, mult in ((16, MIX_MULTIPLIERS[0]), (13, MIX_MULTIPLIERS[1])):
        h = arith.muli(arith.xori(h, arith.shrui(h, _c(shift))), _c(mult))
    return arith.xori(h, arith.shrui(h, _c(16)))


def _uniform(seed: ir.Value, counter: ir.Value, index: ir.Value) -> ir.Value:
    """``u`` in ``[2^-24, 1 - 2^-24]`` from (seed, counter, index), as
    ``rlx.reference.ops.uniform_hash`` defines it."""
    a = _mix(arith.addi(arith.muli(counter, _c(GOLDEN)), _c(COUNTER_OFFSET)))
    key = _mix(arith.xori(seed, a))
    h = _mix(arith.xori(_mix(arith.addi(arith.muli(index, _c(GOLDEN)), key)), key))
    f32 = emit.f32()
    mantissa = arith.uitofp(f32, arith.shrui(h, _c(9)))
    return arith.addf(arith.mulf(mantissa, emit.scalar(2.0 ** -23, f32)),
                      emit.scalar(2.0 ** -24, f32))


def _key(x: ir.Value) -> ir.Value:
    """The unsigned i32 key that orders like the f32 ``x``."""
    bits = arith.bitcast(_i32(), x)
    negative = arith.cmpi(arith.CmpIPredicate.slt, bits, _c(0))
    return arith.select(negative, arith.xori(bits, _c(0xFFFFFFFF)),
                        arith.ori(bits, _c(0x80000000)))


class _Rows:
    """``x [..., V]`` as f32 with its row shape, loop maps and helpers."""

    def __init__(self, x: ir.Value) -> None:
        self.t = emit.elem(x)
        self.x = emit.convert_tensor(x, emit.f32())
        self.r = emit.rank(x)
        self.sizes = emit.sizes(x)
        self.rows = self.sizes[:-1]
        self.full = emit.identity(self.r)
        self.row = emit.amap(self.r, list(range(self.r - 1)))

    def reduce(self, inputs: list[ir.Value], init: ir.Value,
               body: Callable[..., ir.Value]) -> ir.Value:
        """One reduction over the vocabulary: ``body(*input_scalars, acc)``; inputs are
        ``[..., V]`` tensors, then ``[...]`` ones."""
        maps = [self.full if emit.rank(v) == self.r else self.row for v in inputs]
        iters = [emit.PARALLEL] * (self.r - 1) + [emit.REDUCTION]
        return emit.generic(inputs, [init], [*maps, self.row], iters, body)[0]

    def per_token(self, inputs: list[ir.Value], element: ir.Type,
                  body: Callable[..., ir.Value]) -> ir.Value:
        """An elementwise ``[..., V]`` result from ``[..., V]`` and ``[...]`` inputs."""
        maps = [self.full if emit.rank(v) == self.r else self.row for v in inputs]
        init = emit.empty(self.sizes, element)
        return emit.generic(inputs, [init], [*maps, self.full], [emit.PARALLEL] * self.r,
                            lambda *a: body(*a[:len(inputs)]))[0]

    def max(self) -> ir.Value:
        f32 = emit.f32()
        init = emit.filled(self.rows, f32, float("-inf"))
        return self.reduce([self.x], init, emit.maximum)

    def out(self, y: ir.Value) -> list[ir.Value]:
        """The result, fenced off (``emit.barrier``) from its consumers: IREE would fuse
        this elementwise generic into a following row reduction (an argmax, the next
        filter's max) and keep the whole row on the stack there (196 KB for a vocabulary
        of 49152: over llvm-cpu's 32 KB limit)."""
        return [emit.barrier(emit.convert_tensor(y, self.t))]


def _gpu_fence(ctx: LoweringContext, v: ir.Value) -> ir.Value:
    """``v`` fenced off from its consumers on CUDA / ROCm (``emit.barrier``), as it is on
    llvm-cpu and Vulkan. IREE 3.13's GPU reductions of a vocabulary of 32000 (512
    compiled) fail where a producer's result is both stored and reduced in one dispatch:
    top-k's temperature division fused into the search's first step ("'func.func' op
    failed to distribute"), and top-p's ``exp(x - max)`` with its sum (codegen still
    running after 10 minutes)."""
    return emit.barrier(v) if ctx.options.llvmgpu else v


def _threshold(ctx: LoweringContext, rows: _Rows, weights: ir.Value | None, target: ir.Value
               ) -> ir.Value:
    """The largest key ``t`` per row with ``sum(weight where key >= t) >= target``
    (``weights`` None: a count of tokens, i32; else an f32 tensor).

    32 steps, unrolled: the search's dispatches then run in one command buffer (as an
    ``scf.for`` each trip was its own submission: ~20 ms a call for a vocabulary of 49152,
    against ~2 ms). The bit a step tries is carried in a tensor, not a constant, so the 32
    steps are one executable IREE compiles once. Each step's ``t`` and ``bit`` are fenced
    (``emit.barrier``): on a small row (12 x 96) IREE otherwise fuses all 64 generics into
    one dispatch whose llvm-cpu codegen ran for over 14 minutes; a vocabulary of 49152 was
    already two dispatches a step, and the fences add none there (127 -> 131 for top-k and
    top-p together, the fences' own).

    The row is fenced on GPUs (:func:`_gpu_fence`)."""
    i32 = _i32()
    acc_t = i32 if weights is None else emit.f32()
    zero: float = 0 if weights is None else 0.0
    inputs = [_gpu_fence(ctx, rows.x)] if weights is None else [rows.x, weights]
    n = len(rows.rows)
    flat = emit.identity(n)

    def add(x: ir.Value, *rest: ir.Value) -> ir.Value:
        *w, t, bit, acc = rest
        hit = arith.cmpi(arith.CmpIPredicate.uge, _key(x), arith.ori(t, bit))
        if weights is None:
            return arith.addi(acc, arith.select(hit, _c(1), _c(0)))
        return arith.addf(acc, arith.select(hit, w[0], emit.scalar(0.0, acc_t)))

    def reached(t: ir.Value, bit: ir.Value, total: ir.Value, goal: ir.Value,
                *_outs: ir.Value) -> list[ir.Value]:
        ok = (arith.cmpi(arith.CmpIPredicate.sge, total, goal) if weights is None
              else arith.cmpf(arith.CmpFPredicate.OGE, total, goal))
        return [arith.select(ok, arith.ori(t, bit), t), arith.shrui(bit, _c(1))]

    t = emit.filled(rows.rows, i32, 0)
    bit = emit.filled(rows.rows, i32, -(1 << 31))
    for _ in range(32):
        total = rows.reduce([*inputs, t, bit], emit.filled(rows.rows, acc_t, zero), add)
        t, bit = emit.generic([t, bit, total, target],
                              [emit.empty(rows.rows, i32), emit.empty(rows.rows, i32)],
                              [flat] * 6, [emit.PARALLEL] * n, reached)
        t, bit = emit.barrier(t), emit.barrier(bit)
    return t


def _keep_from(rows: _Rows, t: ir.Value, off: ir.Value) -> list[ir.Value]:
    """``x`` where its key is ``>= t`` (or the row's ``off`` flag is set), else ``-inf``."""
    f32 = emit.f32()

    def body(x: ir.Value, tt: ir.Value, o: ir.Value) -> ir.Value:
        keep = arith.ori(arith.cmpi(arith.CmpIPredicate.uge, _key(x), tt), o)
        return arith.select(keep, x, emit.scalar(float("-inf"), f32))

    return rows.out(rows.per_token([rows.x, t, off], f32, body))


@MIR_TO_LINALG.register("top_k_filter")
def lower_top_k_filter(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    rows = _Rows(op["x"])
    k = op["k"]
    vocab = arith.index_cast(_i32(), emit.as_value(rows.sizes[-1]))
    off = emit.map_elementwise([k], emit.i1(), lambda kk: arith.ori(
        arith.cmpi(arith.CmpIPredicate.sle, kk, _c(0)),
        arith.cmpi(arith.CmpIPredicate.sge, kk, vocab)))
    return _keep_from(rows, _threshold(ctx, rows, None, k), off)


@MIR_TO_LINALG.register("top_p_filter")
def lower_top_p_filter(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    rows = _Rows(op["x"])
    f32 = emit.f32()
    p = emit.convert_tensor(op["p"], f32)
    m = rows.max()
    weights = _gpu_fence(ctx, rows.per_token([rows.x, m], f32,
                                             lambda x, mm: math.exp(arith.subf(x, mm))))
    total = rows.reduce([weights], emit.filled(rows.rows, f32, 0.0), arith.addf)
    target = emit.map_elementwise([p, total], f32, arith.mulf)
    off = emit.map_elementwise([p], emit.i1(), lambda pp: arith.cmpf(
        arith.CmpFPredicate.OGE, pp, emit.scalar(1.0, f32)))
    return _keep_from(rows, _threshold(ctx, rows, weights, target), off)


@MIR_TO_LINALG.register("min_p_filter")
def lower_min_p_filter(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Removed where ``exp(x - max) < min_p`` (HF: ``probs < min_p * max(probs)``)."""
    rows = _Rows(op["x"])
    f32 = emit.f32()
    min_p = emit.convert_tensor(op["min_p"], f32)
    m = rows.max()

    def body(x: ir.Value, mm: ir.Value, mp: ir.Value) -> ir.Value:
        drop = arith.cmpf(arith.CmpFPredicate.OLT, math.exp(arith.subf(x, mm)), mp)
        return arith.select(drop, emit.scalar(float("-inf"), f32), x)

    return rows.out(rows.per_token([rows.x, m, min_p], f32, body))


@MIR_TO_LINALG.register("repetition_penalty")
def lower_repetition_penalty(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    rows = _Rows(op["x"])
    f32 = emit.f32()
    penalty = emit.convert_tensor(op["penalty"], f32)
    seen = op["seen"]
    st = emit.elem(seen)

    def body(x: ir.Value, s: ir.Value, p: ir.Value) -> ir.Value:
        marked = (arith.cmpf(arith.CmpFPredicate.UNE, s, emit.scalar(0.0, st))
                  if emit.is_float(st) else arith.cmpi(arith.CmpIPredicate.ne, s,
                                                       emit.scalar(0, st)))
        negative = arith.cmpf(arith.CmpFPredicate.OLT, x, emit.scalar(0.0, f32))
        penalized = arith.select(negative, arith.mulf(x, p), arith.divf(x, p))
        return arith.select(marked, penalized, x)

    return rows.out(rows.per_token([rows.x, seen, penalty], f32, body))


@MIR_TO_LINALG.register("categorical")
def lower_categorical(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Gumbel-max: ``v = x - log(max(-log(u), 2^-25))``, then its first largest index (the
    argmax lowering's reductions)."""
    rows = _Rows(op["x"])
    f32, i32 = emit.f32(), _i32()
    axis = rows.r - 1

    def noisy(x: ir.Value, seed: ir.Value, counter: ir.Value) -> ir.Value:
        i = arith.index_cast(i32, emit.loop_index(axis))
        e = arith.maximumf(arith.negf(math.log(_uniform(seed, counter, i))),
                           emit.scalar(2.0 ** -25, f32))
        return arith.subf(x, math.log(e))

    v = emit.barrier(rows.per_token([rows.x, op["seed"], op["counter"]], f32, noisy))
    return [argmax_along(v, axis, ctx.options.llvmgpu)]


@MIR_TO_LINALG.register("mark_tokens")
def lower_mark_tokens(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """One generic over ``[..., V, N]`` into ``mask``: a 1 where an id equals the index."""
    mask, ids = op["mask"], op["ids"]
    r = emit.rank(mask)
    t = emit.elem(mask)
    one = emit.scalar(1.0 if emit.is_float(t) else 1, t)

    def body(i: ir.Value, acc: ir.Value) -> ir.Value:
        v = arith.index_cast(_i32(), emit.loop_index(r - 1))
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, i, v), one, acc)

    maps = [emit.amap(r + 1, [*range(r - 1), r]), emit.amap(r + 1, list(range(r)))]
    return emit.generic([ids], [mask], maps, [emit.PARALLEL] * r + [emit.REDUCTION], body)
