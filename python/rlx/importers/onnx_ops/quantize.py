"""ONNX quantization ops: ``DequantizeLinear``, ``QuantizeLinear`` (per tensor, per axis and
blocked; integer, 8-bit float and narrow targets), ``DynamicQuantizeLinear`` and
``MatMulInteger`` (what ONNX Runtime's static QDQ and dynamic quantization write).

From ONNX's operator specification:

- ``DequantizeLinear``: ``y = (x - zero_point) * scale`` in f32, then the output type
  (``output_dtype``, else the scale's);
- ``QuantizeLinear``: ``y = saturate(round_half_even(x / scale) + zero_point)`` into the
  zero point's type (``output_dtype``, else uint8); to an 8-bit float ``x / scale`` is cast
  (``saturate`` as ``Cast``'s); to E2M1 ``x / scale + zero_point`` is;
- the scale and zero point are a scalar (per tensor), a vector along ``axis`` (per axis),
  or ``x``'s shape with ``axis`` divided into blocks of ``block_size`` (blocked);
- ``DynamicQuantizeLinear``: uint8 over the range of ``x`` widened to hold 0;
- ``MatMulInteger``: ``(A - a_zero_point) @ (B - b_zero_point)`` in i32 (``a_zero_point``
  per row of ``A``, ``b_zero_point`` per column of ``B``).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnx.helper import np_dtype_to_tensor_dtype

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.elementwise import cast_to
from rlx.importers.onnx_ops.narrow import cast_to_narrow
from rlx.importers.onnx_ops.registry import (
    NARROW_ONNX,
    ONNX_DTYPES,
    UNSIGNED,
    Node,
    Value,
    converter,
    normalize_axes,
)
from rlx.ir.types import DType

INTEGER_RANGES = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127),
                  TensorProto.UINT16: (0, 65535), TensorProto.INT16: (-32768, 32767),
                  **{t: (int(n.lo), int(n.hi)) for t, n in NARROW_ONNX.items()
                     if not n.is_float}}
"""The integer types ``QuantizeLinear`` writes, and the range it saturates to."""
FLOAT8 = (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
          TensorProto.FLOAT8E5M2FNUZ)


def _elem_type(node: Node, i: int) -> int | None:
    """The ONNX element type of input ``i`` (a constant's from its numpy type: onnx maps
    ml_dtypes' narrow types too)."""
    v = node.value(i)
    if isinstance(v, np.ndarray):
        return np_dtype_to_tensor_dtype(v.dtype)
    return node.importer.elem_types.get(node.proto.input[i])


def _widened(node: Node, i: int, dtype: DType) -> Value:
    """Input ``i``'s values in ``dtype`` (a constant stays one; unsigned integers read as
    such): for scales and zero points, which are small."""
    v = node.value(i)
    if isinstance(v, np.ndarray):
        return v.astype(dtype.numpy)
    return node.cast(v, dtype, "source" if node.unsigned(i) else None)


def _along(node: Node, v: Value, x: HirValue, axis: int, block: int, what: str) -> Value:
    """A scale or zero point shaped to broadcast against ``x``: a scalar as is, a vector
    along ``axis``, blocks of ``block`` along ``axis`` repeated."""
    shape = tuple(v.shape)
    if len(shape) == 0 or (not block and int(np.prod(shape)) == 1):
        return v.reshape(()) if isinstance(v, np.ndarray) else node.reshape(v, [])
    dims = [d if isinstance(d, int) else None for d in x.shape]
    if not block:
        if len(shape) != 1 or (dims[axis] is not None and shape[0] != dims[axis]):
            node.fail(f"{what} of shape {list(shape)}: expected a scalar or a vector of "
                      f"{dims[axis]} (x's dim {axis}), or block_size for a blocked one")
        target = [1] * axis + [shape[0]] + [1] * (len(x.shape) - axis - 1)
        return v.reshape(target) if isinstance(v, np.ndarray) else node.reshape(v, target)
    length = dims[axis]
    if length is None or len(shape) != len(x.shape) or shape[axis] != -(-length // block):
        node.fail(f"{what} of shape {list(shape)} for blocks of {block} along axis {axis}: "
                  f"expected x's shape {dims} with dim {axis} ceil({length} / {block})")
    if isinstance(v, np.ndarray):
        return np.take(np.repeat(v, block, axis=axis), range(length), axis=axis)
    if length != shape[axis] * block:
        node.fail(f"{what}: a run-time scale or zero point needs blocks that divide x's "
                  f"dim {axis} ({length} by {block})")
    split = [*shape[:axis + 1], 1, *shape[axis + 1:]]
    grown = [*shape[:axis + 1], block, *shape[axis + 1:]]
    repeated = node.mir("expand", [node.reshape(v, split)], target_shape=grown)
    return node.reshape(repeated, list(dims))


def _layout(node: Node, x: HirValue) -> tuple[int, int]:
    """(axis, block_size); the axis of a scalar scale is not used (nor checked)."""
    block = int(node.attr("block_size", 0))
    if block < 0:
        node.fail(f"block_size {block}: expected 0 (per tensor or axis) or more")
    shape = node.info(1).shape
    if not block and all(isinstance(d, int) for d in shape) and int(np.prod(shape)) == 1:
        return 0, 0
    axis = normalize_axes(node, [node.attr("axis", 1)], max(len(x.shape), 1), "axis")[0]
    return axis, block


@converter("DequantizeLinear", since=10)
def convert_dequantize_linear(node: Node) -> list[Value]:
    x = node.tensor(0)
    axis, block = _layout(node, x)
    x_type = _elem_type(node, 0)
    out_type = node.attr("output_dtype", 0) or _elem_type(node, 1) or TensorProto.FLOAT
    dtype = ONNX_DTYPES.get(out_type)
    if dtype is None or not dtype.is_float or dtype.is_float8:
        node.fail(f"output type {TensorProto.DataType.Name(out_type).lower()}: expected "
                  "float, float16 or bfloat16")
    y = node.cast(x, DType.F32, "source" if node.unsigned(0) else None)  # x stays 8-bit
    if node.has(2) and x_type not in (*FLOAT8, TensorProto.FLOAT4E2M1):  # theirs is 0
        zero = _along(node, _widened(node, 2, DType.F32), x, axis, block, "x_zero_point")
        y = node.mir("binary", [y, zero], kind="sub")
    scale = _along(node, _widened(node, 1, DType.F32), x, axis, block, "x_scale")
    return [node.cast(node.mir("binary", [y, scale], kind="mul"), dtype)]


@converter("QuantizeLinear", since=10)
def convert_quantize_linear(node: Node) -> list[Value]:
    x = node.tensor(0)
    if x.dtype.is_int:
        x = node.cast(x, DType.F32)
    axis, block = _layout(node, x)
    to = (_elem_type(node, 2) if node.has(2) else None) or node.attr(
        "output_dtype", 0) or TensorProto.UINT8
    scale = node.value(1)
    same = (isinstance(scale, np.ndarray) and scale.dtype == x.dtype.numpy) or (
        isinstance(scale, HirValue) and scale.dtype == x.dtype)
    work = x if same else node.cast(x, DType.F32)  # x / scale in x's type, as numpy does
    scale = _along(node, scale if same else _widened(node, 1, DType.F32), x, axis, block,
                   "y_scale")
    y = node.mir("binary", [work, scale], kind="div")
    zero = None
    if node.has(2):
        zero = _along(node, _widened(node, 2, DType.F32), x, axis, block, "y_zero_point")
    if to in FLOAT8:
        return [cast_to(node, y, ONNX_DTYPES[to])]
    if to == TensorProto.FLOAT4E2M1:
        y = node.cast(y, DType.F32)
        if zero is not None:
            y = node.mir("binary", [y, zero], kind="add")
        return [cast_to_narrow(node, y, NARROW_ONNX[to])]
    if to not in INTEGER_RANGES:
        node.fail(f"output type {TensorProto.DataType.Name(to).lower()}: expected an 8- or "
                  "16-bit integer, a narrow one, or an 8-bit or 4-bit float")
    lo, hi = INTEGER_RANGES[to]
    y = node.cast(node.mir("activation", [y], kind="round"), DType.F32)
    return [_saturate(node, y, zero, lo, hi, to)]


def _saturate(node: Node, y: HirValue, zero: Value | None, lo: int, hi: int,
              to: int) -> HirValue:
    """``clamp(y + zero, lo, hi)`` (NaN: ``lo``, as the reference's int32 does) in the
    integer type ``to``, recorded as the node's first output's type where ONNX's shape
    inference did not give it (after a contrib op it cannot: a uint8 read as int8 would
    be off by 256)."""
    node.importer.elem_types.setdefault(node.proto.output[0], to)
    if zero is not None:
        y = node.mir("binary", [y, zero], kind="add")
    nan = node.mir("compare", [y, y], kind="ne")
    y = node.mir("binary", [node.mir("binary", [y, node.scalar(lo, y)], kind="max"),
                            node.scalar(hi, y)], kind="min")
    y = node.mir("where", [nan, node.as_tensor(node.scalar(lo, y)), y])
    return node.cast(y, ONNX_DTYPES[to], "result" if to in UNSIGNED else None)


@converter("DynamicQuantizeLinear", since=11)
def convert_dynamic_quantize_linear(node: Node) -> list[Value]:
    x = node.tensor(0)
    if x.dtype != DType.F32:
        node.fail(f"x is {x.dtype}: DynamicQuantizeLinear takes float32")
    axes = list(range(len(x.shape)))
    # a whole-tensor reduction fused with a producer that reduces itself (a layer norm)
    # over dynamic dims fails in IREE 3.13 (llvm-cpu: "expected no unbounded stack
    # allocations"; Vulkan: "shared memory allocation size overflows 64 bits")
    seen = node.mir("barrier", [x], always=True)

    def whole(kind: str, bound: str) -> HirValue:
        r = node.mir("reduce", [seen], kind=kind, axes=axes, keep_dim=False) if axes else x
        return node.mir("binary", [r, node.scalar(0.0, x)], kind=bound)

    top, bottom = whole("max", "max"), whole("min", "min")
    span = node.mir("binary", [top, bottom], kind="sub")
    span = node.mir("where", [node.mir("compare", [top, bottom], kind="eq"),
                              node.as_tensor(node.scalar(1.0, x)), span])
    scale = node.mir("binary", [span, node.scalar(255.0, x)], kind="div")
    start = node.mir("binary", [node.scalar(0.0, x), node.mir(
        "binary", [bottom, scale], kind="div")], kind="sub")
    start = node.mir("binary", [node.mir("binary", [start, node.scalar(0.0, x)], kind="max"),
                                node.scalar(255.0, x)], kind="min")
    zero = node.mir("activation", [start], kind="round")
    y = node.mir("activation", [node.mir("binary", [x, scale], kind="div")], kind="round")
    u8 = TensorProto.UINT8
    return [_saturate(node, y, zero, 0, 255, u8), scale,
            node.cast(zero, DType.I8, "result")]


@converter("MatMulInteger", since=10)
def convert_matmul_integer(node: Node) -> list[Value]:
    sides = []
    for i, zp in ((0, 2), (1, 3)):
        v = node.cast(node.tensor(i), DType.I32, "source" if node.unsigned(i) else None)
        if node.has(zp):
            z = _widened(node, zp, DType.I32)
            if i == 0 and len(z.shape) == 1 and z.shape[0] != 1:  # per row of A: [M, 1]
                z = z.reshape(-1, 1) if isinstance(z, np.ndarray) else node.reshape(
                    z, [z.shape[0], 1])
            v = node.mir("binary", [v, z], kind="sub")
        sides.append(v)
    if len(sides[0].shape) < 2 or len(sides[1].shape) < 2:
        node.fail("MatMulInteger of a vector: rlx imports operands of rank 2 or more")
    return [node.mir("matmul", sides)]


__all__ = ["convert_dequantize_linear", "convert_dynamic_quantize_linear",
           "convert_matmul_integer", "convert_quantize_linear"]
