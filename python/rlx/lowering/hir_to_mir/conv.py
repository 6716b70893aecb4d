"""hir-to-mir for convolution blocks: depthwise_conv1d_causal (spec 2.10 chain)."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext

LENGTH_AS_HEIGHT = ("cuda", "rocm")
"""Targets whose conv takes the frames as its height (``[B, C, W, 1]``, kernel ``[K, 1]``)
instead of its width (``[B, C, 1, W]``, kernel ``[1, K]``): with a dynamic batch and a
dynamic length (rlx-serve's batched Qwen3.5 prefill) IREE 3.13's CUDA codegen fails on the
width form's rank-reducing loads ("expected result type to be 'memref<1x1x1x1xf32 ...>' or
a rank-reduced version"); the height form compiles. Other targets keep the width form."""


@HIR_TO_MIR.register("depthwise_conv1d_causal")
def lower_depthwise_conv1d_causal(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """concat(left_pad, x) -> [B, C, 1, K-1+S] -> grouped conv [1, K] -> [B, S, C]; with
    ``carry`` also the concat's last K - 1 frames (a narrow from the end)."""
    k = op.attrs["kernel_size"]
    b, _, c = emit.static_shape(op["input"])
    padded = mir("concat", op["left_pad"], op["input"], axis=1)
    # a dynamic batch (several prompts) keeps its dims by copying them (-2 - k: input dim k)
    tall = ctx.options.target in LENGTH_AS_HEIGHT
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
