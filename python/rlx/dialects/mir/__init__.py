"""The ``rlx_mir`` dialect: fused and primitive ops (one module per op family)."""

from rlx.dialects.mir import (
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
from rlx.dialects.mir.dialect import MIR

FAMILIES = (attention, contraction, conv, elementwise, fused, leaf, norm, quant, recurrent,
            reduction, sampling, shape)

__all__ = ["FAMILIES", "MIR"]
