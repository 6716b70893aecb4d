"""rlx.models.llama.from_gguf against HF transformers.

A tiny HF LLaMA (GQA, random weights from a fixed seed) is written as GGUF with the ``gguf``
package the way llama.cpp's ``convert_hf_to_gguf.py`` does (``tests/hf_gguf.py``: tensor
names, metadata, the q/k row permutation to the interleaved RoPE layout; norms stay F32) as
F32, F16 and Q8_0.
Oracles: transformers on the original weights (32 greedy tokens identical for F32 and F16),
and transformers on the weights as the file stores them (f16-rounded, or Q8_0 dequantized by
``gguf.quants.dequantize``) for the logits within the f32 tolerance. Q8_0 logits against the
original model: within ``Q8_0_TOLERANCE`` (see there).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import rlx.models.gguf
from hf_gguf import stored_values, write_gguf
from rlx.generate import Generator
from rlx.models import llama
from rlx.models.gguf import config_from_metadata
from rlx.models.llama import ModelError
from rlx.reference.tolerance import assert_close
from rlx.weights import IMPORT_ALIGNMENT
from test_models import COMMON, PROMPT, hf_reference, prefill_all, save_hf

Q8_0_TOLERANCE = 0.2
"""Q8_0 logits vs the unquantized model: rms(error) <= 0.2 * rms(logits). Q8_0 rounds each
weight to 1/254 of its 32-block's max (about 0.5% rms per weight), and this random model
(init std 0.5, 3 layers) amplifies that: transformers alone, original vs Q8_0-dequantized
weights, measures 0.062 for seed 0 (0.054-0.161 over seeds 0-3). Unrelated logits (a wrong
block layout or scale) give about 1.4 (sqrt 2). The exact check is the one against
transformers on the dequantized weights (f32 tolerance, identical tokens)."""

def as_stored(model: torch.nn.Module, fmt: str) -> torch.nn.Module:
    """The HF model with every 2-D weight replaced by its values after the file round trip."""
    with torch.no_grad():
        for t in model.parameters():
            if t.ndim == 2:
                t.copy_(torch.from_numpy(stored_values(t.numpy(), fmt)))
    return model


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tiny HF LLaMA (3 layers, 4 heads, 2 KV heads), its tokens and logits."""
    path = tmp_path_factory.mktemp("hf")
    model = save_hf("llama", path)
    logits, tokens = hf_reference(model, PROMPT, 32)
    return {"path": path, "model": model, "logits": logits, "tokens": tokens}


@pytest.mark.parametrize("fmt", ["F32", "F16", "Q8_0"])
def test_gguf_matches_transformers_on_llvm_cpu(fmt: str, hf: dict, tmp_path: Path) -> None:
    file = write_gguf(hf["model"], tmp_path / f"tiny-{fmt}.gguf", fmt)
    model = llama.from_gguf(file, logits="all")
    assert model.config.rope_style == "gptj"
    assert set(model.config.weight_schemes.values()) == (
        set() if fmt == "F32" else {f"gguf_{fmt.lower()}"})
    # q/k/v and gate/up of one format are packed: one dequant_matmul each
    assert ("layers.2.qkv" in model.config.packed) == (fmt != "F32")
    # the default load (planes encoded ahead of time, rlx.encoding), which conftest turns off
    gen = Generator(model, options={"encode_parameters": True})
    assert gen.encoded or fmt == "F32"   # F32: planes only where IREE hoists a pack
    got = prefill_all(gen, PROMPT)
    stored = save_hf("llama", tmp_path / "copy")  # same seed: the same weights
    want, want_tokens = hf_reference(as_stored(stored, fmt), PROMPT, 32)
    assert_close(got, want, "f32", f"{fmt} prefill logits vs HF on the stored weights")
    tokens = gen.generate(PROMPT, 32)
    assert tokens == want_tokens
    if fmt == "Q8_0":
        ref = hf["logits"]
        rel = np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref ** 2))
        assert rel <= Q8_0_TOLERANCE, f"Q8_0 logits vs the original model: rms error {rel:.3f}"
    else:
        assert tokens == hf["tokens"]


@pytest.mark.parametrize("boundary", [IMPORT_ALIGNMENT, 256, 1])
def test_gguf_weights_are_views_from_a_boundary(boundary: int, hf: dict, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A raw weight is a view of the file from the 64-byte boundary before its tensor, the
    bytes before it the param's ``lead`` (IREE uses it in place; a GGUF aligns tensors to
    32 bytes, so some tensors have one); a pack's members stay the file's tensors,
    concatenated in the module. This tiny file's tensors all start on 64-byte boundaries, so
    a 256-byte one gives some weights a lead here; with none (1: IREE copies) the logits are
    the same: HF's on the stored weights."""
    monkeypatch.setattr(rlx.models.gguf, "IMPORT_ALIGNMENT", boundary)
    file = write_gguf(hf["model"], tmp_path / "tiny-Q8_0.gguf", "Q8_0")
    model = llama.from_gguf(file, logits="all")
    assert model.config.packed["layers.0.qkv"] == ("layers.0.q", "layers.0.k", "layers.0.v")
    assert "layers.0.q" in model.weights
    assert "layers.0.qkv" not in model.weights
    leads = model.config.weight_leads
    raw = [n for n in model.weights if n in leads or model.weights[n].dtype == np.int8]
    assert raw
    assert all(model.weights[n].ctypes.data % boundary == 0 for n in raw)
    assert all(0 < lead < boundary for lead in leads.values())
    assert bool(leads) == (boundary > IMPORT_ALIGNMENT), leads
    text = str(model.module)
    assert all(f'lead = {lead} : i64, name = "{n}"' in text for n, lead in leads.items())
    stored = save_hf("llama", tmp_path / "copy")
    want, _ = hf_reference(as_stored(stored, "Q8_0"), PROMPT, 1)
    assert_close(prefill_all(Generator(model), PROMPT), want, "f32",
                 f"Q8_0 prefill logits, views from {boundary}-byte boundaries")


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_qwen_gguf_matches_transformers(kind: str, tmp_path: Path) -> None:
    """Qwen2 (QKV bias) and Qwen3 (q/k RMSNorm): NeoX RoPE, q/k not permuted."""
    model = save_hf(kind, tmp_path / "hf")
    want, want_tokens = hf_reference(model, PROMPT, 8)
    built = llama.from_gguf(write_gguf(model, tmp_path / f"{kind}.gguf", "F32", arch=kind),
                            logits="all")
    assert (built.config.rope_style, built.config.arch) == ("neox", kind)
    gen = Generator(built)
    assert_close(prefill_all(gen, PROMPT), want, "f32", f"{kind} GGUF prefill logits")
    assert gen.generate(PROMPT, 8) == want_tokens


def test_gguf_mixed_formats_pack_what_matches(hf: dict, tmp_path: Path) -> None:
    """Q8_0 with attn_v in F16 (as Q4_K_M files keep v in Q6_K): q/k packed, v apart."""
    file = write_gguf(hf["model"], tmp_path / "mixed.gguf", "Q8_0",
                      fmt_of=lambda n: "F16" if "attn_v" in n else "Q8_0")
    model = llama.from_gguf(file, logits="all")
    assert model.config.packed["layers.0.qk"] == ("layers.0.q", "layers.0.k")
    assert model.config.weight_schemes["layers.0.v"] == "gguf_f16"
    stored = save_hf("llama", tmp_path / "copy")
    with torch.no_grad():
        for name, t in stored.named_parameters():
            if t.ndim == 2:
                fmt = "F16" if "v_proj" in name else "Q8_0"
                t.copy_(torch.from_numpy(stored_values(t.numpy(), fmt)))
    want, want_tokens = hf_reference(stored, PROMPT, 8)
    gen = Generator(model)
    assert_close(prefill_all(gen, PROMPT), want, "f32", "mixed-format prefill logits")
    assert gen.generate(PROMPT, 8) == want_tokens


def test_gguf_tied_f16_embeddings(tmp_path: Path) -> None:
    """No output.weight: the LM head reads token_embd (F16) through dequant_matmul."""
    model = save_hf("llama_tied", tmp_path / "hf")
    file = write_gguf(model, tmp_path / "tied.gguf", "F16")
    built = llama.from_gguf(file, logits="all")
    assert built.config.weight_schemes["lm_head"] == "gguf_f16"
    want, want_tokens = hf_reference(as_stored(model, "F16"), PROMPT, 8)
    gen = Generator(built)
    assert_close(prefill_all(gen, PROMPT), want, "f32", "tied F16 prefill logits")
    assert gen.generate(PROMPT, 8) == want_tokens


@pytest.mark.vulkan
def test_gguf_matches_transformers_on_vulkan(hf: dict, tmp_path: Path) -> None:
    file = write_gguf(hf["model"], tmp_path / "tiny.gguf", "F32")
    gen = Generator(llama.from_gguf(file, logits="all"), "vulkan")
    assert_close(prefill_all(gen, PROMPT), hf["logits"], "f32", "vulkan GGUF prefill logits")
    assert gen.generate(PROMPT, 32) == hf["tokens"]


@pytest.mark.vulkan
def test_gguf_q4_1_matches_transformers_on_vulkan(hf: dict, tmp_path: Path) -> None:
    """A quantized model on Vulkan (every linear weight a Q4_1 dequant_matmul, prefill- and
    decode-shaped): logits within the f32 tolerance of transformers on the weights as the
    file stores them, and the same greedy tokens."""
    file = write_gguf(hf["model"], tmp_path / "tiny-q4_1.gguf", "Q4_1")
    model = llama.from_gguf(file, logits="all")
    assert set(model.config.weight_schemes.values()) == {"gguf_q4_1"}
    gen = Generator(model, "vulkan")
    stored = save_hf("llama", tmp_path / "copy")  # same seed: the same weights
    want, want_tokens = hf_reference(as_stored(stored, "Q4_1"), PROMPT, 16)
    assert_close(prefill_all(gen, PROMPT), want, "f32", "vulkan Q4_1 prefill logits")
    assert gen.generate(PROMPT, 16) == want_tokens


def test_rlx_generate_cli_on_gguf(hf: dict, tmp_path: Path) -> None:
    file = write_gguf(hf["model"], tmp_path / "tiny.gguf", "F32")
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(file),
                           "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", "8"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ",".join(map(str, hf["tokens"][:8]))


def test_unsupported_and_broken_gguf(hf: dict, tmp_path: Path) -> None:
    model = hf["model"]
    with pytest.raises(ModelError, match=r"unsupported architecture 'gpt2' "
                                         r"\(general.architecture"):
        llama.from_gguf(write_gguf(model, tmp_path / "gpt2.gguf", "F32", arch="gpt2"))
    with pytest.raises(ModelError, match=r"missing tensor 'blk.1.ffn_up.weight' "
                                         r"\(rlx weight 'layers.1.up'\)"):
        llama.from_gguf(write_gguf(model, tmp_path / "m.gguf", "F32", fmt_of=lambda n: (
            None if n == "blk.1.ffn_up.weight" else "F32")))
    with pytest.raises(ModelError, match=r"tensor 'blk.0.ffn_down.weight' is IQ4_NL, which "
                                         r"rlx cannot dequantize"):
        llama.from_gguf(write_gguf(model, tmp_path / "iq.gguf", "F16", fmt_of=lambda n: (
            "IQ4_NL" if n == "blk.0.ffn_down.weight" else "F16")))
    with pytest.raises(ModelError, match=r"tensor 'blk.0.ffn_down.weight' is F64: a linear "
                                         r"weight must be F32, F16, BF16 or a block format"):
        llama.from_gguf(write_gguf(model, tmp_path / "f64.gguf", "F16", fmt_of=lambda n: (
            "F64" if n == "blk.0.ffn_down.weight" else "F16")))
    with pytest.raises(ModelError, match=r"tensor 'rope_freqs.weight': expected shape \[8\], "
                                         r"found \[3\]"):
        llama.from_gguf(write_gguf(model, tmp_path / "freqs.gguf", "F32",
                                   extra={"rope_freqs.weight": np.ones(3, np.float32)}))
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes((tmp_path / "gpt2.gguf").read_bytes()[:-100])
    with pytest.raises(ModelError, match="runs past the end of the file"):
        llama.from_gguf(truncated)
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(truncated),
                           "--prompt-ids", "1,2"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "runs past the end of the file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_gguf_shape_mismatch_names_the_tensor(hf: dict, tmp_path: Path) -> None:
    cfg = hf["model"].config
    # The tiny model's file, but the metadata claims a wider FFN than the tensors have.
    model = hf["model"]
    cfg.intermediate_size, saved = 256, cfg.intermediate_size
    try:
        wrong = write_gguf(model, tmp_path / "wrong.gguf", "F32")
    finally:
        cfg.intermediate_size = saved
    with pytest.raises(ModelError, match=r"tensor 'blk.0.ffn_gate.weight': expected shape "
                                         r"\[256, 64\], found \[128, 64\]"):
        llama.from_gguf(wrong)


def test_gguf_llama3_rope_freqs_match_transformers(tmp_path: Path) -> None:
    """LLaMA 3 rope scaling travels as ``rope_freqs.weight`` (frequency divisors), as
    convert_hf_to_gguf writes it; rlx divides the frequencies like llama.cpp."""
    import transformers

    scaling = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        **COMMON, num_hidden_layers=2, rope_scaling=scaling)).eval()
    built = llama.from_gguf(write_gguf(model, tmp_path / "llama3.gguf", "F32"), logits="all")
    assert built.config.rope_scaling["rope_type"] == "freq_factors"
    want, _ = hf_reference(model, PROMPT, 1)
    assert_close(prefill_all(Generator(built), PROMPT), want, "f32", "llama3 rope prefill logits")


BASE_META = {"general.architecture": "llama", "llama.embedding_length": 64,
             "llama.block_count": 1, "llama.feed_forward_length": 128,
             "llama.attention.head_count": 4}


@pytest.mark.parametrize(("meta", "message"), [
    ({"llama.block_count": None}, r"missing metadata 'llama.block_count'"),
    ({"llama.attention.head_count_kv": 3}, r"'llama.attention.head_count' 4 is not a multiple "
                                           r"of 'attention.head_count_kv' 3"),
    ({"llama.rope.dimension_count": 8}, r"'llama.rope.dimension_count' 8: partial rotary"),
    ({"llama.rope.scaling.type": "yarn"}, r"'llama.rope.scaling.type' 'yarn' is not supported"),
    ({"llama.rope.freq_base": "fast"}, r"'llama.rope.freq_base': expected a positive number, "
                                       r"found 'fast'"),
    ({"llama.feed_forward_length": -1}, r"'llama.feed_forward_length': expected a positive "
                                        r"integer, found -1"),
])
def test_gguf_metadata_errors(meta: dict, message: str) -> None:
    metadata = {k: v for k, v in {**BASE_META, **meta}.items() if v is not None}
    with pytest.raises(ModelError, match=r"^m.gguf: error: (metadata )?" + message):
        config_from_metadata(metadata, {"token_embd.weight": SimpleNamespace(shape=(16, 64))},
                             "m.gguf")


def test_build_rejects_unknown_functions() -> None:
    c = llama.LlamaConfig(vocab_size=8, hidden_size=8, num_layers=1, num_heads=2,
                          num_kv_heads=2, head_dim=4, intermediate_size=8)
    with pytest.raises(ModelError, match=r"functions: expected some of prefill, decode, "
                                         r"sample, found \['train'\]"):
        llama.build(c, functions=("train",))
    assert llama.build(c, functions=("decode",)).function_names == ["decode"]
    with pytest.raises(ModelError, match=r"context: expected at least 2 positions, found 1"):
        llama.build(c, context=1)
