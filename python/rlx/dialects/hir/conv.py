"""HIR convolution block: depthwise_conv1d_causal."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import AttrValues, Check, Operand, bool_attr, int_attr
from rlx.ir.types import TensorInfo


def depthwise_conv1d_causal_result(c: Check) -> TensorInfo:
    """Shared rule of the HIR block (and its MIR decomposition's checks)."""
    k = c.positive("kernel_size")
    x = checks.float_operands(c, "input", "weight", "left_pad")
    c.rank("input", 3)
    channels = x.shape[2]
    if channels is None:
        c.fail("operand 'input'", "a static channel dim ([B, S, C]: C static)", str(x))
    c.shape("weight", (channels, 1, 1, k), "[C, 1, 1, kernel_size] (grouped conv layout)")
    c.shape("left_pad", (c.ref("input", 0), k - 1, channels), "[B, kernel_size - 1, C]: the "
            "frames before the first input frame")
    return x


def _carry(a: AttrValues) -> bool:
    return bool(a.get("carry"))


@HIR.op("depthwise_conv1d_causal", operands=["input", "weight", "left_pad"],
        attrs=[int_attr("kernel_size"),
               bool_attr("carry", "also return the last kernel_size - 1 frames (the next "
                         "chunk's left_pad); absent: false", optional=True)],
        results=["y", Operand("final_frames", when=_carry)], label="depthwise_conv1d_causal")
def depthwise_conv1d_causal(c: Check) -> list[TensorInfo]:
    """Causal depthwise conv1d over ``[B, S, C]`` (cross-correlation, stride 1, no bias).

    Operands: ``input [B, S, C]``, ``weight [C, 1, 1, K]``, ``left_pad [B, K - 1, C]`` (zeros,
    or the previous chunk's last K - 1 frames when streaming). With
    ``P = concat(left_pad, input)`` along S: ``y[b, t, c] = Σ_j weight[c, 0, 0, j] *
    P[b, t + j, c]``; ``weight[c, 0, 0, K - 1]`` multiplies the current frame.
    Attribute ``kernel_size = K``. Result ``[B, S, C]``; C is static, B and S may be
    dynamic. With ``carry`` (rlx; RLX streams by hand) a second result ``final_frames``
    ``[B, K - 1, C]``: the last ``K - 1`` frames of ``P``, the ``left_pad`` of the next
    chunk (a causal conv's state between calls: chunks chained this way equal one call).

    Example::

        %y = "rlx_hir.depthwise_conv1d_causal"(%x, %w, %pad) {kernel_size = 4 : i64}
            : (tensor<2x?x64xf32>, tensor<64x1x1x4xf32>, tensor<2x3x64xf32>) -> tensor<2x?x64xf32>
    """
    y = depthwise_conv1d_causal_result(c)
    if _carry(c.attrs):
        return [y, y.with_shape((y.shape[0], c.attr("kernel_size") - 1, y.shape[2]))]
    return [y]
