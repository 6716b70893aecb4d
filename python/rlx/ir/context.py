"""The MLIR context rlx builds and parses in."""

from __future__ import annotations

from iree.compiler import ir


def new_context() -> ir.Context:
    """A context that accepts the (unregistered) ``rlx_hir`` / ``rlx_mir`` ops.

    IREE's site initializer registers its own dialects (linalg, tensor, util, flow,
    iree_linalg_ext, stablehlo, ...) into every new context.
    """
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx
