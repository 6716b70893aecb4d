"""Casts to the types narrower than a byte (ONNX's int4, uint4, int2, uint2 and
float4_e2m1fn), which a module holds as their values (:class:`rlx.ir.dtypes.Narrow`: the
integers in i8, E2M1 in E4M3FN). A cast from one needs nothing: its value is there. A cast
to one puts the value in the type's range, as ONNX's reference (ml_dtypes) does:

- **from an integer** (bool, unsigned): its low bits, read in two's complement for the
  signed types (ONNX: "discard higher bits and reinterpret": 200 is 0b1100_1000, whose
  low 4 bits read as int4 are -8);
- **from a float** to an integer: truncated toward zero; a value whose truncation is out
  of range, NaN included, is 0 (ONNX leaves it undefined; ml_dtypes, and so ONNX's
  reference and its node tests, give 0);
- **to E2M1** (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives): rounded to nearest
  even, saturating at 6 (E2M1 has no inf; ONNX's reference saturates with or without
  ``saturate``); -0 and negatives rounding to 0 are -0; NaN is -0 (ml_dtypes' bits 0x8).
"""

from __future__ import annotations

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.registry import Node
from rlx.ir.dtypes import Narrow
from rlx.ir.types import DType


def cast_to_narrow(node: Node, x: HirValue, to: Narrow, as_f32: HirValue | None = None
                   ) -> HirValue:
    """``x`` cast to the narrow type ``to``, in the type holding it (see the module doc);
    ``as_f32``: ``x`` as f32 where it is not a float (ONNX's cast of it, which knows
    whether ``x`` is unsigned)."""
    if to.is_float:
        return node.cast(_round_e2m1(node, as_f32 if as_f32 is not None else node.cast(
            x, DType.F32)), to.storage)
    if x.dtype.is_float8:  # exactly widened: the comparisons take no 8-bit floats
        x = node.cast(x, DType.F32)
    if x.dtype.is_float:
        zero = node.as_tensor(node.scalar(0, x))
        below = node.mir("where", [node.mir("compare", [x, node.scalar(to.hi + 1, x)],
                                            kind="lt"), x, zero])
        kept = node.mir("where", [node.mir("compare", [x, node.scalar(to.lo - 1, x)],
                                           kind="gt"), below, zero])
        return node.cast(kept, to.storage)  # truncates toward zero; in range
    if x.dtype == DType.I1:
        x = node.cast(x, DType.I8)
    span = int(to.hi - to.lo + 1)
    low = node.mir("binary", [x, node.scalar(span, x)], kind="urem")  # the low bits
    if to.lo < 0:  # two's complement: the upper half is negative
        negative = node.mir("compare", [low, node.scalar(to.hi, x)], kind="gt")
        low = node.mir("where", [negative, node.mir(
            "binary", [low, node.scalar(span, x)], kind="sub"), low])
    return node.cast(low, to.storage)


def _round_e2m1(node: Node, f: HirValue) -> HirValue:
    """f32 ``f`` rounded to E2M1's grid (see the module doc), as f32."""
    def lt(a: HirValue, bound: float) -> HirValue:
        return node.mir("compare", [a, node.scalar(bound, a)], kind="lt")

    def const(v: float) -> HirValue:
        return node.as_tensor(node.scalar(v, f))

    magnitude = node.mir("binary", [node.mir("activation", [f], kind="abs"),
                                    node.scalar(6.0, f)], kind="min")
    # the spacing of the grid at |f|: 0.5 below 2, 1 below 4, 2 above
    step = node.mir("where", [lt(magnitude, 2.0), const(0.5),
                              node.mir("where", [lt(magnitude, 4.0), const(1.0), const(2.0)])])
    rounded = node.mir("binary", [node.mir("activation", [
        node.mir("binary", [magnitude, step], kind="div")], kind="round"), step], kind="mul")
    # the sign: f < 0, or f is -0 (1 / -0 is -inf)
    negative = node.mir("where", [lt(f, 0.0), node.as_tensor(node.scalar(True, DType.I1)),
                                  lt(node.mir("binary", [node.scalar(1.0, f), f], kind="div"),
                                     0.0)])
    signed = node.mir("where", [negative, node.mir("binary", [rounded, node.scalar(-1.0, f)],
                                                   kind="mul"), rounded])
    nan = node.mir("compare", [f, f], kind="ne")
    return node.mir("where", [nan, const(-0.0), signed])


__all__ = ["cast_to_narrow"]
