"""The KV cache preallocated to a context length and updated in place (rlx's, not RLX's,
whose decode concatenates): the layers and entry points that write and read it, for
:func:`rlx.models.llama.build` with ``context`` (one sequence) and
:mod:`rlx.models.llama_batch` (one cache slot per sequence); and :func:`fits_context`, the
check every preallocated model's caller makes (LLaMA's and Qwen3.5's, ``rlx.generate`` and
``rlx.speculative``).

A token's K / V are written at its row with ``rlx_mir.write_rows`` (in place: IREE aliases
the cache's output with its input when the caller passes each call the previous call's
outputs), and attention reads the first ``filled`` keys of the row (a ``causal_lengths``
mask whose count is read on the device), so a step's cost does not grow with the context
except for attention over the keys filled so far, and the host never reads a position back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.ir.diagnostics import RunError
from rlx.models.llama import LlamaConfig, _Ctx, _head


def start_state(program: Any, model: Any) -> list[Any]:
    """What ``prefill`` takes after its inputs for a new sequence: the module's ``state``
    results where it has that function (made on the device: Qwen3.5's zeroed caches and
    states, :func:`rlx.models.qwen35_hir`'s ``state``, no host upload), else
    ``model.initial_state()`` (host arrays; LLaMA's prefill takes none)."""
    if "state" not in program.functions:
        return list(model.initial_state())
    state = program.state
    (shape, _), = state.input_types
    out = state.on_device(np.zeros(shape, np.float32))
    return list(out) if isinstance(out, tuple) else [out]


def fits_context(model: Any, positions: int, what: str) -> None:
    """A model whose KV cache is preallocated (``context``) holds that many positions:
    more would land on its last row (the write clamps), so they are refused here."""
    context = getattr(model, "context", None)
    if context is not None and positions > context:
        raise RunError(f"error: {what} need {positions} positions of the KV cache; the "
                       f"model was built with context {context} (a larger "
                       "--context / context=)")


def cache_layer(ctx: _Ctx, i: int, x: HirValue, cos: HirValue, sin: HirValue,
                cache: tuple[HirValue, HirValue], at: tuple[HirValue, HirValue],
                filled: HirValue, rows: int | None = None) -> tuple[HirValue, HirValue, HirValue]:
    """One layer of ``B`` tokens (``x [1, B, E]``), token b the next one of cache row
    ``at = (slot [B], pos [B])``: its K / V written at that row in place
    (``write_rows``), and it attends to the row's first ``filled[b]`` keys (``pos + 1``; a
    ``causal_lengths`` mask the kernels read on the device). ``rows``: the cache has more
    slots than the ``rows`` tokens, token b is slot b's (``slot = 0 .. rows - 1``), and
    attention reads those slots only (a static slice of the cache's leading dim)."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    start = len(h)
    n1 = h.rms_norm(x, ctx.p(pre + "ln1"), ctx.zeros_e, c.rms_norm_eps)
    q, k, v = ctx.attention_inputs(n1, pre, cos, sin)
    a, k_all, v_all = attend_cache(h, (q, k, v), cache, at, filled, c.num_heads, c.head_dim,
                                   rows)
    x1 = h.mir("binary", [x, ctx.linear(a, pre + "o")], kind="add")
    n2 = h.rms_norm(x1, ctx.p(pre + "ln2"), ctx.zeros_e, c.rms_norm_eps)
    y = h.mir("binary", [x1, ctx.ffn(n2, pre)], kind="add")
    h.label_nodes_since(start, f"layers.{i}")
    return y, k_all, v_all


def attend_cache(h: HirModule, qkv: tuple[HirValue, HirValue, HirValue],
                 cache: tuple[HirValue, HirValue], at: tuple[HirValue, HirValue],
                 filled: HirValue, heads: int, head_dim: int, rows: int | None = None
                 ) -> tuple[HirValue, HirValue, HirValue]:
    """Attention of ``B`` tokens (``q``, ``k``, ``v`` ``[1, B, *]``) over a preallocated
    cache (:func:`cache_layer`, and Qwen3.5's batched module): token b's K / V written in
    place at ``at = (slot [B], pos [B])``, then its query over that slot's first
    ``filled[b]`` keys (``causal_lengths``; ``rows``: the first ``rows`` slots only, a
    static slice). Returns the attention output ``[1, B, heads * head_dim]`` and the
    updated K / V caches."""
    q, k, v = qkv
    kv_dim = cache[0].shape[2]
    k_all, v_all = (h.mir("write_rows", [old, h.mir("reshape", [t], new_shape=[-1, 1, kv_dim]),
                                         *at])
                    for t, old in ((k, cache[0]), (v, cache[1])))
    k_att, v_att = k_all, v_all
    if rows is not None:
        k_att, v_att = (h.mir("slice", [t], starts=[0, 0, 0], sizes=[rows, -1, -1],
                              strides=[1, 1, 1]) for t in (k_all, v_all))
    q = h.mir("reshape", [q], new_shape=[-1, 1, heads * head_dim])
    a = h.attention(q, k_att, v_att, filled, num_heads=heads, head_dim=head_dim,
                    mask_kind="causal_lengths")
    return h.mir("reshape", [a], new_shape=[1, -1, heads * head_dim]), k_all, v_all


def write_prompt(h: HirModule, fresh: Sequence[HirValue], cache: Sequence[HirValue],
                 slot: HirValue) -> list[HirValue]:
    """Prompts' K / V ``[P, S, kv]`` written into rows ``0 .. S-1`` of cache slots
    ``slot [P]``, in place (the rows after them are left as they are: no mask reaches them
    until a decode step writes them)."""
    start = len(h)
    first = (h.constant(np.zeros(1, np.int32), "i32") if slot.shape[0] == 1 else
             h.mir("binary", [slot, slot], kind="sub"))         # zeros [P]
    out = [h.mir("write_rows", [old, t, slot, first]) for t, old in zip(fresh, cache,
                                                                         strict=True)]
    h.label_nodes_since(start, "cache_write")
    return out


def cache_inputs(h: HirModule, c: LlamaConfig, batch: int, context: int
                 ) -> list[HirValue]:
    """``k_0, v_0, ..., k_{L-1}, v_{L-1}``, each ``[batch, context, kv_dim]``."""
    return [h.input(f"{kv}_{i}", (batch, context, c.kv_dim))
            for i in range(c.num_layers) for kv in ("k", "v")]


def decode_rows(h: HirModule, c: LlamaConfig, batch: int, context: int, position: str,
                slots: int | None = None) -> tuple[HirValue, HirValue, HirValue, list[HirValue]]:
    """The inputs and body of a decode step of ``batch`` tokens, token b the next one of
    cache slot b: ``ids [1, B] i32, cos [B, hd/2], sin [B, hd/2], <position> [B] i32`` (the
    row each token is written at: the keys before it) and the cache (``slots`` slots,
    ``batch`` by default; more: the step runs slots ``0 .. B - 1`` and leaves the others as
    they are). Returns ``logits [1, B, V]``, ``next [1, B]``, the keys filled after the
    step (``position + 1``) and the cache updated in place."""
    hd2 = c.head_dim // 2
    slots = batch if slots is None else slots     # rows <= slots: llama_batch.step_rows
    ids = h.input("ids", (1, batch), "i32")
    cos, sin = h.input("cos", (batch, hd2)), h.input("sin", (batch, hd2))
    pos = h.input(position, (batch,), "i32")
    cache = cache_inputs(h, c, slots, context)
    ctx = _Ctx.of(h, c)
    start = len(h)
    at = (h.constant(np.arange(batch, dtype=np.int32), "i32"), pos)
    seen = h.mir("binary", [pos, h.constant(np.ones(batch, np.int32), "i32")], kind="add")
    h.label_nodes_since(start, "positions")
    x = h.named("embed", lambda h: ctx.embed(ids))
    out: list[HirValue] = []
    for i in range(c.num_layers):
        x, k, v = cache_layer(ctx, i, x, cos, sin, (cache[2 * i], cache[2 * i + 1]), at, seen,
                              batch if batch < slots else None)
        out += [k, v]
    logits = _head(ctx, x, None)
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    return logits, nxt, seen, out


def context_decode(h: HirModule, c: LlamaConfig, context: int) -> None:
    """``decode(ids [1, 1], cos, sin, filled [1] i32, k_0, v_0, ...)`` over the cache
    preallocated to ``context`` rows: the token is row ``filled`` (keys before it), and the
    step returns ``filled + 1`` beside the cache it updated in place."""
    logits, nxt, seen, out = decode_rows(h, c, 1, context, "filled")
    h.set_outputs([logits, nxt, seen, *out])


def token_count(h: HirModule, ids: HirValue) -> HirValue:
    """``[1]`` i32: the tokens of ``ids [1, S]``, from its shape on the device."""
    return h.mir("cast", [h.mir("reshape", [h.mir("dim", [ids], axis=1)], new_shape=[1])],
                 to="i32")


def prompt_cache(h: HirModule, c: LlamaConfig, ids: HirValue, fresh: list[HirValue],
                  context: int) -> list[HirValue]:
    """The prompt's K / V written into a zeroed cache of ``context`` rows, after the number
    of rows filled (``[1]`` i32, the prompt's length, from ``ids``' shape on the device)."""
    start = len(h)
    filled = token_count(h, ids)
    zero = h.constant(np.zeros((1, 1, 1), np.float32))
    empty = [h.mir("expand", [zero], target_shape=[1, context, c.kv_dim]) for _ in fresh]
    h.label_nodes_since(start, "positions")
    return [filled, *write_prompt(h, fresh, empty, h.constant(np.zeros(1, np.int32), "i32"))]


__all__ = ["attend_cache", "cache_inputs", "cache_layer", "context_decode", "decode_rows",
           "fits_context", "prompt_cache", "start_state", "token_count", "write_prompt"]
