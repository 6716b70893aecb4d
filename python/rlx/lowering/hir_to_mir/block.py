"""hir-to-mir for composite blocks: llama_decoder_block, qwen35_mtp_head (spec 2.15, 2.16).

Both always lower to the same primitive MIR chain, whatever the fusion policy.
"""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.build import mir
from rlx.lowering.hir_to_mir.table import HIR_TO_MIR
from rlx.lowering.registry import LoweringContext


def _swiglu(x: ir.Value, gate_w: ir.Value, up_w: ir.Value, down_w: ir.Value) -> ir.Value:
    g = mir("activation", mir("matmul", x, gate_w), kind="silu")
    return mir("matmul", mir("binary", g, mir("matmul", x, up_w), kind="mul"), down_w)


@HIR_TO_MIR.register("llama_decoder_block")
def lower_llama_decoder_block(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``h = x + attn(rope(n1 Wq), rope(n1 Wk), n1 Wv) Wo``, ``y = h + swiglu(rms(h))``.

    K/V keep their ``num_kv_heads`` heads: ``rlx_mir.attention`` does GQA itself, which is
    what RLX's Narrow/Concat ``repeat_kv`` computes, without copying K and V.
    """
    a = op.attrs
    nh, hd, eps = a["num_heads"], a["head_dim"], a["eps"]
    x = op["x"]
    n1 = mir("rms_norm", x, op["ln1_g"], op["ln1_b"], axis=-1, eps=eps)
    rope = {"head_dim": hd, "n_rot": hd, "style": a["rope_style"]}
    q = mir("rope", mir("matmul", n1, op["q_w"]), op["cos"], op["sin"], **rope)
    k = mir("rope", mir("matmul", n1, op["k_w"]), op["cos"], op["sin"], **rope)
    v = mir("matmul", n1, op["v_w"])
    mask = [op["mask"]] if op.has("mask") else []
    att = mir("attention", q, k, v, *mask, num_heads=nh, head_dim=hd, mask_kind=a["mask"],
              window=a.get("window"))
    h1 = mir("binary", x, mir("matmul", att, op["o_w"]), kind="add")
    n2 = mir("rms_norm", h1, op["ln2_g"], op["ln2_b"], axis=-1, eps=eps)
    return [mir("binary", h1, _swiglu(n2, op["gate_w"], op["up_w"], op["down_w"]), kind="add")]


@HIR_TO_MIR.register("qwen35_mtp_head")
def lower_qwen35_mtp_head(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Embedding and trunk state -> one gated-attention layer + FFN -> logits of the token
    at ``last_token_idx[b]`` of each batch row (a per-batch gather, right for any B). With
    ``carry_kv`` the new keys / values follow the cache's (the attention's causal mask
    takes the queries as the last S keys), and the head-normed row and caches are
    results too."""
    a = op.attrs
    nh, nkv, hd, eps = a["num_heads"], a["num_kv_heads"], a["head_dim"], a["eps"]
    b = emit.static_shape(op["h_pre_norm"])[0]

    def norm(x: ir.Value, w: str) -> ir.Value:
        return mir("rms_norm", x, op[f"{w}_w"], op[f"{w}_b"], axis=-1, eps=eps)

    h = norm(op["h_pre_norm"], "hnorm")
    e = norm(mir("gather", op["embed_w"], op["input_ids"], axis=0), "enorm")
    cur = mir("matmul", mir("concat", e, h, axis=-1), op["eh_w"])
    x = norm(cur, "attn_norm")
    qg = mir("reshape", mir("matmul", x, op["q_gate_w"]), new_shape=[b, -1, nh, 2 * hd])
    q = mir("narrow", qg, axis=3, start=0, len=hd)
    gate = mir("reshape", mir("narrow", qg, axis=3, start=hd, len=hd), new_shape=[b, -1, nh * hd])
    k = mir("reshape", mir("matmul", x, op["k_w"]), new_shape=[b, -1, nkv, hd])
    v = mir("matmul", x, op["v_w"])
    rope = {"head_dim": hd, "n_rot": a["n_rot"], "style": "neox"}
    q = mir("rope", norm(q, "q_norm"), op["cos"], op["sin"], **rope)
    k = mir("rope", norm(k, "k_norm"), op["cos"], op["sin"], **rope)
    q = mir("reshape", q, new_shape=[b, -1, nh * hd])
    k = mir("reshape", k, new_shape=[b, -1, nkv * hd])
    carry = bool(a.get("carry_kv"))
    if carry:
        k = mir("concat", op["past_k"], k, axis=1)
        v = mir("concat", op["past_v"], v, axis=1)
    att = mir("attention", q, k, v, num_heads=nh, head_dim=hd, mask_kind="causal")
    att = mir("binary", att, mir("activation", gate, kind="sigmoid"), kind="mul")
    h1 = mir("binary", cur, mir("matmul", att, op["o_w"]), kind="add")
    n = norm(h1, "post_norm")
    h2 = mir("binary", h1, _swiglu(n, op["gate_w"], op["up_w"], op["down_w"]), kind="add")
    idx = mir("reshape", op["last_token_idx"], new_shape=[b, 1])
    last = norm(mir("gather", h2, idx, axis=1, batch_dims=1), "head_norm")
    logits = mir("matmul", last, op["lm_head_w"])
    return [logits, last, k, v] if carry else [logits]
