"""The MLIR context rlx builds and parses in."""

from __future__ import annotations

import sys
from types import ModuleType

from iree.compiler import ir

RLX_DIALECTS = ("rlx_hir", "rlx_mir")


def _register_dialect_modules() -> None:
    """Give the MLIR bindings an (empty) Python module for each rlx dialect.

    Whenever the bindings wrap an op in a Python object they look up the op's dialect
    module (``iree.compiler.dialects.<namespace>``) for generated op classes, and they
    remember only lookups that succeeded: for rlx's dialects, which have none, every op
    wrapped cost a failed import (a search of ``sys.path``), 20k of them building and
    lowering the 135M LLaMA (about half its Python time). An empty module answers
    "no op classes" once, and the bindings use their generic op view as before.
    """
    for namespace in RLX_DIALECTS:
        name = f"iree.compiler.dialects.{namespace}"
        if name not in sys.modules:
            sys.modules[name] = ModuleType(name, f"rlx's {namespace} dialect: no Python op "
                                                 "classes (rlx.ir.context)")


def new_context() -> ir.Context:
    """A context that accepts the (unregistered) ``rlx_hir`` / ``rlx_mir`` ops.

    IREE's site initializer registers its own dialects (linalg, tensor, util, flow,
    iree_linalg_ext, stablehlo, ...) into every new context.
    """
    _register_dialect_modules()
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx
