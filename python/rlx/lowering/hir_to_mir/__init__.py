"""``hir-to-mir``: every HIR block becomes fused or primitive MIR ops, by fusion policy.

The table is :mod:`rlx.lowering.hir_to_mir.table`; importing a family module registers its
rules into it, so this package imports every family.
"""

from rlx.lowering.hir_to_mir import (
    attention,
    block,
    conv,
    leaf,
    linear,
    norm,
    quant,
    recurrent,
)
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR

FAMILIES = (attention, block, conv, leaf, linear, norm, quant, recurrent)

__all__ = ["FAMILIES", "HIR_TO_MIR"]
