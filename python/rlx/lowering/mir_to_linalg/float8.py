"""Casts to and from the 8-bit floats (``f8E4M3FN``, ``f8E4M3FNUZ``, ``f8E5M2``,
``f8E5M2FNUZ``, and the power-of-two scale type ``f8E8M0FNU``), written out here instead
of left to IREE's emulation of ``arith.extf`` / ``arith.truncf``, which IREE 3.13 gets
wrong on llvm-cpu and Vulkan alike: it widens E4M3FN's negative NaN (``0xff``) to -480,
and rounds the values between the largest subnormal and the smallest normal number
(``0.0147`` in E4M3FN) to zero.

- **From** an 8-bit float: a table of the format's 256 values in f32 (every one exact),
  read with the byte as the index; then on from f32 as any cast.
- **To** an 8-bit float: from f32, round to nearest even in integer arithmetic on the f32
  bits. Normal results: the f32 bits rounded to the format's mantissa width (a carry moves
  into the exponent, as it should), re-biased. Subnormal results (below the smallest normal
  number): ``roundeven(|x| 2^(M - emin))``, which is the encoding itself (reaching ``2^M``
  is the smallest normal number's). Beyond the largest finite value: inf for E5M2, NaN for
  the others (no saturation: ONNX's ``saturate`` clamps before the cast); NaN stays NaN;
  the FNUZ formats have no negative zero.
- **To** E8M0 (``2^(e - 127)``, no sign, 0xff NaN): the f32 exponent field, raised by one
  as ``cast``'s ``round`` says, saturating at 2^127 (:func:`_encode_e8m0`).

The tables and constants come from each format's definition (OCP 8-bit floats; the FNUZ
variants of Graphcore / AMD), as ml_dtypes, which the IREE runtime depends on, implements
them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, math, tensor

from rlx.lowering import emit


@dataclass(frozen=True)
class Format:
    mantissa: int
    bias: int
    max_bits: int  # the encoding of the largest finite value
    overflow: int  # what a value beyond it becomes (inf or NaN)
    nan: int
    fnuz: bool  # no negative zero, no inf, one NaN (0x80)
    numpy_name: str

    @property
    def emin(self) -> int:
        """The exponent of the smallest normal number."""
        return 1 - self.bias


FORMATS = {
    "f8E4M3FN": Format(3, 7, 0x7E, 0x7F, 0x7F, False, "float8_e4m3fn"),
    "f8E4M3FNUZ": Format(3, 8, 0x7F, 0x80, 0x80, True, "float8_e4m3fnuz"),
    "f8E5M2": Format(2, 15, 0x7B, 0x7C, 0x7E, False, "float8_e5m2"),
    "f8E5M2FNUZ": Format(2, 16, 0x7F, 0x80, 0x80, True, "float8_e5m2fnuz"),
    "f8E8M0FNU": Format(0, 127, 0xFE, 0xFF, 0xFF, False, "float8_e8m0fnu"),
}


def format_of(t: ir.Type) -> Format | None:
    return FORMATS.get(str(t))


def _i32(v: int) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(32), v)


def _table(fmt: Format) -> ir.Value:
    """The 256 values of the format in f32, by encoding."""
    import ml_dtypes

    values = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, fmt.numpy_name))
    table = values.astype(np.float32)
    t = ir.RankedTensorType.get([256], emit.f32())
    return arith.ConstantOp(t, ir.DenseElementsAttr.get(table, type=t)).result


def _decode(x: ir.Value, table: ir.Value) -> ir.Value:
    byte = arith.extui(ir.IntegerType.get_signless(32),
                       arith.bitcast(ir.IntegerType.get_signless(8), x))
    return tensor.extract(table, [arith.index_cast(ir.IndexType.get(), byte)])


def _encode(f: ir.Value, to: ir.Type, fmt: Format) -> ir.Value:
    """An f32 value rounded to nearest even into format ``fmt`` (see the module doc)."""
    i32 = ir.IntegerType.get_signless(32)
    u = arith.bitcast(i32, f)
    a = arith.andi(u, _i32(0x7FFFFFFF))
    shift = 23 - fmt.mantissa
    odd = arith.andi(arith.shrui(a, _i32(shift)), _i32(1))
    rounded = arith.shrui(arith.addi(arith.addi(a, _i32((1 << (shift - 1)) - 1)), odd),
                          _i32(shift))
    normal = arith.subi(rounded, _i32((127 - fmt.bias) << fmt.mantissa))
    magnitude = arith.bitcast(emit.f32(), a)
    scaled = arith.mulf(magnitude, emit.scalar(2.0 ** (fmt.mantissa - fmt.emin), emit.f32()))
    subnormal = arith.fptosi(i32, math.roundeven(scaled))
    min_normal_bits = (127 + fmt.emin) << 23
    below = arith.cmpi(arith.CmpIPredicate.ult, a, _i32(min_normal_bits))
    bits = arith.select(below, subnormal, normal)
    beyond = arith.cmpi(arith.CmpIPredicate.sgt, bits, _i32(fmt.max_bits))
    bits = arith.select(beyond, _i32(fmt.overflow), bits)
    sign = arith.shrui(arith.andi(u, _i32(0x80000000)), _i32(24))
    if fmt.fnuz:  # no negative zero (0x80 is the NaN)
        zero = arith.cmpi(arith.CmpIPredicate.eq, bits, _i32(0))
        sign = arith.select(zero, _i32(0), sign)
    bits = arith.ori(bits, sign)
    nan = arith.cmpi(arith.CmpIPredicate.ugt, a, _i32(0x7F800000))
    bits = arith.select(nan, _i32(fmt.nan), bits)
    return arith.bitcast(to, arith.trunci(ir.IntegerType.get_signless(8), bits))


def _encode_e8m0(f: ir.Value, to: ir.Type, rounding: str) -> ir.Value:
    """An f32 value as the power of two ``2^(e - 127)`` (the sign dropped): its f32
    exponent, raised by one where ``rounding`` says (``up``: any fraction; ``nearest``: the
    fraction's top bit, and below the f32 normals also a lower one), except at 2^127
    (saturated); inf and NaN are NaN (0xff)."""
    i32 = ir.IntegerType.get_signless(32)
    u = arith.bitcast(i32, f)
    exponent = arith.andi(arith.shrui(u, _i32(23)), _i32(0xFF))

    def has(mask: int) -> ir.Value:
        return arith.cmpi(arith.CmpIPredicate.ne, arith.andi(u, _i32(mask)), _i32(0))

    if rounding == "up":
        step = has(0x7FFFFF)
    elif rounding == "nearest":
        normal = arith.cmpi(arith.CmpIPredicate.ne, exponent, _i32(0))
        step = arith.andi(has(0x400000), arith.ori(has(0x3FFFFF), normal))
    else:
        step = arith.constant(ir.IntegerType.get_signless(1), 0)
    below_top = arith.cmpi(arith.CmpIPredicate.ne, exponent, _i32(0xFE))
    bits = arith.addi(exponent, arith.extui(i32, arith.andi(step, below_top)))
    special = arith.cmpi(arith.CmpIPredicate.eq, exponent, _i32(0xFF))
    bits = arith.select(special, _i32(0xFF), bits)
    return arith.bitcast(to, arith.trunci(ir.IntegerType.get_signless(8), bits))


def involves(src: ir.Type, to: ir.Type) -> bool:
    """A cast from or to an 8-bit float (this module's)."""
    return format_of(src) is not None or format_of(to) is not None


def convert_tensor(x: ir.Value, to: ir.Type, unsigned: str | None,
                   rounding: str | None = None) -> ir.Value:
    """``rlx_mir.cast`` of ``x`` to ``to`` where either side is an 8-bit float; an
    integer side is unsigned as ``unsigned`` says; ``rounding``: to E8M0."""
    src = emit.elem(x)
    if src == to:
        return x
    src_fmt, to_fmt = format_of(src), format_of(to)
    table = _table(src_fmt) if src_fmt is not None else None
    source = "source" if unsigned in ("source", "both") else None
    result = "result" if unsigned in ("result", "both") else None

    def body(v: ir.Value) -> ir.Value:
        f = _decode(v, table) if table is not None else emit.convert(v, emit.f32(), source)
        if str(to) == "f8E8M0FNU":
            return _encode_e8m0(f, to, rounding or "up")
        if to_fmt is not None:
            return _encode(f, to, to_fmt)
        return emit.convert(f, to, result)

    return emit.map_elementwise([x], to, body, emit.sizes(x))


__all__ = ["FORMATS", "convert_tensor", "format_of", "involves"]
