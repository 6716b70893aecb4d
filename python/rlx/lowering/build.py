"""Creating rlx_mir ops inside lowering rules (result types inferred by the MIR schemas)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from iree.compiler import ir

from rlx.dialects.mir import MIR
from rlx.dialects.schema import create


def mir_op(name: str, operands: Sequence[ir.Value], **attrs: Any) -> list[ir.Value]:
    """Create ``rlx_mir.<name>`` at the current position and location; all results."""
    return list(create(MIR.ops[name], operands, attrs).results)


def mir(name: str, *operands: ir.Value, **attrs: Any) -> ir.Value:
    """Create a one-result ``rlx_mir.<name>``."""
    return mir_op(name, operands, **attrs)[0]
