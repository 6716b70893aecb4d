"""hir-to-mir for quantized weights: dequant_matmul (1:1)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("dequant_matmul")
def lower_dequant_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    operands = [op[n] for n in ("x", "w", "scale", "zp") if op.has(n)]
    return [mir("dequant_matmul", *operands, scheme=op.attrs["scheme"],
                block_size=op.attrs.get("block_size"))]
