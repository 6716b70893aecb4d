"""LLaMA-family models from llama.cpp ``.gguf`` files (``rlx.models.llama.from_gguf``).

The file's metadata gives the hyper-parameters (``{arch}.block_count``,
``.embedding_length``, ``.feed_forward_length``, ``.attention.head_count(_kv)``,
``.attention.key_length``, ``.attention.layer_norm_rms_epsilon``, ``.rope.freq_base``,
``.rope.dimension_count``, ``.rope.scaling.*``); the tensors use llama.cpp's names
(``token_embd``, ``blk.N.attn_q`` ..., ``output_norm``, ``output``).

How each weight is used:

- Linear weights keep the file's format. Block formats (Q4_0 ... Q6_K) and F16 / BF16 go to
  ``dequant_matmul`` as the tensor's raw bytes ``[out, ROWBYTES] i8``: the compiled module
  dequantizes inside the matmul dispatch, so a decode step reads the quantized bytes. F32
  ones are transposed to rlx's ``[in, out]`` and use a plain ``linear``.
- The token embedding is dequantized once, on the host, to f32: a lookup reads one row per
  token, so the quantized form saves no bandwidth there, and a host-side gather keeps the
  module free of a per-scheme gather. When there is no ``output.weight`` (tied embeddings)
  the LM head reads ``token_embd`` in the file's format, like any linear weight.
- Norm weights (and Qwen2's biases) are f32 (widened from F16 if stored so).

RoPE style: llama.cpp's converter permutes the rows of LLaMA's ``q``/``k`` projections so
that each head's rotated pairs are adjacent; GGUF ``llama`` models use the interleaved
(GPT-J, rlx ``gptj``) rotation, and ``qwen2`` / ``qwen3`` the unpermuted NeoX one (llama.cpp's
``LLAMA_ROPE_TYPE_NORM`` vs ``LLAMA_ROPE_TYPE_NEOX``). A ``rope_freqs.weight`` tensor (how
llama.cpp stores LLaMA 3's rope scaling) divides the frequencies, as llama.cpp does.

Supported architectures: ``llama`` (LLaMA 1/2/3, Mistral without sliding window), ``qwen2``
(QKV bias), ``qwen3`` (q/k RMSNorm). Anything the builder cannot honour exactly (another
architecture, partial rotary, YaRN scaling, a GGML type rlx cannot dequantize, a missing
tensor or a shape mismatch) is one :class:`~rlx.models.llama.ModelError` naming the file and
the key or tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rlx.ir.diagnostics import WeightError
from rlx.models.llama import (
    ARCHITECTURES,
    LINEAR,
    LlamaConfig,
    LlamaModel,
    ModelError,
    build,
    gguf_name,
    param_shapes,
)
from rlx.weights import IMPORT_ALIGNMENT, aligned, release_file_pages

GGUF_ARCHITECTURES = {"llama": "gptj", "qwen2": "neox", "qwen3": "neox"}
"""Supported ``general.architecture`` values -> rlx RoPE style."""
EMBED, OUTPUT = gguf_name("embed"), gguf_name("lm_head")

def config_from_metadata(meta: dict[str, Any], tensors: dict[str, Any], source: str
                         ) -> LlamaConfig:
    """A :class:`LlamaConfig` from GGUF metadata (``tensors``: name -> GgufTensor)."""
    arch = meta.get("general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ModelError(f"{source}: error: unsupported architecture {arch!r} "
                         f"(general.architecture; supported: {', '.join(GGUF_ARCHITECTURES)})")

    def key(name: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{name}", default)
        if value is None:
            raise ModelError(f"{source}: error: missing metadata '{arch}.{name}'")
        return value

    def positive(name: str, default: Any = None) -> int:
        value = key(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ModelError(f"{source}: error: metadata '{arch}.{name}': expected a "
                             f"positive integer, found {value!r}")
        return value

    def number(name: str, default: float) -> float:
        value = key(name, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise ModelError(f"{source}: error: metadata '{arch}.{name}': expected a "
                             f"positive number, found {value!r}")
        return float(value)

    hidden = positive("embedding_length")
    heads = positive("attention.head_count")
    kv_heads = positive("attention.head_count_kv", heads)
    head_dim = positive("attention.key_length", hidden // heads)
    if heads % kv_heads:
        raise ModelError(f"{source}: error: metadata '{arch}.attention.head_count' {heads} is "
                         f"not a multiple of 'attention.head_count_kv' {kv_heads}")
    n_rot = positive("rope.dimension_count", head_dim)
    if n_rot != head_dim:
        raise ModelError(f"{source}: error: metadata '{arch}.rope.dimension_count' {n_rot}: "
                         f"partial rotary (head_dim {head_dim}) is not supported by this "
                         "builder")
    if EMBED not in tensors:
        raise ModelError(f"{source}: error: missing tensor '{EMBED}'")
    scaling: dict[str, Any] | None = None
    kind = meta.get(f"{arch}.rope.scaling.type", "none")
    if kind == "linear":
        scaling = {"rope_type": "linear", "factor": number("rope.scaling.factor", 1.0)}
    elif kind != "none":
        raise ModelError(f"{source}: error: metadata '{arch}.rope.scaling.type' {kind!r} is "
                         "not supported (supported: none, linear, rope_freqs.weight)")
    eps = number("attention.layer_norm_rms_epsilon", 1e-5)
    theta = number("rope.freq_base", 10000.0)
    return LlamaConfig(
        vocab_size=tensors[EMBED].shape[0], hidden_size=hidden,
        num_layers=positive("block_count"), num_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, intermediate_size=positive("feed_forward_length"),
        rms_norm_eps=eps, rope_theta=theta,
        rope_style=GGUF_ARCHITECTURES[arch], rope_scaling=scaling,
        tie_word_embeddings=OUTPUT not in tensors, arch=arch,
        **ARCHITECTURES[arch])


T = TypeVar("T")


def read_model(path: str | Path, build: Callable[[Any, str], T]) -> T:
    """``build(file, path)`` on the opened ``.gguf`` (closed after): the one way a model
    family opens its file, a broken file being one ModelError naming it."""
    import rlx.gguf

    path = Path(path)
    try:
        f = rlx.gguf.load(path)
    except WeightError as e:
        raise ModelError(str(e)) from None
    try:
        return build(f, str(path))
    finally:
        f.close()


def from_gguf(path: str | Path, logits: str = "last", context: int | None = None
              ) -> LlamaModel:
    """Build a LLaMA-family model (HIR ``prefill`` / ``decode``, weights) from a ``.gguf``;
    ``context``: positions of the preallocated KV cache (None: the growing one)."""
    return read_model(path, lambda f, name: _model(
        f, config_from_metadata(f.metadata, f.tensors, name), logits, context))


def _model(f: Any, c: LlamaConfig, logits: str, context: int | None) -> LlamaModel:
    src = str(f.path)
    schemes: dict[str, str] = {}
    weights: dict[str, np.ndarray] = {}
    leads: dict[str, int] = {}
    expected = param_shapes(c)
    embd = f.tensors.get(EMBED)
    if c.tie_word_embeddings and embd is not None and embd.type_name != "F32":
        # the LM head reads token_embd in its own format (an F32 one: the module transposes
        # the embedding itself)
        expected["lm_head"] = (c.hidden_size, c.vocab_size)
    for name, shape in expected.items():
        tname = EMBED if name == "lm_head" and c.tie_word_embeddings else gguf_name(name)
        if tname not in f.tensors:
            raise ModelError(f"{src}: error: missing tensor '{tname}' (rlx weight '{name}')")
        t = f.tensors[tname]
        linear = name.rsplit(".", 1)[-1] in LINEAR
        want = shape[::-1] if linear else shape  # GGUF (numpy order) is [out, in]
        if tuple(t.shape) != tuple(want):
            raise ModelError(f"{src}: error: tensor '{tname}': expected shape {list(want)}, "
                             f"found {list(t.shape)} ({t.type_name})")
        if t.plain_dtype is None and t.scheme is None:
            raise ModelError(f"{src}: error: tensor '{tname}' is {t.type_name}, which rlx "
                             "cannot dequantize")
        if (linear or name == "embed") and t.scheme is not None:
            # the embedding too stays the file's rows (gathered, then dequantized: _Ctx.embed)
            schemes[name] = t.scheme
            raw_weight(f, tname, name, weights, leads)
        elif linear and t.type_name == "F32":
            weights[name] = aligned(f.array(tname).T)
        elif linear:
            raise ModelError(f"{src}: error: tensor '{tname}' is {t.type_name}: a linear "
                             "weight must be F32, F16, BF16 or a block format")
        else:
            weights[name] = _dequantized(f, t)
    if "lm_head" in schemes:
        c = dataclasses.replace(c, tie_word_embeddings=False)
    if "rope_freqs.weight" in f.tensors:
        factors = _dequantized(f, f.tensors["rope_freqs.weight"]).reshape(-1)
        if factors.shape != (c.head_dim // 2,):
            raise ModelError(f"{src}: error: tensor 'rope_freqs.weight': expected shape "
                             f"[{c.head_dim // 2}], found {list(factors.shape)}")
        c = dataclasses.replace(c, rope_scaling={"rope_type": "freq_factors",
                                      "factors": tuple(map(float, factors))})
    packed = _pack(c, schemes, weights)
    c = dataclasses.replace(c, weight_schemes=schemes, packed=packed, weight_leads=leads)
    return LlamaModel(c, build(c, logits, context=context), weights, context)


PACKS = {"qkv": ("q", "k", "v"), "qk": ("q", "k"), "gate_up": ("gate", "up")}


def _pack(c: LlamaConfig, schemes: dict[str, str], weights: dict[str, np.ndarray]
          ) -> dict[str, tuple[str, ...]]:
    """Pack projections that read the same input and share a format (q/k/v; gate/up), so
    that each group is one dequant_matmul: two or three fewer dispatches per layer and decode
    token. The weights stay the file's tensors and the module concatenates their rows
    (:func:`rlx.models.llama.packed_weight`). Groups of mixed formats (a Q4_K_M file keeps v
    in Q6_K) pack what matches (q/k) or stay apart."""
    packed: dict[str, tuple[str, ...]] = {}
    for i in range(c.num_layers):
        for pack, parts in PACKS.items():
            members = tuple(f"layers.{i}.{p}" for p in parts)
            if any(m not in schemes or m not in weights for m in members):
                continue
            if len({schemes[m] for m in members}) != 1:
                continue
            name = f"layers.{i}.{pack}"
            schemes[name] = schemes[members[0]]
            for m in members:
                del schemes[m]
            packed[name] = members
    return packed


def raw_weight(f: Any, tname: str, name: str, weights: dict[str, np.ndarray],
               leads: dict[str, int]) -> None:
    """Weight ``name``: tensor ``tname``'s raw bytes as a view of the file from the
    :data:`~rlx.weights.IMPORT_ALIGNMENT` boundary at or before them, its lead (if any) in
    ``leads``. IREE then uses the file's pages in place (a GGUF aligns tensors to 32 bytes:
    a view of the tensor alone would be copied, and the copy kept, for about half of them),
    and drops them once the planes are made (``rlx.runtime``)."""
    weights[name], lead = f.raw_led(tname, IMPORT_ALIGNMENT)
    if lead:
        leads[name] = lead


def _dequantized(f: Any, t: Any) -> np.ndarray:
    """A tensor as f32 values (host-side; for the embedding, norms and biases)."""
    if t.plain_dtype is not None or t.type_name in ("F16", "BF16"):
        out = aligned(f.array(t.name), np.float32)
        release_file_pages([f.raw(t.name)])
        return out
    import gguf

    raw = f.raw(t.name).view(np.uint8)
    out = aligned(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(t.ggml_type)).reshape(
        t.shape), np.float32)
    release_file_pages([raw])
    return out


__all__ = ["GGUF_ARCHITECTURES", "config_from_metadata", "from_gguf", "gguf_name", "raw_weight"]
