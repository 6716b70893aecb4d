"""Qwen3.5 (dense): the hybrid Gated DeltaNet / gated attention trunk and its MTP draft head.

``from_hf(dir)`` reads a checkpoint as HF transformers writes it (``Qwen3_5ForCausalLM``,
``model_type`` ``qwen3_5_text``; or ``qwen3_5`` with a ``text_config``, whose
``model.language_model.*`` tensors are read and whose vision tower is ignored, as
``Qwen3_5ForCausalLM`` itself does); ``from_gguf(path)`` reads llama.cpp's ``qwen35`` files
(:mod:`rlx.models.qwen35_gguf`). The HIR module (:mod:`rlx.models.qwen35_hir`) has:

- ``prefill(ids [1, S], cos, sin, last, *state)`` and ``decode(ids [1, 1], cos, sin,
  *state)``, returning ``logits``, ``next`` (argmax on the device) and the new state (and,
  with ``hidden``, the final-normed hidden states ``[1, S, E]``, the MTP head's input);
- ``verify_K(ids [1, K + 1], ...)`` (K draft tokens): ``next [1, T]``, the hidden
  states, the KV caches and every linear layer's conv and recurrent state after each of
  the T positions (a rejected draft rolls back by picking one of them);
- ``mtp(h, rows, ids, cos, sin, k, v)``: the ``qwen35_mtp_head`` draft with its own KV cache;
- ``mtp_rollback(keep, k, v)``: the MTP head's KV cache cut to ``keep``; with a growing
  cache (``context=None``) also ``rollback(keep, ...)`` for the model's;
- ``state(zeros)`` (with a preallocated cache): the state before the first token, made on
  the device (:func:`rlx.models.llama_cache.start_state`; ``zeros`` a small f32 vector of zeros that
  keeps each cache a buffer of its own), where :func:`initial_state`'s host zeros would be
  uploaded (~120 MB for a 0.8B model at 4096 positions).

The state, in order: with a KV cache preallocated to ``context`` rows (the default of
``from_hf`` / ``from_gguf``: :data:`DEFAULT_CONTEXT`), first ``filled [1] i32``, the rows
that hold keys; then per layer: a full-attention layer's ``k_i``, ``v_i`` ``[1, context,
kv_heads * head_dim]`` (``[1, P, ...]``, P the positions so far, with a growing cache); a
linear-attention layer's ``conv_i`` ``[1, K - 1, C]`` (the last K - 1 inputs of its causal
conv) and ``ssm_i`` ``[1, V_heads, d, d]`` (the delta rule's state). It stays in device
memory between calls; prefill in two chunks equals one. A call's S tokens write their K / V
in place at rows ``filled ..`` (``write_rows``) and attend to the first ``filled + S`` rows
(``causal_lengths``: a step's cost does not grow with the context); the call returns
``filled + S``. Speculative decoding rolls the preallocated cache back by setting
``filled``; the growing cache is cut by ``rollback`` and copied whole by each call's
``concat`` (O(P) a token).

What the builder computes, and where HF differs in form only: zero-centred RMSNorm
(``x̂ (1 + w)``) is a plain RMSNorm with ``1 + w`` folded into the weight at load (GGUF files
store it folded); ``A_log`` is kept as ``A = -exp(A_log)`` (llama.cpp's ``ssm_a``); q / k
L2 normalization is RMSNorm with weight ``1 / sqrt(d)`` and ``eps / d``; the q / k heads
of a layer with fewer key than value heads are repeated per group (HF, ``grouped``) or
tiled (llama.cpp's reordered V heads, ``tiled``): the same computation, the value heads
permuted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlx.dialects.builder import HirModule
from rlx.models.llama import DEFAULT_CONTEXT, ModelError, _read_safetensors
from rlx.weights import aligned, aligned_concat

LINEAR, FULL = "linear_attention", "full_attention"
REFUSED = {"qwen3_5_moe": "the MoE variant", "qwen3_5_moe_text": "the MoE variant",
           "qwen3_next": "Qwen3-Next (MoE)", "qwen3_5_vision": "a vision tower"}
"""model_type values refused with a reason."""


@dataclass(frozen=True)
class Qwen35Config:
    vocab_size: int
    hidden_size: int
    layer_types: tuple[str, ...]
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    linear_k_heads: int
    linear_v_heads: int
    linear_head_dim: int
    conv_kernel: int = 4
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000_000.0
    n_rot: int = 64
    tie_word_embeddings: bool = False
    v_head_order: str = "grouped"
    """How value heads share key heads: ``grouped`` (HF: value head j reads key head
    ``j // G``) or ``tiled`` (llama.cpp's files: ``j % K``)."""
    mtp: bool = False
    """The checkpoint has the MTP draft head's weights."""
    weight_schemes: Mapping[str, str] = field(default_factory=dict)
    """rlx weight name -> ``dequant_matmul`` scheme of linear weights kept in the file's
    format (the raw bytes ``[out, ROWBYTES] i8``); others are f32 ``[in, out]``."""
    packed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """One weight holding the output rows of several projections of the same input."""
    weight_leads: Mapping[str, int] = field(default_factory=dict)
    """Raw-byte weights whose parameter begins before the tensor (as
    :attr:`rlx.models.llama.LlamaConfig.weight_leads`)."""

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def key_dim(self) -> int:
        return self.linear_k_heads * self.linear_head_dim

    @property
    def value_dim(self) -> int:
        return self.linear_v_heads * self.linear_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any], source: str = "config.json") -> Qwen35Config:
        """Read an HF ``config.json`` dict (``text_config`` merged in for ``qwen3_5``)."""
        model_type = cfg.get("model_type")
        if model_type in REFUSED:
            raise ModelError(f"{source}: error: model_type {model_type!r} is "
                             f"{REFUSED[model_type]}, which rlx.models.qwen35 does not support "
                             "(supported: the dense qwen3_5 / qwen3_5_text)")
        if model_type == "qwen3_5":
            text = cfg.get("text_config")
            if not isinstance(text, Mapping):
                raise ModelError(f"{source}: error: model_type 'qwen3_5' without a "
                                 "'text_config'")
            cfg = {**text, "tie_word_embeddings": cfg.get(
                "tie_word_embeddings", text.get("tie_word_embeddings", False))}
            model_type = cfg.get("model_type", "qwen3_5_text")
        if model_type != "qwen3_5_text":
            raise ModelError(f"{source}: error: unsupported model_type {model_type!r} "
                             "(supported: qwen3_5, qwen3_5_text)")
        return _parse_text_config(cls, cfg, source)


def _parse_text_config(cls: type[Qwen35Config], cfg: Mapping[str, Any], source: str
                       ) -> Qwen35Config:
    def need(key: str) -> int:
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ModelError(f"{source}: error: '{key}': expected a positive integer, found "
                             f"{value!r}")
        return value

    if cfg.get("num_experts") or cfg.get("num_local_experts"):
        raise ModelError(f"{source}: error: 'num_experts': the MoE variant is not supported")
    layers = need("num_hidden_layers")
    types = cfg.get("layer_types")
    if types is None:
        every = cfg.get("full_attention_interval", 4)
        types = [FULL if (i + 1) % every == 0 else LINEAR for i in range(layers)]
    if len(types) != layers:
        raise ModelError(f"{source}: error: 'layer_types' has {len(types)} entries, "
                         f"'num_hidden_layers' is {layers}")
    for i, kind in enumerate(types):
        if kind not in (LINEAR, FULL):
            raise ModelError(f"{source}: error: 'layer_types[{i}]': unknown layer type "
                             f"{kind!r} (expected {LINEAR!r} or {FULL!r})")
    kd, vd = need("linear_key_head_dim"), need("linear_value_head_dim")
    if kd != vd:
        raise ModelError(f"{source}: error: 'linear_key_head_dim' {kd} != "
                         f"'linear_value_head_dim' {vd}: gated_delta_net keeps a square state")
    nk, nv = need("linear_num_key_heads"), need("linear_num_value_heads")
    if nv % nk:
        raise ModelError(f"{source}: error: 'linear_num_value_heads' {nv} is not a multiple "
                         f"of 'linear_num_key_heads' {nk}")
    heads, kv_heads = need("num_attention_heads"), need("num_key_value_heads")
    if heads % kv_heads:
        raise ModelError(f"{source}: error: 'num_attention_heads' {heads} is not a multiple "
                         f"of 'num_key_value_heads' {kv_heads}")
    hidden = need("hidden_size")
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    rope = dict(cfg.get("rope_parameters") or {})
    kind = rope.get("rope_type", "default")
    if kind != "default":
        raise ModelError(f"{source}: error: 'rope_parameters.rope_type' {kind!r} is not "
                         "supported (supported: default)")
    factor = float(rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25)))
    n_rot = int(head_dim * factor)
    if n_rot <= 0 or n_rot % 2 or n_rot > head_dim:
        raise ModelError(f"{source}: error: 'partial_rotary_factor' {factor}: rotary dims "
                         f"{n_rot} must be even and in 2..{head_dim}")
    return cls(
        vocab_size=need("vocab_size"), hidden_size=hidden, layer_types=tuple(types),
        num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        intermediate_size=need("intermediate_size"), linear_k_heads=nk, linear_v_heads=nv,
        linear_head_dim=kd, conv_kernel=need("linear_conv_kernel_dim"),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_theta=float(rope.get("rope_theta", cfg.get("rope_theta", 10_000_000.0))),
        n_rot=n_rot, tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        mtp=int(cfg.get("mtp_num_hidden_layers", 0) or 0) > 0)


# --------------------------------------------------------------------------------------
# Weights: names, shapes, the one name table
# --------------------------------------------------------------------------------------

LAYER_NAMES: dict[str, tuple[str, str]] = {
    "ln1": ("input_layernorm.weight", "attn_norm.weight"),
    "ln2": ("post_attention_layernorm.weight", "post_attention_norm.weight"),
    "q": ("self_attn.q_proj.weight", "attn_q.weight"),
    "k": ("self_attn.k_proj.weight", "attn_k.weight"),
    "v": ("self_attn.v_proj.weight", "attn_v.weight"),
    "o": ("self_attn.o_proj.weight", "attn_output.weight"),
    "q_norm": ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    "k_norm": ("self_attn.k_norm.weight", "attn_k_norm.weight"),
    "qkv": ("linear_attn.in_proj_qkv.weight", "attn_qkv.weight"),
    "z": ("linear_attn.in_proj_z.weight", "attn_gate.weight"),
    "b": ("linear_attn.in_proj_b.weight", "ssm_beta.weight"),
    "a": ("linear_attn.in_proj_a.weight", "ssm_alpha.weight"),
    "conv": ("linear_attn.conv1d.weight", "ssm_conv1d.weight"),
    "A": ("linear_attn.A_log", "ssm_a"),
    "dt_bias": ("linear_attn.dt_bias", "ssm_dt.bias"),
    "norm": ("linear_attn.norm.weight", "ssm_norm.weight"),
    "out": ("linear_attn.out_proj.weight", "ssm_out.weight"),
    "gate": ("mlp.gate_proj.weight", "ffn_gate.weight"),
    "up": ("mlp.up_proj.weight", "ffn_up.weight"),
    "down": ("mlp.down_proj.weight", "ffn_down.weight"),
}
"""rlx weight key within ``layers.N.`` (and ``mtp.``) -> (HF name within
``model.layers.N.`` / ``mtp.layers.0.``, GGUF name within ``blk.N.``)."""
TOP_NAMES: dict[str, tuple[str, str]] = {
    "embed": ("model.embed_tokens.weight", "token_embd.weight"),
    "norm": ("model.norm.weight", "output_norm.weight"),
    "lm_head": ("lm_head.weight", "output.weight"),
}
MTP_NAMES: dict[str, tuple[str, str]] = {
    "eh": ("mtp.fc.weight", "nextn.eh_proj.weight"),
    "enorm": ("mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"),
    "hnorm": ("mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"),
    "head_norm": ("mtp.norm.weight", "nextn.shared_head_norm.weight"),
}
"""The MTP head's own weights (``mtp.KEY``; its layer's are ``LAYER_NAMES`` under ``mtp.``);
in GGUF they sit in the block after the trunk's last (``blk.{num_layers}.``)."""
LINEAR_WEIGHTS = {"q", "k", "v", "o", "qkv", "z", "b", "a", "out", "gate", "up", "down",
                  "lm_head", "eh"}
"""rlx keeps these ``[in, out]``; checkpoints store ``[out, in]``."""
ZERO_CENTRED = {"ln1", "ln2", "q_norm", "k_norm", "norm", "enorm", "hnorm", "head_norm"}
"""HF's ``Qwen3_5RMSNorm`` weights (``x̂ (1 + w)``), except a linear layer's gated ``norm``."""
MTP_LAYER = ("ln1", "ln2", "q", "k", "v", "o", "q_norm", "k_norm", "gate", "up", "down")


def _split(name: str) -> tuple[str, int | None, str]:
    """``layers.3.qkv`` -> ("layers", 3, "qkv"); ``mtp.q`` -> ("mtp", None, "q")."""
    if name.startswith("layers."):
        _, i, key = name.split(".", 2)
        return "layers", int(i), key
    if name.startswith("mtp."):
        return "mtp", None, name[4:]
    return "top", None, name


def names(name: str, num_layers: int) -> tuple[str, str]:
    """(HF name, GGUF name) of an rlx weight name."""
    where, i, key = _split(name)
    if where == "top":
        return TOP_NAMES[key]
    if where == "layers":
        hf, gguf = LAYER_NAMES[key]
        return f"model.layers.{i}.{hf}", f"blk.{i}.{gguf}"
    if key in MTP_NAMES:
        hf, gguf = MTP_NAMES[key]
        return hf, f"blk.{num_layers}.{gguf}"
    hf, gguf = LAYER_NAMES[key]
    return f"mtp.layers.0.{hf}", f"blk.{num_layers}.{gguf}"


def is_linear(name: str) -> bool:
    return _split(name)[2] in LINEAR_WEIGHTS


def param_shapes(c: Qwen35Config, mtp: bool | None = None) -> dict[str, tuple[int, ...]]:
    """rlx's weight names and shapes (linear weights ``[in, out]``); the MTP head's with
    ``mtp`` (default: ``c.mtp``)."""
    e, f = c.hidden_size, c.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {"embed": (c.vocab_size, e), "norm": (e,)}
    if not c.tie_word_embeddings:
        shapes["lm_head"] = (e, c.vocab_size)
    for i, kind in enumerate(c.layer_types):
        p = f"layers.{i}."
        shapes |= {p + "ln1": (e,), p + "ln2": (e,), p + "gate": (e, f), p + "up": (e, f),
                   p + "down": (f, e)}
        shapes |= {p + k: s for k, s in (_attention_shapes(c) if kind == FULL
                                         else _linear_shapes(c)).items()}
    if c.mtp if mtp is None else mtp:
        shapes |= {"mtp.eh": (2 * e, e), "mtp.enorm": (e,), "mtp.hnorm": (e,),
                   "mtp.head_norm": (e,), "mtp.ln1": (e,), "mtp.ln2": (e,),
                   "mtp.gate": (e, f), "mtp.up": (e, f), "mtp.down": (f, e)}
        shapes |= {"mtp." + k: s for k, s in _attention_shapes(c).items()}
    return shapes


def _attention_shapes(c: Qwen35Config) -> dict[str, tuple[int, ...]]:
    e, hd = c.hidden_size, c.head_dim
    return {"q": (e, 2 * c.num_heads * hd), "k": (e, c.kv_dim), "v": (e, c.kv_dim),
            "o": (c.num_heads * hd, e), "q_norm": (hd,), "k_norm": (hd,)}


def _linear_shapes(c: Qwen35Config) -> dict[str, tuple[int, ...]]:
    e, nv, d = c.hidden_size, c.linear_v_heads, c.linear_head_dim
    return {"qkv": (e, c.conv_dim), "z": (e, c.value_dim), "b": (e, nv), "a": (e, nv),
            "conv": (c.conv_dim, 1, 1, c.conv_kernel), "A": (nv,), "dt_bias": (nv,),
            "norm": (d,), "out": (c.value_dim, e)}


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


@dataclass
class Qwen35Model:
    """A built model: config, HIR module, weights (numpy, rlx layout)."""

    config: Qwen35Config
    module: HirModule
    weights: dict[str, np.ndarray]
    source: str = ""
    context: int | None = None
    """Positions of the preallocated KV cache (None: it grows by concatenation)."""

    def rope_tables(self, positions: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        return rope_tables(self.config, positions)

    def initial_state(self) -> list[np.ndarray]:
        return initial_state(self.config, self.context)


def rope_tables(c: Qwen35Config, positions: Sequence[int] | np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """cos / sin ``[len(positions), head_dim / 2]``: the first ``n_rot / 2`` columns hold
    ``theta ** (-2i / n_rot)`` (partial rotary); the rest are not read (cos 1, sin 0)."""
    inv = c.rope_theta ** (-np.arange(0, c.n_rot, 2, dtype=np.float64) / c.n_rot)
    angles = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    rest = c.head_dim // 2 - c.n_rot // 2
    cos = np.concatenate([np.cos(angles), np.ones((len(angles), rest))], axis=1)
    sin = np.concatenate([np.sin(angles), np.zeros((len(angles), rest))], axis=1)
    return cos.astype(np.float32), sin.astype(np.float32)


def state_names(c: Qwen35Config, context: int | None = None) -> list[str]:
    """The state's inputs / outputs in order (see the module docstring)."""
    out = [] if context is None else ["filled"]
    for i, kind in enumerate(c.layer_types):
        out += [f"k_{i}", f"v_{i}"] if kind == FULL else [f"conv_{i}", f"ssm_{i}"]
    return out


def state_shapes(c: Qwen35Config, rows: int | str) -> list[tuple[int | str, ...]]:
    """The state's tensors but ``filled``, in order (:func:`state_names`): per layer a
    full-attention layer's K / V caches of ``rows`` rows, a linear layer's conv frames and
    delta-rule state."""
    d = c.linear_head_dim
    out: list[tuple[int | str, ...]] = []
    for kind in c.layer_types:
        out += ([(1, rows, c.kv_dim)] * 2 if kind == FULL else
                [(1, c.conv_kernel - 1, c.conv_dim), (1, c.linear_v_heads, d, d)])
    return out


def initial_state(c: Qwen35Config, context: int | None = None) -> list[np.ndarray]:
    """The state before the first token: empty KV caches (none filled of ``context`` rows,
    or no rows), zero conv and delta states."""
    filled = [] if context is None else [np.zeros(1, np.int32)]
    return filled + [np.zeros(s, np.float32) for s in state_shapes(c, context or 0)]


def build(c: Qwen35Config, logits: str = "last", functions: Sequence[str] | None = None,
          draft_tokens: int | Sequence[int] = 0, name: str = "qwen35",
          context: int | None = None) -> HirModule:
    """The HIR module (see the module docstring); ``functions`` defaults to prefill, decode
    and sample (HF's logits processors and a seeded draw on the device,
    :mod:`rlx.models.sampling`), or, with ``draft_tokens``, prefill, decode, ``verify_K`` for
    each K and mtp / rollback (speculative decoding is greedy). ``context``: the KV cache
    preallocated to that many positions (None: a growing cache)."""
    from rlx.models.qwen35_hir import build_module

    return build_module(c, logits, functions, draft_tokens, name, context)


def speculative(model: Qwen35Model, draft_tokens: int | Sequence[int]) -> Qwen35Model:
    """The model rebuilt with what speculative decoding with ``draft_tokens`` drafts a
    step needs (prefill with hidden states, ``verify_K``, rollback; mtp when the checkpoint
    has the MTP head); one module may serve several K."""
    ks = [draft_tokens] if isinstance(draft_tokens, int) else list(draft_tokens)
    if not ks or any(k < 1 for k in ks):
        raise ModelError(f"error: draft_tokens: expected counts >= 1, found {ks}")
    return replace(model, module=build(model.config, draft_tokens=ks, context=model.context))


def require_mtp(model: Qwen35Model) -> None:
    """A ModelError naming the checkpoint when it has no MTP head."""
    if not model.config.mtp:
        raise ModelError(f"{model.source or 'the model'}: error: speculative decoding with "
                         "the MTP head needs the checkpoint's MTP weights (mtp.* in HF files, "
                         "blk.N.nextn.* in GGUF ones), and it has none")


PACKS = {FULL: {"attn_in": ("q", "k", "v")}, LINEAR: {"lin_in": ("qkv", "z", "b", "a")},
         "ffn": {"gate_up": ("gate", "up")}}
"""Projections of one input packed into one matmul (one dispatch instead of 2-4 per layer
and decode token): pack key -> members, per layer kind."""


def pack(c: Qwen35Config, weights: dict[str, np.ndarray]
         ) -> tuple[Qwen35Config, dict[str, np.ndarray]]:
    """Pack the projections of ``PACKS`` that share a format into one matmul: f32 ``[in,
    out]`` weights concatenated along out here; raw GGUF bytes stay the file's tensors, their
    rows concatenated in the module (:func:`rlx.models.llama.packed_weight`)."""
    schemes = dict(c.weight_schemes)
    packed: dict[str, tuple[str, ...]] = {}
    weights = dict(weights)
    for i, kind in enumerate(c.layer_types):
        for key, parts in (*PACKS[kind].items(), *PACKS["ffn"].items()):
            members = tuple(f"layers.{i}.{m}" for m in parts)
            if len({schemes.get(m) for m in members}) != 1:
                continue
            scheme = schemes.get(members[0])
            name = f"layers.{i}.{key}"
            if scheme is None:                 # f32 [in, out]: one parameter
                weights[name] = aligned_concat([weights.pop(m) for m in members], axis=1)
            for m in members:
                schemes.pop(m, None)
            if scheme is not None:
                schemes[name] = scheme
            packed[name] = members
    return replace(c, weight_schemes=schemes, packed=packed), weights


# --------------------------------------------------------------------------------------
# HF checkpoints
# --------------------------------------------------------------------------------------


def _canonical(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``Qwen3_5ForConditionalGeneration`` names (``model.language_model.*``) as
    ``Qwen3_5ForCausalLM``'s; the vision tower (``model.visual.*``) dropped."""
    out = {}
    for k, v in tensors.items():
        if k.startswith("model.visual."):
            continue
        out[k.replace("model.language_model.", "model.", 1)] = v
    return out


def convert_hf_weights(c: Qwen35Config, tensors: Mapping[str, np.ndarray], source: str
                       ) -> dict[str, np.ndarray]:
    """HF tensors -> rlx weights: linear weights transposed, ``1 + w`` on zero-centred
    norms, ``A = -exp(A_log)``, the conv kernel ``[C, 1, K]`` as ``[C, 1, 1, K]``."""
    tensors = _canonical(tensors)
    out = {}
    for name, shape in param_shapes(c).items():
        if name == "lm_head" and c.tie_word_embeddings:
            continue
        key = names(name, c.num_layers)[0]
        if key not in tensors:
            raise ModelError(f"{source}: error: missing tensor '{key}' (rlx weight '{name}')")
        raw = np.asarray(tensors[key])
        t = raw.astype(np.float32)
        leaf = _split(name)[2]
        if is_linear(name):
            t = t.T
        elif leaf == "conv" and t.ndim == 3:
            t = t[:, :, None, :]
        elif leaf == "A":
            t = -np.exp(t)
        if leaf in ZERO_CENTRED and not (leaf == "norm" and name != "norm"):
            t = t + 1.0
        if tuple(t.shape) != shape:
            want = shape[::-1] if is_linear(name) else shape
            if leaf == "conv":
                want = (shape[0], 1, shape[3])
            raise ModelError(f"{source}: error: tensor '{key}': expected shape {list(want)}, "
                             f"found {list(raw.shape)}")
        out[name] = aligned(t, np.float32)
    return out


def read_config(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ModelError(f"{path}: error: cannot read the config: {e}") from None


def from_hf(config: str | Path, *safetensors: str | Path, logits: str = "last",
            context: int | None = DEFAULT_CONTEXT) -> Qwen35Model:
    """Build from an HF ``config.json`` and its ``*.safetensors`` (or the directory);
    ``context``: the KV cache's positions (None: a growing cache)."""
    cpath = Path(config)
    if cpath.is_dir():
        safetensors = tuple(sorted(cpath.glob("*.safetensors"))) or safetensors
        cpath = cpath / "config.json"
    c = Qwen35Config.from_hf(read_config(cpath), str(cpath))
    paths = [Path(p) for p in safetensors]
    if not paths:
        raise ModelError(f"{cpath}: error: no .safetensors files given")
    source = ", ".join(map(str, paths))
    tensors = _read_safetensors(paths)
    # the MTP head is read when the files have it (HF's save_pretrained drops it)
    c = replace(c, mtp=any(k.startswith("mtp.") for k in tensors))
    c, weights = pack(c, convert_hf_weights(c, tensors, source))
    return Qwen35Model(c, build(c, logits, context=context), weights, source, context)


def from_gguf(path: str | Path, logits: str = "last", context: int | None = DEFAULT_CONTEXT
              ) -> Qwen35Model:
    """Build from a llama.cpp ``qwen35`` ``.gguf`` (see :mod:`rlx.models.qwen35_gguf`)."""
    from rlx.models.qwen35_gguf import from_gguf as _from_gguf

    return _from_gguf(path, logits, context)


def l2_norm_eps(c: Qwen35Config) -> float:
    """The RMSNorm eps that makes ``rms_norm(x, 1 / sqrt(d))`` HF's ``l2norm(x, 1e-6)``."""
    return 1e-6 / c.linear_head_dim


def l2_norm_weight(c: Qwen35Config) -> np.ndarray:
    return np.full(c.linear_head_dim, 1.0 / math.sqrt(c.linear_head_dim), np.float32)


__all__ = ["DEFAULT_CONTEXT", "FULL", "LAYER_NAMES", "LINEAR", "MTP_NAMES", "TOP_NAMES",
           "Qwen35Config", "Qwen35Model", "build", "convert_hf_weights", "from_gguf", "from_hf",
           "initial_state", "names", "pack", "param_shapes", "require_mtp", "rope_tables",
           "speculative", "state_names", "state_shapes"]
