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
from rlx.importers.onnx_ops.quantize import INTEGER_RANGES, _elem_type, _saturate, _widened
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.ir.types import DType


def _centered(node: Node, i: int, zp: int | None, channel_axis: int | None = None
              ) -> HirValue:
    """Input ``i`` in i32 minus its zero point (input ``zp``; a vector is per
    ``channel_axis``)."""
    v = node.cast(node.tensor(i), DType.I32, "source" if node.unsigned(i) else None)
    if zp is None or not node.has(zp):
        return v
    z = _widened(node, zp, DType.I32)
    if len(z.shape) == 1 and z.shape[0] != 1:
        if channel_axis is None:
            node.fail(f"input {zp}: a per-axis zero point of shape {list(z.shape)}; "
                      "expected a scalar")
        target = [1] * len(v.shape)
        target[channel_axis] = z.shape[0]
        z = z.reshape(target) if isinstance(z, np.ndarray) else node.reshape(z, target)
    elif isinstance(z, np.ndarray):
        z = z.reshape(())
    return node.mir("binary", [v, z], kind="sub")


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
        s = _widened(node, i, DType.F32)
        if len(s.shape) == 1 and s.shape[0] != 1 and channel_axis is not None:
            target = [1] * len(acc.shape)
            target[channel_axis] = s.shape[0]
            s = s.reshape(target) if isinstance(s, np.ndarray) else node.reshape(s, target)
        elif isinstance(s, np.ndarray):
            s = s.reshape(())
        if isinstance(mult, np.ndarray) and isinstance(s, np.ndarray):
            mult = (mult * s if kind == "mul" else mult / s).astype(np.float32)
        else:
            mult = node.mir("binary", [node.as_tensor(mult), node.as_tensor(s)], kind=kind)
    scaled = node.mir("binary", [node.cast(acc, DType.F32), mult], kind="mul")
    y = node.mir("activation", [scaled], kind="round")
    to = _elem_type(node, zero) if node.has(zero) else _elem_type(node, like)
    if to not in (TensorProto.UINT8, TensorProto.INT8):
        node.fail(f"output type {to}: QLinear ops write uint8 or int8")
    lo, hi = INTEGER_RANGES[to]  # type: ignore[index]
    z = _widened(node, zero, DType.F32) if node.has(zero) else None
    if isinstance(z, np.ndarray):
        z = z.reshape(())
    return _saturate(node, y, z, lo, hi, to)  # type: ignore[arg-type]


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
