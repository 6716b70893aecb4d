"""Numerics of the norm family (rms_norm, residual_rms_norm, layer_norm, the fused
residual norm) against the numpy reference."""

from __future__ import annotations

import pytest
from harness import TARGETS, check_module

import rlx


def norms(policy: str, dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("norms", policy)
    x = h.input("x", (None, 3, 64), dtype)
    r = h.input("r", (None, 3, 64), dtype)
    g, b = h.param("g", (64,), dtype), h.param("b", (64,), dtype)
    outs = [h.rms_norm(x, g, b, 1e-6), h.residual_rms_norm(x, r, g, b, 1e-5),
            h.mir("layer_norm", [x, g, b], eps=1e-5),
            h.mir("fused_residual_rms_norm", [x, r, b, g, b], has_bias=True, eps=1e-6)]
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("policy", ["direct", "fusable"])
def test_norms(target: str, dtype: str, policy: str) -> None:
    check_module(norms(policy, dtype), target, dyn=4)


def test_rms_norm_eps_inside_the_root() -> None:
    """A zero row normalizes to beta (x * rsqrt(0 + eps) = 0), not NaN."""
    import numpy as np

    h = rlx.HirModule("zero")
    x = h.input("x", (2, 8))
    h.set_outputs([h.rms_norm(x, h.param("g", (8,)), h.param("b", (8,)), 1e-6)])
    out = check_module(h, "llvm-cpu", inputs={"x": np.zeros((2, 8), np.float32)})[0]
    assert np.all(np.isfinite(out))
