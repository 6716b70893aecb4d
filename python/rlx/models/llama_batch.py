"""A LLaMA-family model that decodes up to ``batch`` sequences in one call (continuous
batching), each at its own position in its own KV cache slot.

``build(config, batch, context)`` gives a HIR module whose KV cache is one tensor per layer
and K / V, ``[batch, context, kv_heads * head_dim]``: slot ``b`` holds sequence ``b``'s keys
at positions ``0 .. pos_b``, preallocated to the context length, so sequences join and leave
between calls without the cache changing shape. Entry points:

- ``prefill(ids [1, S] i32, cos [S, hd/2], sin [S, hd/2], last [1, 1] i32, slot [1] i32,
  k_0, v_0, ...)``: runs the prompt (``last`` = S - 1) and writes its K / V into rows
  ``0 .. S-1`` of slot ``slot``; returns ``logits [1, 1, V]`` of the last position,
  ``next [1, 1]`` (their argmax) and the cache.
- ``decode(ids [1, B] i32, cos [B, hd/2], sin [B, hd/2], pos [B] i32, k_0, v_0, ...)``:
  token ``b`` sits at position ``pos[b]`` of slot ``b``; its K / V are written at that row
  and it attends to rows ``0 .. pos[b]`` of its slot (a ``causal_lengths`` mask of
  ``pos + 1`` keys, read on the device: a row's keys past its own are not read). Returns
  ``logits [1, B, V]``, ``next [1, B]`` and the cache. Every row is
  computed; a free slot's row is ignored by the caller (and overwritten when the slot is
  prefilled again). A ``pos[b]`` outside ``0 .. context - 1`` is clamped by the write (it
  never writes outside the cache); the caller keeps positions below the context.
- ``sample``: :mod:`rlx.models.sampling`, one row: the token after a prompt, and each
  sampled row of a decode step (the engine calls it once per such row): a 4-row sample
  function alone (700 logits) had not compiled after a minute of CPU here (load ~25).

The per-token work (embedding, norms, projections, RoPE, FFN, head) runs on the ``B`` tokens
as one ``[1, B, E]`` sequence (RoPE's table row t is token t's position); only attention
sees the batch axis. A row's result does not depend on the other rows. The K / V writes
are ``rlx_mir.write_rows`` at the slot and position read on the device: IREE updates the
cache's buffer in place (the cache outputs alias the inputs; a caller passes each call the
previous call's outputs and does not read the inputs again), so a step writes B rows per
layer and K / V instead of rewriting every slot's whole cache.
"""

from __future__ import annotations

from rlx.dialects.builder import HirModule, HirValue
from rlx.models.llama import LlamaConfig, ModelError, _Ctx, _head, _layer
from rlx.models.llama_cache import cache_inputs, decode_rows, write_prompt
from rlx.models.sampling import add_sample_function

FUNCTIONS = ("prefill", "decode", "sample")


def _prefill(h: HirModule, c: LlamaConfig, batch: int, context: int) -> None:
    """The prompt of one sequence, its K / V written into one slot of the batched cache."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", (1, "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd2)), h.input("sin", ("seq", hd2))
    last = h.input("last", (1, 1), "i32")
    slot = h.input("slot", (1,), "i32")
    cache = cache_inputs(h, c, batch, context)
    ctx = _Ctx.of(h, c)
    x = h.named("embed", lambda h: h.mir("gather", [ctx.p("embed"), ids], axis=0))
    fresh: list[HirValue] = []
    for i in range(c.num_layers):
        x, k, v = _layer(ctx, i, x, cos, sin, None)
        fresh += [k, v]
    logits = _head(ctx, x, last)
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *write_prompt(h, fresh, cache, slot)])


def _decode(h: HirModule, c: LlamaConfig, batch: int, context: int) -> None:
    logits, nxt, _, out = decode_rows(h, c, batch, context, "pos")
    h.set_outputs([logits, nxt, *out])


def build(c: LlamaConfig, batch: int, context: int, name: str = "llama_batch") -> HirModule:
    """The batched module (see the module docstring): ``batch`` slots of ``context``
    positions each."""
    if batch < 1 or context < 2:
        raise ModelError(f"error: batch / context: expected batch >= 1 and context >= 2, "
                         f"found batch {batch}, context {context}")
    h = HirModule(name, function="prefill")
    _prefill(h, c, batch, context)
    h.function("decode")
    _decode(h, c, batch, context)
    add_sample_function(h, c.vocab_size, "sample")
    return h


__all__ = ["FUNCTIONS", "build"]
