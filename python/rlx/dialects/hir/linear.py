"""HIR linear-layer blocks: linear, linear_fused, shared_linear_pair, swiglu."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import LINEAR_ACTIVATIONS
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import Check, bool_attr, enum_attr, opt
from rlx.ir.types import TensorInfo

ACTIVATION = enum_attr("activation", LINEAR_ACTIVATIONS,
                       "activation applied after the bias (\"none\" for none)", default="none")


@HIR.op(
    "linear",
    operands=["x", "weight", opt("bias", lambda a: a["has_bias"])],
    attrs=[ACTIVATION, bool_attr("has_bias", "whether the bias operand is present")],
    label="linear",
)
def linear(c: Check) -> list[TensorInfo]:
    """Linear layer ``y = act(x @ weight + bias)``.

    Operands: ``x [..., K]``, ``weight [K, N]`` (RLX layout: in, out), and ``bias [N]`` iff
    ``has_bias``. Attributes: ``activation`` (``"none"``, ``"silu"``, ``"gelu"``, ...),
    ``has_bias``. Result ``[..., N]``. Under the ``direct`` policy a biased linear lowers to
    one ``rlx_mir.fused_matmul_bias_act``; otherwise to matmul, add and activation.

    Example::

        %y = "rlx_hir.linear"(%x, %w, %b) {activation = "silu", has_bias = true}
            : (tensor<?x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<?x3072xf32>
            loc("layers.0.fc1")
    """
    y = checks.linear_like(c, "x", "weight", "bias" if c.has("bias") else None)
    checks.activation_dtype(c, "x", "activation")
    return [y]


@HIR.op(
    "linear_fused",
    operands=["x", "weight", "bias"],
    attrs=[ACTIVATION],
    label="linear_fused",
)
def linear_fused(c: Check) -> list[TensorInfo]:
    """Linear layer that always lowers to ``rlx_mir.fused_matmul_bias_act``.

    Operands: ``x [..., K]``, ``weight [K, N]``, ``bias [N]``. Attribute: ``activation``.
    Result ``[..., N]`` = ``act(x @ weight + bias)``, whatever the fusion policy.

    Example::

        %y = "rlx_hir.linear_fused"(%x, %w, %b) {activation = "gelu"}
            : (tensor<4x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
    """
    y = checks.linear_like(c, "x", "weight", "bias")
    checks.activation_dtype(c, "x", "activation")
    return [y]


@HIR.op(
    "shared_linear_pair",
    operands=["x", "w_first", "w_second"],
    results=["first", "second"],
    label="shared_linear_pair",
)
def shared_linear_pair(c: Check) -> list[TensorInfo]:
    """Two matmuls that share their input (QKV, SwiGLU up + gate).

    Operands: ``x [..., K]``, ``w_first [K, N1]``, ``w_second [K, N2]``. Results:
    ``first = x @ w_first`` ``[..., N1]`` and ``second = x @ w_second`` ``[..., N2]``. RLX's
    two ``slot`` nodes are the two results of one op here.

    Example::

        %up, %gate = "rlx_hir.shared_linear_pair"(%x, %wu, %wg)
            : (tensor<?x64xf32>, tensor<64x256xf32>, tensor<64x256xf32>)
            -> (tensor<?x256xf32>, tensor<?x256xf32>)
    """
    first = checks.linear_like(c, "x", "w_first")
    second = checks.linear_like(c, "x", "w_second")
    return [first, second]


@HIR.op(
    "swiglu",
    operands=["x", "up_w", "gate_w", "down_w"],
    label="swiglu_ffn",
)
def swiglu(c: Check) -> list[TensorInfo]:
    """SwiGLU feed-forward block ``y = (silu(x @ gate_w) * (x @ up_w)) @ down_w``.

    Operands, in RLX's order (up before gate): ``x [..., K]``, ``up_w [K, F]``,
    ``gate_w [K, F]``, ``down_w [F, N]``. Result ``[..., N]``. SiLU applies to the gate
    projection only. ``direct`` lowers to a matmul over the concatenated ``[up | gate]``
    weight plus ``rlx_mir.fused_swiglu``; ``fusable`` to five primitive ops.

    Example::

        %y = "rlx_hir.swiglu"(%x, %up, %gate, %down)
            : (tensor<?x768xf32>, tensor<768x2048xf32>, tensor<768x2048xf32>,
               tensor<2048x768xf32>) -> tensor<?x768xf32> loc("ffn")
    """
    up = checks.linear_like(c, "x", "up_w")
    checks.float_operands(c, "x", "gate_w", "down_w")
    c.shape("gate_w", c.refs("up_w"), "the shape of 'up_w' ([K, F])")
    n = checks.weight_kn(c, "down_w", c.ref("up_w", 1), "F = 'up_w' dim 1")
    return [up.with_shape((*up.shape[:-1], n.size))]
