"""MIR elementwise ops: activation, binary, compare, where, cast."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import (
    ACTIVATIONS,
    BINARY_OPS,
    BITWISE_OPS,
    CAST_ROUND,
    CAST_UNSIGNED,
    COMPARE_OPS,
    DTYPE_NAMES,
    FLOAT_TYPES,
    UNSIGNED_BINARY_OPS,
    UNSIGNED_COMPARE_OPS,
    WORD_TYPES,
)
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, enum_attr
from rlx.ir.types import DType, TensorInfo


@MIR.op("activation", operands=["x"], attrs=[enum_attr("kind", ACTIVATIONS)])
def activation(c: Check) -> list[TensorInfo]:
    """Unary float function (``Op::Activation``), elementwise.

    Attribute ``kind``: ``gelu`` (exact, erf), ``gelu_approx`` (tanh form), ``silu``,
    ``relu``, ``sigmoid``, ``tanh``, ``exp``, ``log``, ``sqrt``, ``rsqrt``, ``neg``,
    ``abs``, ``sin``, ``cos``, ``tan``, ``atan``, ``round`` (half to even), ``erf``,
    ``softplus``, ``floor``, ``ceil``, ``asin``, ``acos``, ``sinh``, ``cosh``, ``asinh``,
    ``acosh``, ``atanh`` (NaN outside their domain, as C's).

    Example::

        %y = "rlx_mir.activation"(%x) {kind = "silu"} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    """
    info = c.dtype("x", FLOAT_TYPES)
    checks.activation_dtype(c, "x", "kind")
    return [info]


@MIR.op("binary", operands=["lhs", "rhs"], attrs=[enum_attr("kind", BINARY_OPS)])
def binary(c: Check) -> list[TensorInfo]:
    """Binary op with numpy broadcasting (``Op::Binary``): add, sub, mul, div, max, min, pow, rem;
    and, on integers read as unsigned, udiv, urem, umax, umin (a divisor of 0 reads as 1);
    on integers' bits, and, or, xor (i1 too), shl, shr, ushr (a count outside
    ``[0, bits)`` shifts every bit out).

    Both operands have one element type (no promotion); ints allowed except for ``pow``.

    Example::

        %y = "rlx_mir.binary"(%a, %b) {kind = "add"}
            : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    """
    dtype = c.same_dtype("lhs", "rhs")
    checks.not_float8(c, "lhs")
    if c.attr("kind") in UNSIGNED_BINARY_OPS or c.attr("kind") in BITWISE_OPS[3:]:
        c.dtype("lhs", WORD_TYPES)
    elif c.attr("kind") in BITWISE_OPS:
        c.dtype("lhs", WORD_TYPES | {DType.I1})
    elif c.attr("kind") == "pow" or dtype == DType.I1:
        c.dtype("lhs", FLOAT_TYPES)
    if c.attr("kind") == "rem" and dtype == DType.F64:  # a libm fmod IREE does not link
        c.fail("attribute 'kind'", "a binary op IREE computes in f64 (rem is not: IREE "
               "3.13 lowers it to a libm call its executables do not link); cast to f32",
               "rem of f64")
    return [TensorInfo(checks.broadcast(c, ["lhs", "rhs"]), dtype)]


@MIR.op("compare", operands=["lhs", "rhs"], attrs=[enum_attr("kind", COMPARE_OPS)])
def compare(c: Check) -> list[TensorInfo]:
    """Comparison with numpy broadcasting (``Op::Compare``), giving an ``i1`` tensor.

    Attribute ``kind``: eq, ne, lt, le, gt, ge; ult, ule, ugt, uge on integers read as
    unsigned.

    Example::

        %m = "rlx_mir.compare"(%a, %b) {kind = "lt"}
            : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    """
    c.same_dtype("lhs", "rhs")
    checks.not_float8(c, "lhs")
    if c.attr("kind") in UNSIGNED_COMPARE_OPS:
        c.dtype("lhs", WORD_TYPES)
    return [TensorInfo(checks.broadcast(c, ["lhs", "rhs"]), DType.I1)]


@MIR.op("where", operands=["cond", "on_true", "on_false"])
def where(c: Check) -> list[TensorInfo]:
    """Select ``cond ? on_true : on_false`` with numpy broadcasting (``Op::Where``).

    ``cond`` is ``i1``; the two branches share an element type.

    Example::

        %y = "rlx_mir.where"(%m, %a, %b)
            : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    """
    c.dtype("cond", {DType.I1})
    dtype = c.same_dtype("on_true", "on_false")
    return [TensorInfo(checks.broadcast(c, ["cond", "on_true", "on_false"]), dtype)]


@MIR.op("cast", operands=["x"], attrs=[
    enum_attr("to", DTYPE_NAMES, "target element type"),
    enum_attr("unsigned", CAST_UNSIGNED, "whose integers are unsigned: the source's, the "
              "result's or both (absent: neither)", optional=True),
    enum_attr("round", CAST_ROUND, "to f8E8M0FNU: up (absent), down or nearest",
              optional=True)])
def cast(c: Check) -> list[TensorInfo]:
    """Element type conversion (``Op::Cast``): float <-> float rounds to nearest even,
    float -> int truncates toward zero, int -> float rounds, ``i1`` is 0 / 1. Integers
    are signed unless ``unsigned`` names their side: an unsigned source widens with zeros
    and converts to float as unsigned; a float converts to an unsigned result as unsigned
    (a value outside the result's range is undefined, as in C and ONNX). To ``f8E8M0FNU``
    (a power of two) the sign is dropped, ``round`` picks the power, a finite value
    saturates at 2^127, inf and NaN become NaN.

    Example::

        %y = "rlx_mir.cast"(%x) {to = "f16"} : (tensor<4xf32>) -> tensor<4xf16>
        %u = "rlx_mir.cast"(%b) {to = "f32", unsigned = "source"} : (tensor<4xi8>) -> tensor<4xf32>
    """
    to = DType.parse(c.attr("to"))
    side = c.attrs.get("unsigned")
    if side in ("source", "both"):
        c.dtype("x", WORD_TYPES)
    if side in ("result", "both") and to not in WORD_TYPES:
        want = "/".join(sorted(str(d) for d in WORD_TYPES))
        c.fail("attribute 'to'", f"an integer type {want} (unsigned = \"{side}\")", str(to))
    if c.attrs.get("round") is not None and to != DType.F8E8M0FNU:
        c.fail("attribute 'round'", "only with to = \"f8E8M0FNU\"", str(to))
    return [c["x"].with_dtype(to)]
