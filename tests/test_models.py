"""rlx.models.llama against HF transformers: prefill logits within the f32 tolerance and 32
greedy tokens identical (LLaMA with GQA, Qwen2 with QKV bias, Qwen3 with q/k norm, tied
embeddings), on llvm-cpu and Vulkan; unsupported or broken checkpoints are clear errors."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import rlx
from rlx.generate import Generator
from rlx.ir.diagnostics import RunError
from rlx.models import llama
from rlx.models.llama import ModelError
from rlx.reference.tolerance import assert_close

PROMPT = [1, 5, 9, 77, 3, 42]
COMMON = {"vocab_size": 128, "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 128,
          "initializer_range": 0.5}
MODELS = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
              {"num_hidden_layers": 3}),
    "llama_tied": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
                   {"num_hidden_layers": 2, "tie_word_embeddings": True}),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM,
              {"num_hidden_layers": 2}),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
              {"num_hidden_layers": 2}),
}


def save_hf(kind: str, path: Path, seed: int = 0) -> torch.nn.Module:
    config_cls, model_cls, extra = MODELS[kind]
    torch.manual_seed(seed)
    model = model_cls(config_cls(**COMMON, **extra)).eval()
    model.save_pretrained(path)
    return model


def hf_reference(model: torch.nn.Module, ids: list[int], n: int) -> tuple[np.ndarray, list[int]]:
    """HF logits of ``ids`` and ``n`` greedy tokens, by a plain argmax loop on HF's KV cache
    (``generate`` would bend the oracle: with ``min_new_tokens`` it masks the EOS id)."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        logits = out.logits.numpy()
        tokens: list[int] = []
        while len(tokens) < n:
            tokens.append(int(out.logits[0, -1].argmax()))
            out = model(torch.tensor([tokens[-1:]]), cache=out.cache,
                        use_cache=True)
    return logits, tokens


def prefill_all(gen: Generator, ids: list[int]) -> np.ndarray:
    cos, sin = llama.rope_tables(gen.model.config, range(len(ids)))
    return gen.program.prefill(ids=np.array([ids], np.int32), cos=cos, sin=sin)[0]


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_matches_transformers_on_llvm_cpu(kind: str, tmp_path: Path) -> None:
    hf = save_hf(kind, tmp_path)
    want_logits, want_tokens = hf_reference(hf, PROMPT, 32)
    model = llama.from_hf(tmp_path, logits="all")
    assert model.config.arch == kind.split("_")[0]
    gen = Generator(model)
    assert_close(prefill_all(gen, PROMPT), want_logits, "f32", f"{kind} prefill logits")
    assert gen.generate(PROMPT, 32) == want_tokens


@pytest.mark.vulkan
def test_matches_transformers_on_vulkan(tmp_path: Path) -> None:
    hf = save_hf("llama", tmp_path)
    want_logits, want_tokens = hf_reference(hf, PROMPT, 32)
    gen = Generator(llama.from_hf(tmp_path, logits="all"), "vulkan")
    assert_close(prefill_all(gen, PROMPT), want_logits, "f32", "vulkan prefill logits")
    assert gen.generate(PROMPT, 32) == want_tokens


def test_last_logits_prefill_and_decode_chain(tmp_path: Path) -> None:
    """The default build returns only the last position's logits and a KV cache
    preallocated to its context: decode steps chain on it on the device, the filled count
    beside it, and equal a fresh prefill over the longer prompt. The growing cache
    (``context=None``) gives the same decode logits (the same kernel over the same keys)
    and tokens; new tokens past the context are refused before anything runs."""
    save_hf("llama", tmp_path)
    gen = Generator(llama.from_hf(tmp_path, context=8))
    _logits, cache = gen.prefill(PROMPT)
    step, cache = gen.decode(7, len(PROMPT), cache)
    again, _ = gen.prefill([*PROMPT, 7])
    assert_close(step, again, "f32", "decode after prefill vs prefill of the longer prompt")
    assert cache[0].numpy().tolist() == [len(PROMPT) + 1]
    assert cache[1].shape == (1, 8, 2 * 16)
    grown = Generator(llama.from_hf(tmp_path, context=None))
    _, grown_cache = grown.prefill(PROMPT)
    grown_step, grown_cache = grown.decode(7, len(PROMPT), grown_cache)
    np.testing.assert_array_equal(grown_step, step)
    assert grown_cache[0].shape == (1, len(PROMPT) + 1, 2 * 16)
    assert gen.generate(PROMPT, 3) == grown.generate(PROMPT, 3)  # 6 + 3 - 1 rows: all 8
    with pytest.raises(RunError, match="need 9 positions of the KV cache; the model was "
                                       "built with context 8"):
        gen.generate(PROMPT, 4)


@pytest.mark.parametrize("depth", [1, 3])
def test_pipelined_greedy_matches_stepwise_decode(depth: int, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """generate queues decode step n + 1 before it reads step n's token (the module's
    ``next`` output, the argmax on the device): its tokens equal a step-by-step loop that
    takes the argmax of the logits on the host, and it stops right after the end token
    (the steps already queued past it are dropped)."""
    monkeypatch.setattr(importlib.import_module("rlx.generate"), "PIPELINE_DEPTH", depth)
    hf = save_hf("llama", tmp_path)
    gen = Generator(llama.from_hf(tmp_path))
    logits, cache = gen.prefill(PROMPT)
    want, position = [int(np.argmax(logits))], len(PROMPT)
    while len(want) < 12:
        logits, cache = gen.decode(want[-1], position, cache)
        want.append(int(np.argmax(logits)))
        position += 1
    assert want == hf_reference(hf, PROMPT, 12)[1]
    assert gen.generate(PROMPT, 12) == want
    end = want.index(want[6])
    assert gen.generate(PROMPT, 12, eos_token_id=want[6]) == want[:end + 1]
    cos, sin = llama.rope_tables(gen.model.config, range(len(PROMPT)))
    out = gen.program.prefill(np.array([PROMPT], np.int32), cos, sin,
                              np.array([[len(PROMPT) - 1]], np.int32))
    assert out[1].dtype == np.int32
    np.testing.assert_array_equal(out[1], np.argmax(out[0], axis=-1))


def test_rlx_generate_cli(tmp_path: Path) -> None:
    hf = save_hf("llama", tmp_path)
    _, want = hf_reference(hf, PROMPT, 8)
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(tmp_path),
                           "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", "8"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ",".join(map(str, want))


def test_unsupported_and_broken_checkpoints(tmp_path: Path) -> None:
    save_hf("llama", tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2",
                                                 "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(ModelError, match="unsupported architecture 'GPT2LMHeadModel'"):
        llama.from_hf(bad)
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(tmp_path / "model.safetensors"))
    missing = {k: v for k, v in tensors.items() if "layers.1.mlp.up_proj" not in k}
    save_file(missing, str(tmp_path / "missing.safetensors"))
    with pytest.raises(ModelError, match=r"missing tensor 'model.layers.1.mlp.up_proj.weight'"):
        llama.from_hf(tmp_path / "config.json", tmp_path / "missing.safetensors")
    wrong = dict(tensors)
    wrong["model.norm.weight"] = torch.ones(63)
    save_file(wrong, str(tmp_path / "wrong.safetensors"))
    with pytest.raises(ModelError, match=r"tensor 'model.norm.weight': expected shape \[64\], "
                                         r"found \[63\]"):
        llama.from_hf(tmp_path / "config.json", tmp_path / "wrong.safetensors")
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(bad),
                           "--prompt-ids", "1,2"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "unsupported architecture" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_rope_scaling_llama3_matches_transformers() -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    cfg = transformers.LlamaConfig(**COMMON, num_hidden_layers=1, rope_scaling=scaling)
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    c = llama.LlamaConfig.from_hf(cfg.to_dict())
    cos, _ = llama.rope_tables(c, [5])
    np.testing.assert_allclose(cos[0], np.cos(5 * inv.double().numpy()), rtol=1e-6, atol=1e-6)


def test_models_are_exported() -> None:
    assert rlx.models.llama is llama
    assert rlx.generate is sys.modules["rlx.generate"].generate
