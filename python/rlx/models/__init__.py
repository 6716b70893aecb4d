"""Model builders: whole models as HIR modules, loaded from common checkpoint formats."""

from rlx.models import llama

__all__ = ["llama"]
