"""``mir-to-linalg``: MIR ops -> linalg on tensors (+ tensor, arith, math, util, and
``iree_linalg_ext`` / ``iree_tensor_ext`` where IREE's own ops are the fast form).

The table is :mod:`rlx.lowering.mir_to_linalg.table`; importing a family module registers its
rules into it, so this package imports every family.
"""

from rlx.lowering.mir_to_linalg import (
    attention,
    contraction,
    conv,
    elementwise,
    fused,
    leaf,
    norm,
    quant,
    recurrent,
    reduction,
    sampling,
    shape,
)
from rlx.lowering.mir_to_linalg.table import (
    MIR_TO_LINALG,
    NOT_YET_LOWERED,
    declare_params,
    param_symbol,
)

FAMILIES = (attention, contraction, conv, elementwise, fused, leaf, norm, quant, recurrent,
            reduction, sampling, shape)

__all__ = ["FAMILIES", "MIR_TO_LINALG", "NOT_YET_LOWERED", "declare_params", "param_symbol"]
