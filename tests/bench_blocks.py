"""The rlx form of the benchmarked transformer blocks (``benchmarks/blocks.py`` holds their
PyTorch and ONNX forms and the harness): shapes from cpu-performance-anchors.md, batch 1, f32,
hidden 1024, 16 query heads / 4 KV heads of 64, FFN 2816, prefill seq 128, decode 1 token
against a 512-position cache.

A test helper: ``tests/test_dispatch_counts.py`` counts the dispatches of exactly these
modules, and ``python -m benchmarks`` times them.
"""

from __future__ import annotations

import rlx

E, H, KVH, HD, F, S, PAST, EPS = 1024, 16, 4, 64, 2816, 128, 512, 1e-5
KVD = KVH * HD
BLOCKS = ("rmsnorm", "swiglu_ffn", "attention", "prefill_block", "decode_step")


def rlx_block(name: str) -> rlx.HirModule:
    h = rlx.HirModule(name)
    p = {n: h.param(n, s) for n, s in [
        ("ln1", (E,)), ("ln2", (E,)), ("q", (E, H * HD)), ("k", (E, KVD)), ("v", (E, KVD)),
        ("o", (H * HD, E)), ("gate", (E, F)), ("up", (E, F)), ("down", (F, E)),
        ("zeros", (E,))]}
    if name == "rmsnorm":
        x = h.input("x", (1, S, E))
        h.set_outputs([h.rms_norm(x, p["ln1"], p["zeros"], EPS)])
    elif name == "swiglu_ffn":
        x = h.input("x", (S, E))
        h.set_outputs([h.swiglu_ffn(x, p["up"], p["gate"], p["down"])])
    elif name == "attention":
        q, k, v = h.input("q", (1, S, H * HD)), h.input("k", (1, S, KVD)), h.input("v", (1, S, KVD))
        h.set_outputs([h.attention(q, k, v, num_heads=H, head_dim=HD, mask_kind="causal")])
    elif name == "prefill_block":
        x = h.input("x", (1, S, E))
        cos, sin = h.input("cos", (S, HD // 2)), h.input("sin", (S, HD // 2))
        h.set_outputs([h.llama_decoder_block(
            x, p["ln1"], p["zeros"], p["q"], p["k"], p["v"], p["o"], p["ln2"], p["zeros"],
            p["gate"], p["up"], p["down"], cos, sin, num_heads=H, head_dim=HD, num_kv_heads=KVH,
            eps=EPS)])
    elif name == "decode_step":
        x = h.input("x", (1, 1, E))
        cos, sin = h.input("cos", (1, HD // 2)), h.input("sin", (1, HD // 2))
        kc, vc = h.input("k_cache", (1, PAST, KVD)), h.input("v_cache", (1, PAST, KVD))
        n1 = h.rms_norm(x, p["ln1"], p["zeros"], EPS)
        q = h.rope(h.linear(n1, p["q"]), cos, sin, HD)
        k = h.mir("concat", [kc, h.rope(h.linear(n1, p["k"]), cos, sin, HD)], axis=1)
        v = h.mir("concat", [vc, h.linear(n1, p["v"])], axis=1)
        a = h.attention(q, k, v, num_heads=H, head_dim=HD, mask_kind="causal")
        x1 = h.mir("binary", [x, h.linear(a, p["o"])], kind="add")
        n2 = h.rms_norm(x1, p["ln2"], p["zeros"], EPS)
        y = h.mir("binary", [x1, h.swiglu_ffn(n2, p["up"], p["gate"], p["down"])], kind="add")
        h.set_outputs([y, k, v])
    else:
        raise ValueError(name)
    return h
