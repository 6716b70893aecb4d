"""hir-to-mir for normalization blocks: rms_norm, residual_rms_norm."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("rms_norm")
def lower_rms_norm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [mir("rms_norm", op["x"], op["gamma"], op["beta"], axis=-1, eps=op.attrs["eps"])]


@HIR_TO_MIR.register("residual_rms_norm")
def lower_residual_rms_norm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``direct``: ``fused_residual_rms_norm``; otherwise add then rms_norm."""
    eps = op.attrs["eps"]
    if ctx.policy == "direct":
        return [mir("fused_residual_rms_norm", op["x"], op["residual"], op["gamma"],
                    op["beta"], has_bias=False, eps=eps)]
    s = mir("binary", op["x"], op["residual"], kind="add")
    return [mir("rms_norm", s, op["gamma"], op["beta"], axis=-1, eps=eps)]
