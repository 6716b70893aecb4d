"""HIR normalization blocks: rms_norm, residual_rms_norm."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import Check, float_attr
from rlx.ir.types import TensorInfo

EPS = float_attr("eps", "added to the mean of squares inside the square root", default=1e-6)


@HIR.op("rms_norm", operands=["x", "gamma", "beta"], attrs=[EPS], label="rms_norm")
def rms_norm(c: Check) -> list[TensorInfo]:
    """RMS normalization over the last axis: ``y = x / sqrt(mean(x²) + eps) * gamma + beta``.

    Operands: ``x [..., D]``, ``gamma [D]`` (multiplies directly: no implicit ``1 + gamma``),
    ``beta [D]`` (additive, pass zeros for LLaMA-style norms). Attribute ``eps > 0``.
    Result: the shape of ``x``.

    Example::

        %y = "rlx_hir.rms_norm"(%x, %g, %b) {eps = 9.99999997E-7 : f32}
            : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    """
    checks.positive_eps(c)
    return [checks.norm_params(c, "x", "gamma", "beta")]


@HIR.op("residual_rms_norm", operands=["x", "residual", "gamma", "beta"], attrs=[EPS],
        label="residual_rms_norm")
def residual_rms_norm(c: Check) -> list[TensorInfo]:
    """``rms_norm(x + residual)``; only the normalized value is a result (not the sum).

    Operands: ``x [..., D]``, ``residual`` (same shape), ``gamma [D]``, ``beta [D]``.
    Attribute ``eps > 0``. ``direct`` lowers to ``rlx_mir.fused_residual_rms_norm``.

    Example::

        %y = "rlx_hir.residual_rms_norm"(%x, %r, %g, %b) {eps = 9.99999974E-6 : f32}
            : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
            -> tensor<2x8x64xf32>
    """
    checks.positive_eps(c)
    t = checks.norm_params(c, "x", "gamma", "beta")
    checks.float_operands(c, "x", "residual")
    checks.same_shape(c, "x", "residual")
    return [t]
