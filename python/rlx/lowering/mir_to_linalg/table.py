"""The ``mir-to-linalg`` lowering table, which each family module registers its rules into,
and the weights' globals that the ``param`` rule loads (declared before the rules run)."""

from __future__ import annotations

import json

from iree.compiler import ir
from iree.compiler.dialects import util

from rlx.dialects.mir import MIR
from rlx.ir.diagnostics import LoweringError
from rlx.ir.locations import describe
from rlx.ir.text import walk_ops
from rlx.lowering.registry import LoweringContext, LoweringTable

MIR_TO_LINALG = LoweringTable("mir-to-linalg", MIR, size_checks=True)
PARAM_SCOPE = "model"

NOT_YET_LOWERED: dict[str, str] = {}
"""MIR ops without a mir-to-linalg rule yet, and why (a test keeps this list exact)."""


def param_symbol(name: str) -> str:
    return f"param.{name}"


def declare_params(module: ir.Module, ctx: LoweringContext) -> None:
    """One ``util.global`` per weight name, bound to ``#flow.parameter.named<"model"::NAME>``
    so the weights live in a parameter file, never in the vmfb."""
    seen: dict[str, tuple[ir.Type, ir.Operation]] = {}
    for op in walk_ops(module.operation):
        if op.name != "rlx_mir.param":
            continue
        name = ir.StringAttr(op.attributes["name"]).value
        t = op.results[0].type
        if name in seen and seen[name][0] != t:
            raise LoweringError(
                f"{describe(op.location)}: error: weight '{name}' is declared as {t} here and "
                f"as {seen[name][0]} at {describe(seen[name][1].location)}")
        seen[name] = (t, op)
    body = module.body
    first = body.operations[0] if len(body.operations) else None
    with module.context, ir.Location.unknown():
        for name, (t, _) in seen.items():
            value = ir.Attribute.parse(
                f"#flow.parameter.named<{json.dumps(PARAM_SCOPE)}::{json.dumps(name)}> : {t}")
            ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
            util.GlobalOp(param_symbol(name), t, sym_visibility="private", initial_value=value,
                          ip=ip)
    ctx.state["params"] = {name: t for name, (t, _) in seen.items()}


__all__ = ["MIR_TO_LINALG", "NOT_YET_LOWERED", "PARAM_SCOPE", "declare_params", "param_symbol"]
