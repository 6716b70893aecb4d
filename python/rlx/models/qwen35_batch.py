"""A Qwen3.5 model that decodes up to ``batch`` sequences in one call (continuous batching),
each at its own position with its own KV cache slot and its own DeltaNet states: the
Qwen3.5 counterpart of :mod:`rlx.models.llama_batch`, with the same entry points and the
same calling convention, so :class:`rlx.serve.engine.BatchModel` runs either.

The state, one tensor per layer and kind, slot ``b`` of each sequence ``b``'s:

- a full-attention layer: ``k_i``, ``v_i`` ``[batch, context, kv_heads * head_dim]`` (as
  LLaMA's batched cache: rows ``0 .. pos_b`` of slot ``b`` hold its keys);
- a linear-attention layer: ``conv_i [batch, K - 1, C]`` (the last K - 1 inputs of its
  causal conv) and ``ssm_i [batch, V_heads, d, d]`` (the delta rule's state).

Entry points:

- ``prefill(ids [1, S] i32, cos [S, hd/2], sin [S, hd/2], last [1, 1] i32, slot [1] i32,
  *state)``: the prompt run from an empty state (attention over its own keys, conv frames
  and delta state from zero; whatever the slot held before is not read), its K / V written
  into rows ``0 .. S-1`` of slot ``slot`` and its final conv frames and delta state into
  that slot; returns ``logits [1, 1, V]`` of the last position, ``next [1, 1]`` and the
  state.
- ``decode(ids [1, B] i32, cos [B, hd/2], sin [B, hd/2], pos [B] i32, *state)``: token
  ``b`` the next one of slot ``b`` at position ``pos[b]``; the attention layers write its
  K / V at that row and attend to the slot's first ``pos[b] + 1`` keys (``causal_lengths``);
  the linear layers advance slot ``b``'s conv frames and delta state by the one token (the
  batch axis of ``depthwise_conv1d_causal`` and ``gated_delta_net``: each row its own
  recurrence). Returns ``logits [1, B, V]``, ``next [1, B]`` and the state.
- ``decode_R`` for each ``R`` of :func:`rlx.models.llama_batch.step_rows` below ``batch``:
  ``decode`` for slots ``0 .. R - 1`` only; the other slots' caches and states are left
  as they are (a step reads and writes the delta states of its busy rows only, ~1 MB a
  layer and slot at 0.8B).
- ``sample``: :mod:`rlx.models.sampling`.

Every state write is ``rlx_mir.write_rows`` at slots read on the device (the delta state
written as ``[batch, V_heads, d * d]`` rows), so IREE updates the state's buffers in place
and a row's result does not depend on the other rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.models.llama import ModelError
from rlx.models.llama_batch import decode_function, step_rows
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
from rlx.models.sampling import add_sample_function

FUNCTIONS = ("prefill", "decode", "sample")
"""The functions of every batched module (beside ``decode_R``)."""


def state_shapes(c: Qwen35Config, batch: int, context: int) -> list[tuple[int, ...]]:
    """The state's tensors in order (see the module docstring)."""
    d = c.linear_head_dim
    out: list[tuple[int, ...]] = []
    for kind in c.layer_types:
        out += ([(batch, context, c.kv_dim)] * 2 if kind == FULL else
                [(batch, c.conv_kernel - 1, c.conv_dim), (batch, c.linear_v_heads, d, d)])
    return out


def _state_inputs(h: HirModule, c: Qwen35Config, batch: int, context: int) -> list[HirValue]:
    names = [n for i, kind in enumerate(c.layer_types)
             for n in ((f"k_{i}", f"v_{i}") if kind == FULL else (f"conv_{i}", f"ssm_{i}"))]
    return [h.input(n, s) for n, s in zip(names, state_shapes(c, batch, context), strict=True)]


def _write(ctx: _Ctx, old: HirValue, new: HirValue, slots: HirValue, rows: HirValue
           ) -> HirValue:
    """``new [N, T, ...]`` written into slots ``slots`` of ``old [B, T', ...]`` at row
    ``rows`` (``write_rows``; a rank-4 state is written as rank 3, ``d * d`` columns)."""
    h = ctx.h
    # IREE 3.13 fuses the scan (or the conv) that makes ``new`` into the scatter and then
    # stack-allocates the rows it writes: at 0.8B widths 1 MB a delta state row, and llvm-cpu
    # refuses ("exceeded stack allocation limit of 32768 bytes"): ``new`` passes a barrier
    new = h.mir("barrier", [new])
    shape = list(old.shape)
    if len(shape) == 3:
        return h.mir("write_rows", [old, new, slots, rows])
    flat = [shape[0], shape[1], int(np.prod(shape[2:]))]
    out = h.mir("write_rows", [ctx.reshape(old, *flat),
                               h.mir("reshape", [new], new_shape=[-1, *flat[1:]]), slots, rows])
    return ctx.reshape(out, *shape)


def _rows(ctx: _Ctx, state: HirValue, rows: int, batch: int) -> HirValue:
    """Slots ``0 .. rows - 1`` of a state tensor (all of it when ``rows == batch``)."""
    if rows == batch:
        return state
    rank = len(state.shape)
    return ctx.h.mir("slice", [state], starts=[0] * rank, sizes=[rows] + [-1] * (rank - 1),
                     strides=[1] * rank)


def _prefill(h: HirModule, c: Qwen35Config, batch: int, context: int) -> None:
    """One sequence's prompt from an empty state, written into one slot."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", (1, "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd2)), h.input("sin", ("seq", hd2))
    last = h.input("last", (1, 1), "i32")
    slot = h.input("slot", (1,), "i32")
    state = _state_inputs(h, c, batch, context)
    ctx = _Ctx(h, c)
    first = h.constant(np.zeros(1, np.int32), "i32")
    x = h.named("embed", lambda h: h.mir("gather", [ctx.p("embed"), ids], axis=0))
    out: list[HirValue] = []
    for i, kind in enumerate(c.layer_types):
        start = len(h)
        s0, s1 = state[2 * i], state[2 * i + 1]
        if kind == FULL:
            x, k, v = full_layer(ctx, i, x, cos, sin, None)
            new = [k, v]
        else:
            x, conv, ssm = linear_layer(ctx, i, x, _zeros(ctx, s0), _zeros(ctx, s1))
            new = [conv, ssm]
        out += [_write(ctx, old, t, slot, first) for old, t in ((s0, new[0]), (s1, new[1]))]
        h.label_nodes_since(start, f"layers.{i}")
    start = len(h)
    logits = _head(ctx, ctx.norm(h.mir("gather", [x, last], axis=1, batch_dims=1), "norm"))
    h.label_nodes_since(start, "lm_head")
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *out])


def _zeros(ctx: _Ctx, state: HirValue) -> HirValue:
    """A zero state of one slot, ``state``'s shape with a leading 1."""
    shape = [1, *state.shape[1:]]
    zero = ctx.h.constant(np.zeros([1] * len(shape), np.float32))
    return ctx.h.mir("expand", [zero], target_shape=shape)


def _decode(h: HirModule, c: Qwen35Config, rows: int, batch: int, context: int) -> None:
    """Token b the next one of slot b, for slots ``0 .. rows - 1``."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", (1, rows), "i32")
    cos, sin = h.input("cos", (rows, hd2)), h.input("sin", (rows, hd2))
    pos = h.input("pos", (rows,), "i32")
    state = _state_inputs(h, c, batch, context)
    ctx = _Ctx(h, c)
    start = len(h)
    slots = h.constant(np.arange(rows, dtype=np.int32), "i32")
    zeros = h.constant(np.zeros(rows, np.int32), "i32")
    seen = h.mir("binary", [pos, h.constant(np.ones(rows, np.int32), "i32")], kind="add")
    h.label_nodes_since(start, "positions")
    x = h.named("embed", lambda h: h.mir("gather", [ctx.p("embed"), ids], axis=0))
    out: list[HirValue] = []
    for i, kind in enumerate(c.layer_types):
        start = len(h)
        s0, s1 = state[2 * i], state[2 * i + 1]
        if kind == FULL:
            x, k, v = _attention_step(ctx, i, x, cos, sin, (s0, s1), (slots, pos, seen), rows)
            out += [k, v]
        else:
            x, conv, ssm = _delta_step(ctx, i, x, _rows(ctx, s0, rows, batch),
                                       _rows(ctx, s1, rows, batch))
            out += [_write(ctx, old, t, slots, zeros) for old, t in ((s0, conv), (s1, ssm))]
        h.label_nodes_since(start, f"layers.{i}")
    start = len(h)
    logits = _head(ctx, ctx.norm(x, "norm"))
    h.label_nodes_since(start, "lm_head")
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *out])


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
    k_all, v_all = (h.mir("write_rows", [old, ctx.reshape(t, -1, 1, c.kv_dim), slots, pos])
                    for t, old in ((k, cache[0]), (v, cache[1])))
    k_att, v_att = (_rows(ctx, t, rows, t.shape[0]) for t in (k_all, v_all))
    q = ctx.reshape(q, -1, 1, c.num_heads * c.head_dim)
    a = h.attention(q, k_att, v_att, seen, num_heads=c.num_heads, head_dim=c.head_dim,
                    mask_kind="causal_lengths")
    a = ctx.mul(ctx.reshape(a, 1, -1, c.num_heads * c.head_dim), ctx.act(gate, "sigmoid"))
    x1 = ctx.add(x, ctx.linear(a, pre + "o"))
    return ctx.add(x1, ctx.ffn(ctx.norm(x1, pre + "ln2"), pre)), k_all, v_all


def _delta_step(ctx: _Ctx, i: int, x: HirValue, conv_state: HirValue, ssm: HirValue
                ) -> tuple[HirValue, HirValue, HirValue]:
    """The Gated DeltaNet layer of ``R`` tokens (``x [1, R, E]``), token b one step of row
    b's recurrence: the projections run on the R tokens as one sequence, the conv and the
    delta rule on R rows of one step each. Returns (y, conv frames, delta state) ``[R, ..]``."""
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
    y, ssm = h.gated_delta_net_carry(*step, ssm, d)
    return delta_output(ctx, pre, x, ctx.reshape(y, 1, -1, hv, d), z), conv_state, ssm


def build(c: Qwen35Config, batch: int, context: int, name: str = "qwen35_batch",
          rows: Sequence[int] | None = None) -> HirModule:
    """The batched module (see the module docstring): ``batch`` slots of ``context``
    positions each, a decode function for each of :func:`.llama_batch.step_rows`."""
    if batch < 1 or context < 2:
        raise ModelError(f"error: batch / context: expected batch >= 1 and context >= 2, "
                         f"found batch {batch}, context {context}")
    h = HirModule(name, function="prefill")
    _prefill(h, c, batch, context)
    for r in reversed(step_rows(batch, rows)):
        h.function(decode_function(r, batch))
        _decode(h, c, r, batch, context)
    add_sample_function(h, c.vocab_size, "sample")
    return h


__all__ = ["FUNCTIONS", "build", "state_shapes"]
