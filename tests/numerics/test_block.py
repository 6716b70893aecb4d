"""``llama_decoder_block`` / ``transformer_block`` against HF transformers'
``LlamaDecoderLayer`` (random weights from a fixed seed, GQA, causal), and against the
numpy reference for the other mask kinds and GPT-J RoPE."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import DEVICE, TARGETS, check_module

import rlx
from rlx.reference.tolerance import assert_close

SHAPES = [  # (batch, seq, hidden, heads, kv_heads, head_dim, ffn)
    (1, 7, 64, 4, 2, 16, 96),
    (2, 12, 128, 8, 2, 16, 176),
]


def hf_layer(hidden: int, heads: int, kv_heads: int, head_dim: int, ffn: int, seed: int):
    from transformers.models.llama.modeling_llama import (
        LlamaConfig,
        LlamaDecoderLayer,
        LlamaRotaryEmbedding,
    )

    cfg = LlamaConfig(hidden_size=hidden, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, head_dim=head_dim, intermediate_size=ffn,
                      rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=64,
                      attn_implementation="eager")
    torch.manual_seed(seed)
    layer = LlamaDecoderLayer(cfg, layer_idx=0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * (0.2 if p.ndim == 2 else 0.1) + (1.0 if p.ndim == 1
                                                                          else 0.0))
    return cfg, layer, LlamaRotaryEmbedding(cfg)


def block_module(batch: int, hidden: int, heads: int, kv_heads: int, head_dim: int, ffn: int,
                 alias: bool) -> rlx.HirModule:
    h = rlx.HirModule("block")
    x = h.input("x", (batch, None, hidden))
    cos, sin = h.input("cos", (None, head_dim // 2)), h.input("sin", (None, head_dim // 2))
    names = [("ln1_g", (hidden,)), ("ln1_b", (hidden,)), ("q_w", (hidden, heads * head_dim)),
             ("k_w", (hidden, kv_heads * head_dim)), ("v_w", (hidden, kv_heads * head_dim)),
             ("o_w", (heads * head_dim, hidden)), ("ln2_g", (hidden,)), ("ln2_b", (hidden,)),
             ("gate_w", (hidden, ffn)), ("up_w", (hidden, ffn)), ("down_w", (ffn, hidden))]
    p = [h.param(n, s) for n, s in names]
    build = h.transformer_block if alias else h.llama_decoder_block
    h.set_outputs([build(x, *p, cos, sin, num_heads=heads, head_dim=head_dim,
                         num_kv_heads=kv_heads, eps=1e-5)])
    return h


def weights_from_hf(layer) -> dict[str, np.ndarray]:
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in layer.state_dict().items()}
    hidden = sd["input_layernorm.weight"].shape[0]
    t = {name: sd[key].T.copy() for name, key in [
        ("q_w", "self_attn.q_proj.weight"), ("k_w", "self_attn.k_proj.weight"),
        ("v_w", "self_attn.v_proj.weight"), ("o_w", "self_attn.o_proj.weight"),
        ("gate_w", "mlp.gate_proj.weight"), ("up_w", "mlp.up_proj.weight"),
        ("down_w", "mlp.down_proj.weight")]}
    zeros = np.zeros(hidden, np.float32)
    return {"ln1_g": sd["input_layernorm.weight"], "ln1_b": zeros,
            "ln2_g": sd["post_attention_layernorm.weight"], "ln2_b": zeros, **t}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_llama_block_matches_transformers(target: str, shape: tuple[int, ...]) -> None:
    batch, seq, hidden, heads, kv_heads, head_dim, ffn = shape
    _, layer, rotary = hf_layer(hidden, heads, kv_heads, head_dim, ffn, seed=seq)
    torch.manual_seed(100 + seq)
    x = torch.randn(batch, seq, hidden)
    pos = torch.arange(seq)[None].expand(batch, seq)
    cos, sin = rotary(x, pos)
    causal = torch.full((seq, seq), float("-inf")).triu(1)[None, None].expand(batch, 1, seq, seq)
    with torch.no_grad():
        out = layer(x, attention_mask=causal, position_ids=pos, position_embeddings=(cos, sin))
    want = (out[0] if isinstance(out, tuple) else out).numpy()
    vmfb = rlx.compile(block_module(batch, hidden, heads, kv_heads, head_dim, ffn,
                                    alias=shape is SHAPES[1]), target)
    prog = rlx.runtime.load(vmfb, DEVICE[target], weights_from_hf(layer))
    half = head_dim // 2
    got = prog.main(x=x.numpy(), cos=cos[0, :, :half].numpy().copy(),
                    sin=sin[0, :, :half].numpy().copy())
    assert_close(got, want, "f32", "llama_decoder_block vs LlamaDecoderLayer")


def test_block_mask_kinds_and_gptj() -> None:
    """GPT-J RoPE under each mask kind (output ``i``: ``kinds[i]``), one block of each over
    the same input and weights, in one compile."""
    h = rlx.HirModule("block_masks")
    e, nh, nkv, hd, f = 32, 4, 2, 8, 48
    x = h.input("x", (2, None, e))
    p = [h.param(n, s) for n, s in [
        ("ln1_g", (e,)), ("ln1_b", (e,)), ("q_w", (e, nh * hd)), ("k_w", (e, nkv * hd)),
        ("v_w", (e, nkv * hd)), ("o_w", (nh * hd, e)), ("ln2_g", (e,)), ("ln2_b", (e,)),
        ("gate_w", (e, f)), ("up_w", (e, f)), ("down_w", (f, e))]]
    cos, sin = h.input("cos", (None, hd // 2)), h.input("sin", (None, hd // 2))
    keep = (np.random.default_rng(0).random((2, 6)) < 0.7).astype(np.float32)
    keep[:, 0] = 1
    masks = {"custom": h.input("mask_custom", (2, None)),
             "bias": h.input("mask_bias", (2, nh, None, None))}
    kinds = ("custom", "bias", "sliding_window", "none")
    h.set_outputs([h.llama_decoder_block(x, *p, cos, sin, masks.get(kind), num_heads=nh,
                                         head_dim=hd, num_kv_heads=nkv, eps=1e-6,
                                         mask_kind=kind, rope_style="gptj",
                                         window=2 if kind == "sliding_window" else None)
                   for kind in kinds])
    check_module(h, "llvm-cpu", dyn=6, inputs={"mask_custom": keep})


def mtp_module(batch: int, carry: bool = False) -> rlx.HirModule:
    """Qwen3.5 MTP head: E 32, 4 query heads over 2 KV heads of 8 (partial RoPE over 4
    lanes), FFN 48, vocabulary 50, MTP vocabulary 40; dynamic sequence length. With
    ``carry``: 3 new positions over a KV cache of a dynamic length."""
    from rlx.dialects.hir.block import MTP_OPERANDS

    e, nh, nkv, hd, f, vocab = 32, 4, 2, 8, 48, 50
    seq = 3 if carry else None
    shapes = {"h_pre_norm": (batch, seq, e), "input_ids": (batch, seq), "cos": (seq, 4),
              "sin": (seq, 4), "last_token_idx": (batch,), "embed_w": (vocab, e),
              "eh_w": (2 * e, e), "q_gate_w": (e, nh * 2 * hd), "k_w": (e, nkv * hd),
              "v_w": (e, nkv * hd), "q_norm_w": (hd,), "q_norm_b": (hd,), "k_norm_w": (hd,),
              "k_norm_b": (hd,), "o_w": (nh * hd, e), "gate_w": (e, f), "up_w": (e, f),
              "down_w": (f, e), "lm_head_w": (e, 40)}
    inputs = ("h_pre_norm", "input_ids", "cos", "sin", "last_token_idx")
    h = rlx.HirModule("mtp")
    ops = [h.input(n, shapes.get(n, (e,))) if n in inputs else h.param(n, shapes.get(n, (e,)))
           for n in MTP_OPERANDS]
    attrs = {"num_heads": nh, "num_kv_heads": nkv, "head_dim": hd, "n_rot": 4, "n_embd": e,
             "n_ff": f, "mtp_vocab": 40, "eps": 1e-6}
    if carry:
        past = [h.input(n, (batch, None, nkv * hd)) for n in ("past_k", "past_v")]
        h.set_outputs(list(h.qwen35_mtp_head_carry(*ops, *past, **attrs)))
    else:
        h.set_outputs([h.qwen35_mtp_head(*ops, **attrs)])
    return h


@pytest.mark.parametrize("target", TARGETS)
def test_qwen35_mtp_head_matches_spec_composition(target: str) -> None:
    """Against the numpy composition of spec 2.16 (``rlx.reference.recurrent``), two batch
    rows reading different positions (the per-batch row pick, right for B > 1)."""
    rng = np.random.default_rng(5)
    seq = 6
    inputs = {"input_ids": rng.integers(0, 50, (2, seq)).astype(np.float32),
              "last_token_idx": np.array([seq - 1, 2], np.float32)}
    check_module(mtp_module(2), target, dyn=seq, inputs=inputs)


@pytest.mark.parametrize("target", TARGETS)
def test_qwen35_mtp_head_over_a_kv_cache(target: str) -> None:
    """``carry_kv``: 3 new positions attend causally to a 5-position cache; the logits,
    the head-normed row and the grown caches against the reference."""
    rng = np.random.default_rng(6)
    inputs = {"input_ids": rng.integers(0, 50, (2, 3)).astype(np.float32),
              "last_token_idx": np.array([2, 1], np.float32)}
    check_module(mtp_module(2, carry=True), target, dyn=5, inputs=inputs)
