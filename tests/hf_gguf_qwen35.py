"""An HF Qwen3.5 checkpoint written as a ``qwen35`` GGUF file the way llama.cpp's
``convert_hf_to_gguf.py`` writes it (``Qwen3_5TextModel``: Qwen3-Next's tensor rules, the
V-head reorder, the MTP block as ``blk.{L}.nextn.*``), for rlx's reader and for llama.cpp.

What the converter does to the tensors, and so this file: ``A_log`` stored as ``ssm_a =
-exp(A_log)``; ``dt_bias`` as ``ssm_dt.bias``; the conv kernel ``[C, 1, K]`` squeezed to
``[C, K]``; ``+1`` on every ``*norm.weight`` but the linear layers' gated ``norm``; with
fewer key than value heads, the value heads of ``in_proj_qkv``'s V rows, ``in_proj_z``,
``in_proj_a`` / ``in_proj_b``, ``A_log``, ``dt_bias``, the conv's V channels and
``out_proj``'s columns reordered from grouped (by key head) to tiled; ``mtp.fc`` ->
``nextn.eh_proj``, ``mtp.pre_fc_norm_embedding`` / ``_hidden`` -> ``nextn.enorm`` /
``hnorm``, ``mtp.norm`` -> ``nextn.shared_head_norm``, ``mtp.layers.0.*`` -> the block
after the trunk's last. Types: 1-D tensors, ``*_norm.weight``, the conv kernel and tensors
not named ``*.weight`` in F32; others in the chosen format (a block format falls back to
F16 when a row is not a whole number of blocks, as the converter does). Metadata: the
converter's keys (``ssm.*``, ``rope.dimension_count`` = the rotary dims,
``rope.dimension_sections``, ``attention.recurrent_layers``, ``full_attention_interval``,
``nextn_predict_layers``); block_count counts the MTP block.

The tensor names come from rlx's name table (``rlx.models.qwen35.names``), which
``tests/test_models_names.py`` checks against the ``gguf`` package's map.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from hf_gguf import FILE_TYPES, _add_vocab, stored
from rlx.models import qwen35


def _hf_to_rlx(cfg: Any) -> dict[str, str]:
    """HF tensor name -> rlx weight name (every name the checkpoint may hold)."""
    layers = cfg.num_hidden_layers
    out = {}
    config = qwen35.Qwen35Config.from_hf(cfg.to_dict())
    for name in qwen35.param_shapes(config, mtp=True):
        out[qwen35.names(name, layers)[0]] = name
    return out


def reorder_v_heads(t: np.ndarray, axis: int, nk: int, g: int, width: int) -> np.ndarray:
    """Value heads along ``axis`` (``nk * g`` groups of ``width``) from grouped order
    (key head major) to tiled (repeat major)."""
    shape = list(t.shape)
    split = [*shape[:axis], nk, g, width, *shape[axis + 1:]]
    return np.swapaxes(t.reshape(split), axis, axis + 1).reshape(shape)


def converted(name: str, t: np.ndarray, cfg: Any) -> np.ndarray:
    """The converter's value rules for one HF tensor (see the module docstring)."""
    if name.endswith(".A_log"):
        t = -np.exp(t)
    elif "conv1d" in name:
        t = t.reshape(t.shape[0], t.shape[-1])
    elif (name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight")) or \
            name.startswith("mtp.pre_fc_norm_"):
        # the converter renames mtp.pre_fc_norm_* to ...enorm / hnorm.weight first
        t = t + 1.0
    nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    if nk == nv or "linear_attn." not in name:
        return t
    g, d = nv // nk, cfg.linear_value_head_dim
    key = nk * cfg.linear_key_head_dim
    if ".in_proj_qkv." in name or ".conv1d." in name:
        v = reorder_v_heads(t[2 * key:], 0, nk, g, d)
        return np.concatenate([t[:2 * key], v], axis=0)
    if ".in_proj_z." in name:
        return reorder_v_heads(t, 0, nk, g, d)
    if any(s in name for s in (".in_proj_a.", ".in_proj_b.", ".A_log", ".dt_bias")):
        return reorder_v_heads(t, 0, nk, g, 1)
    if ".out_proj." in name:
        return reorder_v_heads(t, 1, nk, g, d)
    return t


def tensor_type(gname: str, t: np.ndarray, fmt: str) -> str:
    """The converter's type choice for a tensor of the given format."""
    if t.ndim <= 1 or gname.endswith("_norm.weight") or "ssm_conv1d" in gname or \
            not gname.endswith(".weight"):
        return "F32"
    if fmt in ("F32", "F16", "F64", "IQ4_NL"):
        return fmt
    elems = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[fmt]][0]
    return fmt if t.shape[-1] % elems == 0 else "F16"


def _metadata(w: gguf.GGUFWriter, cfg: Any, mtp_layers: int) -> None:
    layers = cfg.num_hidden_layers
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(layers + mtp_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    rope = cfg.rope_parameters
    w.add_rope_freq_base(float(rope["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(int(cfg.head_dim * rope.get("partial_rotary_factor", 0.25)))
    w.add_rope_dimension_sections([11, 11, 10, 0])
    w.add_ssm_conv_kernel(cfg.linear_conv_kernel_dim)
    w.add_ssm_state_size(cfg.linear_key_head_dim)
    w.add_ssm_group_count(cfg.linear_num_key_heads)
    w.add_ssm_time_step_rank(cfg.linear_num_value_heads)
    w.add_ssm_inner_size(cfg.linear_value_head_dim * cfg.linear_num_value_heads)
    recurrent = [t == "linear_attention" for t in cfg.layer_types] + [False] * mtp_layers
    w.add_array("qwen35.attention.recurrent_layers", recurrent)
    w.add_full_attention_interval(4)
    if mtp_layers:
        w.add_nextn_predict_layers(mtp_layers)


def write_gguf(model: Any, path: Path, fmt: str = "F16", *,
               tensors: Mapping[str, np.ndarray] | None = None,
               fmt_of: Callable[[str], str | None] | None = None, vocab: bool = False,
               meta: Callable[[gguf.GGUFWriter], None] | None = None) -> Path:
    """Write the HF ``Qwen3_5ForCausalLM`` (its ``state_dict``, or ``tensors``: e.g. with
    ``mtp.*`` added) as ``convert_hf_to_gguf.py --outtype fmt`` does. ``fmt_of(gguf_name)``
    overrides a tensor's format (``None``: leave it out); ``meta`` adds or overrides
    metadata (called last)."""
    cfg = model.config
    if tensors is None:
        tensors = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    mtp_layers = 1 if any(k.startswith("mtp.") for k in tensors) else 0
    w = gguf.GGUFWriter(str(path), "qwen35")
    w.add_name("random-qwen35")
    if fmt in FILE_TYPES:
        w.add_file_type(FILE_TYPES[fmt])
    _metadata(w, cfg, mtp_layers)
    if vocab:
        _add_vocab(w, cfg.vocab_size)
    rlx_names = _hf_to_rlx(cfg)
    for name, t in tensors.items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        gname = qwen35.names(rlx_names[name], cfg.num_hidden_layers)[1]
        arr = converted(name, np.asarray(t, np.float32), cfg)
        chosen = fmt_of(gname) if fmt_of is not None else tensor_type(gname, arr, fmt)
        if chosen is None:
            continue
        data, qtype = stored(arr, chosen)
        w.add_tensor(gname, data, raw_dtype=qtype)
    if meta is not None:
        meta(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def stored_values(name: str, t: np.ndarray, fmt: str, cfg: Any) -> np.ndarray:
    """An HF tensor's values after the file round trip in ``fmt`` (converted, stored,
    read back, converted back): what HF computes with to match the file exactly."""
    from hf_gguf import stored_values as round_trip

    gname = qwen35.names(_hf_to_rlx(cfg)[name], cfg.num_hidden_layers)[1]
    arr = converted(name, t, cfg)
    chosen = tensor_type(gname, arr, fmt)
    if chosen == "F32":
        return t
    back = round_trip(arr, chosen)
    nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    if nk != nv and "linear_attn." in name:  # undo the reorder: tiled -> grouped
        g, d = nv // nk, cfg.linear_value_head_dim
        key = nk * cfg.linear_key_head_dim
        if ".in_proj_qkv." in name:
            back = np.concatenate([back[:2 * key],
                                   reorder_v_heads(back[2 * key:], 0, g, nk, d)])
        elif ".in_proj_z." in name:
            back = reorder_v_heads(back, 0, g, nk, d)
        elif ".in_proj_a." in name or ".in_proj_b." in name:
            back = reorder_v_heads(back, 0, g, nk, 1)
        elif ".out_proj." in name:
            back = reorder_v_heads(back, 1, g, nk, d)
    return back.astype(np.float32)
