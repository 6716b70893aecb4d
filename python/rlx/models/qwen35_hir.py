"""The Qwen3.5 HIR module: prefill / decode / verify / mtp / rollback entry points
(documented in :mod:`rlx.models.qwen35`), built from rlx's blocks: ``gated_delta_net`` with
its carried state, ``depthwise_conv1d_causal`` with its carried frames, ``attention``
(causal, GQA, over the KV cache), ``rope`` (partial, NeoX), ``rms_norm``, ``swiglu``,
``dequant_matmul`` for weights kept in a GGUF file's format, and ``qwen35_mtp_head``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.models.llama import ModelError, embed_rows, packed_weight
from rlx.models.llama_cache import token_count
from rlx.models.qwen35 import (
    FULL,
    Qwen35Config,
    l2_norm_eps,
    l2_norm_weight,
    param_shapes,
    state_names,
    state_shapes,
)

FUNCTIONS = ("prefill", "decode", "sample", "mtp", "rollback", "mtp_rollback", "state")
"""Entry points besides ``verify_K`` (K draft tokens: K + 1 positions)."""


@dataclass
class _Ctx:
    h: HirModule
    c: Qwen35Config
    shapes: dict[str, tuple[int, ...]] = field(init=False)
    zeros: dict[int, HirValue] = field(default_factory=dict)
    want_last: bool = False
    context: int | None = None
    """The KV cache preallocated to this many rows and updated in place (``filled`` rows
    of it hold keys); None: the cache grows by concatenation each call."""
    prompts: bool = False
    """The hidden states are ``[P, S, E]``, P prompts of a batched prefill (both dynamic);
    else ``[1, S, E]``."""

    def __post_init__(self) -> None:
        self.shapes = param_shapes(self.c, mtp=True)

    def p(self, name: str) -> HirValue:
        return self.h.param(name, self.shapes[name])

    def embed(self, ids: HirValue) -> HirValue:
        """The embedding's rows of ``ids`` as f32: of the f32 table, or of a GGUF file's
        table kept in its format (:func:`rlx.models.llama.embed_rows`)."""
        return embed_rows(self.h, ids, self.shapes["embed"], self.c.weight_schemes,
                          self.c.weight_leads)

    @cached_property
    def slot0(self) -> HirValue:
        """``[0]`` i32: the cache's one slot."""
        return self.h.constant(np.zeros(1, np.int32), "i32")

    def zero(self, n: int) -> HirValue:
        if n not in self.zeros:
            self.zeros[n] = self.h.constant(np.zeros(n, np.float32))
        return self.zeros[n]

    def norm(self, x: HirValue, weight: str | HirValue, n: int | None = None) -> HirValue:
        """RMSNorm over the last axis (the weight holds HF's ``1 + w`` where zero-centred)."""
        w = self.p(weight) if isinstance(weight, str) else weight
        dim = n if n is not None else self.shapes[str(weight)][0]
        return self.h.rms_norm(x, w, self.zero(dim), self.c.rms_norm_eps)

    def linear(self, x: HirValue, name: str) -> HirValue:
        """``x @ W``: a plain linear, or a dequant_matmul on the file's raw bytes."""
        members = self.c.packed.get(name, (name,))
        k = self.shapes[members[0]][0]
        n = sum(self.shapes[m][1] for m in members)
        scheme = self.c.weight_schemes.get(name)
        if scheme is None:
            return self.h.linear(x, self.h.param(name, (k, n)))
        w = packed_weight(self.h, self.shapes, self.c.packed, name, scheme,
                          self.c.weight_leads)
        return self.h.dequant_matmul(x, w, scheme=scheme)

    def linears(self, x: HirValue, names: Sequence[str]) -> list[HirValue]:
        """``x @ W_i`` for each name; a packed run of names is one matmul, sliced apart."""
        out: list[HirValue] = []
        i = 0
        while i < len(names):
            pack = next((p for p, m in self.c.packed.items()
                         if tuple(names[i:i + len(m)]) == tuple(m)), None)
            if pack is None:
                out.append(self.linear(x, names[i]))
                i += 1
                continue
            y, start = self.linear(x, pack), 0
            for name in self.c.packed[pack]:
                n = self.shapes[name][1]
                out.append(self.last(y, start, n))
                start += n
            i += len(self.c.packed[pack])
        return out

    def last(self, y: HirValue, start: int, n: int) -> HirValue:
        """``y[..., start:start + n]`` of a rank-3 value."""
        return self.h.mir("narrow", [y], axis=2, start=start, len=n)

    def ffn(self, x: HirValue, pre: str) -> HirValue:
        names = [pre + n for n in ("up", "gate", "down")]
        if not any(n in self.c.weight_schemes or n in self.c.packed for n in names) and \
                pre + "gate_up" not in self.c.packed:
            return self.h.swiglu_ffn(x, *map(self.p, names))
        gate, up = self.linears(x, [pre + "gate", pre + "up"])
        act = self.h.mir("binary", [self.h.mir("activation", [gate], kind="silu"), up],
                         kind="mul")
        return self.linear(act, pre + "down")

    def add(self, a: HirValue, b: HirValue) -> HirValue:
        return self.h.mir("binary", [a, b], kind="add")

    def mul(self, a: HirValue, b: HirValue) -> HirValue:
        return self.h.mir("binary", [a, b], kind="mul")

    def act(self, x: HirValue, kind: str) -> HirValue:
        return self.h.mir("activation", [x], kind=kind)

    def reshape(self, x: HirValue, *shape: int) -> HirValue:
        return self.h.mir("reshape", [x], new_shape=list(shape))

    def tokens(self, x: HirValue, *tail: int) -> HirValue:
        """``x [B, S, ...]`` as ``[B, S, *tail]`` (``B`` 1, or :attr:`prompts`)."""
        return self.reshape(x, -2, -3, *tail) if self.prompts else self.reshape(x, 1, -1, *tail)


# --------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------


def attention_qkv(ctx: _Ctx, x: HirValue, pre: str, cos: HirValue, sin: HirValue
                  ) -> tuple[HirValue, HirValue, HirValue, HirValue]:
    """The gated attention's q (normed, rotated), k (normed, rotated), v and output gate:
    ``q_proj`` holds per head ``hd`` query then ``hd`` gate columns."""
    h, c = ctx.h, ctx.c
    nh, nkv, hd = c.num_heads, c.num_kv_heads, c.head_dim
    qg, k, v = ctx.linears(x, [pre + "q", pre + "k", pre + "v"])
    qg = ctx.tokens(qg, nh, 2 * hd)
    q = h.mir("narrow", [qg], axis=3, start=0, len=hd)
    gate = ctx.tokens(h.mir("narrow", [qg], axis=3, start=hd, len=hd), nh * hd)
    q = h.rope(ctx.norm(q, pre + "q_norm"), cos, sin, hd, c.n_rot, "neox")
    k = h.rope(ctx.norm(ctx.tokens(k, nkv, hd), pre + "k_norm"), cos, sin, hd,
               c.n_rot, "neox")
    return ctx.tokens(q, nh * hd), ctx.tokens(k, nkv * hd), v, gate


def full_layer(ctx: _Ctx, i: int, x: HirValue, cos: HirValue, sin: HirValue,
               past: tuple[HirValue, HirValue] | None,
               at: tuple[HirValue, HirValue] | None = None
               ) -> tuple[HirValue, HirValue, HirValue]:
    """Gated full attention over the KV cache, then the FFN; returns (y, k, v). ``at``
    (preallocated cache): ``(filled, seen)``, the tokens' K / V written in place at rows
    ``filled ..`` and attention over the first ``seen = filled + S`` keys
    (``causal_lengths``); else the cache grows by concatenation (causal); ``past`` None:
    no cache, the tokens attend to their own keys (causal; K / V are theirs)."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    q, k, v, gate = attention_qkv(ctx, ctx.norm(x, pre + "ln1"), pre, cos, sin)
    if at is None:
        if past is not None:
            k = h.mir("concat", [past[0], k], axis=1)
            v = h.mir("concat", [past[1], v], axis=1)
        a = h.attention(q, k, v, num_heads=c.num_heads, head_dim=c.head_dim,
                        mask_kind="causal")
    else:
        assert past is not None
        filled, seen = at
        # IREE 3.13 fuses the partial RoPE's generic into the scatter of K and then fails
        # on llvm-cpu ("expected no unbounded stack allocations"): K passes a barrier
        k = h.mir("barrier", [k])
        k, v = (h.mir("write_rows", [old, new, ctx.slot0, filled])
                for new, old in ((k, past[0]), (v, past[1])))
        a = h.attention(q, k, v, seen, num_heads=c.num_heads, head_dim=c.head_dim,
                        mask_kind="causal_lengths")
    a = ctx.mul(a, ctx.act(gate, "sigmoid"))
    x1 = ctx.add(x, ctx.linear(a, pre + "o"))
    return ctx.add(x1, ctx.ffn(ctx.norm(x1, pre + "ln2"), pre)), k, v


def _heads(ctx: _Ctx, x: HirValue, start: int, heads: int) -> HirValue:
    d = ctx.c.linear_head_dim
    return ctx.tokens(ctx.last(x, start, heads * d), heads, d)


def _expand_heads(ctx: _Ctx, x: HirValue) -> HirValue:
    """``[1, S, K, d]`` key heads -> ``[1, S, V, d]``: each repeated ``V / K`` times, in
    groups (HF's ``repeat_interleave``) or tiled (llama.cpp's reordered V heads)."""
    c = ctx.c
    nk, nv, d = c.linear_k_heads, c.linear_v_heads, c.linear_head_dim
    if nk == nv:
        return x
    g = nv // nk
    lead = [-1, -1] if ctx.prompts else [1, -1]
    if c.v_head_order == "grouped":
        wide = ctx.h.mir("expand", [ctx.tokens(x, nk, 1, d)], target_shape=[*lead, nk, g, d])
    else:
        wide = ctx.h.mir("expand", [ctx.tokens(x, 1, nk, d)], target_shape=[*lead, g, nk, d])
    return ctx.tokens(wide, nv, d)


def delta_inputs(ctx: _Ctx, pre: str, conv: HirValue, a: HirValue, b: HirValue
                 ) -> tuple[HirValue, ...]:
    """q, k (L2-normalized, expanded to the value heads), v, g, beta from the conv output
    ``[1, S, C]`` (after SiLU) and the ``a`` / ``b`` projections."""
    c = ctx.c
    l2w = ctx.h.constant(l2_norm_weight(c))
    zero = ctx.zero(c.linear_head_dim)

    def l2(x: HirValue) -> HirValue:
        return ctx.h.rms_norm(x, l2w, zero, l2_norm_eps(c))

    q = _expand_heads(ctx, l2(_heads(ctx, conv, 0, c.linear_k_heads)))
    k = _expand_heads(ctx, l2(_heads(ctx, conv, c.key_dim, c.linear_k_heads)))
    v = _heads(ctx, conv, 2 * c.key_dim, c.linear_v_heads)
    beta = ctx.act(b, "sigmoid")
    g = ctx.mul(ctx.act(ctx.add(a, ctx.p(pre + "dt_bias")), "softplus"), ctx.p(pre + "A"))
    return q, k, v, g, beta


def delta_output(ctx: _Ctx, pre: str, x: HirValue, y: HirValue, z: HirValue) -> HirValue:
    """Gated RMSNorm ``rms(y) w * silu(z)`` per head, ``out_proj``, residual, FFN."""
    c = ctx.c
    gate = ctx.act(ctx.tokens(z, c.linear_v_heads, c.linear_head_dim), "silu")
    y = ctx.mul(ctx.norm(y, pre + "norm"), gate)
    # a per-head norm reshaped into a data-tiled matmul's input: IREE 3.13 fuses it into
    # the operand's encoding and fails to compile that dispatch (stack allocation)
    y = ctx.h.mir("barrier", [ctx.tokens(y, c.value_dim)])
    x1 = ctx.add(x, ctx.linear(y, pre + "out"))
    return ctx.add(x1, ctx.ffn(ctx.norm(x1, pre + "ln2"), pre))


def linear_layer(ctx: _Ctx, i: int, x: HirValue, conv_state: HirValue, ssm: HirValue,
                 padded: tuple[HirValue, HirValue] | None = None
                 ) -> tuple[HirValue, HirValue, HirValue]:
    """Gated DeltaNet layer; returns (y, conv state, recurrent state). ``padded``:
    right-padded prompts (:attr:`_Ctx.prompts`), ``(valid [P, S, 1] f32, frames [P, K - 1]
    i32)``: 1 at a prompt's own tokens, and the positions of its last ``K - 1`` inputs in the
    conv's ``concat(conv_state, x)``."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    mixed, z, b, a = ctx.linears(ctx.norm(x, pre + "ln1"),
                                 [pre + n for n in ("qkv", "z", "b", "a")])
    conv, frames = h.depthwise_conv1d_causal_carry(mixed, ctx.p(pre + "conv"), conv_state,
                                                   c.conv_kernel)
    q, k, v, g, beta = delta_inputs(ctx, pre, ctx.act(conv, "silu"), a, b)
    if padded is not None:
        # a padding step with g = beta = 0 leaves the state exactly as it is (exp(0) S,
        # plus k times a zero delta); the carried frames are each prompt's own last inputs
        valid, at = padded
        g, beta = ctx.mul(g, valid), ctx.mul(beta, valid)
        frames = h.mir("gather", [h.mir("concat", [conv_state, mixed], axis=1), at], axis=1,
                       batch_dims=1)
    y, ssm = h.gated_delta_net_carry(q, k, v, g, beta, ssm, c.linear_head_dim)
    return delta_output(ctx, pre, x, y, z), frames, ssm


def linear_layer_steps(ctx: _Ctx, i: int, x: HirValue, conv_state: HirValue, ssm: HirValue,
                       steps: int) -> tuple[HirValue, list[HirValue], list[HirValue]]:
    """The same layer over ``steps`` (static) tokens, with the conv and recurrent state
    after each token (what a rejected draft rolls back to): the projections run once for
    all tokens, the scan one token at a time."""
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    mixed, z, b, a = ctx.linears(ctx.norm(x, pre + "ln1"),
                                 [pre + n for n in ("qkv", "z", "b", "a")])
    conv = h.depthwise_conv1d_causal(mixed, ctx.p(pre + "conv"), conv_state, c.conv_kernel)
    padded = h.mir("concat", [conv_state, mixed], axis=1)
    kk = c.conv_kernel - 1
    convs = [h.mir("narrow", [padded], axis=1, start=t + 1, len=kk) for t in range(steps)]
    ins = delta_inputs(ctx, pre, ctx.act(conv, "silu"), a, b)
    ys, ssms = [], []
    for t in range(steps):
        step = [h.mir("narrow", [v], axis=1, start=t, len=1) for v in ins]
        y, ssm = h.gated_delta_net_carry(*step, ssm, c.linear_head_dim)
        ys.append(y)
        ssms.append(ssm)
    y = h.mir("concat", ys, axis=1) if steps > 1 else ys[0]
    return delta_output(ctx, pre, x, y, z), convs, ssms


# --------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------


def _state_inputs(ctx: _Ctx) -> list[HirValue]:
    """The state's inputs (:func:`rlx.models.qwen35.state_names`): with a preallocated
    cache, ``filled [1] i32`` first."""
    h, c = ctx.h, ctx.c
    rows = "past" if ctx.context is None else ctx.context
    names = state_names(c, ctx.context)
    out = [] if ctx.context is None else [h.input(names.pop(0), (1,), "i32")]
    return out + [h.input(n, s) for n, s in zip(names, state_shapes(c, rows), strict=True)]


def _head(ctx: _Ctx, x: HirValue) -> HirValue:
    """Logits of (normed) hidden states."""
    h, c = ctx.h, ctx.c
    if c.tie_word_embeddings and "lm_head" not in c.weight_schemes:
        return h.linear(x, h.mir("transpose", [ctx.p("embed")], perm=[1, 0]))
    return ctx.linear(x, "lm_head")


def _trunk(ctx: _Ctx, seq: int | str, steps: int = 0
           ) -> tuple[HirValue, list[HirValue], HirValue | None]:
    """Inputs, embedding, layers. Returns (hidden before the final norm, new state in
    input order (verify: per-position linear states), the ``last`` input if any)."""
    h, c = ctx.h, ctx.c
    ids = h.input("ids", (1, seq), "i32")
    hd2 = c.head_dim // 2
    cos, sin = h.input("cos", (seq, hd2)), h.input("sin", (seq, hd2))
    last = h.input("last", (1, 1), "i32") if seq == "seq" and ctx.want_last else None
    state = _state_inputs(ctx)
    at = None
    out: list[HirValue] = []
    if ctx.context is not None:     # rows filled before and after these S tokens
        filled, state = state[0], state[1:]
        start = len(h)
        length = token_count(h, ids)
        at = (filled, h.mir("binary", [filled, length], kind="add"))
        h.label_nodes_since(start, "positions")
        out.append(at[1])
    x = h.named("embed", lambda h: ctx.embed(ids))
    for i, kind in enumerate(c.layer_types):
        start = len(h)
        s0, s1 = state[2 * i], state[2 * i + 1]
        if kind == FULL:
            x, k, v = full_layer(ctx, i, x, cos, sin, (s0, s1), at)
            out += [k, v]
        elif steps:
            x, convs, ssms = linear_layer_steps(ctx, i, x, s0, s1, steps)
            out += [*convs, *ssms]
        else:
            x, conv, ssm = linear_layer(ctx, i, x, s0, s1)
            out += [conv, ssm]
        h.label_nodes_since(start, f"layers.{i}")
    return x, out, last


def _prefill_or_decode(ctx: _Ctx, decode: bool, logits: str, hidden: bool) -> None:
    h = ctx.h
    ctx.want_last = not decode and logits == "last"
    x, state, last = _trunk(ctx, 1 if decode else "seq")
    start = len(h)
    normed = ctx.norm(x, "norm") if hidden else None
    if last is not None:
        x = h.mir("gather", [normed if normed is not None else x, last], axis=1,
                  batch_dims=1)
        out = _head(ctx, x if normed is not None else ctx.norm(x, "norm"))
    else:
        out = _head(ctx, normed if normed is not None else ctx.norm(x, "norm"))
    h.label_nodes_since(start, "lm_head")
    nxt = h.named("next", lambda h: h.mir("argmax", [out], axis=-1, keep_dim=False))
    h.set_outputs([out, nxt, *state, *([normed] if normed is not None else [])])


def _verify(ctx: _Ctx, steps: int) -> None:
    """``steps`` tokens (the pending one and the drafts): the greedy token after each, the
    hidden states, the KV caches and per-position linear states."""
    h = ctx.h
    ctx.want_last = False
    x, state, _ = _trunk(ctx, steps, steps=steps)
    start = len(h)
    normed = ctx.norm(x, "norm")
    out = _head(ctx, normed)
    h.label_nodes_since(start, "lm_head")
    nxt = h.named("next", lambda h: h.mir("argmax", [out], axis=-1, keep_dim=False))
    h.set_outputs([nxt, normed, *state])


def _initial_state(ctx: _Ctx) -> None:
    """``state(zeros [n])``: the state before the first token
    (:func:`rlx.models.qwen35.initial_state`) made on the device, ``filled = 0``, zeroed
    KV caches of ``context`` rows and zero conv / delta states, where uploading the host's
    zeros moved ~120 MB for a 0.8B model at 4096 positions. ``zeros`` (``n`` = the state's
    tensors but ``filled``; the caller passes zeros) gives each tensor a value of its own
    to broadcast: a splat of a constant would be one value, CSE'd into one buffer returned
    for every cache of its shape, and the next call updates each cache in place
    (``write_rows``), so those caches would all be written through one buffer."""
    h = ctx.h
    assert ctx.context is not None
    shapes = state_shapes(ctx.c, ctx.context)
    seed = h.input("zeros", (len(shapes),))
    out = [h.constant(np.zeros(1, np.int32), "i32")]
    for i, shape in enumerate(shapes):
        one = h.mir("slice", [seed], starts=[i], sizes=[1], strides=[1])
        one = h.mir("reshape", [one], new_shape=[1] * len(shape))
        out.append(h.mir("expand", [one], target_shape=list(shape)))
    h.set_outputs(out)


def _rollback(ctx: _Ctx, names: Sequence[str]) -> None:
    """KV caches cut to their first ``len(keep)`` rows (``keep = [0, 1, ...]``)."""
    h, c = ctx.h, ctx.c
    keep = h.input("keep", ("keep",), "i32")
    caches = [h.input(n, (1, "past", c.kv_dim)) for n in names]
    h.set_outputs([h.mir("gather", [t, keep], axis=1) for t in caches])


def build_module(c: Qwen35Config, logits: str, functions: Sequence[str] | None,
                 draft_tokens: int | Sequence[int], name: str, context: int | None = None
                 ) -> HirModule:
    if logits not in ("last", "all"):
        raise ModelError(f"error: logits: expected 'last' or 'all', found {logits!r}")
    ks = (draft_tokens,) if isinstance(draft_tokens, int) else tuple(draft_tokens)
    ks = tuple(k for k in ks if k)
    if any(k < 1 for k in ks):
        raise ModelError(f"error: draft_tokens: expected counts >= 1, found {list(ks)}")
    verifies = tuple(f"verify_{k}" for k in ks)
    if functions is None:
        mtp = ("mtp", "mtp_rollback") if c.mtp else ()
        # a preallocated cache rolls back by its filled count alone (no rollback call)
        rollback = ("rollback",) if context is None else ()
        state = ("state",) if context is not None else ()
        functions = (("prefill", "decode", *verifies, *rollback, *mtp, *state) if ks
                     else ("prefill", "decode", "sample", *state))
    known = (*FUNCTIONS, *verifies)
    unknown = [f for f in functions if f not in known]
    if unknown or not functions:
        raise ModelError(f"error: functions: expected some of {', '.join(known)}, found "
                         f"{list(functions)!r}")
    if "rollback" in functions and context is not None:
        raise ModelError("error: functions: 'rollback' cuts a growing KV cache; with a "
                         "preallocated one (context) the filled count is the rollback")
    if "state" in functions and context is None:
        raise ModelError("error: functions: 'state' makes a preallocated cache on the "
                         "device; a growing one (no context) starts from the host's "
                         "initial_state()")
    if context is not None and context < 1:
        raise ModelError(f"error: context: expected at least 1 position, found {context}")
    if "mtp" in functions and not c.mtp:
        raise ModelError("error: the checkpoint has no MTP weights (mtp.* / "
                         "blk.N.nextn.*): the mtp draft head cannot be built")
    h = HirModule(name, function=functions[0])
    for i, fn in enumerate(functions):
        if fn == "sample":                       # HF's logits processors and a seeded draw
            from rlx.models.sampling import add_sample_function

            add_sample_function(h, c.vocab_size, fn)
            continue
        if i:
            h.function(fn)
        _function(_Ctx(h, c, context=context), fn, logits, bool(ks))
    return h


def _function(ctx: _Ctx, fn: str, logits: str, speculative: bool) -> None:
    c = ctx.c
    full = [i for i, k in enumerate(c.layer_types) if k == FULL]
    if fn in ("prefill", "decode"):
        _prefill_or_decode(ctx, fn == "decode", logits,
                           hidden=fn == "prefill" and speculative)
    elif fn.startswith("verify_"):
        _verify(ctx, int(fn.removeprefix("verify_")) + 1)
    elif fn == "rollback":
        _rollback(ctx, [n for i in full for n in (f"k_{i}", f"v_{i}")])
    elif fn == "state":
        _initial_state(ctx)
    elif fn == "mtp_rollback":
        _rollback(ctx, ["k", "v"])
    else:
        from rlx.models.qwen35_mtp import mtp_function

        mtp_function(ctx)


__all__ = ["FUNCTIONS", "build_module"]
