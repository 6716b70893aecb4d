"""A LLaMA-family model that decodes up to ``batch`` sequences in one call (continuous
batching), each at its own position in its own KV cache slot.

``build(config, batch, context)`` gives a HIR module whose KV cache is one tensor per layer
and K / V, ``[batch, context, kv_heads * head_dim]``: slot ``b`` holds sequence ``b``'s keys
at positions ``0 .. pos_b``, preallocated to the context length, so sequences join and leave
between calls without the cache changing shape. Entry points:

- ``prefill(ids [P, S] i32, cos [S, hd/2], sin [S, hd/2], last [P, 1] i32, slot [P] i32,
  k_0, v_0, ...)``: runs ``P`` prompts at once, prompt p right-padded to ``S`` tokens
  (``last[p]`` its last real token), and writes prompt p's K / V into rows ``0 .. S-1`` of
  slot ``slot[p]``; returns ``logits [P, 1, V]`` of each prompt's last token, ``next
  [P, 1]`` (their argmax) and the cache. The prompts share each weight's dequantization
  (a prefill call's fixed cost, ~0.5 s at 1B Q8_0) and run as one ``[P * S]``-row GEMM. A
  padded token is causal, after its prompt's real ones: no real token attends to it, and
  the K / V it writes at row ``>= len_p`` of the slot are past the slot's filled rows,
  overwritten by the decode step at that position before any mask reaches them.
- ``decode(ids [1, B] i32, cos [B, hd/2], sin [B, hd/2], pos [B] i32, k_0, v_0, ...)``:
  token ``b`` sits at position ``pos[b]`` of slot ``b``; its K / V are written at that row
  and it attends to rows ``0 .. pos[b]`` of its slot (a ``causal_lengths`` mask of
  ``pos + 1`` keys, read on the device: a row's keys past its own are not read). Returns
  ``logits [1, B, V]``, ``next [1, B]`` and the cache. Every row is
  computed; a free slot's row is ignored by the caller (and overwritten when the slot is
  prefilled again). A ``pos[b]`` outside ``0 .. context - 1`` is clamped by the write (it
  never writes outside the cache); the caller keeps positions below the context.
- ``decode_R`` for each ``R`` of ``rows`` below ``batch`` (by default the powers of two:
  1, 2, 4 for 8 slots): ``decode`` for tokens in slots ``0 .. R - 1`` only (``ids [1, R]``,
  ``cos`` / ``sin`` ``[R, hd/2]``, ``pos [R]``, the whole cache; attention reads those
  slots), the others left as they are: a step costs what its busy slots need (a caller
  keeps busy sequences in the lowest slots: :class:`rlx.serve.engine.Engine` admits into
  the lowest free one). At 1B a batch-8 step's GEMVs cost ~7x a 1-row step's
  (benchmarks/results/serve.md).
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

from collections.abc import Callable, Sequence

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.lowering.mir_to_linalg.quant.gemv_kernels import MAX_BATCH
from rlx.models.llama import LlamaConfig, ModelError, _Ctx, _head, _layer
from rlx.models.llama_cache import cache_inputs, decode_rows, write_prompt
from rlx.models.sampling import add_sample_function

FUNCTIONS = ("prefill", "decode", "sample")
"""The functions of every batched module (beside ``decode_R``, see the docstring)."""


def _prefill(h: HirModule, c: LlamaConfig, batch: int, context: int) -> None:
    """``P`` prompts at once (right-padded to one length ``S``), each from an empty cache, its
    K / V written into one slot of the batched cache."""
    hd2 = c.head_dim // 2
    ids = h.input("ids", ("prompts", "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd2)), h.input("sin", ("seq", hd2))
    last = h.input("last", ("prompts", 1), "i32")
    slot = h.input("slot", ("prompts",), "i32")
    cache = cache_inputs(h, c, batch, context)
    ctx = _Ctx.of(h, c)
    x = h.named("embed", lambda h: ctx.embed(ids))
    fresh: list[HirValue] = []
    for i in range(c.num_layers):
        x, k, v = _layer(ctx, i, x, cos, sin, None)
        fresh += [k, v]
    logits = prompt_logits(h, x, last, batch, lambda rows: _head(ctx, rows, None))
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    h.set_outputs([logits, nxt, *write_prompt(h, fresh, cache, slot)])


def _decode(h: HirModule, c: LlamaConfig, rows: int, batch: int, context: int) -> None:
    logits, nxt, _, out = decode_rows(h, c, rows, context, "pos", slots=batch)
    h.set_outputs([logits, nxt, *out])


def state_shapes(c: LlamaConfig, batch: int, context: int) -> list[tuple[int, ...]]:
    """The cache tensors in order: ``k_i``, ``v_i`` ``[batch, context, kv_dim]`` per layer."""
    return [(batch, context, c.kv_dim)] * (2 * c.num_layers)


def step_rows(batch: int, rows: Sequence[int] | None = None) -> list[int]:
    """The row counts of the decode functions, ascending, ``batch`` last (``decode``; each
    other ``R`` is ``decode_R``): ``rows`` (default the powers of two below ``batch``)."""
    if rows is None:
        rows = [1 << i for i in range(batch.bit_length()) if 1 << i < batch]
    bad = [r for r in rows if not 1 <= r <= batch]
    if bad:
        raise ModelError(f"error: rows: expected decode row counts 1 .. {batch} (the slots), "
                         f"found {bad}")
    return sorted({*rows, batch})


def prompt_logits(h: HirModule, x: HirValue, last: HirValue, batch: int,
                  head: Callable[[HirValue], HirValue]) -> HirValue:
    """``head`` (final norm and LM head) of each prompt's last hidden state: ``x [P, S, E]``,
    ``last [P, 1]``; returns ``[P, 1, V]``. A prefill's ``P`` is dynamic, and a quantized
    head over dynamic rows is a prefill matmul, which dequantizes the whole head into a
    data-tiled pack every call (Qwen3.5-0.8B's 248320 x 1024 Q8_0 head: ~300 ms of a
    1-prompt prefill, against ~200 ms for all the rest at 8 tokens). Within the batched
    GEMV kernel's rows (``batch <= MAX_BATCH``) the head runs on ``batch`` static rows
    instead: the prompts' rows, the last one repeated (``min(b, P - 1)``), and the first P
    rows of its logits are kept. Relied on: ``P <= batch`` (one prompt a slot), which
    ``BatchModel.prefill_many`` checks; a larger P reads no row out of bounds (the gathers
    clamp their indices) but would repeat row ``batch - 1``'s logits."""
    start = len(h)
    rows = h.mir("gather", [x, last], axis=1, batch_dims=1)              # [P, 1, E]
    if batch > MAX_BATCH:
        out = head(rows)
        h.label_nodes_since(start, "lm_head")
        return out
    one = h.constant(np.ones((), np.int64), "i64")
    top = h.mir("binary", [h.mir("dim", [rows], axis=0), one], kind="sub")        # P - 1
    pick = h.mir("binary", [h.constant(np.arange(batch, dtype=np.int64), "i64"), top],
                 kind="min")
    logits = head(h.mir("gather", [rows, pick], axis=0))                # [batch, 1, V]
    out = h.mir("gather", [logits, h.mir("iota", [rows], axis=0)], axis=0)
    h.label_nodes_since(start, "lm_head")
    return out


def decode_function(rows: int, batch: int) -> str:
    """The decode function of ``rows`` rows in a module of ``batch`` slots."""
    return "decode" if rows == batch else f"decode_{rows}"


def build(c: LlamaConfig, batch: int, context: int, name: str = "llama_batch",
          rows: Sequence[int] | None = None) -> HirModule:
    """The batched module (see the module docstring): ``batch`` slots of ``context``
    positions each, a decode function for each of :func:`step_rows`."""
    return batched_module(name, c.vocab_size, batch, context, rows,
                          lambda h: _prefill(h, c, batch, context),
                          lambda h, r: _decode(h, c, r, batch, context))


def batched_module(name: str, vocab_size: int, batch: int, context: int,
                   rows: Sequence[int] | None, prefill: Callable[[HirModule], None],
                   decode: Callable[[HirModule, int], None]) -> HirModule:
    """A batched module's functions in order: ``prefill``, ``decode`` / ``decode_R`` for
    each of :func:`step_rows` (widest first), ``sample``; the bodies are the model's."""
    if batch < 1 or context < 2:
        raise ModelError(f"error: batch / context: expected batch >= 1 and context >= 2, "
                         f"found batch {batch}, context {context}")
    h = HirModule(name, function="prefill")
    prefill(h)
    for r in reversed(step_rows(batch, rows)):
        h.function(decode_function(r, batch))
        decode(h, r)
    add_sample_function(h, vocab_size, "sample")
    return h


__all__ = ["FUNCTIONS", "batched_module", "build", "decode_function", "prompt_logits",
           "state_shapes", "step_rows"]
