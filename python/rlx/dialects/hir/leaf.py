"""HIR leaves: weights (``param``) and small inline data (``constant``)."""

from __future__ import annotations

from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import Attr, AttrKind, Check, int_attr, str_attr
from rlx.ir.dtypes import DType
from rlx.ir.types import TensorInfo

PARAM_ATTRS = [
    str_attr("name", "weight name, the key in the parameter file"),
    int_attr("lead", "bytes before the weight's data that its parameter entry begins with "
             "(absent: 0); i8 weights only", optional=True)]
"""The attributes of ``rlx_hir.param`` / ``rlx_mir.param``."""


def param_result(c: Check) -> list[TensorInfo]:
    """Shared rule of ``rlx_hir.param`` / ``rlx_mir.param``: a named, static weight."""
    name = c.attr("name")
    if not name:
        c.fail("attribute 'name'", "a non-empty weight name", '""')
    if len(c.declared) != 1:
        c.fail("results", "1 (the weight)", str(len(c.declared)))
    t = c.declared[0]
    if not t.is_static:
        c.fail("result type", "a static shape (weights have fixed sizes)", str(t))
    lead = c.attrs.get("lead")
    if lead is not None:
        if lead < 0:
            c.fail("attribute 'lead'", "a byte count >= 0", str(lead))
        if t.dtype is not DType.I8 or t.rank == 0:
            c.fail("attribute 'lead'", "an i8 weight of rank >= 1 (the lead is counted in "
                   "bytes)", str(t))
    return [t]


def constant_result(c: Check) -> list[TensorInfo]:
    """Shared rule of ``constant``: the result type is the type of ``value``."""
    value = c.attr("value")
    try:
        t = TensorInfo.from_mlir(value.type)
    except ValueError as e:
        c.fail("attribute 'value'", "elements of a ranked tensor type", str(e))
    return [t]


@HIR.op("param", attrs=PARAM_ATTRS, results=["w"])
def param(c: Check) -> list[TensorInfo]:
    """A weight, bound at load time from a parameter file (``HirOp::Param``).

    Attributes: ``name`` (string) is the weight's key in the parameter archive / dict. The
    result type gives the weight's (static) shape and element type. Lowers to a
    ``util.global`` with ``#flow.parameter.named<"model"::NAME>``: no weight bytes in the vmfb.

    ``lead`` (optional, i8 weights): the parameter entry holds ``lead`` bytes before the
    weight's data, ``tensor<(lead + N)xi8>`` for a weight of N bytes, and the weight is its
    bytes from ``lead`` on. IREE uses a host buffer in place only when it starts on a 64-byte
    boundary and otherwise copies it for the module's lifetime; a GGUF file aligns its
    tensors to 32 bytes, so a builder reading the file's mapping in place names the view
    from the boundary before the tensor (:data:`rlx.weights.IMPORT_ALIGNMENT`).

    Example::

        %w = "rlx_hir.param"() {name = "layers.0.q_w"} : () -> tensor<768x768xf32>
    """
    return param_result(c)


@HIR.op("constant", attrs=[Attr("value", AttrKind.DENSE, "the tensor's elements")])
def constant(c: Check) -> list[TensorInfo]:
    """Small inline data (``HirOp::Constant``): the result is the ``value`` attribute.

    Keep it small; weights belong in ``param``.

    Example::

        %c = "rlx_hir.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    """
    return constant_result(c)
