"""hir-to-mir for leaves: param, constant (names and data carried over)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.mir import MIR
from rlx.dialects.schema import Decoded, create
from rlx.ir.types import TensorInfo
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("param")
def lower_param(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    result = TensorInfo.from_mlir(op.op.results[0].type)
    return list(create(MIR.ops["param"], [], op.attrs, results=[result]).results)


@HIR_TO_MIR.register("constant")
def lower_constant(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return list(create(MIR.ops["constant"], [], op.attrs).results)
