"""mir-to-linalg for leaves: param (a load of its parameter global), constant."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, util

from rlx.dialects.schema import Decoded
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG, param_symbol
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("param")
def lower_param(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    t = op.op.results[0].type
    return [util.GlobalLoadOp(t, param_symbol(op.attrs["name"])).result]


@MIR_TO_LINALG.register("constant")
def lower_constant(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    value = op.attrs["value"]
    return [arith.ConstantOp(value.type, value).result]
