"""MIR reductions: reduce, argmax, topk, softmax, cumsum."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import FLOAT_TYPES, REDUCE_OPS
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, bool_attr, enum_attr, int_attr, ints_attr
from rlx.ir.types import DType, TensorInfo


@MIR.op("reduce", operands=["x"],
        attrs=[enum_attr("kind", REDUCE_OPS), ints_attr("axes"),
               bool_attr("keep_dim", "keep reduced axes as size 1", default=False)])
def reduce(c: Check) -> list[TensorInfo]:
    """Reduce over ``axes`` (``Op::Reduce``): sum, mean, max, min, prod.

    Float sums accumulate in f32 (f64 for f64). Reduced axes are dropped unless ``keep_dim``.

    Example::

        %s = "rlx_mir.reduce"(%x) {axes = array<i64: -1>, keep_dim = true, kind = "mean"}
            : (tensor<?x64xf32>) -> tensor<?x1xf32>
    """
    x = c["x"]
    axes = [checks.normalize_axis(c, "axes", a, x.rank) for a in c.attr("axes")]
    if len(set(axes)) != len(axes) or not axes:
        c.fail("attribute 'axes'", "distinct axes, at least one", str(list(c.attr("axes"))))
    if c.attr("kind") == "mean":
        c.dtype("x", FLOAT_TYPES)
    if c.attr("keep_dim"):
        return [x.with_shape(1 if i in axes else d for i, d in enumerate(x.shape))]
    return [x.with_shape(d for i, d in enumerate(x.shape) if i not in axes)]


ORDERED_TYPES = frozenset(d for d in DType if d != DType.I1)


@MIR.op("argmax", operands=["x"],
        attrs=[int_attr("axis", default=-1),
               bool_attr("keep_dim", "keep the reduced axis as size 1", default=False)])
def argmax(c: Check) -> list[TensorInfo]:
    """Index of the largest element along ``axis``, as i32 (``Op::ArgMax``): the first one
    on ties, and NaN counts as the largest (numpy's and PyTorch's ``argmax``).

    A greedy decode step's next token, computed on the device so the token can feed the
    next step without a host round trip.

    Example::

        %t = "rlx_mir.argmax"(%logits) {axis = -1 : i64, keep_dim = false}
            : (tensor<1x1x32000xf32>) -> tensor<1x1xi32>
    """
    x = c.dtype("x", ORDERED_TYPES)
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    keep = c.attr("keep_dim")
    shape = [1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis]
    return [TensorInfo(tuple(shape), DType.I32)]


TOPK_TYPES = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64, DType.I8, DType.I16,
                        DType.I32, DType.I64})


@MIR.op("topk", operands=["x"], results=["values", "indices"],
        attrs=[int_attr("k", "how many elements to keep"), int_attr("axis", default=-1),
               bool_attr("largest", "the largest (else the smallest) first", default=True)])
def topk(c: Check) -> list[TensorInfo]:
    """The ``k`` largest (``largest = false``: smallest) elements along ``axis``, sorted,
    and their indices as i32 (ONNX ``TopK``, ``torch.topk``; rlx's, not RLX's). Equal
    elements keep their order (the lower index first), ``-0`` and ``0`` are equal, NaN
    counts as larger than every number. ``k`` is at most the axis' size (checked at run
    time where the axis is dynamic). One exception, i64 only: an element equal to i64's
    minimum (``largest``; its maximum otherwise) is kept with the right value but index 0
    when fewer than ``k`` other elements are kept (it ties with the initial sort key).

    Example::

        %v, %i = "rlx_mir.topk"(%x) {axis = -1 : i64, k = 2 : i64, largest = true}
            : (tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
    """
    x = c.dtype("x", TOPK_TYPES)
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    k = c.attr("k")
    if k < 1:
        c.fail("attribute 'k'", "at least 1", str(k))
    c.at_least("x", axis, k, "k elements to keep")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return [TensorInfo(shape, x.dtype), TensorInfo(shape, DType.I32)]


@MIR.op("softmax", operands=["x"], attrs=[int_attr("axis", default=-1)])
def softmax(c: Check) -> list[TensorInfo]:
    """Softmax along ``axis`` with the max subtracted (``Op::Softmax``).

    Example::

        %p = "rlx_mir.softmax"(%s) {axis = -1 : i64} : (tensor<8x?xf32>) -> tensor<8x?xf32>
    """
    x = c.dtype("x", FLOAT_TYPES)
    checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    return [x]


@MIR.op("cumsum", operands=["x"],
        attrs=[int_attr("axis"), bool_attr("exclusive", "sum of the elements before only",
                                          default=False)])
def cumsum(c: Check) -> list[TensorInfo]:
    """Running sum along ``axis`` (``Op::Cumsum``); ``exclusive`` leaves out the element
    itself.

    Example::

        %y = "rlx_mir.cumsum"(%x) {axis = 1 : i64, exclusive = false}
            : (tensor<2x8xf32>) -> tensor<2x8xf32>
    """
    x = c["x"]
    checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    return [x]
