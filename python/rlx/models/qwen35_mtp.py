"""The ``mtp`` entry point of a Qwen3.5 module: the checkpoint's multi-token-prediction head
(``mtp.*`` in HF files, ``blk.{L}.nextn.*`` in GGUF ones) as one ``qwen35_mtp_head`` over
its own KV cache.

``mtp(h [1, R, E], rows [1, S] i32, ids [1, S] i32, cos, sin [S, hd/2], last [1] i32,
k, v [1, P, kv_dim])``: the pairs (hidden state ``h[rows[t]]``, token ``ids[t]``) of S
positions after the P cached ones; returns ``next [1, 1]`` (the argmax draft at
position ``last``), ``hidden [1, 1, E]`` (the head-normed state: the input of a chained
draft) and the caches grown to P + S. ``h`` is the trunk's final-normed hidden state (what
llama.cpp and vLLM feed the head), or a previous draft's ``hidden``; ``rows`` picks the rows
of a verify call's hidden states that the accepted tokens produced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.models.qwen35_hir import _head

if TYPE_CHECKING:
    from rlx.models.qwen35_hir import _Ctx


def _lm_head_operand(ctx: _Ctx) -> HirValue:
    """The op's ``lm_head_w [E, V]`` operand, whose logits :func:`mtp_function` does not
    use: the trunk's f32 head where the model has one (HF's ``lm_head``, or the tied f32
    embedding transposed), else (a head kept in a GGUF file's format) a broadcast zero that
    nothing reads (the dead matmul is removed by IREE), where a widened f32 copy of the
    head used to be held (1 GB for a 0.8B model's 248320 x 1024) and read every draft."""
    c, h = ctx.c, ctx.h
    if "lm_head" in c.weight_schemes:
        zero = h.constant(np.zeros((1, 1), np.float32))
        return h.mir("expand", [zero], target_shape=[c.hidden_size, c.vocab_size])
    if c.tie_word_embeddings:
        return h.mir("transpose", [ctx.p("embed")], perm=[1, 0])
    return ctx.p("lm_head")


def _embedding(ctx: _Ctx, ids: HirValue) -> tuple[HirValue, HirValue]:
    """The op's ``embed_w`` and ``input_ids`` operands: the f32 table and the ids, or, where
    the table stays in a GGUF file's format, the ids' rows (gathered from the file's bytes
    and dequantized, ``[S, E]``) and ``0 .. S-1``, so that the op's ``embed_w[input_ids]``
    is the same rows without a widened copy of the table (1 GB for a 0.8B model's 248320 x
    1024) in memory. The op reads ``input_ids`` for the embedding alone (spec 2.16)."""
    if "embed" not in ctx.c.weight_schemes:
        return ctx.p("embed"), ids
    h = ctx.h
    rows = h.mir("reshape", [ctx.embed(ids)], new_shape=[-1, ctx.c.hidden_size])
    positions = h.mir("reshape", [h.mir("iota", [ids], axis=1)], new_shape=[1, -1])
    return rows, positions


def mtp_function(ctx: _Ctx) -> None:
    h, c = ctx.h, ctx.c
    e, hd = c.hidden_size, c.head_dim
    h_all = h.input("h", (1, "rows", e))
    rows = h.input("rows", (1, "seq"), "i32")
    ids = h.input("ids", (1, "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd // 2)), h.input("sin", ("seq", hd // 2))
    last = h.input("last", (1,), "i32")
    past = [h.input(n, (1, "past", c.kv_dim)) for n in ("k", "v")]
    hidden = h.mir("gather", [h_all, rows], axis=1, batch_dims=1)
    ze, zd = ctx.zero(e), ctx.zero(hd)

    def p(name: str) -> HirValue:
        return ctx.p("mtp." + name)

    table, ids = _embedding(ctx, ids)
    operands = [hidden, ids, cos, sin, last, table, p("hnorm"), ze, p("enorm"), ze,
                p("eh"), p("ln1"), ze, p("q"), p("k"), p("v"), p("q_norm"), zd, p("k_norm"),
                zd, p("o"), p("ln2"), ze, p("gate"), p("up"), p("down"), p("head_norm"), ze,
                _lm_head_operand(ctx)]
    start = len(h)
    _, out, k, v = h.qwen35_mtp_head_carry(
        *operands, *past, num_heads=c.num_heads, num_kv_heads=c.num_kv_heads, head_dim=hd,
        n_rot=c.n_rot, n_embd=e, n_ff=c.intermediate_size, mtp_vocab=c.vocab_size,
        eps=c.rms_norm_eps)
    # the draft's logits: spec 2.16's RmsNorm(last; head_norm) @ lm_head_w, with `out` that
    # normed row and the head the trunk's own, in the file's format (its GEMV kernel)
    logits = _head(ctx, out)
    h.label_nodes_since(start, "mtp")
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([nxt, out, k, v])


__all__ = ["mtp_function"]
