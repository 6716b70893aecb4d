"""HIR composite blocks: llama_decoder_block, qwen35_mtp_head."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import (
    BLOCK_FLOAT_TYPES,
    INDEX_TYPES,
    MASK_KINDS,
    ROPE_STYLES,
    mask_has_operand,
)
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import (
    AttrValues,
    Check,
    Operand,
    bool_attr,
    enum_attr,
    float_attr,
    int_attr,
    opt,
)
from rlx.ir.types import TensorInfo

LLAMA_OPERANDS = [
    "x", "ln1_g", "ln1_b", "q_w", "k_w", "v_w", "o_w", "ln2_g", "ln2_b",
    "gate_w", "up_w", "down_w", "cos", "sin",
    opt("mask", lambda a: mask_has_operand(a["mask"])),
]


def _heads(c: Check) -> tuple[int, int, int]:
    nh, nkv, hd = c.positive("num_heads"), c.positive("num_kv_heads"), c.positive("head_dim")
    if nh % nkv:
        c.fail("attribute 'num_kv_heads'", f"a divisor of num_heads = {nh}", str(nkv))
    return nh, nkv, hd


@HIR.op(
    "llama_decoder_block",
    operands=LLAMA_OPERANDS,
    attrs=[int_attr("num_heads"), int_attr("head_dim"), int_attr("num_kv_heads"),
           float_attr("eps", default=1e-5),
           enum_attr("mask", MASK_KINDS, default="causal"),
           int_attr("window", when=lambda a: a["mask"] == "sliding_window"),
           enum_attr("rope_style", ROPE_STYLES, default="neox")],
    label="llama_decoder_block",
)
def llama_decoder_block(c: Check) -> list[TensorInfo]:
    """LLaMA-style pre-norm decoder layer: GQA attention with RoPE, then a SwiGLU FFN.

    Operands (14, plus ``mask`` for custom / bias masks): ``x [B, S, E]``, ``ln1_g``,
    ``ln1_b [E]``, ``q_w [E, nh*hd]``, ``k_w``, ``v_w [E, nkv*hd]``, ``o_w [nh*hd, E]``,
    ``ln2_g``, ``ln2_b [E]``, ``gate_w``, ``up_w [E, F]`` (gate before up, unlike
    ``swiglu``), ``down_w [F, E]``, ``cos``, ``sin [T >= S, hd/2]``, ``mask``. Computes
    ``h = x + attn(rope(rms(x) Wq), rope(rms(x) Wk), rms(x) Wv) Wo`` and
    ``y = h + swiglu(rms(h))``, with full rotation (``n_rot = head_dim``) in ``rope_style``
    (``"gptj"`` for GGUF-converted LLaMA weights). Attributes: ``num_heads``, ``head_dim``,
    ``num_kv_heads`` (divides ``num_heads``), ``eps``, ``mask``, ``rope_style``.
    Result ``[B, S, E]``.

    Example::

        %y = "rlx_hir.llama_decoder_block"(%x, %g1, %b1, %wq, %wk, %wv, %wo, %g2, %b2,
              %wg, %wu, %wd, %cos, %sin) {eps = 9.99999974E-6 : f32, head_dim = 64 : i64,
              mask = "causal", num_heads = 8 : i64, num_kv_heads = 2 : i64,
              rope_style = "neox"}
            : (tensor<1x?x512xf32>, ..., tensor<?x32xf32>) -> tensor<1x?x512xf32>
    """
    nh, nkv, hd = _heads(c)
    checks.positive_eps(c)
    checks.rope_dims(c, hd, hd)
    names = [n for n in c.operands if n != "mask"]
    x = checks.float_operands(c, *names, types=BLOCK_FLOAT_TYPES)
    c.rank("x", 3)
    e = c.ref("x", 2)
    for n in ("ln1_g", "ln1_b", "ln2_g", "ln2_b"):
        checks.vector(c, n, e, "E = 'x' dim 2")
    c.shape("q_w", (e, nh * hd), "[E, num_heads * head_dim]")
    for n in ("k_w", "v_w"):
        c.shape(n, (e, nkv * hd), "[E, num_kv_heads * head_dim]")
    c.shape("o_w", (nh * hd, e), "[num_heads * head_dim, E]")
    f = checks.weight_kn(c, "gate_w", e, "E = 'x' dim 2")
    c.shape("up_w", (e, f), "the shape of 'gate_w' ([E, F])")
    c.shape("down_w", (f, e), "[F, E]")
    seq = c.ref("x", 1)
    checks.rope_tables(c, "cos", "sin", seq, hd, "x")
    layout = checks.AttentionLayout(3, False, c.ref("x", 0), seq, seq, nkv)
    checks.attention_mask(c, c.attr("mask"), "mask", layout, nh, like="x")
    return [x]


MTP_OPERANDS = [
    "h_pre_norm", "input_ids", "cos", "sin", "last_token_idx", "embed_w",
    "hnorm_w", "hnorm_b", "enorm_w", "enorm_b", "eh_w", "attn_norm_w", "attn_norm_b",
    "q_gate_w", "k_w", "v_w", "q_norm_w", "q_norm_b", "k_norm_w", "k_norm_b", "o_w",
    "post_norm_w", "post_norm_b", "gate_w", "up_w", "down_w", "head_norm_w", "head_norm_b",
    "lm_head_w",
]


def carry_kv(a: AttrValues) -> bool:
    return bool(a.get("carry_kv"))


@HIR.op(
    "qwen35_mtp_head",
    operands=[*MTP_OPERANDS, opt("past_k", carry_kv), opt("past_v", carry_kv)],
    attrs=[int_attr("num_heads"), int_attr("num_kv_heads"), int_attr("head_dim"),
           int_attr("n_rot"), int_attr("n_embd"), int_attr("n_ff"), int_attr("mtp_vocab"),
           float_attr("eps", default=1e-6),
           bool_attr("carry_kv", "attend over a KV cache of earlier positions and return "
                     "it grown, with the selected hidden state; absent: false",
                     optional=True)],
    results=["logits", Operand("hidden", when=carry_kv), Operand("k_cache", when=carry_kv),
             Operand("v_cache", when=carry_kv)],
    label="qwen35_mtp_head",
)
def qwen35_mtp_head(c: Check) -> list[TensorInfo]:
    """Qwen3.5 multi-token-prediction draft head (29 operands, spec 2.16).

    ``cur = [rms(embed(input_ids)) | rms(h_pre_norm)] @ eh_w``; one gated full-attention
    layer (per-head q/k RMSNorm, partial NeoX RoPE over ``n_rot`` lanes, GQA, causal,
    output times ``sigmoid(gate)``) and a SwiGLU FFN, both residual; then the hidden state
    of token ``last_token_idx[b]`` of each batch row, normed, times ``lm_head_w``. Operands:
    ``h_pre_norm [B, S, E]``, ``input_ids [B, S]`` and ``last_token_idx [B]`` (f32-encoded
    or integer ids), ``cos``/``sin [T >= S, hd/2]``, ``embed_w [V, E]``, norms ``[E]``
    (``q_norm``/``k_norm`` ``[hd]``), ``eh_w [2E, E]``, ``q_gate_w [E, nh*2hd]`` (per head
    hd query then hd gate columns), ``k_w``/``v_w [E, nkv*hd]``, ``o_w [nh*hd, E]``,
    ``gate_w``/``up_w [E, F]``, ``down_w [F, E]``, ``lm_head_w [E, mtp_vocab]``. The row
    selection is per batch row (RLX's gather was right only for B = 1).
    Result ``[B, 1, mtp_vocab]``.

    Example::

        %logits = "rlx_hir.qwen35_mtp_head"(%h, %ids, %cos, %sin, %last, ...)
              {eps = 9.99999997E-7 : f32, head_dim = 64 : i64, mtp_vocab = 1000 : i64,
               n_embd = 256 : i64, n_ff = 512 : i64, n_rot = 32 : i64, num_heads = 4 : i64,
               num_kv_heads = 2 : i64} : (...) -> tensor<1x1x1000xf32>
    """
    nh, nkv, hd = _heads(c)
    checks.positive_eps(c)
    checks.rope_dims(c, hd, c.attr("n_rot"))
    e, f, vocab = c.positive("n_embd"), c.positive("n_ff"), c.positive("mtp_vocab")
    floats = [n for n in MTP_OPERANDS if n not in ("input_ids", "last_token_idx")]
    h = checks.float_operands(c, *floats, types=BLOCK_FLOAT_TYPES)
    c.rank("h_pre_norm", 3)
    c.dim("h_pre_norm", 2, e, "n_embd")
    b = h.shape[0]
    if b is None:
        c.fail("operand 'h_pre_norm' dim 0", "a static batch size", str(h))
    c.dtype("input_ids", INDEX_TYPES)
    c.shape("input_ids", (b, c.ref("h_pre_norm", 1)), "[B, S] token ids")
    c.dtype("last_token_idx", INDEX_TYPES)
    c.shape("last_token_idx", (b,), "[B]: the position to predict from, per batch row")
    checks.rope_tables(c, "cos", "sin", c.ref("h_pre_norm", 1), hd, "h_pre_norm")
    c.rank("embed_w", 2)
    c.dim("embed_w", 1, e, "n_embd")
    for n in ("hnorm_w", "hnorm_b", "enorm_w", "enorm_b", "attn_norm_w", "attn_norm_b",
              "post_norm_w", "post_norm_b", "head_norm_w", "head_norm_b"):
        checks.vector(c, n, e, "n_embd")
    for n in ("q_norm_w", "q_norm_b", "k_norm_w", "k_norm_b"):
        checks.vector(c, n, hd, "head_dim")
    c.shape("eh_w", (2 * e, e), "[2 * n_embd, n_embd]")
    c.shape("q_gate_w", (e, nh * 2 * hd), "[n_embd, num_heads * 2 * head_dim]")
    for n in ("k_w", "v_w"):
        c.shape(n, (e, nkv * hd), "[n_embd, num_kv_heads * head_dim]")
    c.shape("o_w", (nh * hd, e), "[num_heads * head_dim, n_embd]")
    for n in ("gate_w", "up_w"):
        c.shape(n, (e, f), "[n_embd, n_ff]")
    c.shape("down_w", (f, e), "[n_ff, n_embd]")
    c.shape("lm_head_w", (e, vocab), "[n_embd, mtp_vocab]")
    logits = h.with_shape((b, 1, vocab))
    if not carry_kv(c.attrs):
        return [logits]
    return [logits, *_mtp_caches(c, h, nkv * hd)]


def _mtp_caches(c: Check, h: TensorInfo, kv_dim: int) -> list[TensorInfo]:
    """``carry_kv``'s results after the logits: hidden ``[B, 1, E]``, the grown caches."""
    b = h.shape[0]
    for n in ("past_k", "past_v"):
        checks.float_operands(c, "h_pre_norm", n, types=BLOCK_FLOAT_TYPES)
        c.shape(n, (b, c.ref("past_k", 1), kv_dim), "[B, P, num_kv_heads * head_dim]")
    past, seq = c["past_k"].shape[1], h.shape[1]
    grown = past + seq if past is not None and seq is not None else None
    cache = h.with_shape((b, grown, kv_dim))
    return [h.with_shape((b, 1, h.shape[2])), cache, cache]
