"""Qwen3.5 models from llama.cpp ``qwen35`` ``.gguf`` files (``rlx.models.qwen35.from_gguf``).

Metadata: ``qwen35.block_count`` (the trunk plus ``nextn_predict_layers`` MTP blocks),
``embedding_length``, ``feed_forward_length``, ``attention.head_count(_kv)``,
``attention.key_length``, ``attention.layer_norm_rms_epsilon``, ``rope.freq_base``,
``rope.dimension_count`` (the rotary dims), ``ssm.conv_kernel``, ``ssm.state_size`` (the
key / value head dim), ``ssm.group_count`` (key heads), ``ssm.time_step_rank`` (value
heads), ``ssm.inner_size``; the layer pattern from ``attention.recurrent_layers`` or else
``full_attention_interval`` (default 4, as llama.cpp).

What llama.cpp's converter did to the weights, and how rlx reads them back: ``ssm_a`` is
``-exp(A_log)``, rlx's ``A`` as is; the norms it shifted by ``+1`` are rlx's RMSNorm
weights as they are (rlx folds the ``+1`` into HF's at load); ``ssm_conv1d`` ``[C, K]`` is
rlx's ``[C, 1, 1, K]``; the value heads it reordered to tiled order stay so, and the q / k
heads are tiled to them (``v_head_order = "tiled"``): the same computation with the value
heads permuted, which ``ssm_out``'s columns (reordered alike) undo. Linear weights keep the
file's format (``dequant_matmul`` on the raw bytes; F32 ones transposed); projections of
one input in one format are packed into one matmul. The embedding stays the file's too
(the tokens' rows gathered, then dequantized); norms and the small per-head vectors are f32
on the host. The MTP head (``blk.{L}.nextn.*`` and its layer's tensors) is read in f32 (one
layer; its op takes f32 weights, and the drafted tokens' embedding rows); its drafts' logits
are the trunk's LM head in the file's format (:mod:`rlx.models.qwen35_mtp`).

Anything rlx cannot honour (another architecture, a MoE file, a missing tensor or metadata
key, a mis-shaped tensor, a GGML type it cannot dequantize) is one ModelError naming the
file and the key or tensor.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rlx.models.gguf import _dequantized, raw_weight, read_model
from rlx.models.llama import ModelError
from rlx.models.qwen35 import (
    FULL,
    LINEAR,
    Qwen35Config,
    Qwen35Model,
    _split,
    build,
    is_linear,
    names,
    pack,
    param_shapes,
)
from rlx.weights import aligned

ARCH = "qwen35"
EMBED, OUTPUT = "token_embd.weight", "output.weight"


class _Meta:
    def __init__(self, meta: dict[str, Any], source: str) -> None:
        self.meta, self.source = meta, source

    def get(self, key: str, default: Any = None) -> Any:
        value = self.meta.get(f"{ARCH}.{key}", default)
        if value is None:
            raise ModelError(f"{self.source}: error: missing metadata '{ARCH}.{key}'")
        return value

    def int(self, key: str, default: Any = None, minimum: int = 1) -> int:
        value = self.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ModelError(f"{self.source}: error: metadata '{ARCH}.{key}': expected an "
                             f"integer >= {minimum}, found {value!r}")
        return value


def config_from_metadata(meta: dict[str, Any], tensors: dict[str, Any], source: str
                         ) -> Qwen35Config:
    arch = meta.get("general.architecture")
    if arch == "qwen35moe":
        raise ModelError(f"{source}: error: architecture 'qwen35moe' (general.architecture) "
                         "is the MoE variant, which rlx.models.qwen35 does not support")
    if arch != ARCH:
        raise ModelError(f"{source}: error: unsupported architecture {arch!r} "
                         f"(general.architecture; supported: {ARCH})")
    m = _Meta(meta, source)
    mtp = m.int("nextn_predict_layers", 0, minimum=0)
    layers = m.int("block_count") - mtp
    if layers < 1 or mtp > 1:
        raise ModelError(f"{source}: error: metadata '{ARCH}.nextn_predict_layers' {mtp}: "
                         "expected 0 or 1 MTP blocks after at least one trunk layer")
    recurrent = meta.get(f"{ARCH}.attention.recurrent_layers")
    if recurrent is None:
        every = m.int("full_attention_interval", 4)
        recurrent = [(i + 1) % every != 0 for i in range(layers)]
    recurrent = list(recurrent)[:layers]
    if len(recurrent) != layers:
        raise ModelError(f"{source}: error: metadata '{ARCH}.attention.recurrent_layers' "
                         f"has {len(recurrent)} entries, expected {layers}")
    heads, kv_heads = m.int("attention.head_count"), m.int("attention.head_count_kv")
    nk, nv, d = m.int("ssm.group_count"), m.int("ssm.time_step_rank"), m.int("ssm.state_size")
    if nv % nk or heads % kv_heads:
        raise ModelError(f"{source}: error: metadata head counts: value heads {nv} / key "
                         f"heads {nk}, query heads {heads} / KV heads {kv_heads} must divide")
    if m.int("ssm.inner_size") != nv * d:
        raise ModelError(f"{source}: error: metadata '{ARCH}.ssm.inner_size' "
                         f"{m.get('ssm.inner_size')}: expected time_step_rank x state_size "
                         f"= {nv * d}")
    if EMBED not in tensors:
        raise ModelError(f"{source}: error: missing tensor '{EMBED}'")
    hidden = m.int("embedding_length")
    head_dim = m.int("attention.key_length", hidden // heads)
    return Qwen35Config(
        vocab_size=tensors[EMBED].shape[0], hidden_size=hidden,
        layer_types=tuple(LINEAR if r else FULL for r in recurrent), num_heads=heads,
        num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=m.int("feed_forward_length"),
        linear_k_heads=nk, linear_v_heads=nv, linear_head_dim=d,
        conv_kernel=m.int("ssm.conv_kernel"),
        rms_norm_eps=float(m.get("attention.layer_norm_rms_epsilon", 1e-6)),
        rope_theta=float(m.get("rope.freq_base", 10_000_000.0)),
        n_rot=m.int("rope.dimension_count", head_dim), tie_word_embeddings=OUTPUT not in tensors,
        v_head_order="tiled", mtp=mtp == 1)


def from_gguf(path: str | Path, logits: str = "last", context: int | None = None
              ) -> Qwen35Model:
    """Build a Qwen3.5 model (HIR module, weights) from a ``qwen35`` ``.gguf``; ``context``:
    the KV cache's positions (None: a growing cache)."""
    return read_model(path, lambda f, name: _model(
        f, config_from_metadata(f.metadata, f.tensors, name), logits, context))


def _tensor(f: Any, name: str, tname: str, want: tuple[int, ...]) -> Any:
    src = str(f.path)
    if tname not in f.tensors:
        raise ModelError(f"{src}: error: missing tensor '{tname}' (rlx weight '{name}')")
    t = f.tensors[tname]
    if tuple(t.shape) != tuple(want):
        raise ModelError(f"{src}: error: tensor '{tname}': expected shape {list(want)}, "
                         f"found {list(t.shape)} ({t.type_name})")
    if t.plain_dtype is None and t.scheme is None:
        raise ModelError(f"{src}: error: tensor '{tname}' is {t.type_name}, which rlx "
                         "cannot dequantize")
    return t


def _model(f: Any, c: Qwen35Config, logits: str, context: int | None) -> Qwen35Model:
    schemes: dict[str, str] = {}
    weights: dict[str, np.ndarray] = {}
    leads: dict[str, int] = {}
    for name, shape in param_shapes(c).items():
        tname = EMBED if name == "lm_head" and c.tie_word_embeddings else \
            names(name, c.num_layers)[1]
        leaf = _split(name)[2]
        want = shape[::-1] if is_linear(name) else (shape[0], shape[3]) if leaf == "conv" \
            else shape
        t = _tensor(f, name, tname, want)
        if (is_linear(name) or name == "embed") and t.scheme is not None and (
                not name.startswith("mtp.")):
            # the embedding too stays the file's rows (gathered, then dequantized: _Ctx.embed)
            schemes[name] = t.scheme
            raw_weight(f, tname, name, weights, leads)
        elif is_linear(name):
            weights[name] = aligned(_dequantized(f, t).T)
        else:
            weights[name] = aligned(_dequantized(f, t).reshape(shape))
    if c.tie_word_embeddings and f.tensors[EMBED].type_name != "F32":
        # the LM head reads token_embd in its own format (an F32 one: the module
        # transposes the f32 embedding itself)
        t = f.tensors[EMBED]
        schemes["lm_head"] = t.scheme or ""
        raw_weight(f, EMBED, "lm_head", weights, leads)
        c = replace(c, tie_word_embeddings=False)
    if schemes.get("lm_head") == "":
        raise ModelError(f"{f.path}: error: tensor '{EMBED}' is "
                         f"{f.tensors[EMBED].type_name}: a tied LM head must be F32, F16, "
                         "BF16 or a block format")
    c, weights = pack(replace(c, weight_schemes=schemes, weight_leads=leads), weights)
    return Qwen35Model(c, build(c, logits, context=context), weights, str(f.path), context)


__all__ = ["ARCH", "config_from_metadata", "from_gguf"]
