"""HF LLaMA-family models written as GGUF files, the way llama.cpp's ``convert_hf_to_gguf.py``
does: its tensor names and metadata keys, LLaMA's q/k rows permuted to the interleaved RoPE
layout, 1-D tensors (norms, biases) in F32, 2-D ones in the chosen format.

A test helper, shared by ``tests/test_models_gguf.py`` (input for rlx's GGUF reader) and
``benchmarks/llama.py`` (model files for rlx, HF and llama.cpp). Everything but the tensor
names is written from llama.cpp's converter, not from rlx's reader; the names come from the
LLaMA family's one name table (``rlx.models.llama.LAYER_NAMES``), which
``tests/test_models_names.py`` checks against the ``gguf`` package's own name map.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from rlx.models.llama import hf_to_gguf

FILE_TYPES = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
              "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf's ``LlamaModel.permute``: HF's rotate-half rows -> interleaved."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def stored(w: np.ndarray, fmt: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
    """A tensor as the file stores it (data for ``GGUFWriter`` and its GGML type): 1-D ones
    and ``F32`` as f32, ``F16`` / ``F64`` as f16 / f64, a GGML quant type through
    ``gguf.quants.quantize``, ``IQ4_NL`` (the ``gguf`` package cannot quantize it) as zero
    blocks."""
    if w.ndim == 1 or fmt == "F32":
        return w.astype(np.float32), gguf.GGMLQuantizationType.F32
    if fmt == "F64":
        return w.astype(np.float64), gguf.GGMLQuantizationType.F64
    if fmt == "F16":
        return w.astype(np.float16), gguf.GGMLQuantizationType.F16
    qtype = gguf.GGMLQuantizationType[fmt]
    if fmt == "IQ4_NL":
        elems, nbytes = gguf.GGML_QUANT_SIZES[qtype]
        return np.zeros((w.shape[0], w.shape[1] // elems * nbytes), np.uint8), qtype
    return gguf.quants.quantize(w.astype(np.float32), qtype), qtype


def stored_values(w: np.ndarray, fmt: str) -> np.ndarray:
    """The f32 values a tensor has after a round trip through the file format."""
    data, qtype = stored(w, fmt)
    if qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        return data.astype(np.float32)
    return gguf.quants.dequantize(data, qtype).reshape(w.shape)


def llama3_rope_factors(cfg: Any) -> np.ndarray | None:
    """``rope_freqs.weight`` as convert_hf_to_gguf writes it for LLaMA 3 rope scaling: the
    divisor of each rotary frequency (None without llama3 scaling)."""
    rope = cfg.rope_parameters or {}
    if rope.get("rope_type") != "llama3":
        return None
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    dim = cfg.head_dim
    freqs = 1.0 / (rope["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, np.float32)


def _add_vocab(w: gguf.GGUFWriter, vocab: int) -> None:
    """A byte-level SPM vocabulary (what llama.cpp needs to load the file)."""
    w.add_tokenizer_model("llama")
    w.add_token_list([b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
                     + [f"\u2581t{i}".encode() for i in range(vocab - 259)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
                      + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def write_gguf(model: Any, path: Path, fmt: str = "F16", *, arch: str = "llama",
               fmt_of: Callable[[str], str | None] | None = None,
               vocab: bool | Callable[[gguf.GGUFWriter], object] = False,
               extra: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write the HF ``model`` (a ``*ForCausalLM``) as ``convert_hf_to_gguf.py --outtype fmt``.

    ``fmt_of(gguf_name)`` overrides the format per tensor (``None``: leave it out);
    ``vocab`` adds a byte-level tokenizer (llama.cpp refuses files without one), or is a
    function that writes the tokenizer metadata (``tokenizer_fixtures.add_vocab``); ``extra``
    tensors are written as given (after ``rope_freqs.weight`` for LLaMA 3 rope scaling).
    """
    cfg = model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("random-" + arch)
    if fmt in FILE_TYPES:
        w.add_file_type(FILE_TYPES[fmt])
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if callable(vocab):
        vocab(w)
    elif vocab:
        _add_vocab(w, cfg.vocab_size)
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        gname = hf_to_gguf(name)
        tensor_fmt = fmt_of(gname) if fmt_of is not None else fmt
        if tensor_fmt is None:
            continue
        arr = t.detach().float().numpy()
        if arch == "llama" and name.endswith("self_attn.q_proj.weight"):
            arr = permute(arr, cfg.num_attention_heads)
        elif arch == "llama" and name.endswith("self_attn.k_proj.weight"):
            arr = permute(arr, cfg.num_key_value_heads)
        data, qtype = stored(arr, tensor_fmt)
        w.add_tensor(gname, data, raw_dtype=qtype)
    factors = llama3_rope_factors(cfg)
    if factors is not None:
        w.add_tensor("rope_freqs.weight", factors)
    for name, arr in (extra or {}).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
