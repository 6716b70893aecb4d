"""``hir-to-mir``: every HIR block becomes fused or primitive MIR ops, by fusion policy."""

from rlx.dialects.hir import HIR
from rlx.lowering.registry import LoweringTable

HIR_TO_MIR = LoweringTable("hir-to-mir", HIR)

from rlx.lowering.hir_to_mir import (  # noqa: E402  (families register into the table)
    attention,
    block,
    conv,
    leaf,
    linear,
    norm,
    quant,
    recurrent,
)

FAMILIES = (attention, block, conv, leaf, linear, norm, quant, recurrent)

__all__ = ["FAMILIES", "HIR_TO_MIR"]
