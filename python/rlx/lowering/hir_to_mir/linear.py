"""hir-to-mir for linear blocks: linear, linear_fused, shared_linear_pair, swiglu."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("linear")
def lower_linear(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``direct`` with a bias: one fused op; otherwise matmul [+ add] [+ activation]."""
    act = op.attrs["activation"]
    if op.has("bias") and ctx.policy == "direct":
        return [mir("fused_matmul_bias_act", op["x"], op["weight"], op["bias"], activation=act)]
    y = mir("matmul", op["x"], op["weight"])
    if op.has("bias"):
        y = mir("binary", y, op["bias"], kind="add")
    if act != "none":
        y = mir("activation", y, kind=act)
    return [y]


@HIR_TO_MIR.register("linear_fused")
def lower_linear_fused(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [mir("fused_matmul_bias_act", op["x"], op["weight"], op["bias"],
                activation=op.attrs["activation"])]


@HIR_TO_MIR.register("shared_linear_pair")
def lower_shared_linear_pair(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [mir("matmul", op["x"], op["w_first"]), mir("matmul", op["x"], op["w_second"])]


@HIR_TO_MIR.register("swiglu")
def lower_swiglu(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``direct``: one matmul over ``[up | gate]`` then ``fused_swiglu``; else 5 ops."""
    x, up, gate, down = op["x"], op["up_w"], op["gate_w"], op["down_w"]
    if ctx.policy == "direct":
        packed = mir("matmul", x, mir("concat", up, gate, axis=1))
        return [mir("matmul", mir("fused_swiglu", packed, gate_first=False), down)]
    u = mir("matmul", x, up)
    g = mir("activation", mir("matmul", x, gate), kind="silu")
    return [mir("matmul", mir("binary", u, g, kind="mul"), down)]
