"""hir-to-mir for convolution blocks: depthwise_conv1d_causal (spec 2.10 chain)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


@HIR_TO_MIR.register("depthwise_conv1d_causal")
def lower_depthwise_conv1d_causal(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """concat(left_pad, x) -> [B, C, 1, K-1+S] -> grouped conv [1, K] -> [B, S, C]; with
    ``carry`` also the concat's last K - 1 frames (a narrow from the end)."""
    k = op.attrs["kernel_size"]
    b, _, c = emit.static_shape(op["input"])
    padded = mir("concat", op["left_pad"], op["input"], axis=1)
    # a dynamic batch (several prompts) keeps its dims by copying them (-2 - k: input dim k)
    # LLVMGPU targets take the frames as the conv's height ([B, C, W, 1], kernel [K, 1]):
    # with a dynamic batch and length (rlx-serve's batched Qwen3.5 prefill) IREE 3.13's CUDA
    # codegen fails on the width form's rank-reducing loads; other targets keep the width
    tall = ctx.options.llvmgpu
    nchw = mir("reshape", mir("transpose", padded, perm=[0, 2, 1]),
               new_shape=([b, c, -1, 1] if tall else [b, c, 1, -1]) if b is not None else
               ([-2, -3, -4, 1] if tall else [-2, -3, 1, -4]))
    weight = mir("reshape", op["weight"], new_shape=[c, 1, k, 1]) if tall else op["weight"]
    y = mir("conv", nchw, weight, kernel_size=[k, 1] if tall else [1, k], stride=[1, 1],
            padding=[0, 0], dilation=[1, 1], groups=c)
    out = [mir("transpose", mir("reshape", y, new_shape=[b, c, -1] if b is not None
                                else [-2, -3, -4] if tall else [-2, -3, -5]), perm=[0, 2, 1])]
    if op.attrs.get("carry"):
        out.append(mir("narrow", padded, axis=1, start=-(k - 1), len=k - 1))
    return out
