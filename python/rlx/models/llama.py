"""LLaMA-family decoder-only models as HIR, with a KV cache, from HF checkpoints.

``build(config)`` gives a HIR module with three entry points:

- ``prefill(ids [1, S] i32, cos [S, hd/2], sin [S, hd/2], last [1, 1] i32)`` returns the
  logits of position ``last`` (``[1, 1, V]``; with ``logits="all"``: ``[1, S, V]`` and no
  ``last`` input), ``next`` (their argmax, the greedy token: ``[1, 1]`` i32, ``[1, S]`` with
  ``logits="all"``), then the KV cache: ``k_0, v_0, ..., k_{L-1}, v_{L-1}``, each
  ``[1, S, kv_heads * head_dim]``.
- ``decode(ids [1, 1] i32, cos [1, hd/2], sin [1, hd/2], k_0, v_0, ...)`` takes the cache of
  the ``P`` positions so far and returns ``logits [1, 1, V]``, ``next [1, 1]`` and the cache
  of ``P + 1`` positions.
- With ``build(config, context=C)`` (what ``from_hf`` / ``from_gguf`` build, C =
  :data:`DEFAULT_CONTEXT` unless told) the cache is preallocated instead
  (:mod:`rlx.models.llama_cache`): ``prefill`` returns ``filled [1] i32`` (S, the rows
  written) and each K / V ``[1, C, kv_heads * head_dim]`` with the prompt in rows
  ``0 .. S-1``; ``decode(ids, cos, sin, filled, k_0, v_0, ...)`` writes the token's K / V
  at row ``filled`` in place, attends to rows ``0 .. filled`` and returns ``logits``,
  ``next``, ``filled + 1`` and the cache. A step's cost then does not grow with the
  positions filled (the growing cache copies itself each step: O(P) a token), and the
  position lives on the device beside the cache: the pipelined loop never reads it.
- ``sample(logits [1, 1, V], seen, temperature, top_k, top_p, min_p, penalty, seed,
  counter)``: HF's logits processors and a seeded draw on the device
  (:mod:`rlx.models.sampling`); its token feeds ``decode`` as a device tensor.

The cache is explicit inputs and outputs (the module stays functional and testable); the
generation loop keeps it in device memory between calls (``Function.on_device``), so it never
crosses to the host. ``next`` lets greedy decoding feed a step's token to the next step on
the device: ``rlx.generate`` queues step n + 1 before it reads step n's token back
(``Function.submit``), so the host's work per call overlaps the device's. RoPE tables are
inputs: row t holds the absolute position of token t, so the same module serves any position
(``rope_tables``). Supported: LLaMA (1/2/3, Mistral-style without sliding window), Qwen2 (QKV
bias), Qwen3 (q/k RMSNorm); tied embeddings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.dialects.enums import QUANT_SCHEMES
from rlx.ir.diagnostics import RlxError
from rlx.ir.types import DType
from rlx.weights import aligned


class ModelError(RlxError):
    """A model checkpoint or config rlx cannot build (unsupported, missing, mismatched)."""


ARCHITECTURES = {
    "llama": {"qkv_bias": False, "qk_norm": False},
    "mistral": {"qkv_bias": False, "qk_norm": False},
    "qwen2": {"qkv_bias": True, "qk_norm": False},
    "qwen3": {"qkv_bias": False, "qk_norm": True},
}


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_style: str = "neox"
    rope_scaling: Mapping[str, Any] | None = None
    tie_word_embeddings: bool = False
    arch: str = "llama"
    qkv_bias: bool = False
    qk_norm: bool = False
    weight_schemes: Mapping[str, str] = field(default_factory=dict)
    """rlx weight name -> ``dequant_matmul`` scheme (``"gguf_q8_0"``...) for linear weights
    kept in a quantized / half format: such a weight is the GGML tensor's raw bytes
    ``[out, ROWBYTES] i8`` and its matmul dequantizes in the dispatch; ``"embed"`` the
    table's raw bytes ``[vocab, ROWBYTES]``, its gathered rows dequantized (``dequant``).
    Others are f32."""
    packed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Weights stored as one tensor: ``"layers.0.qkv" -> ("layers.0.q", "layers.0.k",
    "layers.0.v")`` (rows concatenated, ``[sum N, ROWBYTES] i8``, the pack's scheme in
    ``weight_schemes``). Projections of the same input then run as one ``dequant_matmul``
    (one dispatch instead of two or three per decode token) and are sliced apart."""
    weight_leads: Mapping[str, int] = field(default_factory=dict)
    """Raw-byte weights whose parameter holds ``lead`` bytes before the tensor (the file's
    own: a view of a GGUF mapping from the 64-byte boundary before the tensor, which IREE
    then uses in place; ``rlx_hir.param``'s ``lead``)."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any], source: str = "config.json") -> LlamaConfig:
        """Read an HF ``config.json`` dict; unsupported architectures are a ModelError."""
        model_type = cfg.get("model_type")
        if model_type not in ARCHITECTURES:
            archs = cfg.get("architectures") or [model_type]
            raise ModelError(f"{source}: error: unsupported architecture {archs[0]!r} "
                             f"(model_type {model_type!r}; supported: "
                             f"{', '.join(sorted(ARCHITECTURES))})")
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size"):
            if key not in cfg:
                raise ModelError(f"{source}: error: missing field '{key}'")
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        if cfg.get("sliding_window") and cfg.get("use_sliding_window", model_type == "mistral"):
            raise ModelError(f"{source}: error: sliding-window attention models are not "
                             "supported by this builder")
        scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
        if scaling and scaling.get("rope_type", scaling.get("type")) not in (
                None, "default", "llama3", "linear"):
            raise ModelError(f"{source}: error: unsupported rope_scaling {scaling!r} "
                             "(supported: default, linear, llama3)")
        theta = cfg.get("rope_theta") or (scaling or {}).get("rope_theta") or 10000.0
        return cls(
            vocab_size=int(cfg["vocab_size"]), hidden_size=hidden,
            num_layers=int(cfg["num_hidden_layers"]), num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads), head_dim=head_dim,
            intermediate_size=int(cfg["intermediate_size"]),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)), rope_theta=float(theta),
            rope_scaling=scaling if scaling and scaling.get(
                "rope_type", scaling.get("type")) not in (None, "default") else None,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            arch=model_type, **ARCHITECTURES[model_type])


# --------------------------------------------------------------------------------------
# Weights: names, shapes, the HF checkpoint mapping
# --------------------------------------------------------------------------------------


def param_shapes(c: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """rlx's weight names and shapes. Linear weights are ``[in, out]`` (``y = x @ w``)."""
    e, f = c.hidden_size, c.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {"embed": (c.vocab_size, e), "norm": (e,)}
    if not c.tie_word_embeddings:
        shapes["lm_head"] = (e, c.vocab_size)
    for i in range(c.num_layers):
        p = f"layers.{i}."
        shapes |= {p + "ln1": (e,), p + "q": (e, c.num_heads * c.head_dim),
                   p + "k": (e, c.kv_dim), p + "v": (e, c.kv_dim),
                   p + "o": (c.num_heads * c.head_dim, e), p + "ln2": (e,),
                   p + "gate": (e, f), p + "up": (e, f), p + "down": (f, e)}
        if c.qkv_bias:
            shapes |= {p + "q_b": (c.num_heads * c.head_dim,), p + "k_b": (c.kv_dim,),
                       p + "v_b": (c.kv_dim,)}
        if c.qk_norm:
            shapes |= {p + "q_norm": (c.head_dim,), p + "k_norm": (c.head_dim,)}
    return shapes


LAYER_NAMES: dict[str, tuple[str, str]] = {
    "ln1": ("input_layernorm.weight", "attn_norm.weight"),
    "ln2": ("post_attention_layernorm.weight", "ffn_norm.weight"),
    "q": ("self_attn.q_proj.weight", "attn_q.weight"),
    "k": ("self_attn.k_proj.weight", "attn_k.weight"),
    "v": ("self_attn.v_proj.weight", "attn_v.weight"),
    "o": ("self_attn.o_proj.weight", "attn_output.weight"),
    "q_b": ("self_attn.q_proj.bias", "attn_q.bias"),
    "k_b": ("self_attn.k_proj.bias", "attn_k.bias"),
    "v_b": ("self_attn.v_proj.bias", "attn_v.bias"),
    "q_norm": ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    "k_norm": ("self_attn.k_norm.weight", "attn_k_norm.weight"),
    "gate": ("mlp.gate_proj.weight", "ffn_gate.weight"),
    "up": ("mlp.up_proj.weight", "ffn_up.weight"),
    "down": ("mlp.down_proj.weight", "ffn_down.weight"),
}
"""The family's one name table: rlx weight key within ``layers.N.`` -> (HF name within
``model.layers.N.``, GGUF name within ``blk.N.``)."""
TOP_NAMES: dict[str, tuple[str, str]] = {
    "embed": ("model.embed_tokens.weight", "token_embd.weight"),
    "norm": ("model.norm.weight", "output_norm.weight"),
    "lm_head": ("lm_head.weight", "output.weight"),
}
"""rlx weight name outside the layers -> (HF name, GGUF name)."""
LINEAR = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"}
"""Linear weights: rlx keeps them ``[in, out]``; checkpoints (HF, GGUF) store ``[out, in]``."""


def _names(name: str) -> tuple[str, str]:
    """(HF name, GGUF name) of an rlx weight name."""
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    _, i, key = name.split(".", 2)
    hf, gguf = LAYER_NAMES[key]
    return f"model.layers.{i}.{hf}", f"blk.{i}.{gguf}"


def hf_name(name: str) -> str:
    """The HF tensor name of an rlx weight name (``layers.0.q`` ->
    ``model.layers.0.self_attn.q_proj.weight``)."""
    return _names(name)[0]


def gguf_name(name: str) -> str:
    """The GGUF tensor name of an rlx weight name (``layers.0.q`` -> ``blk.0.attn_q.weight``)."""
    return _names(name)[1]


def hf_to_gguf(hf: str) -> str:
    """The GGUF tensor name of an HF tensor name (what llama.cpp's converter writes)."""
    top = dict(TOP_NAMES.values())
    if hf in top:
        return top[hf]
    _, _, i, rest = hf.split(".", 3)
    return f"blk.{i}.{dict(LAYER_NAMES.values())[rest]}"


# --------------------------------------------------------------------------------------
# The HIR module
# --------------------------------------------------------------------------------------


def packed_weight(h: HirModule, shapes: Mapping[str, tuple[int, ...]],
                  packed: Mapping[str, tuple[str, ...]], name: str, scheme: str,
                  leads: Mapping[str, int]) -> HirValue:
    """The raw bytes ``[N, ROWBYTES]`` of a quantized weight: its parameter; for a pack, the
    rows of its members' parameters concatenated in the module (each member stays the file's
    own tensor: the lowering makes the kernels' planes of the concatenation at load, and no
    host copy is held). ``leads``: :attr:`LlamaConfig.weight_leads`."""
    members = packed.get(name, (name,))
    row = QUANT_SCHEMES[scheme].row_bytes(shapes[members[0]][0])
    parts = [h.param(m, (shapes[m][1], row), "i8", lead=leads.get(m, 0)) for m in members]
    return parts[0] if len(parts) == 1 else h.mir("concat", parts, axis=0)


def embed_rows(h: HirModule, ids: HirValue, shape: tuple[int, ...],
               schemes: Mapping[str, str], leads: Mapping[str, int]) -> HirValue:
    """The ``embed`` table's rows of ``ids`` as f32: a gather of the f32 table ``shape``, or
    where the table stays in a GGUF file's format (``schemes["embed"]``) a gather of its raw
    rows and their ``dequant`` (one row a token dequantized; nothing held but the file's
    bytes)."""
    scheme = schemes.get("embed")
    if scheme is None:
        return h.mir("gather", [h.param("embed", shape), ids], axis=0)
    vocab, e = shape
    raw = h.param("embed", (vocab, QUANT_SCHEMES[scheme].row_bytes(e)), "i8",
                  lead=leads.get("embed", 0))
    return h.mir("dequant", [h.mir("gather", [raw, ids], axis=0)], scheme=scheme)


@dataclass
class _Ctx:
    h: HirModule
    c: LlamaConfig
    zeros_e: HirValue
    zeros_hd: HirValue | None
    shapes: dict[str, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.shapes = param_shapes(self.c)

    @classmethod
    def of(cls, h: HirModule, c: LlamaConfig) -> _Ctx:
        """The context of one function of ``h``: its zero RMSNorm biases as constants."""
        return cls(h, c, h.constant(np.zeros(c.hidden_size, np.float32)),
                   h.constant(np.zeros(c.head_dim, np.float32)) if c.qk_norm else None)

    def p(self, name: str) -> HirValue:
        return self.h.param(name, self.shapes[name])

    def embed(self, ids: HirValue) -> HirValue:
        """The embedding's rows of ``ids`` as f32 (:func:`embed_rows`)."""
        return embed_rows(self.h, ids, self.shapes["embed"], self.c.weight_schemes,
                          self.c.weight_leads)

    def linear(self, x: HirValue, name: str, bias: HirValue | None = None) -> HirValue:
        """``x @ W (+ bias)``: a plain linear, or a dequant_matmul on the raw bytes."""
        scheme = self.c.weight_schemes.get(name)
        if scheme is None:
            return self.h.linear(x, self.p(name), bias)
        w = packed_weight(self.h, self.shapes, self.c.packed, name, scheme,
                          self.c.weight_leads)
        y = self.h.dequant_matmul(x, w, scheme=scheme)
        return y if bias is None else self.h.mir("binary", [y, bias], kind="add")

    def linears(self, x: HirValue, names: Sequence[str],
                biases: Sequence[HirValue | None]) -> list[HirValue]:
        """``x @ W_i (+ b_i)`` for each name; a packed run of names is one matmul, sliced."""
        shapes = self.shapes
        out: list[HirValue] = []
        i = 0
        while i < len(names):
            pack = self.pack_of(names[i:])
            if pack is None:
                out.append(self.linear(x, names[i], biases[i]))
                i += 1
                continue
            members = self.c.packed[pack]
            y = self.linear(x, pack)
            start = 0
            for name, bias in zip(members, biases[i:i + len(members)], strict=True):
                n = shapes[name][1]
                part = self.slice(y, start, n)
                out.append(part if bias is None
                           else self.h.mir("binary", [part, bias], kind="add"))
                start += n
            i += len(members)
        return out

    def pack_of(self, names: Sequence[str]) -> str | None:
        """The pack whose members start ``names``, if any."""
        return next((p for p, members in self.c.packed.items()
                     if tuple(names[:len(members)]) == tuple(members)), None)

    def slice(self, y: HirValue, start: int, n: int) -> HirValue:
        """``y[..., start:start + n]``."""
        return self.h.mir("slice", [y], starts=[0, 0, start], sizes=[-1, -1, n],
                          strides=[1, 1, 1])

    def attention_inputs(self, x: HirValue, pre: str, cos: HirValue, sin: HirValue
                         ) -> tuple[HirValue, HirValue, HirValue]:
        """q and k (rotated) and v of the layer. With q / k / v packed and nothing between
        the projection and RoPE (no bias, no q/k norm), q and k are rotated together: RoPE
        is the same per head, so one rope over their adjacent slice is exact and is one
        dispatch per layer and token instead of two."""
        h, c = self.h, self.c
        names = [pre + n for n in ("q", "k", "v")]
        qd = self.shapes[names[0]][1]
        pack = self.pack_of(names)               # q, k, v or q, k (v in another format)
        if pack is not None and not (c.qkv_bias or c.qk_norm):
            y = self.linear(x, pack)
            qk = h.rope(self.slice(y, 0, qd + c.kv_dim), cos, sin, c.head_dim, c.head_dim,
                        c.rope_style)
            v = (self.slice(y, qd + c.kv_dim, c.kv_dim) if len(self.c.packed[pack]) == 3
                 else self.linear(x, names[2]))
            return self.slice(qk, 0, qd), self.slice(qk, qd, c.kv_dim), v
        q, k, v = self.linears(x, names, [self.p(n + "_b") if c.qkv_bias else None
                                          for n in names])
        if c.qk_norm:
            q = _heads_norm(q, self, pre + "q_norm", c.num_heads)
            k = _heads_norm(k, self, pre + "k_norm", c.num_kv_heads)
        q = h.rope(q, cos, sin, c.head_dim, c.head_dim, c.rope_style)
        k = h.rope(k, cos, sin, c.head_dim, c.head_dim, c.rope_style)
        return q, k, v

    def ffn(self, x: HirValue, prefix: str) -> HirValue:
        names = [prefix + n for n in ("up", "gate", "down")]
        if not any(n in self.c.weight_schemes for n in names):
            return self.h.swiglu_ffn(x, *map(self.p, names))
        gate, up = self.linears(x, [prefix + "gate", prefix + "up"], [None, None])
        act = self.h.mir("binary", [self.h.mir("activation", [gate], kind="silu"), up],
                         kind="mul")
        return self.linear(act, prefix + "down")


def _heads_norm(x: HirValue, ctx: _Ctx, weight: str, heads: int) -> HirValue:
    """Qwen3's per-head RMSNorm of q or k over head_dim."""
    h, c = ctx.h, ctx.c
    per_head = h.mir("reshape", [x], new_shape=[-2, -3, heads, c.head_dim])
    normed = h.rms_norm(per_head, ctx.p(weight), ctx.zeros_hd, c.rms_norm_eps)
    return h.mir("reshape", [normed], new_shape=[-2, -3, heads * c.head_dim])


def _layer(ctx: _Ctx, i: int, x: HirValue, cos: HirValue, sin: HirValue,
           past: tuple[HirValue, HirValue] | None) -> tuple[HirValue, HirValue, HirValue]:
    h, c = ctx.h, ctx.c
    pre = f"layers.{i}."
    start = len(h)
    n1 = h.rms_norm(x, ctx.p(pre + "ln1"), ctx.zeros_e, c.rms_norm_eps)
    q, k, v = ctx.attention_inputs(n1, pre, cos, sin)
    if past is not None:
        k = h.mir("concat", [past[0], k], axis=1)
        v = h.mir("concat", [past[1], v], axis=1)
    a = h.attention(q, k, v, num_heads=c.num_heads, head_dim=c.head_dim, mask_kind="causal")
    x1 = h.mir("binary", [x, ctx.linear(a, pre + "o")], kind="add")
    n2 = h.rms_norm(x1, ctx.p(pre + "ln2"), ctx.zeros_e, c.rms_norm_eps)
    ffn = ctx.ffn(n2, pre)
    y = h.mir("binary", [x1, ffn], kind="add")
    h.label_nodes_since(start, f"layers.{i}")
    return y, k, v


def _head(ctx: _Ctx, x: HirValue, last: HirValue | None) -> HirValue:
    h, c = ctx.h, ctx.c
    start = len(h)
    if last is not None:
        x = h.mir("gather", [x, last], axis=1, batch_dims=1)
    x = h.rms_norm(x, ctx.p("norm"), ctx.zeros_e, c.rms_norm_eps)
    if c.tie_word_embeddings:
        logits = h.linear(x, h.mir("transpose", [ctx.p("embed")], perm=[1, 0]))
    else:
        logits = ctx.linear(x, "lm_head")
    h.label_nodes_since(start, "lm_head")
    return logits


def _function(h: HirModule, c: LlamaConfig, decode: bool, logits: str,
              context: int | None = None) -> None:
    from rlx.models.llama_cache import context_decode, prompt_cache

    if decode and context is not None:
        context_decode(h, c, context)
        return
    hd2 = c.head_dim // 2
    seq: int | str = 1 if decode else "seq"
    ids = h.input("ids", (1, seq), "i32")
    cos, sin = h.input("cos", (seq, hd2)), h.input("sin", (seq, hd2))
    last = h.input("last", (1, 1), "i32") if not decode and logits == "last" else None
    pasts = ([(h.input(f"k_{i}", (1, "past", c.kv_dim)), h.input(f"v_{i}", (1, "past", c.kv_dim)))
              for i in range(c.num_layers)] if decode else [None] * c.num_layers)
    ctx = _Ctx.of(h, c)
    x = h.named("embed", lambda h: ctx.embed(ids))
    cache: list[HirValue] = []
    for i in range(c.num_layers):
        x, k, v = _layer(ctx, i, x, cos, sin, pasts[i])
        cache += [k, v]
    logits = _head(ctx, x, last)
    nxt = h.named("next", lambda h: h.mir("argmax", [logits], axis=-1, keep_dim=False))
    if context is not None:
        cache = prompt_cache(h, c, ids, cache, context)
    h.set_outputs([logits, nxt, *cache])


FUNCTIONS = ("prefill", "decode", "sample")


def build(c: LlamaConfig, logits: str = "last", name: str = "llama",
          functions: Sequence[str] = FUNCTIONS, context: int | None = None) -> HirModule:
    """The HIR module with ``prefill``, ``decode`` and ``sample`` (see the module docstring
    and :mod:`rlx.models.sampling`); ``functions`` picks a subset (e.g. ``("decode",)`` to
    count a decode step's dispatches). ``context``: the KV cache preallocated to that many
    positions and updated in place; None: the cache grows by one position a step."""
    from rlx.models.sampling import add_sample_function

    if logits not in ("last", "all"):
        raise ModelError(f"error: logits: expected 'last' or 'all', found {logits!r}")
    if context is not None and context < 2:
        raise ModelError(f"error: context: expected at least 2 positions, found {context}")
    unknown = [f for f in functions if f not in FUNCTIONS]
    if unknown or not functions:
        raise ModelError(f"error: functions: expected some of {', '.join(FUNCTIONS)}, found "
                         f"{list(functions)!r}")
    h = HirModule(name, function=functions[0])
    for fn in functions:
        if fn == "sample":
            add_sample_function(h, c.vocab_size, fn)
            continue
        h.function(fn)
        _function(h, c, decode=fn == "decode", logits=logits, context=context)
    return h


def rope_tables(c: LlamaConfig, positions: Sequence[int] | np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """cos / sin ``[len(positions), head_dim / 2]`` (f32) with the model's theta and scaling."""
    hd = c.head_dim
    inv = c.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    inv = _scale_frequencies(inv, c.rope_scaling)
    angles = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _scale_frequencies(inv: np.ndarray, scaling: Mapping[str, Any] | None) -> np.ndarray:
    if not scaling:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "freq_factors":  # GGUF's rope_freqs.weight (how llama.cpp stores llama3 rope)
        return inv / np.asarray(scaling["factors"], np.float64)
    factor = float(scaling.get("factor", 1.0))
    if kind == "linear":
        return inv / factor
    low = float(scaling.get("low_freq_factor", 1.0))
    high = float(scaling.get("high_freq_factor", 4.0))
    old = float(scaling.get("original_max_position_embeddings", 8192))
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - low) / (high - low)
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    mid = (wavelen <= old / low) & (wavelen >= old / high)
    return np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)


# --------------------------------------------------------------------------------------
# Loading HF checkpoints
# --------------------------------------------------------------------------------------


@dataclass
class LlamaModel:
    """A built model: its config, HIR module and weights (numpy, rlx layout)."""

    config: LlamaConfig
    module: HirModule
    weights: dict[str, np.ndarray]
    context: int | None = None
    """Positions the KV cache is preallocated to (None: it grows a position a step)."""

    def rope_tables(self, positions: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        return rope_tables(self.config, positions)

    def initial_state(self) -> list[np.ndarray]:
        """What ``prefill`` takes after its inputs: nothing (it starts an empty cache)."""
        return []


def _read_safetensors(paths: Sequence[Path]) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    from rlx.runtime import read_safetensors_header

    out: dict[str, np.ndarray] = {}
    for path in paths:
        if not path.is_file():
            raise ModelError(f"{path}: error: file not found")
        header = read_safetensors_header(path)
        bf16 = any(dtype == DType.BF16 for dtype, _, _ in header.values())
        try:
            out.update(_load_bf16(path) if bf16 else load_file(str(path)))
        except Exception as e:  # safetensors raises its own error types
            raise ModelError(f"{path}: error: cannot read: {e}") from None
    return out


def _load_bf16(path: Path) -> dict[str, np.ndarray]:
    """bf16 checkpoints: numpy has no bfloat16, so widen to f32 through torch."""
    from safetensors.torch import load_file

    return {k: v.float().numpy() for k, v in load_file(str(path)).items()}


def convert_hf_weights(c: LlamaConfig, tensors: Mapping[str, np.ndarray], source: str
                       ) -> dict[str, np.ndarray]:
    """HF tensors -> rlx weights (f32, linear weights transposed to ``[in, out]``)."""
    out = {}
    for name, shape in param_shapes(c).items():
        key = hf_name(name)
        if key not in tensors:
            raise ModelError(f"{source}: error: missing tensor '{key}' (rlx weight '{name}')")
        t = np.asarray(tensors[key], dtype=np.float32)
        transposed = name.rsplit(".", 1)[-1] in LINEAR
        if transposed:
            t = t.T
        if tuple(t.shape) != shape:
            want = shape[::-1] if transposed else shape
            raise ModelError(f"{source}: error: tensor '{key}': expected shape {list(want)}, "
                             f"found {list(np.asarray(tensors[key]).shape)}")
        out[name] = aligned(t)
    return out


DEFAULT_CONTEXT = 4096
"""Positions a loaded model's KV cache is preallocated to unless told (llama.cpp's
``llama-cli`` default ``-c``): 2 · layers · context · kv_dim f32, 189 MB for a 135M
model, 268 MB for a 1B."""


def from_gguf(path: str | Path, logits: str = "last", context: int | None = DEFAULT_CONTEXT
              ) -> LlamaModel:
    """Build from a llama.cpp ``.gguf`` file (see :mod:`rlx.models.gguf`); ``context`` as
    :func:`from_hf`'s."""
    from rlx.models.gguf import from_gguf as _from_gguf

    return _from_gguf(path, logits, context)


def from_hf(config: str | Path, *safetensors: str | Path, logits: str = "last",
            context: int | None = DEFAULT_CONTEXT) -> LlamaModel:
    """Build from an HF ``config.json`` and its ``*.safetensors`` (or the directory).
    ``context``: the positions (prompt and generated tokens) the KV cache is preallocated
    to and updated in place; None builds the cache that grows by concatenation."""
    cpath = Path(config)
    if cpath.is_dir():
        safetensors = tuple(sorted(cpath.glob("*.safetensors"))) or safetensors
        cpath = cpath / "config.json"
    try:
        cfg = json.loads(cpath.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ModelError(f"{cpath}: error: cannot read the config: {e}") from None
    c = LlamaConfig.from_hf(cfg, str(cpath))
    paths = [Path(p) for p in safetensors]
    if not paths:
        raise ModelError(f"{cpath}: error: no .safetensors files given")
    weights = convert_hf_weights(c, _read_safetensors(paths), ", ".join(map(str, paths)))
    return LlamaModel(c, build(c, logits, context=context), weights, context)


__all__ = ["ARCHITECTURES", "DEFAULT_CONTEXT", "FUNCTIONS", "LAYER_NAMES", "TOP_NAMES",
           "LlamaConfig", "LlamaModel", "ModelError", "build", "convert_hf_weights",
           "from_gguf", "from_hf", "gguf_name", "hf_name", "hf_to_gguf", "param_shapes",
           "rope_tables"]
