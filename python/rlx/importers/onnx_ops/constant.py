"""ONNX ops that make values from attributes and shapes, folded at import time: Constant,
ConstantOfShape, Range (the run-time forms only where a result is too large to fold)."""

from __future__ import annotations

import math

import numpy as np
import sympy
from onnx import GraphProto, numpy_helper

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


@converter("If")
def convert_if(node: Node) -> list[Value]:
    """A condition known at import time (a check on static sizes, as TorchScript exports
    write them): the branch it picks, inlined. A condition computed at run time: both
    branches inlined and each output selected (``where``) by the condition, which is what an
    ``If`` computes where its branches are pure (ONNX's are: no side effects) and give
    outputs of one type and shape; branches whose outputs differ in element type, rank or a
    static size are refused (rlx compiles one path: the output's shape must not depend on
    the condition), and dynamic sizes of the two are checked equal at run time (``where``'s
    size checks). Both branches run, so a run-time check in either (a size relation rlx
    checks before a kernel reads) applies whichever is taken."""
    cond = node.maybe_const(0)
    if cond is not None:
        if cond.size != 1:
            node.fail(f"condition of shape {list(cond.shape)}: expected one boolean")
        branch = node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
        return _branch(node, branch)
    if node.value(0) is not None and not isinstance(node.value(0), np.ndarray):
        info = node.info(0)
        if info.dtype != DType.I1 or any(d != 1 for d in info.shape):
            node.fail(f"condition {info.dtype.value} of shape {list(info.shape)}: expected one "
                      "boolean")
    else:                                        # a shape vector holding dynamic sizes
        node.const(0, "the condition")
        node.fail("condition: expected one boolean, found a shape vector")
    taken = _branch(node, node.attrs["then_branch"])
    other = _branch(node, node.attrs["else_branch"])
    c = node.tensor(0)
    outs: list[Value] = []
    for k, (a, b) in enumerate(zip(taken, other, strict=True)):
        ta, tb = node.as_tensor(a), node.as_tensor(b)
        da, db = node.dims_of(a), node.dims_of(b)
        if ta.type.dtype != tb.type.dtype or len(da) != len(db) or any(
                not _same_size(x, y) for x, y in zip(da, db, strict=True)):
            node.fail(f"output {k} ('{node.proto.output[k]}'): the branches give "
                      f"{ta.type.dtype.value} {da} and {tb.type.dtype.value} {db}; a condition "
                      "known only at run time needs branches of one element type and shape "
                      "(rlx computes both and selects)")
        flag = node.reshape(c, [1] * len(da)) if len(da) != c.type.rank else c
        outs.append(node.known(node.mir("where", [flag, ta, tb]), da))
    return outs


def _branch(node: Node, graph: GraphProto) -> list[Value]:
    """The outputs of ``graph``, one of ``node``'s branches, inlined."""
    outs = node.importer.inline(node, graph)
    if len(outs) != len(node.proto.output):
        node.fail(f"the branch has {len(outs)} outputs; the node {len(node.proto.output)}")
    return outs


def _same_size(a: object, b: object) -> bool:
    """Whether two branch outputs' sizes may be one: equal numbers, or either dynamic (then
    ``where`` checks them equal at run time; a dynamic dim is never stretched), but a 1
    beside a dynamic size (``where`` would stretch the 1: another shape than the branch's)."""
    if is_static(a) and is_static(b):
        return int(a) == int(b)                  # type: ignore[call-overload]
    return not ((is_static(a) and int(a) == 1) or (is_static(b) and int(b) == 1))  # type: ignore
