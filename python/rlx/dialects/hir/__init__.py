"""The ``rlx_hir`` dialect: block-level ops (one module per op family)."""

from rlx.dialects.hir import attention, block, conv, leaf, linear, norm, quant, recurrent
from rlx.dialects.hir.dialect import HIR

FAMILIES = (attention, block, conv, leaf, linear, norm, quant, recurrent)

__all__ = ["FAMILIES", "HIR"]
