"""ONNX ops that make values from attributes and shapes, folded at import time: Constant,
ConstantOfShape, Range (the run-time forms only where a result is too large to fold)."""

from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper

from rlx.importers.onnx_ops.registry import Node, Value, converter, folder, is_symbolic
from rlx.importers.onnx_ops.shape import FOLD_MAX_ELEMENTS


@converter("Constant")
def convert_constant(node: Node) -> list[Value]:
    node.fail("this Constant has no tensor value rlx reads (sparse or string values are not "
              "supported)")


@folder("Constant")
def fold_constant(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    for name, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if name in node.attrs:
            return [np.asarray(node.attrs[name], dtype=dtype)]
    for name, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if name in node.attrs:
            return [np.asarray(list(node.attrs[name]), dtype=dtype)]
    if "value" in node.attrs:
        arr = numpy_helper.to_array(node.attrs["value"])
        return None if arr.dtype.kind in "OUS" else [arr]
    return None


@converter("ConstantOfShape", const_inputs=(0,), since=9)
def convert_constant_of_shape(node: Node) -> list[Value]:
    """A static shape too large to fold: a scalar expanded at run time."""
    shape = [int(s) for s in node.static(0, "the shape")]
    fill = _fill_value(node)
    return [node.mir("expand", [fill.reshape([1] * len(shape))], target_shape=shape)]


def _fill_value(node: Node) -> np.ndarray:
    value = node.attrs.get("value")
    return np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value).reshape(1)


@folder("ConstantOfShape")
def fold_constant_of_shape(node: Node, inputs: list[np.ndarray | None]
                           ) -> list[np.ndarray] | None:
    shape = inputs[0]
    if shape is None or is_symbolic(shape):
        return None
    dims = [int(s) for s in shape]
    if math.prod(dims) > FOLD_MAX_ELEMENTS:
        return None
    fill = _fill_value(node)
    return [np.full(dims, fill[0], dtype=fill.dtype)]


@converter("Range", const_inputs=(0, 1, 2), since=11)
def convert_range(node: Node) -> list[Value]:
    for i, what in enumerate(("start", "limit", "delta")):
        node.static(i, f"the {what}")
    node.fail("the range is too long to fold at import time")


@folder("Range")
def fold_range(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if any(v is None or is_symbolic(v) for v in inputs[:3]):
        return None
    start, limit, delta = (np.asarray(v).reshape(()) for v in inputs[:3])
    if delta == 0:
        node.fail("delta is 0")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    if count > FOLD_MAX_ELEMENTS:
        return None
    return [(start + np.arange(count).astype(start.dtype) * delta).astype(start.dtype)]
