"""ONNX Runtime's quantized contrib ops (domain ``com.microsoft``), as its quantization
tools write them in the QOperator format: ``QLinearAdd``, ``QLinearMul``,
``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearGlobalAveragePool``, ``QLinearConcat``,
``QGemm`` (the list is ``rlx.importers.onnx_read.CONTRIB_OPS``).

From ONNX Runtime's contrib operator documentation: each input is dequantized, ``(x -
zero_point) * scale`` in f32, the float op applied, and the result quantized,
``saturate(round_half_even(y / y_scale) + y_zero_point)`` into the output zero point's type;
``QGemm`` sums ``(A - a_zp)(B - b_zp)`` and its int32 bias ``C`` exactly in i32 and scales
by ``alpha a_scale b_scale`` (then quantizes when ``y_scale`` is given, else returns f32).
ONNX Runtime computes some of these through fixed-point or table lookups, so an output may
be one quantization step away where the exact value sits at a half.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.qlinear import _centered, _requantize, quantized
from rlx.importers.onnx_ops.quantize import _widened
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.importers.onnx_read import CONTRIB_DOMAIN
from rlx.ir.types import DType

MS = CONTRIB_DOMAIN + "."


def _scalar(node: Node, i: int) -> Value:
    v = _widened(node, i, DType.F32)
    return v.reshape(()) if isinstance(v, np.ndarray) and v.size == 1 else v


def dequantized(node: Node, x: int, scale: int, zero: int) -> HirValue:
    """``(x - zero) * scale`` in f32 (per tensor)."""
    return node.mir("binary", [node.cast(_centered(node, x, zero), DType.F32),
                               node.as_tensor(_scalar(node, scale))], kind="mul")


def _quantized(node: Node, y: HirValue, scale: int, zero: int) -> HirValue:
    """``saturate(round(y / scale) + zero)`` in input ``zero``'s type (uint8 without it)."""
    scaled = node.mir("binary", [y, node.as_tensor(_scalar(node, scale))], kind="div")
    return quantized(node, scaled, zero, None)


@converter(MS + "QLinearAdd", MS + "QLinearMul")
def convert_qlinear_binary(node: Node) -> list[Value]:
    """Inputs A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point
    (numpy broadcasting)."""
    a, b = dequantized(node, 0, 1, 2), dequantized(node, 3, 4, 5)
    kind = "add" if node.op_type.endswith("Add") else "mul"
    return [_quantized(node, node.mir("binary", [a, b], kind=kind), 6, 7)]


@converter(MS + "QLinearSigmoid", MS + "QLinearLeakyRelu")
def convert_qlinear_activation(node: Node) -> list[Value]:
    """Inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point (LeakyRelu: ``alpha``)."""
    x = dequantized(node, 0, 1, 2)
    if node.op_type.endswith("Sigmoid"):
        y = node.mir("activation", [x], kind="sigmoid")
    else:
        negative = node.mir("compare", [x, node.scalar(0.0, x)], kind="lt")
        scaled = node.mir("binary", [x, node.scalar(float(node.attr("alpha", 0.01)), x)],
                          kind="mul")
        y = node.mir("where", [negative, scaled, x])
    return [_quantized(node, y, 3, 4)]


@converter(MS + "QLinearGlobalAveragePool")
def convert_qlinear_global_average_pool(node: Node) -> list[Value]:
    """Inputs X, x_scale, x_zero_point, y_scale, y_zero_point: the mean over the spatial
    dims (after the channels, or before them with ``channels_last``), kept as size 1."""
    x = dequantized(node, 0, 1, 2)
    rank = len(x.shape)
    axes = list(range(1, rank - 1)) if node.attr("channels_last", 0) else list(range(2, rank))
    mean = node.mir("reduce", [x], kind="mean", axes=axes, keep_dim=True)
    return [_quantized(node, mean, 3, 4)]


@converter(MS + "QLinearConcat")
def convert_qlinear_concat(node: Node) -> list[Value]:
    """Inputs Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    if (node.n_inputs - 2) % 3 or node.n_inputs < 5:
        node.fail(f"{node.n_inputs} inputs: expected Y_scale, Y_zero_point and triples")
    parts = [dequantized(node, i, i + 1, i + 2) for i in range(2, node.n_inputs, 3)]
    axis = normalize_axes(node, [node.attr("axis")], len(parts[0].shape), "axis")[0]
    return [_quantized(node, node.mir("concat", parts, axis=axis), 0, 1)]


@converter(MS + "QGemm")
def convert_qgemm(node: Node) -> list[Value]:
    """Inputs A, a_scale, a_zero_point, B, b_scale, b_zero_point, C (int32 bias, scale
    ``alpha a_scale b_scale``), y_scale, y_zero_point; ``transA`` / ``transB``."""
    trans_b = bool(node.attr("transB", 0))
    a, b = _centered(node, 0, 2), _centered(node, 3, 5, channel_axis=0 if trans_b else -1)
    if node.attr("transA", 0):
        a = node.mir("transpose", [a], perm=[1, 0])
    if trans_b:
        b = node.mir("transpose", [b], perm=[1, 0])
    acc = node.mir("matmul", [a, b])
    if node.has(6):
        acc = node.mir("binary", [acc, node.cast(node.tensor(6), DType.I32)], kind="add")
    alpha = float(node.attr("alpha", 1.0))
    if node.has(7):
        return [_requantize(node, acc, (1, 4, 7), 8, 0, channel_axis=1, factor=alpha)]
    node.importer.elem_types.setdefault(node.proto.output[0], TensorProto.FLOAT)
    scale = node.mir("binary", [node.as_tensor(_scalar(node, 1)),
                                node.as_tensor(_scalar(node, 4))], kind="mul")
    y = node.mir("binary", [node.cast(acc, DType.F32), scale], kind="mul")
    if alpha != 1.0:
        y = node.mir("binary", [y, node.scalar(alpha, y)], kind="mul")
    return [y]
