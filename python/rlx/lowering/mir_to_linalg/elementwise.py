"""mir-to-linalg for elementwise ops: activation, binary, compare, where, cast.

Each is one ``linalg.generic`` with numpy broadcasting through its indexing maps, which
IREE fuses with its producers and consumers. f16 / bf16 transcendental math runs in f32.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.dialects.schema import Decoded
from rlx.ir.types import DType
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import float8, hyperbolic
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

Unary = Callable[[ir.Value], ir.Value]


def _gelu(x: ir.Value) -> ir.Value:
    half = emit.scalar(0.5, x.type)
    inner = math.erf(arith.mulf(x, emit.scalar(1.0 / pymath.sqrt(2.0), x.type)))
    return arith.mulf(arith.mulf(half, x), arith.addf(emit.scalar(1.0, x.type), inner))


def _gelu_approx(x: ir.Value) -> ir.Value:
    c = emit.scalar(pymath.sqrt(2.0 / pymath.pi), x.type)
    cube = arith.mulf(arith.mulf(x, x), x)
    inner = arith.mulf(c, arith.addf(x, arith.mulf(emit.scalar(0.044715, x.type), cube)))
    one = emit.scalar(1.0, x.type)
    return arith.mulf(arith.mulf(emit.scalar(0.5, x.type), x), arith.addf(one, math.tanh(inner)))


def _softplus(x: ir.Value) -> ir.Value:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: no overflow for large x
    (the plain form is inf above ~88 in f32), no lost digits for very negative x."""
    zero = emit.scalar(0.0, x.type)
    tail = math.log1p(math.exp(arith.negf(math.absf(x))))
    return arith.addf(arith.maximumf(x, zero), tail)


ACTIVATIONS: dict[str, Unary] = {
    "gelu": _gelu,
    "gelu_approx": _gelu_approx,
    "silu": emit.silu,
    "relu": lambda x: arith.maximumf(x, emit.scalar(0.0, x.type)),
    "sigmoid": emit.sigmoid,
    "tanh": math.tanh,
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "rsqrt": math.rsqrt,
    "neg": arith.negf,
    "abs": math.absf,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "atan": math.atan,
    "round": math.roundeven,
    "erf": math.erf,
    "softplus": _softplus,
    "floor": math.floor,
    "ceil": math.ceil,
    "asin": math.asin,
    "acos": math.acos,
    "sinh": hyperbolic.sinh,
    "cosh": hyperbolic.cosh,
    "asinh": hyperbolic.asinh,
    "acosh": hyperbolic.acosh,
    "atanh": hyperbolic.atanh,
}
EXACT_IN_ANY_WIDTH = frozenset({"neg", "abs", "relu", "round", "floor", "ceil"})


def apply_activation(kind: str, x: ir.Value) -> ir.Value:
    """The activation of a scalar; 16-bit floats are computed in f32 and rounded back."""
    fn = ACTIVATIONS[kind]
    if kind in EXACT_IN_ANY_WIDTH or isinstance(x.type, ir.F32Type | ir.F64Type):
        return fn(x)
    return emit.convert(fn(emit.to_f32(x)), x.type)


@MIR_TO_LINALG.register("activation")
def lower_activation(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    kind = op.attrs["kind"]
    return [emit.map_elementwise([x], emit.elem(x), lambda v: apply_activation(kind, v),
                                 emit.sizes(x))]


def _signed_pow(a: ir.Value, b: ir.Value) -> ir.Value:
    """numpy's ``a ** b``: ``|a| ** b`` with the sign of ``a`` for odd integer ``b``, NaN
    for a negative ``a`` and a fractional ``b`` (``math.powf`` alone is NaN for every
    negative base)."""
    t = a.type
    magnitude = math.powf(math.absf(a), b)
    whole = arith.cmpf(arith.CmpFPredicate.OEQ, math.roundeven(b), b)
    half = arith.mulf(b, emit.scalar(0.5, t))
    odd = arith.andi(whole, arith.cmpf(arith.CmpFPredicate.UNE, math.roundeven(half), half))
    signed = arith.select(odd, arith.negf(magnitude), magnitude)
    negative = arith.cmpf(arith.CmpFPredicate.OLT, a, emit.scalar(0.0, t))
    nan = emit.scalar(float("nan"), t)
    return arith.select(negative, arith.select(whole, signed, nan), magnitude)


def _pow(a: ir.Value, b: ir.Value) -> ir.Value:
    if isinstance(a.type, ir.F32Type | ir.F64Type):
        return _signed_pow(a, b)
    return emit.convert(_signed_pow(emit.to_f32(a), emit.to_f32(b)), a.type)


def _rem(a: ir.Value, b: ir.Value) -> ir.Value:
    """C's remainder (the sign of ``a``). An integer divisor of 0 or -1 is read as 1 (the
    remainder is 0 either way for -1): x86's idiv traps on 0 and on INT_MIN % -1, and a
    value the caller passes must not stop the program."""
    if emit.is_float(a.type):
        return arith.remf(a, b)
    zero, minus_one = (arith.ConstantOp(b.type, v).result for v in (0, -1))
    bad = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, b, zero),
                    arith.cmpi(arith.CmpIPredicate.eq, b, minus_one))
    return arith.remsi(a, arith.select(bad, arith.ConstantOp(b.type, 1).result, b))


def _nonzero(b: ir.Value) -> ir.Value:
    """An unsigned divisor with 0 read as 1: x86's div traps on 0, and a value the caller
    passes must not stop the program."""
    zero = arith.ConstantOp(b.type, 0).result
    return arith.select(arith.cmpi(arith.CmpIPredicate.eq, b, zero),
                        arith.ConstantOp(b.type, 1).result, b)


def _shift(kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """A shift whose count outside ``[0, bits)`` (read as unsigned) shifts every bit out:
    0, or -1 for ``shr`` of a negative value. LLVM's and SPIR-V's shifts are poison /
    undefined there, and the count is a value the caller passes."""
    bits = ir.IntegerType(a.type).width
    in_range = arith.cmpi(arith.CmpIPredicate.ult, b, arith.ConstantOp(b.type, bits).result)
    if kind == "shr":
        last = arith.ConstantOp(b.type, bits - 1).result
        return arith.shrsi(a, arith.select(in_range, b, last))
    safe = arith.select(in_range, b, arith.ConstantOp(b.type, 0).result)
    shifted = arith.shli(a, safe) if kind == "shl" else arith.shrui(a, safe)
    return arith.select(in_range, shifted, arith.ConstantOp(a.type, 0).result)


BINARY: dict[str, Callable[[ir.Value, ir.Value], ir.Value]] = {
    "add": emit.add, "sub": emit.sub, "mul": emit.mul, "div": emit.div,
    "max": emit.maximum, "min": emit.minimum, "pow": _pow, "rem": _rem,
    "udiv": lambda a, b: arith.divui(a, _nonzero(b)),
    "urem": lambda a, b: arith.remui(a, _nonzero(b)),
    "umax": arith.maxui, "umin": arith.minui,
    "and": arith.andi, "or": arith.ori, "xor": arith.xori,
    "shl": lambda a, b: _shift("shl", a, b), "shr": lambda a, b: _shift("shr", a, b),
    "ushr": lambda a, b: _shift("ushr", a, b),
}


@MIR_TO_LINALG.register("binary")
def lower_binary(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    fn = BINARY[op.attrs["kind"]]
    lhs, rhs = op["lhs"], op["rhs"]
    return [emit.map_elementwise([lhs, rhs], emit.elem(lhs), fn)]


FLOAT_PREDICATES = {"eq": "OEQ", "ne": "UNE", "lt": "OLT", "le": "OLE", "gt": "OGT",
                    "ge": "OGE"}
INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge",
                  "ult": "ult", "ule": "ule", "ugt": "ugt", "uge": "uge"}


def compare(kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    if emit.is_float(a.type):
        return arith.cmpf(getattr(arith.CmpFPredicate, FLOAT_PREDICATES[kind]), a, b)
    return arith.cmpi(getattr(arith.CmpIPredicate, INT_PREDICATES[kind]), a, b)


@MIR_TO_LINALG.register("compare")
def lower_compare(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    kind = op.attrs["kind"]
    return [emit.map_elementwise([op["lhs"], op["rhs"]], emit.i1(),
                                 lambda a, b: compare(kind, a, b))]


def input_flags_as_i8(ctx: LoweringContext, v: ir.Value) -> ir.Value | None:
    """An i1 function input as i8 behind a compute barrier, on targets with data tiling.

    IREE 3.13 packs every operand of an elementwise consumer it fuses into a data-tiled
    matmul, and cannot pack i1 ("'linalg.pack' op expected padding_value has 'i8' but got:
    'i1'"); converted in a dispatch of its own, the mask reaches the consumer as i8. (i1
    constants are stored as i8 by the constant rule; i1 values computed in the module fuse
    with their producers and never reach a dispatch as i1.)"""
    if not ctx.options.compute_barriers or emit.elem(v) != emit.i1() or not isinstance(
            v.owner, ir.Block):
        return None
    return emit.barrier(emit.convert_tensor(v, ir.IntegerType.get_signless(8)))


@MIR_TO_LINALG.register("where")
def lower_where(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    cond, on_true, on_false = op["cond"], op["on_true"], op["on_false"]
    flags = input_flags_as_i8(ctx, cond)
    if flags is None:
        return [emit.map_elementwise([cond, on_true, on_false], emit.elem(on_true),
                                     arith.select)]

    def pick(c: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.select(arith.cmpi(arith.CmpIPredicate.ne, c, emit.scalar(0, c.type)),
                            a, b)

    return [emit.map_elementwise([flags, on_true, on_false], emit.elem(on_true), pick,
                                 emit.broadcast_sizes([cond, on_true, on_false]))]


@MIR_TO_LINALG.register("cast")
def lower_cast(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    to = DType.parse(op.attrs["to"]).mlir()
    if float8.involves(emit.elem(x), to):
        return [float8.convert_tensor(x, to, op.attrs.get("unsigned"), op.attrs.get("round"))]
    flags = input_flags_as_i8(ctx, x)
    return [emit.convert_tensor(x if flags is None else flags, to, op.attrs.get("unsigned"))]
