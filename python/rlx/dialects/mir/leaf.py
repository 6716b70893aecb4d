"""MIR leaves: param, constant (function arguments are MIR's inputs)."""

from __future__ import annotations

from rlx.dialects.hir.leaf import PARAM_ATTRS, constant_result, param_result
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Attr, AttrKind, Check
from rlx.ir.types import TensorInfo


@MIR.op("param", attrs=PARAM_ATTRS, results=["w"])
def param(c: Check) -> list[TensorInfo]:
    """A weight bound at load time (``Op::Param``); as ``rlx_hir.param``.

    Example::

        %w = "rlx_mir.param"() {name = "fc.w"} : () -> tensor<64x64xf32>
    """
    return param_result(c)


@MIR.op("constant", attrs=[Attr("value", AttrKind.DENSE, "the tensor's elements")])
def constant(c: Check) -> list[TensorInfo]:
    """Inline data (``Op::Constant``): the result is the ``value`` attribute.

    Example::

        %c = "rlx_mir.constant"() {value = dense<0.5> : tensor<4xf32>} : () -> tensor<4xf32>
    """
    return constant_result(c)
