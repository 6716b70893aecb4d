"""ONNX ops that make values from attributes and shapes, folded at import time: Constant,
ConstantOfShape, Range (the run-time forms only where a result is too large to fold)."""

from __future__ import annotations

import math

import numpy as np
import sympy
from onnx import numpy_helper

from rlx.importers.dims import is_static, normalize
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    dtype_of,
    folder,
    is_symbolic,
)
from rlx.importers.onnx_ops.shape import FOLD_MAX_ELEMENTS
from rlx.ir.types import DType


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
    """A shape too large to fold or holding dynamic sizes (an LSTM's zero state of
    ``[layers, batch, hidden]``): a scalar broadcast at run time."""
    shape = [normalize(s) for s in node.const(0, "the shape").reshape(-1)]
    fill = _fill_value(node)
    return [node.known(node.sizes.full(fill.reshape(()), shape, node.fail), shape)]


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
    """A range to a dynamic limit (torch ``arange(seq)``): ``start + delta * iota(n)``
    with ``n = (limit - start) / delta`` (a size rlx can build: delta 1, or dividing)."""
    start, limit, delta = (node.const(i, f"the {w}").reshape(())
                           for i, w in enumerate(("start", "limit", "delta")))
    if is_symbolic(delta) or (not is_symbolic(start) and not is_symbolic(limit)):
        node.static(2, "the delta")
        if not (is_symbolic(start) or is_symbolic(limit)):
            node.fail("the range is too long to fold at import time")
    step = delta.item()
    if step == 0:
        node.fail("delta is 0")
    lo, hi = normalize(start.item()) if is_symbolic(start) else start.item(), (
        normalize(limit.item()) if is_symbolic(limit) else limit.item())
    count = sympy.simplify((sympy.sympify(hi) - sympy.sympify(lo)) / step)
    if not count.is_integer:
        node.fail(f"a range of {count} elements: rlx builds ranges whose length is a sum or "
                  "product of sizes")
    count = normalize(count)
    dtype = dtype_of(delta)
    if dtype is None:
        node.fail(f"delta of element type {delta.dtype}")
    y = node.sizes.iota(count, dtype, node.fail)
    if dtype != DType.I64 and not dtype.is_float:
        y = node.cast(y, dtype)
    if step != 1:
        y = node.mir("binary", [y, node.scalar(step, y)], kind="mul")
    if not (is_static(lo) and int(lo) == 0):
        first = (node.sizes.scalar(lo, dtype, node.fail) if not is_static(lo)
                 else node.scalar(lo, y))
        y = node.mir("binary", [y, first], kind="add")
    return [node.known(y, [count])]


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
