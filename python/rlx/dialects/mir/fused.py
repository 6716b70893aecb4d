"""MIR fused ops that ``direct`` lowering emits: fused_matmul_bias_act, fused_swiglu,
fused_residual_rms_norm."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.hir.linear import ACTIVATION
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.mir.norm import EPS
from rlx.dialects.schema import Check, bool_attr, opt
from rlx.ir.types import TensorInfo


@MIR.op("fused_matmul_bias_act", operands=["x", "w", "b"], attrs=[ACTIVATION])
def fused_matmul_bias_act(c: Check) -> list[TensorInfo]:
    """``act(x @ w + b)`` in one op (``Op::FusedMatMulBiasAct``).

    Operands ``x [..., K]``, ``w [K, N]``, ``b [N]``; result ``[..., N]``.

    Example::

        %y = "rlx_mir.fused_matmul_bias_act"(%x, %w, %b) {activation = "gelu"}
            : (tensor<4x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
    """
    y = checks.linear_like(c, "x", "w", "b")
    checks.activation_dtype(c, "x", "activation")
    return [y]


@MIR.op("fused_swiglu", operands=["x"],
        attrs=[bool_attr("gate_first", "the gate is the low half (else the high half)",
                         default=False)])
def fused_swiglu(c: Check) -> list[TensorInfo]:
    """``up * silu(gate)`` on a packed ``[..., 2F]`` tensor (``Op::FusedSwiGLU``).

    With ``gate_first = false`` (what SwiGLU lowering emits) the low half is ``up`` and the
    high half ``gate``. Result ``[..., F]``.

    Example::

        %y = "rlx_mir.fused_swiglu"(%ug) {gate_first = false}
            : (tensor<?x512xf32>) -> tensor<?x256xf32>
    """
    t = checks.float_operands(c, "x")
    c.min_rank("x", 1)
    width = t.shape[-1]
    if width is None or width % 2:
        c.fail("operand 'x' dim -1", "an even static width (up and gate halves)", str(t))
    return [t.with_shape((*t.shape[:-1], width // 2))]


@MIR.op("fused_residual_rms_norm",
        operands=["x", "residual", opt("bias", lambda a: a["has_bias"]), "gamma", "beta"],
        attrs=[bool_attr("has_bias", default=False), EPS])
def fused_residual_rms_norm(c: Check) -> list[TensorInfo]:
    """``rms_norm(x + residual (+ bias))`` (``Op::FusedResidualRmsNorm``).

    Operands ``x [..., D]``, ``residual`` (same shape), ``bias [D]`` iff ``has_bias``,
    ``gamma [D]``, ``beta [D]``.

    Example::

        %y = "rlx_mir.fused_residual_rms_norm"(%x, %r, %g, %b)
              {eps = 9.99999974E-6 : f32, has_bias = false}
            : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>)
            -> tensor<8x64xf32>
    """
    checks.positive_eps(c)
    params = ["gamma", "beta"] + (["bias"] if c.has("bias") else [])
    t = checks.norm_params(c, "x", *params)
    checks.float_operands(c, "x", "residual")
    checks.same_shape(c, "x", "residual")
    return [t]
