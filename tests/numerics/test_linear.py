"""Numerics of the linear family (hir_to_mir/linear.py, mir_to_linalg/contraction.py and
fused.py) against the numpy reference, on llvm-cpu and Vulkan, f32 and f16."""

from __future__ import annotations

import pytest
from harness import TARGETS, check_module

import rlx


def linear_family(policy: str, dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("linear", policy)
    x = h.input("x", (2, None, 32), dtype)
    w, b = h.param("w", (32, 48), dtype), h.param("b", (48,), dtype)
    outs = [h.linear(x, w, b, "silu"), h.linear(x, w, b, "gelu"), h.linear(x, w),
            h.linear(x, w, b), h.linear_fused(x, w, b, "relu")]
    first, second = h.shared_linear_pair(x, w, h.param("w2", (32, 16), dtype))
    ffn = h.swiglu_ffn(x, h.param("up", (32, 64), dtype), h.param("gate", (32, 64), dtype),
                       h.param("down", (64, 24), dtype))
    h.set_outputs([*outs, first, second, ffn])
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("policy", ["direct", "fusable"])
def test_linear_family(target: str, dtype: str, policy: str) -> None:
    check_module(linear_family(policy, dtype), target, dyn=7)
