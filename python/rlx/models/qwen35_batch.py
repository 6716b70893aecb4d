"""A Qwen3.5 model that decodes up to ``batch`` sequences in one call (continuous batching),
each at its own position with its own KV cache slot and its own DeltaNet states: the
Qwen3.5 counterpart of :mod:`rlx.models.llama_batch`, with the same entry points, so
:class:`rlx.serve.engine.BatchModel` runs either.

Every state is batched (:func:`state_shapes`; row ``b`` is slot ``b``'s), every function's
inputs and outputs: each full-attention layer's ``k_i``, ``v_i`` ``[batch, context,
kv_heads * head_dim]`` (as LLaMA's batched cache: rows ``0 .. pos_b`` of slot ``b`` hold its
keys), each linear-attention layer's ``ssm_i [batch, V_heads, d, d]`` (the delta-rule
state) and ``conv_i [batch, K - 1, C]`` (the last K - 1 inputs of its causal conv).

- The delta states are updated in place. A decode step must read a slot's old delta state
  as well as write it, and IREE (3.13) updates an argument in place only where a write is
  its one use: the step is ``gated_delta_net`` with ``state_in_place``, on llvm-cpu one
  dispatch that reads and writes the state in its buffer (``mir_to_linalg.gdn_kernel``).
  Before it, each slot kept its delta state in a buffer of its own and a step stacked them
  into the recurrence's rows and split them out again (an 8-slot 0.8B step: 166 ms, against
  82-94 ms now, same tokens; benchmarks/results/serve.md); before that, batched states were
  cloned whole every step.
- The conv frames (72 KiB a layer and slot at 0.8B) are a step's new tensor: its rows'
  new frames, with the other slots' rows concatenated where it runs fewer than ``batch``.
- A prefill writes its prompts' rows of every state (``write_rows`` at their slots).

Entry points:

- ``prefill(ids [P, S] i32, cos [S, hd/2], sin [S, hd/2], last [P, 1] i32, slot [P] i32,
  k_*, v_*, ssm_*, conv_*)``: ``P`` prompts, right-padded to the longest (``last``: each
  one's last token), each run from an empty state (attention over its own keys, conv frames
  and delta state from zero; a padding step leaves the DeltaNet states as they are, and the
  frames kept are the prompt's own last inputs: ``qwen35_hir.linear_layer``'s ``padded``);
  its K / V written into rows ``0 .. S-1`` of slot ``slot[p]``, its delta state and conv
  frames into row ``slot[p]``. Returns ``logits [P, 1, V]`` of each last position, ``next
  [P, 1]`` and the state.
- ``decode(ids [1, B] i32, cos [B, hd/2], sin [B, hd/2], pos [B] i32, k_*, v_*, ssm_*,
  conv_*)``: token ``b`` the next one of slot ``b`` at position ``pos[b]``; the attention
  layers write its K / V at that row and attend to the slot's first ``pos[b] + 1`` keys
  (``causal_lengths``); the linear layers advance each slot's conv frames and delta state
  by the one token (the slots as the batch rows of ``depthwise_conv1d_causal`` and
  ``gated_delta_net``: each row its own recurrence). Returns ``logits [1, B, V]``, ``next
  [1, B]`` and the state.
- ``decode_R`` for each ``R`` of :func:`rlx.models.llama_batch.step_rows` below ``batch``:
  ``decode`` for slots ``0 .. R - 1`` only (the first ``R`` rows of the delta states
  stepped: ``gated_delta_net`` takes a state of more rows than its inputs); the other slots'
  rows of every state are left as they are.
- ``sample``: :mod:`rlx.models.sampling`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.models.llama_batch import batched_module, prompt_logits
from rlx.models.llama_cache import attend_cache, write_prompt
from rlx.models.qwen35 import FULL, Qwen35Config
from rlx.models.qwen35_hir import (
    _Ctx,
    _head,
    attention_qkv,
    delta_inputs,
    delta_output,
    full_layer,
    linear_layer,
)

FUNCTIONS = ("prefill", "decode", "sample")
"""The functions of every batched module (beside ``decode_R``)."""


def state_shapes(c: Qwen35Config, batch: int, context: int) -> list[tuple[int, ...]]:
    """The batched state (every function's): ``k_i``, ``v_i`` ``[batch, context, kv_dim]``
    of each full-attention layer ``i``, then ``ssm_i [batch, V_heads, d, d]`` and ``conv_i
    [batch, K - 1, C]`` of each linear-attention layer ``i`` (row ``b``: slot ``b``'s)."""
    d, full = c.linear_head_dim, c.layer_types.count(FULL)
    linear = len(c.layer_types) - full
    return ([(batch, context, c.kv_dim)] * (2 * full) + [(batch, c.linear_v_heads, d, d)]
            * linear + [(batch, c.conv_kernel - 1, c.conv_dim)] * linear)


def _cache_inputs(h: HirModule, c: Qwen35Config, batch: int, context: int
                  ) -> tuple[list[HirValue], list[HirValue], list[HirValue]]:
    """The batched state's inputs (:func:`state_shapes`): the KV caches, the delta states,
    the conv frames."""
    full = [i for i, kind in enumerate(c.layer_types) if kind == FULL]
    linear = [i for i, kind in enumerate(c.layer_types) if kind != FULL]
    shapes = state_shapes(c, batch, context)
    kv = [h.input(f"{kv}_{i}", shapes[0]) for i in full for kv in "kv"]
    return (kv, [h.input(f"ssm_{i}", shapes[2 * len(full)]) for i in linear],
            [h.input(f"conv_{i}", shapes[-1]) for i in linear])


def _write_states(ctx: _Ctx, batched: HirValue, new: HirValue, slot: HirValue) -> HirValue:
    """Prompts' ``new [P, ...]`` written over slots ``slot [P]`` of ``batched [batch, ...]``
    in place: ``write_prompt`` of each slot's state as one row ``[batch, 1, size]``."""
    size = int(np.prod(batched.shape[1:]))
    # fused into the scatter, the prompts' state (its dynamic rows) was stack-allocated
    # ("stack allocation size overflows 64 bits", IREE 3.13): it is materialized first
    new = ctx.reshape(ctx.h.mir("barrier", [new]), -1, 1, size)
    rows, = write_prompt(ctx.h, [new], [ctx.reshape(batched, batched.shape[0], 1, size)], slot)
    return ctx.reshape(rows, *batched.shape)


def _padding(ctx: _Ctx, ids: HirValue, last: HirValue) -> tuple[HirValue, HirValue]:
    """``linear_layer``'s ``padded`` for prompts ``ids [P, S]`` whose last tokens are at
    ``last [P, 1]``: ``t <= last`` as ``[P, S, 1]`` f32, and ``last + 1 + [0, K - 1)``."""
    h, k = ctx.h, ctx.c.conv_kernel
    t = h.mir("cast", [h.mir("reshape", [h.mir("iota", [ids], axis=1)], new_shape=[1, -1])],
              to="i32")
    valid = h.mir("cast", [h.mir("compare", [t, last], kind="le")], to="f32")
    at = h.mir("binary", [last, h.constant(np.arange(1, k, dtype=np.int32)[None], "i32")],
               kind="add")
    return ctx.reshape(valid, -2, -3, 1), at


def _prefill(h: HirModule, c: Qwen35Config, batch: int, context: int) -> None:
    """``P`` prompts at once (right-padded to one length ``S``), each from an empty state:
    its K / V, delta states and conv frames written into its slot of the batched state."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", ("prompts", "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd2)), h.input("sin", ("seq", hd2))
    last = h.input("last", ("prompts", 1), "i32")
    slot = h.input("slot", ("prompts",), "i32")
    cache, ssms, convs = _cache_inputs(h, c, batch, context)
    ctx = _Ctx(h, c, prompts=True)
    start = len(h)
    padded = _padding(ctx, ids, last)
    none = h.mir("cast", [h.mir("binary", [last, last], kind="sub")], to="f32")  # [P, 1] 0s
    zeros = [h.mir("binary", [_zeros(ctx, (1, *t.shape[1:])), ctx.reshape(
        none, -1, *[1] * (len(t.shape) - 1))], kind="add") for t in (convs[0], ssms[0])]
    h.label_nodes_since(start, "positions")
    x = h.named("embed", lambda h: ctx.embed(ids))
    fresh: list[HirValue] = []
    for i, kind in enumerate(c.layer_types):
        start = len(h)
        if kind == FULL:
            x, k, v = full_layer(ctx, i, x, cos, sin, None)
            # the partial RoPE fused into the scatter fails on llvm-cpu (_attention_step)
            fresh += [h.mir("barrier", [k]), v]
        else:
            x, conv, ssm = linear_layer(ctx, i, x, *zeros, padded=padded)
            j = len([t for t in c.layer_types[:i] if t != FULL])
            ssms[j] = _write_states(ctx, ssms[j], ssm, slot)
            convs[j] = _write_states(ctx, convs[j], conv, slot)
        h.label_nodes_since(start, f"layers.{i}")
    logits = prompt_logits(h, x, last, batch, lambda rows: _head(ctx, ctx.norm(rows, "norm")))
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *write_prompt(h, fresh, cache, slot), *ssms, *convs])


def _zeros(ctx: _Ctx, shape: tuple[int, ...]) -> HirValue:
    """A zero state of ``shape``."""
    zero = ctx.h.constant(np.zeros([1] * len(shape), np.float32))
    return ctx.h.mir("expand", [zero], target_shape=list(shape))


def _decode(h: HirModule, c: Qwen35Config, rows: int, batch: int, context: int) -> None:
    """Token b the next one of slot b, for slots ``0 .. rows - 1``: the batched state in and
    out (the other slots' rows as they were)."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", (1, rows), "i32")
    cos, sin = h.input("cos", (rows, hd2)), h.input("sin", (rows, hd2))
    pos = h.input("pos", (rows,), "i32")
    cache, ssms, convs = _cache_inputs(h, c, batch, context)
    ctx = _Ctx(h, c)
    start = len(h)
    slots = h.constant(np.arange(rows, dtype=np.int32), "i32")
    seen = h.mir("binary", [pos, h.constant(np.ones(rows, np.int32), "i32")], kind="add")
    h.label_nodes_since(start, "positions")
    x = h.named("embed", lambda h: ctx.embed(ids))
    kv: list[HirValue] = []
    for i, kind in enumerate(c.layer_types):
        start = len(h)
        if kind == FULL:
            j = len(kv)
            x, k, v = _attention_step(ctx, i, x, cos, sin, (cache[j], cache[j + 1]),
                                      (slots, pos, seen), rows)
            kv += [k, v]
        else:
            j = len([t for t in c.layer_types[:i] if t != FULL])
            # the whole batched delta state: its first `rows` slots step, the rest stay
            x, conv, ssms[j] = _delta_step(ctx, i, x, _rows(ctx, convs[j], rows), ssms[j])
            convs[j] = conv if rows == batch else h.mir(
                "concat", [conv, h.mir("narrow", [convs[j]], axis=0, start=rows,
                                       len=batch - rows)], axis=0)
        h.label_nodes_since(start, f"layers.{i}")
    start = len(h)
    logits = _head(ctx, ctx.norm(x, "norm"))
    h.label_nodes_since(start, "lm_head")
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *kv, *ssms, *convs])


def _rows(ctx: _Ctx, t: HirValue, rows: int) -> HirValue:
    """The first ``rows`` rows of ``t [batch, ...]``."""
    return t if rows == t.shape[0] else ctx.h.mir("narrow", [t], axis=0, start=0, len=rows)


def _attention_step(ctx: _Ctx, i: int, x: HirValue, cos: HirValue, sin: HirValue,
                    cache: tuple[HirValue, HirValue],
                    at: tuple[HirValue, HirValue, HirValue], rows: int
                    ) -> tuple[HirValue, HirValue, HirValue]:
    """The gated attention of ``rows`` tokens (``x [1, R, E]``), token b at row ``pos[b]``
    of slot b: K / V written there in place, attention over the slot's first
    ``seen[b] = pos[b] + 1`` keys (the cache's first ``rows`` slots: a static slice)."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    slots, pos, seen = at
    q, k, v, gate = attention_qkv(ctx, ctx.norm(x, pre + "ln1"), pre, cos, sin)
    # the partial RoPE's generic fused into the scatter fails on llvm-cpu (IREE 3.13; see
    # qwen35_hir.full_layer): K passes a barrier
    k = h.mir("barrier", [k])
    a, k_all, v_all = attend_cache(h, (q, k, v), cache, (slots, pos), seen, c.num_heads,
                                   c.head_dim, rows if rows < cache[0].shape[0] else None)
    a = ctx.mul(a, ctx.act(gate, "sigmoid"))
    x1 = ctx.add(x, ctx.linear(a, pre + "o"))
    return ctx.add(x1, ctx.ffn(ctx.norm(x1, pre + "ln2"), pre)), k_all, v_all


def _delta_step(ctx: _Ctx, i: int, x: HirValue, conv_state: HirValue, ssm: HirValue
                ) -> tuple[HirValue, HirValue, HirValue]:
    """The Gated DeltaNet layer of ``R`` tokens (``x [1, R, E]``), token b one step of row
    b's recurrence: the projections run on the R tokens as one sequence, the conv and the
    delta rule on R rows of one step each (``ssm``: the batched ``[batch, ..]`` state, its
    first R rows stepped in place). Returns (y, conv frames ``[R, ..]``, the delta state)."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    mixed, z, b, a = ctx.linears(ctx.norm(x, pre + "ln1"),
                                 [pre + n for n in ("qkv", "z", "b", "a")])
    conv, conv_state = h.depthwise_conv1d_causal_carry(
        ctx.reshape(mixed, -1, 1, c.conv_dim), ctx.p(pre + "conv"), conv_state, c.conv_kernel)
    conv = ctx.reshape(conv, 1, -1, c.conv_dim)
    q, k, v, g, beta = delta_inputs(ctx, pre, ctx.act(conv, "silu"), a, b)
    hv, d = c.linear_v_heads, c.linear_head_dim
    step = [ctx.reshape(t, -1, 1, hv, d) for t in (q, k, v)]
    step += [ctx.reshape(t, -1, 1, hv) for t in (g, beta)]
    # the step's state updated in its buffer (the batched state, or its first rows)
    y, ssm = h.gated_delta_net_carry(*step, ssm, d, state_in_place=True)
    return delta_output(ctx, pre, x, ctx.reshape(y, 1, -1, hv, d), z), conv_state, ssm


def build(c: Qwen35Config, batch: int, context: int, name: str = "qwen35_batch",
          rows: Sequence[int] | None = None) -> HirModule:
    """The batched module (see the module docstring): ``batch`` slots of ``context``
    positions each, a decode function for each of :func:`.llama_batch.step_rows`."""
    return batched_module(name, c.vocab_size, batch, context, rows,
                          lambda h: _prefill(h, c, batch, context),
                          lambda h, r: _decode(h, c, r, batch, context))


__all__ = ["FUNCTIONS", "build", "state_shapes"]
