"""Numerics of the linear family (hir_to_mir/linear.py, mir_to_linalg/contraction.py and
fused.py) against the numpy reference, on llvm-cpu and Vulkan, f32 and f16."""

from __future__ import annotations

import re

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


def test_f32_prefill_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """f32 matmuls of parameter weights over a dynamic M, in column blocks of 32 (as on an
    Intel CPU with AVX-512; forced here, the kernel's 16-lane vectors split where the host has
    fewer): quant/f32_matmul.py's kernel for a plain linear (K = 96: a chunk of 3 blocks), a
    [2, S, K] input, the direct policy's packed gate / up (two parameters concatenated along
    N) and its down projection, and a linear over 704 columns (22 column blocks, workgroups
    of several), a linear with a bias and GELU (the direct policy's fused_matmul_bias_act,
    the bias and activation after the kernel); IREE's matmul where the kernel does not apply
    (N = 48, a weight passed in, a static M of 4). Against the numpy reference at M = 1,
    under a pass, across passes with a remainder, and past a workgroup's rows."""
    monkeypatch.setattr(rlx.compiler, "vector_bits_of", lambda cpu, flags: 512)
    h = rlx.HirModule("f32_prefill", "direct")
    x = h.input("x", (None, 96))
    x3 = h.input("x3", (2, None, 256))
    w, w704 = h.param("w", (96, 64)), h.param("w704", (256, 704))
    ffn = h.swiglu_ffn(x, h.param("up", (96, 160)), h.param("gate", (96, 160)),
                       h.param("down", (160, 96)))
    small = h.linear(h.input("x4", (4, 96)), w)
    biased = h.linear(x3, h.param("wb", (256, 96)), h.param("b", (96,)), "gelu")
    h.set_outputs([h.linear(x, w), h.linear(x3, w704), ffn, h.linear(x, h.param("w48", (96, 48))),
                   h.linear(x, h.input("wi", (96, 64))), small, biased])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg", prefill_columns=32)
    ran = re.findall(r"flow\.dispatch @rlx_gemv_(\w+)::", linalg)
    assert sorted(ran) == sorted(["f32_64x96_mdynwc32", "f32_704x256_mdynwc32",
                                  "f32_320x96_mdynwc32", "f32_96x160_mdynwc32",
                                  "f32_96x256_mdynwc32"]), ran
    check_module(h, "llvm-cpu", dyn=(1, 5, 33, 70), prefill_columns=32)
