"""ONNX's quantized operators (ONNX Runtime's QOperator format, and the int8 models of the
ONNX Model Zoo): ``QLinearMatMul``, ``QLinearConv``, ``ConvInteger``.

From ONNX's operator specification (and its reference evaluator): the integer inputs minus
their zero points (per tensor; the weight's also per output channel) are multiplied and
summed in i32 (``rlx_mir.matmul`` / ``rlx_mir.conv`` on i32: exact, wrapping as i32's
do); ``QLinear*`` then requantize, ``y = saturate(round_half_even(acc * (a_scale b_scale
/ y_scale)) + y_zero_point)`` into the output zero point's type. The multiplier is computed
in f32 and applied to ``acc`` in f32 (ONNX's reference applies it in f64): the two differ
only where ``acc * multiplier`` lies within ~6e-8 of its size from a half, where the
rounding may then go the other way (one quantization step).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.conv import conv_nd
from rlx.importers.onnx_ops.quantize import (
    INTEGER_RANGES,
    _along,
    _elem_type,
    _saturate,
    _widened,
)
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.ir.types import DType


def _per(node: Node, v: Value, like: HirValue, axis: int | None, what: str) -> Value:
    """A scale or zero point against ``like``: one value, or (``axis`` given) a vector
    along ``axis`` (:func:`rlx.importers.onnx_ops.quantize._along`, which checks its
    length)."""
    if axis is None and int(np.prod(v.shape)) != 1:
        node.fail(f"{what} of shape {list(v.shape)}: expected a scalar")
    return _along(node, v, like, 0 if axis is None else axis % len(like.shape), 0, what)


def _centered(node: Node, i: int, zp: int | None, channel_axis: int | None = None
              ) -> HirValue:
    """Input ``i`` in i32 minus its zero point (input ``zp``; a vector is per
    ``channel_axis``)."""
    v = node.cast(node.tensor(i), DType.I32, "source" if node.unsigned(i) else None)
    if zp is None or not node.has(zp):
        return v
    z = _per(node, _widened(node, zp, DType.I32), v, channel_axis, f"input {zp} (zero point)")
    return node.mir("binary", [v, z], kind="sub")


def quantized(node: Node, scaled: HirValue, zero: int, like: int | None) -> HirValue:
    """``saturate(round_half_even(scaled) + zero)`` into the type of input ``zero`` (else
    input ``like``'s, else uint8): the QLinear ops' last step."""
    y = node.mir("activation", [scaled], kind="round")
    to = _elem_type(node, zero) if node.has(zero) else (
        _elem_type(node, like) if like is not None else TensorProto.UINT8)
    if to not in (TensorProto.UINT8, TensorProto.INT8):
        node.fail(f"output type {to}: QLinear ops write uint8 or int8")
    lo, hi = INTEGER_RANGES[to]  # type: ignore[index]
    z = _per(node, _widened(node, zero, DType.F32), y, None, f"input {zero} (zero point)") \
        if node.has(zero) else None
    return _saturate(node, y, z, lo, hi, to)  # type: ignore[arg-type]


def _requantize(node: Node, acc: HirValue, scales: tuple[int, int, int], zero: int,
                like: int, channel_axis: int | None = None, factor: float = 1.0
                ) -> HirValue:
    """``saturate(round(acc * factor s0 s1 / s2) + zero)`` into the type of input ``zero``
    (else input ``like``'s); ``s1`` may be per ``channel_axis``."""
    mult: Value = _widened(node, scales[0], DType.F32)
    if factor != 1.0:
        mult = mult * np.float32(factor) if isinstance(mult, np.ndarray) else node.mir(
            "binary", [mult, node.scalar(factor, mult)], kind="mul")
    for i, kind in ((scales[1], "mul"), (scales[2], "div")):
        s = _per(node, _widened(node, i, DType.F32), acc,
                 channel_axis if i == scales[1] else None, f"input {i} (scale)")
        if isinstance(mult, np.ndarray) and isinstance(s, np.ndarray):
            mult = (mult * s if kind == "mul" else mult / s).astype(np.float32)
        else:
            mult = node.mir("binary", [node.as_tensor(mult), node.as_tensor(s)], kind=kind)
    scaled = node.mir("binary", [node.cast(acc, DType.F32), node.as_tensor(mult)], kind="mul")
    return quantized(node, scaled, zero, like)


@converter("QLinearMatMul", since=10)
def convert_qlinear_matmul(node: Node) -> list[Value]:
    """Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
    y_zero_point (per tensor; ``b``'s scale and zero point may be per column)."""
    a, b = _centered(node, 0, 2), _centered(node, 3, 5, channel_axis=-1)
    if len(a.shape) < 2 or len(b.shape) < 2:
        node.fail("QLinearMatMul of a vector: rlx imports operands of rank 2 or more")
    acc = node.mir("matmul", [a, b])
    return [_requantize(node, acc, (1, 4, 6), 7, 0, channel_axis=len(acc.shape) - 1)]


@converter("QLinearConv", since=10)
def convert_qlinear_conv(node: Node) -> list[Value]:
    """Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
    y_zero_point, B (an i32 bias, added to the sums); ``w``'s scale and zero point may be
    per output channel."""
    x, w = _centered(node, 0, 2), _centered(node, 3, 5, channel_axis=0)
    bias = node.cast(node.tensor(8), DType.I32) if node.has(8) else None
    acc = conv_nd(node, x, w, bias)
    return [_requantize(node, acc, (1, 4, 6), 7, 0, channel_axis=1)]


@converter("ConvInteger", since=10)
def convert_conv_integer(node: Node) -> list[Value]:
    """``(x - x_zero_point) * (w - w_zero_point)`` convolved, in i32 (inputs x, w,
    x_zero_point, w_zero_point; ``w``'s zero point may be per output channel)."""
    x, w = _centered(node, 0, 2), _centered(node, 1, 3, channel_axis=0)
    return [conv_nd(node, x, w, None)]
