"""ATen elementwise ops, casts, reductions, softmax and tensor creation as MIR ops.

Binary ops compute in the node's result type (torch's type promotion, read from the
program): both operands are cast to it, a Python number becomes a 0-d constant of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.dialects.builder import HirValue
from rlx.importers.dims import is_static
from rlx.importers.torch_export.convert import Op, Value, converter, rlx_dtype
from rlx.ir.types import DType

BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max",
          "minimum": "min", "max": "max", "min": "min", "pow": "pow", "rsub": "sub",
          "fmod": "rem", "remainder": "rem"}
"""``max`` / ``min``: their ``other`` overload, of two tensors (MPNet's relative-position
buckets); the overloads that reduce are refused by name."""
COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
UNARY = {"relu": "relu", "relu_": "relu", "silu": "silu", "silu_": "silu",
         "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt",
         "rsqrt": "rsqrt", "abs": "abs", "sin": "sin", "cos": "cos", "erf": "erf",
         "round": "round", "softplus": "softplus", "tan": "tan", "atan": "atan",
         "floor": "floor", "ceil": "ceil", "asin": "asin", "acos": "acos", "sinh": "sinh",
         "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
BITWISE = {"logical_and": "and", "bitwise_and": "and", "__and__": "and",
           "logical_or": "or", "bitwise_or": "or", "__or__": "or",
           "logical_xor": "xor", "bitwise_xor": "xor", "__xor__": "xor",
           "bitwise_left_shift": "shl", "__lshift__": "shl",
           "bitwise_right_shift": "shr", "__rshift__": "shr"}


def operand(op: Op, v: Any, source: Any, dtype: DType) -> HirValue:
    """A binary op's operand in the compute type ``dtype``."""
    if isinstance(v, bool | int | float):
        return op.h.constant(op.scalar(v, dtype), dtype)
    if not isinstance(v, HirValue | np.ndarray) and not is_static(v):
        return op.cast(op.sizes.scalar(v, DType.I64, op.fail), dtype)
    return op.cast(op.as_tensor(v, source), dtype)


def compute_dtype(op: Op, *sources: Any) -> DType:
    """The type torch computes a comparison or logical op in (its operands promoted)."""
    dtypes = [op.g.dtype(s) for s in sources if hasattr(s, "meta")]
    found = [d for d in dtypes if d is not None]
    if not found:
        return DType.F32
    out = found[0]
    for d in found[1:]:
        out = torch.promote_types(out, d)
    if not out.is_floating_point and any(isinstance(s, float) for s in sources):
        out = torch.float32
    return rlx_dtype(out, op.fail)


@converter(*BINARY)
def convert_binary(op: Op) -> Value:
    name = op.name
    if name in ("max", "min") and getattr(op.node.target, "_overloadname", "") != "other":
        op.fail(f"{op.node.target}: only the elementwise form (two tensors) is supported; "
                f"torch.a{name} reduces")
    dtype = op.out_dtype()
    a_src, b_src = op.raw(0, "self"), op.raw(1, "other")
    a = operand(op, op.value(a_src), a_src, dtype)
    b = operand(op, op.value(b_src), b_src, dtype)
    alpha = op.raw(2, "alpha", op.node.kwargs.get("alpha", 1))
    if name in ("add", "sub", "rsub") and alpha != 1:
        b = op.mir("binary", [b, op.h.constant(op.scalar(alpha, dtype), dtype)], kind="mul")
    if name == "rsub":
        a, b = b, a
    if name == "div":
        mode = op.node.kwargs.get("rounding_mode")
        if mode is not None:
            op.fail(f"rounding_mode '{mode}' is not supported (true division only)")
    if name == "pow" and isinstance(op.value(b_src), int | float) and op.value(b_src) == 2:
        return op.mir("binary", [a, a], kind="mul")
    y = op.mir("binary", [a, b], kind=BINARY[name])
    return _floored(op, y, b, dtype) if name == "remainder" else y


def _floored(op: Op, r: HirValue, b: HirValue, dtype: DType) -> HirValue:
    """``torch.remainder`` (the sign of the divisor, Python's ``%``) from C's remainder
    ``r``: plus ``b`` where ``r`` is not 0 and its sign differs from ``b``'s."""
    zero = op.h.constant(op.scalar(0, dtype), dtype)
    differ = op.mir("compare", [op.mir("compare", [r, zero], kind="lt"),
                                op.mir("compare", [b, zero], kind="lt")], kind="ne")
    fix = op.mir("where", [op.mir("compare", [r, zero], kind="ne"), differ, False])
    return op.mir("binary", [r, op.mir("where", [fix, b, zero])], kind="add")


@converter(*COMPARE)
def convert_compare(op: Op) -> Value:
    a_src, b_src = op.raw(0, "self"), op.raw(1, "other")
    dtype = compute_dtype(op, a_src, b_src)
    a = operand(op, op.value(a_src), a_src, dtype)
    b = operand(op, op.value(b_src), b_src, dtype)
    return op.mir("compare", [a, b], kind=COMPARE[op.name])


def as_bool(op: Op, v: Any, source: Any) -> HirValue:
    t = operand(op, v, source, DType.I1) if isinstance(v, bool) else op.as_tensor(v, source)
    if t.dtype == DType.I1:
        return t
    return op.mir("compare", [t, op.h.constant(op.scalar(0, t.dtype), t.dtype)], kind="ne")


@converter(*BITWISE)
def convert_bitwise(op: Op) -> Value:
    """Logical ops on booleans (``logical_*`` of any type reads them as booleans); bitwise
    ops and shifts on integers, with torch's promotion (``>>`` of a signed type is
    arithmetic, of ``uint8`` logical)."""
    name, kind = op.name, BITWISE[op.name]
    a_src, b_src = op.raw(0, "self"), op.raw(1, "other")
    if name.startswith("logical") or op.g.dtype(op.node) == torch.bool:
        if kind in ("shl", "shr"):
            op.fail("shifts of booleans are not supported")
        a, b = as_bool(op, op.value(a_src), a_src), as_bool(op, op.value(b_src), b_src)
        return op.mir("binary", [a, b], kind=kind)
    dtype = op.out_dtype()
    if dtype.is_float:
        op.fail(f"{name} of {dtype}: bitwise ops take integers or booleans")
    if kind == "shr" and op.g.dtype(op.node) == torch.uint8:
        kind = "ushr"
    a = operand(op, op.value(a_src), a_src, dtype)
    b = operand(op, op.value(b_src), b_src, dtype)
    return op.mir("binary", [a, b], kind=kind)


@converter("logical_not", "bitwise_not")
def convert_not(op: Op) -> Value:
    if op.name == "bitwise_not" and op.g.dtype(op.node) != torch.bool:
        dtype = op.out_dtype()
        if dtype.is_float:
            op.fail(f"bitwise_not of {dtype}: bitwise ops take integers or booleans")
        x = op.cast(op.tensor(0), dtype)
        return op.mir("binary", [x, op.h.constant(op.scalar(-1, dtype), dtype)], kind="xor")
    x = as_bool(op, op.arg(0, "self"), op.raw(0, "self"))
    return op.mir("compare", [x, op.h.constant(np.asarray(False), DType.I1)], kind="eq")


WHERE_ARGS = {"where": ((0, "condition"), (1, "self"), (2, "other")),
              "masked_fill": ((1, "mask"), (2, "value"), (0, "self"))}
"""(condition, value where true, value where false) of each select: ``x.masked_fill(mask,
value)`` (DeBERTa's attention) is ``where(mask, value, x)``."""


@converter(*WHERE_ARGS)
def convert_where(op: Op) -> Value:
    dtype = op.out_dtype()
    (ci, cn), (ai, an), (bi, bn) = WHERE_ARGS[op.name]
    cond = as_bool(op, op.arg(ci, cn), op.raw(ci, cn))
    a = operand(op, op.arg(ai, an), op.raw(ai, an), dtype)
    b = operand(op, op.arg(bi, bn), op.raw(bi, bn), dtype)
    return op.mir("where", [cond, a, b])


@converter(*UNARY, "gelu", "neg", "reciprocal")
def convert_unary(op: Op) -> Value:
    name = op.name
    dtype = op.out_dtype()
    x = op.cast(op.tensor(0), dtype)
    if name == "neg":
        if dtype.is_float:
            return op.mir("activation", [x], kind="neg")
        return op.mir("binary", [op.h.constant(op.scalar(0, dtype), dtype), x], kind="sub")
    if name == "reciprocal":
        return op.mir("binary", [op.h.constant(op.scalar(1, dtype), dtype), x], kind="div")
    if name == "abs" and not dtype.is_float:  # MPNet's relative-position buckets
        zero = op.h.constant(op.scalar(0, dtype), dtype)
        negative = op.mir("compare", [x, zero], kind="lt")
        return op.mir("where", [negative, op.mir("binary", [zero, x], kind="sub"), x])
    if name == "gelu":
        approx = op.node.kwargs.get("approximate", op.raw(1, "approximate", "none"))
        return op.mir("activation", [x], kind="gelu_approx" if approx == "tanh" else "gelu")
    if name in ("floor", "ceil", "round") and not dtype.is_float:
        return x  # whole already (torch keeps the integer type)
    return op.mir("activation", [x], kind=UNARY[name])


@converter("clamp", "clamp_min", "clamp_max", "hardtanh")
def convert_clamp(op: Op) -> Value:
    name = op.name
    dtype = op.out_dtype()
    y = op.cast(op.tensor(0), dtype)
    low = op.arg(1, "min", -1.0 if name == "hardtanh" else None)
    high = op.arg(2, "max", 1.0 if name == "hardtanh" else None)
    if name == "clamp_max":
        low, high = None, low
    for bound, kind in ((low, "max"), (high, "min")):
        if bound is not None:
            y = op.mir("binary", [y, operand(op, bound, None, dtype)], kind=kind)
    return y


@converter("hardswish", "hardsigmoid")
def convert_hard_activation(op: Op) -> Value:
    """``hardsigmoid(x) = clamp(x / 6 + 1 / 2, 0, 1)``; ``hardswish(x) = x hardsigmoid(x)``
    (MobileNetV3's activations)."""
    dtype = op.out_dtype()
    x = op.cast(op.tensor(0), dtype)

    def c(v: float) -> HirValue:
        return op.h.constant(op.scalar(v, dtype), dtype)

    gate = op.mir("binary", [op.mir("binary", [x, c(1 / 6)], kind="mul"), c(0.5)], kind="add")
    gate = op.mir("binary", [op.mir("binary", [gate, c(0.0)], kind="max"), c(1.0)], kind="min")
    return gate if op.name == "hardsigmoid" else op.mir("binary", [x, gate], kind="mul")


@converter("to", "_to_copy", "type_as")
def convert_cast(op: Op) -> Value:
    return op.cast(op.tensor(0), op.out_dtype())


# -- reductions ----------------------------------------------------------------------------


def _axes(op: Op, rank: int, dims: Any) -> list[int]:
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return [int(d) % rank for d in dims]


@converter("mean", "sum", "amax", "amin", "prod")
def convert_reduce(op: Op) -> Value:
    name = op.name
    x = op.tensor(0)
    dtype = op.out_dtype()
    x = op.cast(x, dtype)
    axes = _axes(op, len(x.shape), op.arg(1, "dim", None))
    keep = bool(op.arg(2, "keepdim", False))
    kind = {"amax": "max", "amin": "min"}.get(name, name)
    return op.mir("reduce", [x], kind=kind, axes=axes, keep_dim=keep)


@converter("cumsum")
def convert_cumsum(op: Op) -> Value:
    """``torch.cumsum`` (in the result's type: a bool or int mask sums as i64), as
    ``rlx_mir.cumsum``: RoBERTa's position ids count the mask's tokens this way."""
    x = op.cast(op.tensor(0), op.out_dtype())
    return op.mir("cumsum", [x], axis=int(op.arg(1, "dim")) % len(x.shape), exclusive=False)


@converter("softmax", "_softmax", "log_softmax", "_log_softmax")
def convert_softmax(op: Op) -> Value:
    name = op.name
    x = op.cast(op.tensor(0), op.out_dtype())
    y = op.mir("softmax", [x], axis=int(op.arg(1, "dim")) % len(x.shape))
    return op.mir("activation", [y], kind="log") if "log" in name else y


# -- creation --------------------------------------------------------------------------------


def _fill(op: Op, value: float | int | bool) -> Value:
    dtype = op.out_dtype()
    dims = op.out_dims()
    scalar = op.scalar(value, dtype)
    if all(is_static(d) for d in dims):
        return np.full([int(d) for d in dims], scalar, dtype=scalar.dtype)
    return op.sizes.full(scalar, dims, op.fail)


@converter("zeros", "new_zeros", "zeros_like")
def convert_zeros(op: Op) -> Value:
    return _fill(op, 0)


@converter("ones", "new_ones", "ones_like")
def convert_ones(op: Op) -> Value:
    return _fill(op, 1)


@converter("full", "new_full", "full_like")
def convert_full(op: Op) -> Value:
    name = op.name
    value = op.arg(1 if name in ("full", "full_like") else 2, "fill_value")
    if not isinstance(value, bool | int | float):
        op.fail(f"fill value {value!r} must be a number")
    return _fill(op, value)


@converter("arange")
def convert_arange(op: Op) -> Value:
    args = [op.value(a) for a in op.node.args]
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args[:2], args[2] if len(
        args) > 2 else 1)
    dtype = op.out_dtype()
    if all(is_static(v) for v in (start, end, step)):
        return np.arange(int(start), int(end), int(step)).astype(op.scalar(0, dtype).dtype)
    if not (is_static(start) and is_static(step) and int(step) == 1):
        op.fail("arange with a dynamic start or a step other than 1")
    n = op.out_dims()[0]
    line = op.sizes.iota(n, DType.I64, op.fail)
    if int(start):
        line = op.mir("binary", [line, op.h.constant(np.asarray(int(start)), DType.I64)],
                      kind="add")
    return op.cast(line, dtype)


__all__ = ["as_bool", "compute_dtype", "operand"]
