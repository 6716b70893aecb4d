"""hir-to-mir for attention blocks: attention, rope (1:1)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("attention")
def lower_attention(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    operands = [op["q"], op["k"], op["v"]] + ([op["mask"]] if op.has("mask") else [])
    return [mir("attention", *operands, num_heads=op.attrs["num_heads"],
                head_dim=op.attrs["head_dim"], mask_kind=op.attrs["mask"],
                window=op.attrs.get("window"))]


@HIR_TO_MIR.register("rope")
def lower_rope(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [mir("rope", op["x"], op["cos"], op["sin"], head_dim=op.attrs["head_dim"],
                n_rot=op.attrs["n_rot"], style=op.attrs["rope_style"])]
