"""MIR normalization ops: rms_norm, layer_norm."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, float_attr, int_attr
from rlx.ir.types import TensorInfo

AXIS = int_attr("axis", "the normalized axis; only the last axis (-1) is supported",
                default=-1)
EPS = float_attr("eps", default=1e-6)


def _last_axis(c: Check) -> None:
    rank = c["x"].rank
    if checks.normalize_axis(c, "axis", c.attr("axis"), rank) != rank - 1:
        c.fail("attribute 'axis'", f"the last axis (-1 or {rank - 1})", str(c.attr("axis")))


@MIR.op("rms_norm", operands=["x", "gamma", "beta"], attrs=[AXIS, EPS])
def rms_norm(c: Check) -> list[TensorInfo]:
    """RMS normalization ``x / sqrt(mean(x²) + eps) * gamma + beta`` (``Op::RmsNorm``).

    Example::

        %y = "rlx_mir.rms_norm"(%x, %g, %b) {axis = -1 : i64, eps = 9.99999997E-7 : f32}
            : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    """
    checks.positive_eps(c)
    t = checks.norm_params(c, "x", "gamma", "beta")
    _last_axis(c)
    return [t]


@MIR.op("layer_norm", operands=["x", "gamma", "beta"], attrs=[AXIS, EPS])
def layer_norm(c: Check) -> list[TensorInfo]:
    """Layer normalization ``(x - mean) / sqrt(var + eps) * gamma + beta`` (``Op::LayerNorm``).

    The variance is the biased (population) one, as in PyTorch.

    Example::

        %y = "rlx_mir.layer_norm"(%x, %g, %b) {axis = -1 : i64, eps = 9.99999974E-6 : f32}
            : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    """
    checks.positive_eps(c)
    t = checks.norm_params(c, "x", "gamma", "beta")
    _last_axis(c)
    return [t]
