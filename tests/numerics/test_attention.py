"""Numerics of attention and RoPE: every mask kind, GQA, all q/k/v layouts, dynamic and
different query / key lengths, both lowerings (decomposed; IREE's fused op on llvm-cpu)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TARGETS, check_module

import rlx
from rlx.dialects.enums import MASK_KINDS


def attention_module(mask_kind: str, dtype: str, *, q_len: int | None = None,
                     kv_len: int | None = None) -> rlx.HirModule:
    """Packed heads, GQA (8 query heads over 2 KV heads), dynamic lengths."""
    h = rlx.HirModule(f"attn_{mask_kind}")
    q = h.input("q", (2, q_len, 8 * 16), dtype)
    k = h.input("k", (2, kv_len, 2 * 16), dtype)
    v = h.input("v", (2, kv_len, 2 * 16), dtype)
    mask = None
    if mask_kind == "custom":
        mask = h.input("mask", (2, kv_len), dtype)
    elif mask_kind == "bias":
        mask = h.input("mask", (2, 8, q_len, kv_len), dtype)
    window = 3 if mask_kind == "sliding_window" else None
    h.set_outputs([h.attention(q, k, v, mask, num_heads=8, head_dim=16, mask_kind=mask_kind,
                               window=window)])
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
def test_attention_masks(target: str, dtype: str, mask_kind: str) -> None:
    h = attention_module(mask_kind, dtype)
    inputs = {}
    if mask_kind == "custom":
        m = (np.random.default_rng(3).random((2, 6)) < 0.6).astype(np.float16 if dtype == "f16"
                                                                    else np.float32)
        m[:, 0] = 1
        inputs["mask"] = m
    check_module(h, target, dyn=6, inputs=inputs)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
def test_decode_shape_queries_are_the_last_positions(mask_kind: str, dtype: str) -> None:
    """S = 1 query against S_k = 9 keys: causal keeps every key, a window of 3 keeps 4."""
    h = rlx.HirModule("decode")
    q = h.input("q", (1, 1, 64), dtype)
    k = h.input("k", (1, None, 32), dtype)
    v = h.input("v", (1, None, 32), dtype)
    mask = None
    if mask_kind == "custom":
        mask = h.input("mask", (1, None), dtype)
    elif mask_kind == "bias":
        mask = h.input("mask", (1, 4, 1, None), dtype)
    window = 3 if mask_kind == "sliding_window" else None
    h.set_outputs([h.attention(q, k, v, mask, num_heads=4, head_dim=16, mask_kind=mask_kind,
                               window=window)])
    check_module(h, "llvm-cpu", dyn=9)


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "mask_kind", "window", "keys"), [
    (9, 3, 64, "causal", None, 1),          # the 135M model's shape; one key
    (9, 3, 64, "causal", None, 37),
    (4, 4, 32, "none", None, 300),          # MHA, a cache longer than the unrolled tiles
    (32, 8, 128, "causal", None, 19),       # the 1B model's shape
    (6, 2, 16, "sliding_window", 5, 40),    # the last 6 keys
    (6, 2, 16, "sliding_window", 50, 40),   # a window wider than the cache
    (4, 2, 16, "causal", None, -7),          # a static cache length (7); V's dynamic
])
def test_decode_attention_kernel(heads: int, kv_heads: int, head_dim: int, mask_kind: str,
                                 window: int | None, keys: int) -> None:
    """One query against the cache through rlx's hand-written llvm-cpu kernel (one
    dispatch, checked in the lowered module), against the numpy reference; scores large
    enough (inputs x 4) that a missing max subtraction or a wrong head mapping shows.
    ``keys < 0``: a static K length of ``-keys`` (V stays dynamic)."""
    h = rlx.HirModule("decode_kernel")
    length = -keys if keys < 0 else None
    keys = abs(keys)
    q = h.input("q", (1, 1, heads * head_dim))
    k = h.input("k", (1, length, kv_heads * head_dim))
    v = h.input("v", (1, None, kv_heads * head_dim))
    h.set_outputs([h.attention(q, k, v, num_heads=heads, head_dim=head_dim,
                               mask_kind=mask_kind, window=window)])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    assert linalg.count("flow.dispatch @rlx_attention_decode_") == 1
    assert "linalg.softmax" not in linalg
    rng = np.random.default_rng(keys)
    inputs = {"q": 4 * rng.standard_normal((1, 1, heads * head_dim), np.float32),
              "k": rng.standard_normal((1, keys, kv_heads * head_dim), np.float32),
              "v": rng.standard_normal((1, keys, kv_heads * head_dim), np.float32)}
    check_module(h, "llvm-cpu", inputs=inputs)


def test_decode_score_scale_and_softcap() -> None:
    h = rlx.HirModule("scale")
    q = h.input("q", (1, 1, 32))
    kv = h.input("kv", (1, 5, 32))
    h.set_outputs([h.mir("attention", [q, kv, kv], num_heads=2, head_dim=16, mask_kind="none",
                         score_scale=0.5, attn_logit_softcap=2.0)])
    check_module(h, "llvm-cpu")


def layouts(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("layouts")
    outs = []
    q2 = h.input("q2", (None, 4 * 8), dtype)
    kv2 = h.input("kv2", (None, 4 * 8), dtype)
    outs.append(h.attention(q2, kv2, kv2, num_heads=4, head_dim=8, mask_kind="causal"))
    bshd = h.input("bshd", (2, None, 4, 8), dtype)
    kv4 = h.input("kv4", (2, None, 2, 8), dtype)
    outs.append(h.attention(bshd, kv4, kv4, num_heads=4, head_dim=8, mask_kind="causal"))
    bhsd = h.input("bhsd", (2, 4, 5, 8), dtype)
    kvh = h.input("kvh", (2, 1, 7, 8), dtype)
    outs.append(h.attention(bhsd, kvh, kvh, num_heads=4, head_dim=8, mask_kind="causal"))
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
def test_attention_layouts(target: str) -> None:
    check_module(layouts("f32"), target, dyn=6)


@pytest.mark.parametrize("mask_kind", MASK_KINDS)
def test_fused_attention_lowering(mask_kind: str) -> None:
    """iree_linalg_ext.attention (the CUDA / ROCm default), selected on llvm-cpu."""
    h = attention_module(mask_kind, "f32")
    inputs = {}
    if mask_kind == "custom":
        m = (np.random.default_rng(3).random((2, 6)) < 0.6).astype(np.float32)
        m[:, 0] = 1
        inputs["mask"] = m
    check_module(h, "llvm-cpu", dyn=6, inputs=inputs, attention="fused")


def test_score_scale_and_softcap() -> None:
    h = rlx.HirModule("scale")
    q = h.input("q", (1, 4, 32))
    h.set_outputs([h.mir("attention", [q, q, q], num_heads=2, head_dim=16, mask_kind="none",
                         score_scale=0.5, attn_logit_softcap=2.0)])
    check_module(h, "llvm-cpu")


def rope_module(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("rope")
    x = h.input("x", (2, None, 4 * 16), dtype)
    cos, sin = h.input("cos", (None, 8), dtype), h.input("sin", (None, 8), dtype)
    x2 = h.input("x2", (None, 2 * 16), dtype)
    x4 = h.input("x4", (2, None, 3, 16), dtype)
    outs = []
    for style in ("neox", "gptj"):
        outs += [h.rope(x, cos, sin, 16, 16, style), h.rope(x, cos, sin, 16, 6, style),
                 h.rope(x2, cos, sin, 16, 10, style), h.rope(x4, cos, sin, 16, 16, style)]
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rope(target: str, dtype: str) -> None:
    check_module(rope_module(dtype), target, dyn=5)


def test_rope_table_longer_than_sequence() -> None:
    """Tables hold T >= S rows; row t is position t."""
    h = rlx.HirModule("rope_long")
    x = h.input("x", (1, 3, 32))
    cos, sin = h.param("cos", (16, 8)), h.param("sin", (16, 8))
    h.set_outputs([h.rope(x, cos, sin, 16, 16)])
    check_module(h, "llvm-cpu")


@pytest.mark.parametrize("barriers", [True, False])
@pytest.mark.parametrize(("batch", "heads", "kv_heads", "head_dim"),
                         [(2, 2, 1, 4), (None, 1, 1, 8)])
def test_projected_attention_with_data_tiling(barriers: bool, batch: int | None, heads: int,
                                              kv_heads: int, head_dim: int) -> None:
    """Found by tests/fuzz: q/k/v projected from one input, 3 positions. IREE 3.13 with data
    tiling computed wrong attention unless q/k/v pass a barrier; rlx emits them whenever
    data tiling is on, even with compute_barriers=False."""
    h = rlx.HirModule("fuzz_regression")
    x = h.input("x0", (batch, 3, 8))
    q = h.linear(x, h.param("p1", (8, heads * head_dim)))
    k = h.linear(x, h.param("p2", (8, kv_heads * head_dim)))
    v = h.linear(x, h.param("p3", (8, kv_heads * head_dim)))
    h.set_outputs([h.attention(q, k, v, num_heads=heads, head_dim=head_dim,
                               mask_kind="none")])
    check_module(h, "llvm-cpu", compute_barriers=barriers, dyn=2)
