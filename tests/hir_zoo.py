"""One small, valid HIR module per op kind (and per interesting variant).

Shared by the text round-trip, IRDL and lowering tests: adding an op means adding it here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import rlx
from rlx.dialects.hir.block import MTP_OPERANDS

Build = Callable[[rlx.HirModule], list[rlx.HirValue]]


def _linear(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (None, 16))
    w, b = h.param("w", (16, 32)), h.param("b", (32,))
    return [h.linear(x, w, b, "silu"), h.linear(x, w)]


def _linear_fused(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (4, 16))
    return [h.linear_fused(x, h.param("w", (16, 8)), h.param("b", (8,)), "gelu")]


def _pair(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (2, None, 16))
    a, b = h.shared_linear_pair(x, h.param("w1", (16, 8)), h.param("w2", (16, 24)))
    return [a, b]


def _swiglu(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (None, 16))
    return [h.swiglu_ffn(x, h.param("up", (16, 32)), h.param("gate", (16, 32)),
                         h.param("down", (32, 16)))]


def _norms(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (2, 5, 16))
    r = h.input("r", (2, 5, 16))
    g, b = h.param("g", (16,)), h.param("b", (16,))
    return [h.rms_norm(x, g, b, 1e-5), h.residual_rms_norm(x, r, g, b, 1e-6)]


def _attention(mask_kind: str) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        q = h.input("q", (2, 6, 32))
        k = h.input("k", (2, 6, 16))
        v = h.input("v", (2, 6, 16))
        mask = None
        if mask_kind == "custom":
            mask = h.input("mask", (2, 6))
        elif mask_kind == "bias":
            mask = h.input("mask", (2, 4, 6, 6))
        window = 2 if mask_kind == "sliding_window" else None
        return [h.attention(q, k, v, mask, num_heads=4, head_dim=8, mask_kind=mask_kind,
                            window=window)]
    return build


def _rope(style: str) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        x = h.input("x", (1, None, 32))
        cos, sin = h.input("cos", (None, 4)), h.input("sin", (None, 4))
        return [h.rope(x, cos, sin, head_dim=8, n_rot=4, rope_style=style)]
    return build


def _conv(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (2, 8, 16))
    return [h.depthwise_conv1d_causal(x, h.param("w", (16, 1, 1, 3)), h.input("pad", (2, 2, 16)),
                                      kernel_size=3)]


def _dequant(scheme: str) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        x = h.input("x", (1, 256))
        if scheme == "gguf_q4_k":
            return [h.dequant_matmul(x, h.param("w", (8, 144), "i8"), scheme=scheme)]
        if scheme == "int8":
            return [h.dequant_matmul(x, h.param("w", (256, 8), "i8"), h.param("s", (8, 8)),
                                     h.param("z", (8, 8)), scheme="int8", block_size=32)]
        return [h.dequant_matmul(x, h.param("w", (256, 4), "i8"), h.param("s", (16, 8), "i8"),
                                 h.param("z", (1,)), scheme="nvfp4", block_size=16)]
    return build


def _gdn(carry: bool) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        q, k, v = (h.input(n, (1, None, 2, 8)) for n in "qkv")
        g, beta = h.input("g", (1, None, 2)), h.input("beta", (1, None, 2))
        if carry:
            return list(h.gated_delta_net_carry(q, k, v, g, beta, h.input("s", (1, 2, 8, 8)), 8))
        return [h.gated_delta_net(q, k, v, g, beta, 8)]
    return build


def _lstm(carry: bool) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        x = h.input("x", (2, None, 8))
        hid, layers = 16, 2
        wih = h.param("wih", (4 * hid * 8 * 2 + 4 * hid * 32 * 2,))
        whh = h.param("whh", (layers * 2 * 4 * hid, hid))
        b = h.param("b", (layers * 2 * 4 * hid,))
        if carry:
            h0, c0 = h.input("h0", (4, 2, hid)), h.input("c0", (4, 2, hid))
            return list(h.lstm_carry(x, wih, whh, b, h0, c0, hid, layers, True))
        return [h.lstm(x, wih, whh, b, hid, layers, True)]
    return build


def _ragged(h: rlx.HirModule) -> list[rlx.HirValue]:
    """Per-row lengths (LSTM with peepholes and states; GRU)."""
    x = h.input("x", (None, None, 8))
    lengths = h.input("lengths", (None,), "i64")
    h0, c0 = h.input("h0", (2, None, 16)), h.input("c0", (2, None, 16))
    y, hn, cn = h.lstm_carry(x, h.param("wih", (128, 8)), h.param("whh", (128, 16)),
                             h.param("b", (128,)), h0, c0, 16, bidirectional=True,
                             peephole=h.param("peep", (2, 48)), lengths=lengths)
    g = h.gru(x, h.param("gih", (48, 8)), h.param("ghh", (48, 16)), h.param("gbi", (48,)),
              h.param("gbh", (48,)), 16, lengths=lengths)
    return [y, hn, cn, g]


def _gru(carry: bool) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        x = h.input("x", (2, None, 8))
        w = [h.param("wih", (48, 8)), h.param("whh", (48, 16)), h.param("bih", (48,)),
             h.param("bhh", (48,))]
        if carry:  # ONNX's default form (the reset gate before the recurrent matmul)
            return list(h.gru_carry(x, *w, h.input("h0", (1, 2, 16)), 16,
                                    linear_before_reset=False))
        return [h.gru(x, *w, 16)]
    return build


def _llama(mask_kind: str, alias: bool = False) -> Build:
    def build(h: rlx.HirModule) -> list[rlx.HirValue]:
        e, nh, nkv, hd, f = 32, 4, 2, 8, 48
        x = h.input("x", (1, None, e))
        p = {n: h.param(n, s) for n, s in [
            ("ln1_g", (e,)), ("ln1_b", (e,)), ("q_w", (e, nh * hd)), ("k_w", (e, nkv * hd)),
            ("v_w", (e, nkv * hd)), ("o_w", (nh * hd, e)), ("ln2_g", (e,)), ("ln2_b", (e,)),
            ("gate_w", (e, f)), ("up_w", (e, f)), ("down_w", (f, e))]}
        cos, sin = h.input("cos", (None, hd // 2)), h.input("sin", (None, hd // 2))
        mask = h.input("mask", (1, None)) if mask_kind == "custom" else None
        args = [x, *p.values(), cos, sin, mask]
        kw = dict(num_heads=nh, head_dim=hd, num_kv_heads=nkv, eps=1e-5, mask_kind=mask_kind)
        if alias:
            return [h.transformer_block(*args, **kw)]
        return [h.llama_decoder_block(*args, **kw, rope_style="gptj")]
    return build


MTP_SHAPES = {
    "h_pre_norm": (1, None, 32), "input_ids": (1, None), "cos": (None, 4), "sin": (None, 4),
    "last_token_idx": (1,), "embed_w": (50, 32), "eh_w": (64, 32), "q_gate_w": (32, 64),
    "k_w": (32, 16), "v_w": (32, 16), "q_norm_w": (8,), "q_norm_b": (8,), "k_norm_w": (8,),
    "k_norm_b": (8,), "o_w": (32, 32), "gate_w": (32, 48), "up_w": (32, 48),
    "down_w": (48, 32), "lm_head_w": (32, 40),
}


def _mtp(h: rlx.HirModule) -> list[rlx.HirValue]:
    inputs = ("h_pre_norm", "input_ids", "cos", "sin", "last_token_idx")
    ops = []
    for n in MTP_OPERANDS:
        shape = MTP_SHAPES.get(n, (32,))
        ops.append(h.input(n, shape) if n in inputs else h.param(n, shape))
    return [h.qwen35_mtp_head(*ops, num_heads=4, num_kv_heads=2, head_dim=8, n_rot=4, n_embd=32,
                              n_ff=48, mtp_vocab=40, eps=1e-6)]


def _constant(h: rlx.HirModule) -> list[rlx.HirValue]:
    c = h.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = h.input("x", (2, 3))
    return [h.mir("binary", [x, c], kind="add")]


def _escape(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (2, None, 16))
    y = h.mir("activation", [x], kind="exp")
    s = h.mir("reduce", [y], kind="sum", axes=[-1], keep_dim=True)
    p = h.mir("binary", [y, s], kind="div")
    t = h.mir("transpose", [p], perm=[1, 0, 2])
    r = h.mir("reshape", [x], new_shape=[-1, 16])
    n = h.mir("narrow", [r], axis=1, start=4, len=8)
    c = h.mir("concat", [n, n], axis=1)
    m = h.mir("compare", [c, c], kind="lt")
    w = h.mir("where", [m, c, c])
    k = h.mir("cast", [w], to="f16")
    return [t, k, h.mir("softmax", [x], axis=-1)]


def _mir_blocks(h: rlx.HirModule) -> list[rlx.HirValue]:
    x = h.input("x", (2, 6, 32))
    w, b = h.param("w", (32, 32)), h.param("b", (32,))
    g = h.param("g", (32,))
    mm = h.mir("matmul", [x, w])
    fused = h.mir("fused_matmul_bias_act", [x, w, b], activation="relu")
    sw = h.mir("fused_swiglu", [fused], gate_first=True)
    rn = h.mir("fused_residual_rms_norm", [mm, x, b, g, b], has_bias=True, eps=1e-5)
    ln = h.mir("layer_norm", [rn, g, b], axis=-1, eps=1e-5)
    r2 = h.mir("rms_norm", [ln, g, b], axis=-1, eps=1e-6)
    cos, sin = h.input("cos", (6, 4)), h.input("sin", (6, 4))
    ro = h.mir("rope", [r2, cos, sin], head_dim=8, n_rot=8, style="gptj")
    at = h.mir("attention", [ro, ro, ro], num_heads=4, head_dim=8, mask_kind="causal",
               score_scale=0.5, attn_logit_softcap=30.0)
    ids = h.input("ids", (2, 6), "i32")
    emb = h.mir("gather", [w, ids], axis=0)
    pick = h.mir("gather", [x, h.input("last", (2, 1), "i32")], axis=1, batch_dims=1)
    ex = h.mir("expand", [b], target_shape=[2, 6, 32])
    cs = h.mir("cumsum", [ex], axis=1, exclusive=True)
    img = h.input("img", (2, 4, 8, 8))
    cw = h.param("cw", (8, 2, 3, 3))
    cv = h.mir("conv", [img, cw], kernel_size=[3, 3], stride=[1, 1], padding=[1, 1],
               dilation=[1, 1], groups=2)
    xq = h.input("xq", (1, 64))
    dq = h.mir("dequant_matmul", [xq, h.param("wq", (16, 68), "i8")], scheme="gguf_q8_0")
    pool = h.mir("pool", [img], kind="avg", kernel_size=[3, 2], stride=[2, 1],
                 dilation=[1, 1], padding=[1, 0, 1, 1], ceil_mode=True, count_include_pad=False)
    sl = h.mir("slice", [x], starts=[0, 5, 1], sizes=[-1, 3, 4], strides=[1, -2, 3])
    pd = h.mir("pad", [x], low=[0, 1, 0], high=[0, 0, 2], value=-1.0)
    wr = h.mir("write_rows", [h.input("cache", (3, 8, 32)), x, h.input("slot", (2,), "i32"),
                              h.input("pos", (2,), "i32")])
    sc = h.mir("scatter", [h.input("grid", (5, 4, 32)), h.input("at", (None, 2), "i64"),
                           h.input("rows", (None, 32))], reduction="add")
    tv, ti = h.mir_multi("topk", [x], k=2, axis=1, largest=False)
    return [at, sw, emb, pick, cs, cv, dq, pool, sl, pd, wr, sc, tv, ti]


def _mir_scans(h: rlx.HirModule) -> list[rlx.HirValue]:
    q = h.input("q", (1, 3, 2, 4))
    gb = h.input("g", (1, 3, 2))
    s = h.input("s", (1, 2, 4, 4))
    y, fs = h.mir_multi("gated_delta_net", [q, q, q, gb, gb, s], state_size=4, carry_state=True)
    x = h.input("x", (1, 3, 4))
    ly = h.mir("lstm", [x, h.param("wih", (32, 4)), h.param("whh", (32, 8)),
                        h.param("b", (32,))], hidden_size=8, num_layers=1, bidirectional=False,
               carry=False)
    gy, hn = h.mir_multi("gru", [x, h.param("gih", (24, 4)), h.param("ghh", (24, 8)),
                                 h.param("gbi", (24,)), h.param("gbh", (24,)),
                                 h.input("h0", (1, 1, 8))],
                         hidden_size=8, num_layers=1, bidirectional=False, carry=True)
    return [y, fs, ly, gy, hn]


HIR_ZOO: dict[str, Build] = {
    "linear": _linear,
    "linear_fused": _linear_fused,
    "shared_linear_pair": _pair,
    "swiglu": _swiglu,
    "norms": _norms,
    **{f"attention_{m}": _attention(m) for m in ("none", "causal", "sliding_window", "custom",
                                                   "bias")},
    "rope_neox": _rope("neox"),
    "rope_gptj": _rope("gptj"),
    "depthwise_conv1d_causal": _conv,
    **{f"dequant_{s}": _dequant(s) for s in ("gguf_q4_k", "int8", "nvfp4")},
    "gated_delta_net": _gdn(False),
    "gated_delta_net_carry": _gdn(True),
    "lstm": _lstm(False),
    "lstm_carry": _lstm(True),
    "gru": _gru(False),
    "gru_carry": _gru(True),
    "rnn_lengths_peephole": _ragged,
    "llama_decoder_block": _llama("causal"),
    "llama_decoder_block_custom_mask": _llama("custom"),
    "transformer_block": _llama("causal", alias=True),
    "qwen35_mtp_head": _mtp,
    "constant": _constant,
    "mir_escape": _escape,
    "mir_blocks": _mir_blocks,
    "mir_scans": _mir_scans,
}


def build(name: str, policy: str = "direct") -> rlx.HirModule:
    h = rlx.HirModule(name, policy)
    h.set_outputs(HIR_ZOO[name](h))
    return h
