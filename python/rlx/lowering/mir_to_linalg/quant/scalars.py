"""Affine expressions over a generic's loops and the ``arith`` scalars of dequant bodies."""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir
from iree.compiler.dialects import affine, arith

from rlx.lowering import emit

Expr = ir.AffineExpr
Exprs = Sequence[Expr]
Scalars = dict[str, ir.Value]
"""A dequant body's operands (block elements of the input arrays) by name."""
Loops = list[ir.Value]
"""The ``linalg.index`` values of the enclosing generic's loops."""


def const(v: int) -> Expr:
    return ir.AffineConstantExpr.get(v)


def div(e: Expr, v: int) -> Expr:
    return ir.AffineFloorDivExpr.get(e, const(v))


def mod(e: Expr, v: int) -> Expr:
    return ir.AffineModExpr.get(e, const(v))


def row_major(idx: Exprs, sizes: Sequence[int]) -> Expr:
    """The flat index of ``idx`` in a row-major array of ``sizes``."""
    out: Expr = const(0)
    stride = 1
    for e, s in zip(reversed(list(idx)), reversed(list(sizes)), strict=True):
        out = out + e * stride
        stride *= s
    return out


def int_type(width: int) -> ir.Type:
    return ir.IntegerType.get_signless(width)


def i8(v: int) -> ir.Value:
    return arith.constant(int_type(8), v)


def i32(v: int) -> ir.Value:
    return arith.constant(int_type(32), v)


def index_at(e: Expr, loops: Loops) -> ir.Value:
    """``e`` over the loop indices, as an ``index``."""
    if isinstance(e, ir.AffineConstantExpr):
        return emit.index(ir.AffineConstantExpr(e).value)
    return affine.apply(ir.AffineMap.get(len(loops), 0, [e]), loops)


def i8_at(e: Expr, loops: Loops) -> ir.Value:
    """``e`` over the loop indices, as an ``i8``."""
    if isinstance(e, ir.AffineConstantExpr):
        return i8(ir.AffineConstantExpr(e).value)
    return arith.index_cast(int_type(8), index_at(e, loops))


def bits(v: ir.Value, shift: ir.Value, mask: int) -> ir.Value:
    """``(v >> shift) & mask``."""
    width = ir.IntegerType(v.type).width
    return arith.andi(arith.shrui(v, shift), arith.constant(int_type(width), mask))


def u32(v: ir.Value) -> ir.Value:
    """An unsigned narrow int widened to i32."""
    return arith.extui(int_type(32), v)


def uf(v: ir.Value) -> ir.Value:
    """Unsigned int -> f32 (exact for the widths used here)."""
    return arith.uitofp(emit.f32(), v)


def sf(v: ir.Value) -> ir.Value:
    return arith.sitofp(emit.f32(), v)


def f32_of(v: ir.Value) -> ir.Value:
    return arith.extf(emit.f32(), v)


def mulf(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.mulf(a, b)


__all__ = ["Expr", "Exprs", "Loops", "Scalars", "bits", "const", "div", "f32_of", "i8",
           "i8_at", "i32", "index_at", "int_type", "mod", "mulf", "row_major", "sf", "u32",
           "uf"]
