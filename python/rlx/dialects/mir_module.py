"""``rlx.MirModule`` (a module at the MIR stage) and the hook through which ``rlx.lowering``
gives :meth:`HirModule.lower_to_mir <rlx.dialects.builder.HirModule.lower_to_mir>` its
implementation.

The dialects sit below the lowering and never import it (DESIGN.md section 4), so the
builder cannot call ``rlx.lowering`` itself: ``rlx.lowering`` calls
:func:`install_mir_lowering` with its ``lower_to_mir`` when it is imported, and ``import rlx``
imports it. Calling ``lower_to_mir`` before that raises :class:`LoweringError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from iree.compiler import ir

from rlx.dialects import verify_module
from rlx.ir.diagnostics import LoweringError
from rlx.ir.text import parse_module, print_module

if TYPE_CHECKING:
    from rlx.dialects.hir_module import HirModuleCore

MirLowering = Callable[["HirModuleCore", str | None], "MirModule"]
"""``(hir_module, fusion_policy or None) -> MirModule``, leaving ``hir_module`` as it is."""

_installed: list[MirLowering] = []


def install_mir_lowering(lowering: MirLowering) -> None:
    """Make ``lowering`` what ``HirModule.lower_to_mir`` runs (``rlx.lowering`` does this
    when imported; installing again replaces it)."""
    _installed[:] = [lowering]


def mir_lowering() -> MirLowering:
    """The installed HIR -> MIR lowering; a :class:`LoweringError` if there is none."""
    if not _installed:
        raise LoweringError("error: HirModule.lower_to_mir: expected the hir-to-mir lowering "
                            "that rlx.lowering installs when imported (import rlx, or "
                            "rlx.lowering), found none installed")
    return _installed[0]


class MirModule:
    """A module at the MIR stage (what ``HirModule.lower_to_mir`` returns)."""

    def __init__(self, module: ir.Module) -> None:
        self._module = module

    @property
    def mlir(self) -> ir.Module:
        return self._module

    @property
    def ops(self) -> list[ir.Operation]:
        func = self._module.body.operations[0].operation
        return [op.operation for op in func.regions[0].blocks[0].operations
                if op.operation.name != "func.return"]

    def __len__(self) -> int:
        """Nodes as RLX counts them: function inputs plus ops."""
        func = self._module.body.operations[0].operation
        return len(func.regions[0].blocks[0].arguments) + len(self.ops)

    def verify(self) -> None:
        verify_module(self._module, "mir")

    def __str__(self) -> str:
        return print_module(self._module)

    @classmethod
    def parse(cls, text: str, source: str = "<string>") -> MirModule:
        module = parse_module(text, source)
        verify_module(module, "mir")
        return cls(module)

__all__ = ["MirLowering", "MirModule", "install_mir_lowering", "mir_lowering"]
