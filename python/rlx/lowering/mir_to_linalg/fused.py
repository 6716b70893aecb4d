"""mir-to-linalg for the fused ops of ``direct`` lowering: fused_matmul_bias_act,
fused_swiglu, fused_residual_rms_norm (each a matmul or reduction plus one elementwise
generic that IREE fuses into the same dispatch; on llvm-cpu an f32 prefill of a parameter
weight is :mod:`.quant.f32_matmul`'s dispatch, the bias and activation a generic after it)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.contraction import fenced_rows, matmul_acc
from rlx.lowering.mir_to_linalg.elementwise import apply_activation
from rlx.lowering.mir_to_linalg.norm import rms_norm
from rlx.lowering.mir_to_linalg.quant.f32_matmul import lower_f32_prefill
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("fused_matmul_bias_act")
def lower_fused_matmul_bias_act(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    out_t = emit.elem(x)
    # llvm-cpu, an f32 prefill of a parameter weight: rlx's column-block GEMM, the bias and
    # activation a generic after its dispatch (quant.f32_matmul)
    acc = lower_f32_prefill(ctx, x, op["w"])
    if acc is None:
        acc = matmul_acc(fenced_rows(ctx, x, op["w"]), op["w"])
    act = op.attrs["activation"]

    def body(a: ir.Value, b: ir.Value) -> ir.Value:
        y = emit.add(a, emit.convert(b, a.type))
        if act != "none":
            y = apply_activation(act, y)
        return emit.convert(y, out_t)

    return [emit.map_elementwise([acc, op["b"]], out_t, body, emit.sizes(acc))]


@MIR_TO_LINALG.register("fused_swiglu")
def lower_fused_swiglu(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``up * silu(gate)`` from the two halves of the last dim."""
    x = op["x"]
    half = emit.static_shape(x)[-1] // 2
    low = emit.narrow(x, -1, 0, half)
    high = emit.narrow(x, -1, half, half)
    gate, up = (low, high) if op.attrs["gate_first"] else (high, low)
    out_t = emit.elem(x)

    def body(u: ir.Value, g: ir.Value) -> ir.Value:
        return emit.convert(emit.mul(emit.to_f32(u), apply_activation("silu", emit.to_f32(g))),
                            out_t)

    return [emit.map_elementwise([up, gate], out_t, body, emit.sizes(up))]


@MIR_TO_LINALG.register("fused_residual_rms_norm")
def lower_fused_residual_rms_norm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    parts = [op["x"], op["residual"]] + ([op["bias"]] if op.has("bias") else [])
    x = op["x"]

    def body(*vals: ir.Value) -> ir.Value:
        total = vals[0]
        for v in vals[1:]:
            total = emit.add(total, v)
        return total

    s = emit.map_elementwise(parts, emit.elem(x), body, emit.sizes(x))
    return [rms_norm(ctx, s, op["gamma"], op["beta"], op.attrs["eps"])]
