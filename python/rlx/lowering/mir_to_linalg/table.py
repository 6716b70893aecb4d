"""The ``mir-to-linalg`` lowering table, which each family module registers its rules into,
and the weights' globals that the ``param`` rule loads (declared before the rules run)."""

from __future__ import annotations

import json
import math

from iree.compiler import ir
from iree.compiler.dialects import util

from rlx.dialects import param_lead
from rlx.dialects.mir import MIR
from rlx.ir.text import walk_ops
from rlx.lowering import emit
from rlx.lowering.registry import LoweringContext, LoweringTable

MIR_TO_LINALG = LoweringTable("mir-to-linalg", MIR, size_checks=True)
PARAM_SCOPE = "model"

NOT_YET_LOWERED: dict[str, str] = {}
"""MIR ops without a mir-to-linalg rule yet, and why (a test keeps this list exact)."""


def param_symbol(name: str) -> str:
    return f"param.{name}"


def declare_params(module: ir.Module, ctx: LoweringContext) -> None:
    """One ``util.global`` per weight name, bound to ``#flow.parameter.named<"model"::NAME>``
    so the weights live in a parameter file, never in the vmfb. A weight with a ``lead`` is
    the global ``tensor<(lead + N)xi8>`` (:func:`load_param` takes its bytes from ``lead``).
    Every declaration of a name has one type and lead: ``verify_module`` refused the module
    otherwise before this pass ran."""
    seen: dict[str, tuple[ir.Type, int]] = {}
    for op in walk_ops(module.operation):
        if op.name == "rlx_mir.param":
            seen.setdefault(ir.StringAttr(op.attributes["name"]).value,
                            (op.results[0].type, param_lead(op)))
    body = module.body
    first = body.operations[0] if len(body.operations) else None
    with module.context, ir.Location.unknown():
        for name, (t, lead) in seen.items():
            stored = _stored_type(t, lead)
            value = ir.Attribute.parse(
                f"#flow.parameter.named<{json.dumps(PARAM_SCOPE)}::{json.dumps(name)}> : "
                f"{stored}")
            ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
            util.GlobalOp(param_symbol(name), stored, sym_visibility="private",
                          initial_value=value, ip=ip)
    ctx.state["params"] = seen


def _stored_type(t: ir.Type, lead: int) -> ir.Type:
    if not lead:
        return t
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get([lead + math.prod(rt.shape)], rt.element_type)


def load_param(ctx: LoweringContext, name: str) -> ir.Value:
    """Weight ``name`` (declared by :func:`declare_params`) as its param op's type: its
    global's value, or for a weight with a ``lead`` the global's bytes from ``lead`` on,
    reshaped (a slice of the parameter: nothing is copied)."""
    t, lead = ctx.state["params"][name]
    value = util.GlobalLoadOp(_stored_type(t, lead), param_symbol(name)).result
    if not lead:
        return value
    shape = list(ir.RankedTensorType(t).shape)
    flat = emit.extract_slice(value, [lead], [math.prod(shape)])
    return emit.expand(flat, [list(range(len(shape)))], shape)


__all__ = ["MIR_TO_LINALG", "NOT_YET_LOWERED", "PARAM_SCOPE", "declare_params", "load_param",
           "param_symbol"]
