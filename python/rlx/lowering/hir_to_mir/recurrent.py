"""hir-to-mir for scans: gated_delta_net, lstm, gru (1:1, carried state as results)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering.build import mir_op
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


def _same(name: str, op: Decoded) -> list[ir.Value]:
    operands = [op[n] for n in op.schema.operand_names(op.attrs)]
    return mir_op(name, operands, **op.attrs)


@HIR_TO_MIR.register("gated_delta_net")
def lower_gated_delta_net(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return _same("gated_delta_net", op)


@HIR_TO_MIR.register("lstm")
def lower_lstm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return _same("lstm", op)


@HIR_TO_MIR.register("gru")
def lower_gru(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return _same("gru", op)
