"""The ``hir-to-mir`` lowering table, which each family module registers its rules into."""

from rlx.dialects.hir import HIR
from rlx.lowering.registry import LoweringTable

HIR_TO_MIR = LoweringTable("hir-to-mir", HIR)

__all__ = ["HIR_TO_MIR"]
