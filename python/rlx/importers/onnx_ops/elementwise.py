"""ONNX elementwise ops: arithmetic, math functions, comparisons, logic and bitwise ops,
``Where``, ``Cast``, ``Clip``, ``Identity``; and their import-time folders (the activations
are :mod:`rlx.importers.onnx_ops.activations`).

Everything becomes ``rlx_mir.activation`` / ``binary`` / ``compare`` / ``where`` /
``cast`` with numpy broadcasting, which is ONNX's multidirectional broadcasting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy
from onnx import helper

from rlx.dialects.builder import HirValue
from rlx.importers.dims import normalize, tidy
from rlx.importers.onnx_ops.narrow import cast_to_narrow
from rlx.importers.onnx_ops.registry import (
    NARROW_ONNX,
    ONNX_DTYPES,
    UNSIGNED,
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    np_dtype,
    onnx_dtype_name,
    why_unsupported,
)
from rlx.ir.dtypes import Narrow
from rlx.ir.types import DType

BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
COMPARE = {"Equal": "eq", "Less": "lt", "Greater": "gt", "LessOrEqual": "le",
           "GreaterOrEqual": "ge"}
FLOAT_UNARY = {"Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Tanh": "tanh",
               "Sigmoid": "sigmoid", "Erf": "erf", "Sin": "sin", "Cos": "cos", "Tan": "tan",
               "Atan": "atan", "Round": "round", "Floor": "floor", "Ceil": "ceil",
               "Asin": "asin", "Acos": "acos", "Sinh": "sinh", "Cosh": "cosh",
               "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh"}


def float_input(node: Node, i: int = 0) -> HirValue:
    x = node.tensor(i)
    if not x.dtype.is_float:
        node.fail(f"input {i} is {x.dtype}; rlx computes {node.op_type} on float tensors")
    return x


# --------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------


@converter(*BINARY, since=7)
def convert_binary(node: Node) -> list[Value]:
    kind = "udiv" if node.op_type == "Div" and node.unsigned(0) else BINARY[node.op_type]
    return [node.mir("binary", [node.tensor(0), node.tensor(1)], kind=kind)]


@converter("Mod", since=10)
def convert_mod(node: Node) -> list[Value]:
    """``fmod = 1``: C's remainder (the sign of A), ``binary rem``. ``fmod = 0``: the sign
    of B, Python's ``%``: the remainder plus B where it is not 0 and its sign differs from
    B's."""
    a, b = node.tensor(0), node.tensor(1)
    if a.dtype == DType.F64:
        node.fail("Mod of float64: IREE 3.13 lowers an f64 remainder to a libm call its "
                  "executables do not link (f32 and integers are supported)")
    if node.unsigned(0):  # no signs: both modes are the remainder
        return [node.mir("binary", [a, b], kind="urem")]
    r = node.mir("binary", [a, b], kind="rem")
    if node.attr("fmod", 0):
        return [r]
    zero = node.scalar(0, a)
    differ = node.mir("compare", [node.mir("compare", [r, zero], kind="lt"),
                                  node.mir("compare", [b, zero], kind="lt")], kind="ne")
    fix = node.mir("where", [node.mir("compare", [r, zero], kind="ne"), differ,
                             node.scalar(False, differ)])
    return [node.mir("binary", [r, node.mir("where", [fix, b, zero])], kind="add")]


@converter("Pow", since=7)
def convert_pow(node: Node) -> list[Value]:
    """Float bases: ``binary pow`` (the exponent converted to the base's type). Integer
    bases are raised in f32 and rounded back (exact while results fit f32's 24 bits)."""
    base = node.tensor(0)
    compute = base.dtype if base.dtype.is_float else DType.F32
    exponent = node.cast(node.tensor(1), compute, "source" if node.unsigned(1) else None)
    if base.dtype.is_float:
        return [node.mir("binary", [base, exponent], kind="pow")]
    side = "source" if node.unsigned(0) else None
    y = node.mir("binary", [node.cast(base, compute, side), exponent], kind="pow")
    return [node.cast(node.mir("activation", [y], kind="round"), base.dtype,
                      "result" if side else None)]


@converter("Max", "Min", "Sum", "Mean", since=8)
def convert_variadic(node: Node) -> list[Value]:
    kind = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}[node.op_type]
    u = "u" if node.unsigned(0) else ""
    if u and kind in ("max", "min"):
        kind = u + kind
    values = [node.tensor(i) for i in range(node.n_inputs) if node.has(i)]
    y = values[0]
    for v in values[1:]:
        y = node.mir("binary", [y, v], kind=kind)
    if node.op_type == "Mean" and len(values) > 1:
        y = node.mir("binary", [y, node.scalar(len(values), y)], kind=u + "div")
    return [y]


@converter("Reciprocal")
def convert_reciprocal(node: Node) -> list[Value]:
    x = float_input(node)
    return [node.mir("binary", [node.scalar(1.0, x), x], kind="div")]


@converter("Neg", "Abs")
def convert_sign_ops(node: Node) -> list[Value]:
    x = node.tensor(0)
    kind = node.op_type.lower()
    if kind == "abs" and node.unsigned(0):
        return [x]
    if x.dtype.is_float:
        return [node.mir("activation", [x], kind=kind)]
    negated = node.mir("binary", [node.scalar(0, x), x], kind="sub")
    if kind == "neg":
        return [negated]
    negative = node.mir("compare", [x, node.scalar(0, x)], kind="lt")
    return [node.mir("where", [negative, negated, x])]


# --------------------------------------------------------------------------------------
# Math functions and activations
# --------------------------------------------------------------------------------------


@converter(*FLOAT_UNARY)
def convert_unary(node: Node) -> list[Value]:
    return [node.mir("activation", [float_input(node)], kind=FLOAT_UNARY[node.op_type])]


@converter("Sign")
def convert_sign(node: Node) -> list[Value]:
    x = node.tensor(0)
    one, zero, minus = (node.scalar(v, x) for v in (1, 0, -1))
    negative = node.mir("where", [node.mir("compare", [x, zero], kind="lt"), minus, zero])
    return [node.mir("where", [node.mir("compare", [x, zero], kind="gt"), one, negative])]


@converter("IsNaN", "IsInf", since=9)
def convert_is_nan(node: Node) -> list[Value]:
    x = float_input(node)
    if node.op_type == "IsNaN":
        return [node.mir("compare", [x, x], kind="ne")]
    pos = node.mir("compare", [x, node.scalar(float("inf"), x)], kind="eq")
    neg = node.mir("compare", [x, node.scalar(float("-inf"), x)], kind="eq")
    want_pos, want_neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if want_pos and want_neg:
        return [node.mir("where", [pos, pos, neg])]
    if want_pos or want_neg:
        return [pos if want_pos else neg]
    never = node.scalar(False, DType.I1)
    return [node.mir("where", [pos, never, never])]


@converter("Identity")
def convert_identity(node: Node) -> list[Value]:
    v = node.value(0)
    if v is None:
        node.fail("input 0 is required")
    return [v]


@converter("Dropout")
def convert_dropout(node: Node) -> list[Value]:
    """Inference: the input itself, and an all-true mask when asked for."""
    training = node.maybe_const(2) if node.has(2) else np.asarray(False)
    if training is None or bool(training):
        node.fail("training mode (random masks) is not supported; rlx imports inference "
                  "graphs")
    outs: list[Value] = [node.value(0) if node.value(0) is not None else node.tensor(0)]
    if len(node.proto.output) > 1 and node.proto.output[1]:
        t = node.info(0)
        if not t.is_static:
            node.fail("the mask output of a dynamically shaped input is not supported")
        outs.append(np.ones(t.shape, dtype=bool))
    return outs


# --------------------------------------------------------------------------------------
# Comparisons, logic, selection
# --------------------------------------------------------------------------------------


@converter(*COMPARE, since=7)
def convert_compare(node: Node) -> list[Value]:
    kind = COMPARE[node.op_type]
    if node.unsigned(0) and kind not in ("eq", "ne"):
        kind = "u" + kind
    return [node.mir("compare", [node.tensor(0), node.tensor(1)], kind=kind)]


@converter("Not")
def convert_not(node: Node) -> list[Value]:
    x = node.tensor(0)
    return [node.mir("compare", [x, node.scalar(False, x)], kind="eq")]


@converter("And", "Or", "Xor", since=7)
def convert_logic(node: Node) -> list[Value]:
    a, b = node.tensor(0), node.tensor(1)
    if node.op_type == "Xor":
        return [node.mir("compare", [a, b], kind="ne")]
    if node.op_type == "And":
        return [node.mir("where", [a, b, node.scalar(False, a)])]
    return [node.mir("where", [a, node.scalar(True, a), b])]


BITWISE = {"BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor"}


@converter(*BITWISE, since=18)
def convert_bitwise(node: Node) -> list[Value]:
    return [node.mir("binary", [node.tensor(0), node.tensor(1)], kind=BITWISE[node.op_type])]


@converter("BitwiseNot", since=18)
def convert_bitwise_not(node: Node) -> list[Value]:
    x = node.tensor(0)
    return [node.mir("binary", [x, node.scalar(-1, x)], kind="xor")]


@converter("BitShift", since=11)
def convert_bit_shift(node: Node) -> list[Value]:
    """``shl``; right: ``ushr`` of unsigned integers, ``shr`` (arithmetic) of signed ones
    (BitShift-28). A count of the width or more, or a negative one, shifts every bit out:
    0, or -1 for a right shift of a negative value, as BitShift-28 specifies."""
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        node.fail(f"attribute direction = {direction!r}: expected 'LEFT' or 'RIGHT'")
    kind = "shl" if direction == "LEFT" else "ushr" if node.unsigned(0) else "shr"
    return [node.mir("binary", [node.tensor(0), node.tensor(1)], kind=kind)]


@converter("Where", since=9)
def convert_where(node: Node) -> list[Value]:
    return [node.mir("where", [node.tensor(0), node.tensor(1), node.tensor(2)])]


@converter("Clip")
def convert_clip(node: Node) -> list[Value]:
    """``min(max(x, lo), hi)`` (so ``hi`` wins when ``lo > hi``, as in ONNX)."""
    x = node.tensor(0)
    if node.version < 11:
        lo, hi = node.attr("min"), node.attr("max")
        bounds: list[Value | None] = [None if lo is None else node.scalar(lo, x),
                                      None if hi is None else node.scalar(hi, x)]
    else:
        bounds = [node.value(1), node.value(2)]
    y = x
    u = "u" if node.unsigned(0) else ""
    for bound, kind in zip(bounds, (u + "max", u + "min"), strict=True):
        if bound is not None:
            y = node.mir("binary", [y, node.as_tensor(bound)], kind=kind)
    return [y]


# --------------------------------------------------------------------------------------
# Casts
# --------------------------------------------------------------------------------------


def target_dtype(node: Node, elem_type: int) -> DType:
    dtype = ONNX_DTYPES.get(elem_type)
    name = onnx_dtype_name(elem_type)
    if dtype is None:
        node.fail(f"cast to {name}: {why_unsupported(name)}")
    return dtype


FLOAT8_MAX = {DType.F8E4M3FN: 448.0, DType.F8E4M3FNUZ: 240.0, DType.F8E5M2: 57344.0,
              DType.F8E5M2FNUZ: 57344.0}
"""The largest finite value of each 8-bit float (ONNX's ``saturate`` clamps to it)."""


def cast_to(node: Node, x: HirValue, dtype: DType, unsigned_result: bool = False
            ) -> HirValue:
    """ONNX cast: to bool is ``x != 0``; float to int truncates; floats round to nearest;
    unsigned integers (input 0's type, ``unsigned_result``) convert as unsigned. To an
    8-bit float with ``saturate`` (the default) values beyond its range (inf included)
    become its largest finite value of their sign, NaN stays NaN; without, they round as
    IEEE does (to inf, or NaN for the types without inf)."""
    if x.dtype.is_float8:  # widened to f32 (exactly), then converted from there
        x = node.cast(x, DType.F32)
        if dtype in (DType.F32, *FLOAT8_MAX):
            return node.cast(x, dtype)
    elif dtype.is_float8 and not x.dtype.is_float:
        x = cast_to(node, x, DType.F32)
    if dtype == DType.F8E8M0FNU:  # a power of two: ONNX's round_mode; saturating
        if not node.attr("saturate", 1):
            node.fail("cast to float8_e8m0fnu with saturate = 0: rlx casts to E8M0 "
                      "saturating (a finite value at most 2^127)")
        mode = node.attr("round_mode", "up")
        if mode not in ("up", "down", "nearest"):
            node.fail(f"round_mode {mode!r}: expected up, down or nearest")
        return node.mir("cast", [node.cast(x, DType.F32)], to=str(dtype), round=mode)
    if dtype.is_float8:
        if node.attr("saturate", 1):
            top = FLOAT8_MAX[dtype]
            x = node.mir("binary", [node.mir("binary", [x, node.scalar(-top, x)],
                                             kind="max"), node.scalar(top, x)], kind="min")
        return node.cast(x, dtype)
    if dtype == DType.I1 and x.dtype != DType.I1:
        return node.mir("compare", [x, node.scalar(0, x)], kind="ne")
    source = node.unsigned(0) and x.dtype != DType.I1
    result = unsigned_result and dtype != DType.I1
    side = {(True, True): "both", (True, False): "source", (False, True): "result"}.get(
        (source, result))
    return node.cast(x, dtype, side)


def _cast_to_narrow(node: Node, x: HirValue, to: Narrow) -> HirValue:
    wide = to.is_float and not x.dtype.is_float  # as ONNX casts it (unsigned or not)
    return cast_to_narrow(node, x, to, cast_to(node, x, DType.F32) if wide else None)


@converter("Cast", since=6)
def convert_cast(node: Node) -> list[Value]:
    to = node.attr("to")
    if to in NARROW_ONNX:
        return [_cast_to_narrow(node, node.tensor(0), NARROW_ONNX[to])]
    return [cast_to(node, node.tensor(0), target_dtype(node, to), to in UNSIGNED)]


@converter("CastLike", since=15)
def convert_cast_like(node: Node) -> list[Value]:
    """Only the element type of input 1 matters: a constant input 0 stays a constant."""
    dtype, narrow = node.info(1).dtype, node.narrow(1)
    const = node.maybe_const(0)
    if narrow is not None:
        return [const.astype(narrow.numpy) if const is not None else
                _cast_to_narrow(node, node.tensor(0), narrow)]
    if const is not None:
        if node.unsigned(1):  # numpy's own unsigned type, as the Cast folder gives
            return [const.astype(f"u{np_dtype(dtype).itemsize}")]
        return [const.astype(np_dtype(dtype)) if dtype != DType.I1 else const != 0]
    return [cast_to(node, node.tensor(0), dtype, node.unsigned(1))]


# --------------------------------------------------------------------------------------
# Folders (import-time numpy, ONNX semantics)
# --------------------------------------------------------------------------------------


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C semantics, as ONNX's integer Div)."""
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(np.result_type(a, b))


def _numeric(*arrays: np.ndarray | None) -> bool:
    return all(a is not None and not is_symbolic(a) for a in arrays)


def _sizes(*arrays: np.ndarray | None) -> bool:
    """Integer arrays one of which holds dynamic sizes (shape arithmetic)."""
    return all(a is not None and (is_symbolic(a) or a.dtype.kind in "iu") for a in arrays
               ) and any(is_symbolic(a) for a in arrays)  # type: ignore[arg-type]


def _size_op(fn: Callable[[Any, Any], Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` elementwise over size arrays (numpy broadcasting), as sympy expressions."""
    shapes = np.broadcast_shapes(*(a.shape for a in arrays))
    views = [np.broadcast_to(a, shapes).reshape(-1) for a in arrays]
    out = np.empty(int(np.prod(shapes)), dtype=object)
    for i in range(out.size):
        out[i] = fn(*(_as_size(v[i]) for v in views))
    return tidy(out.reshape(shapes))


def _as_size(v: object) -> object:
    return int(v) if isinstance(v, np.integer | int) else v


SIZE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a // b, "Max": lambda a, b: sympy.Max(a, b),
    "Min": lambda a, b: sympy.Min(a, b), "Mod": lambda a, b: a % b}


@folder(*BINARY)
def fold_binary(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    a, b = inputs[0], inputs[1]
    if _sizes(a, b):
        return [_size_op(SIZE_OPS[node.op_type], a, b)]  # type: ignore[arg-type]
    if not _numeric(a, b) or a.dtype != b.dtype:
        return None
    if node.op_type == "Div" and a.dtype.kind in "iu":
        return [_int_div(a, b)]
    fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
    with np.errstate(all="ignore"):
        return [np.asarray(fn[node.op_type](a, b)).astype(a.dtype)]


@folder("Mod")
def fold_mod(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """Shape arithmetic (Swin's window padding: ``(w - h % w) % w`` of a static size) and
    constants: ``fmod = 0`` Python's ``%`` (the sign of B), ``fmod = 1`` C's (of A)."""
    a, b = inputs[0], inputs[1]
    fmod = node.attr("fmod", 0)
    if _sizes(a, b) and not fmod:
        return [_size_op(SIZE_OPS["Mod"], a, b)]  # type: ignore[arg-type]
    if not _numeric(a, b) or a.dtype != b.dtype or (a.dtype.kind in "iu" and not np.all(b)):
        return None
    with np.errstate(all="ignore"):
        return [np.asarray((np.fmod if fmod else np.mod)(a, b)).astype(a.dtype)]


@folder("Pow")
def fold_pow(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    a, b = inputs[0], inputs[1]
    if not _numeric(a, b):
        return None
    with np.errstate(all="ignore"):
        return [np.power(a, b.astype(a.dtype)).astype(a.dtype)]


FOLD_UNARY = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Neg": np.negative,
              "Abs": np.abs, "Sin": np.sin, "Cos": np.cos, "Floor": np.floor,
              "Ceil": np.ceil, "Reciprocal": np.reciprocal, "Tanh": np.tanh,
              "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype))}


@folder(*FOLD_UNARY)
def fold_unary(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if node.op_type in ("Neg", "Abs") and x is not None and _sizes(x):
        # shape arithmetic: Funnel's and XLNet's relative positions run from s down to -s
        fn = {"Neg": lambda a: -a, "Abs": sympy.Abs}[node.op_type]
        return [_size_op(lambda a: normalize(fn(a)), x)]
    if not _numeric(x):
        return None
    if node.op_type == "Reciprocal" and x.dtype.kind != "f":
        return None
    with np.errstate(all="ignore"):
        return [np.asarray(FOLD_UNARY[node.op_type](x)).astype(x.dtype)]


def _decided(rel: object) -> object:
    """A comparison of sizes: True / False when sympy decides it, else raises."""
    if isinstance(rel, bool | np.bool_) or rel in (sympy.true, sympy.false):
        return bool(rel)
    raise _Undecided


class _Undecided(Exception):
    pass


SIZE_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Equal": lambda a, b: sympy.Eq(a, b), "Less": lambda a, b: sympy.Lt(a, b),
    "Greater": lambda a, b: sympy.Gt(a, b), "LessOrEqual": lambda a, b: sympy.Le(a, b),
    "GreaterOrEqual": lambda a, b: sympy.Ge(a, b)}


@folder(*COMPARE, "Not", "And", "Or", "Xor")
def fold_logic(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if node.op_type in SIZE_COMPARE and _sizes(inputs[0], inputs[1]):
        compare = SIZE_COMPARE[node.op_type]
        try:
            out = _size_op(lambda a, b: _decided(compare(a, b)), inputs[0], inputs[1])  # type: ignore[arg-type]
        except _Undecided:
            return None  # compared when the module runs
        return [out.astype(bool)]
    if not _numeric(*inputs[:1 if node.op_type == "Not" else 2]):
        return None
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater,
          "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal,
          "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}
    if node.op_type == "Not":
        return [np.logical_not(inputs[0])]
    return [np.asarray(fn[node.op_type](inputs[0], inputs[1]))]


@folder("Where")
def fold_where(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    c, a, b = inputs[:3]
    if c is None or a is None or b is None or is_symbolic(c):
        return None
    out = np.where(c, a, b)
    return [out if out.dtype == object or a.dtype == object else out.astype(a.dtype)]


@folder("Max", "Min", "Sum")
def fold_variadic(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if inputs and _sizes(*inputs):
        fn = SIZE_OPS["Add" if node.op_type == "Sum" else node.op_type]
        out = inputs[0]
        for x in inputs[1:]:
            out = _size_op(fn, out, x)  # type: ignore[arg-type]
        return [out]  # type: ignore[list-item]
    if not inputs or not _numeric(*inputs):
        return None
    fn = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}[node.op_type]
    out = inputs[0]
    for x in inputs[1:]:
        out = fn(out, x)
    return [np.asarray(out).astype(inputs[0].dtype)]


@folder("Identity")
def fold_identity(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    return [inputs[0]] if inputs[0] is not None else None


def _cast_array(x: np.ndarray, elem_type: int) -> np.ndarray | None:
    try:
        to = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        return None
    if is_symbolic(x):
        return x if to.kind in "iu" else None
    if to == np.bool_:
        return x != 0
    with np.errstate(all="ignore"):
        return (np.trunc(x) if x.dtype.kind == "f" and to.kind in "iu" else x).astype(to)


@folder("Cast")
def fold_cast(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is None:
        return None
    out = _cast_array(x, node.attr("to"))
    return None if out is None else [out]


@folder("CastLike")
def fold_cast_like(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, like = inputs[0], inputs[1]
    if x is None or like is None or is_symbolic(like):
        return None
    if is_symbolic(x):
        return [x] if like.dtype.kind in "iu" else None
    return [x.astype(like.dtype)]


__all__ = ["cast_to", "float_input", "np_dtype"]
