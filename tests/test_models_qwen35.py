"""rlx.models.qwen35 against HF transformers' ``Qwen3_5ForCausalLM`` (a tiny random model,
fixed seed: two linear-attention and two full-attention layers, 2 key heads over 4 value
heads in the DeltaNet layers, GQA 4 over 2 in the attention layers, partial RoPE over 8 of
32 lanes, linear head dim 16 vs attention head dim 32; norms and dt_bias perturbed so that
the zero-centred ``1 + w`` fold is exercised): prefill logits within the f32 tolerance and
32 greedy tokens identical on llvm-cpu and Vulkan; prefill in two chunks equals one call;
the same checkpoint as llama.cpp's converter writes it (F32, F16, Q8_0); speculative
decoding with the (random) MTP head, a replayed always-right draft and a replay with
mistakes gives plain greedy's tokens for K = 1 and 3, prompts of several lengths, an end token
inside an accepted run, and on a Q8_0 file in the q8 mode (the Python API and rlx-generate);
broken checkpoints are one clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from hf_gguf_qwen35 import stored_values, write_gguf
from rlx import speculative as spec
from rlx.generate import Generator, Sampling
from rlx.ir.diagnostics import RunError
from rlx.models import qwen35
from rlx.models.llama import ModelError
from rlx.models.llama_cache import start_state
from rlx.reference.tolerance import assert_close
from sampling_chain import host_chain

PROMPT = [1, 5, 9, 77, 3, 42]
CONFIG = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 4, "layer_types": ["linear_attention", "full_attention",
                                                  "linear_attention", "full_attention"],
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
          "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
          "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6,
          "max_position_embeddings": 256, "initializer_range": 0.5,
          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                              "partial_rotary_factor": 0.25}}
Q8_0_TOLERANCE = 0.2
"""Q8_0 logits vs the unquantized model: rms(error) <= 0.2 rms(logits). Q8_0 rounds each
weight to 1/254 of its 32-block's largest (about 0.5% rms a weight); this random model
(init std 0.5, 4 layers, two of them recurrent) amplifies it: transformers alone, original
vs Q8_0-dequantized weights, measures 0.056 for seed 0 (0.041-0.063 over seeds 0-3).
Unrelated logits (a wrong block layout, a head order mixed up) give about 1.4 (sqrt 2). The
exact check is against transformers on the dequantized weights (f32 tolerance, identical
tokens)."""


def hf_model(seed: int = 0, **extra: object) -> transformers.PreTrainedModel:
    cfg = transformers.Qwen3_5TextConfig(**{**CONFIG, **extra})
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.Qwen3_5ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "dt_bias" in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def with_mtp(model: transformers.PreTrainedModel, seed: int = 7) -> dict[str, torch.Tensor]:
    """The model's tensors plus a random MTP head (``mtp.*``, as published checkpoints
    carry it and HF's model class drops it)."""
    g = torch.Generator().manual_seed(seed)
    e = model.config.hidden_size
    out = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out |= {"mtp.fc.weight": torch.randn(e, 2 * e, generator=g) * 0.3}
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        out[f"mtp.{n}.weight"] = torch.randn(e, generator=g) * 0.3
    full = model.config.layer_types.index("full_attention")
    for k, v in model.state_dict().items():
        prefix = f"model.layers.{full}."
        if k.startswith(prefix):
            out["mtp.layers.0." + k[len(prefix):]] = torch.randn(v.shape, generator=g) * 0.3
    return out


def save(model: transformers.PreTrainedModel, path: Path, mtp: bool = True) -> Path:
    model.save_pretrained(path)
    if mtp:
        save_file(with_mtp(model), str(path / "model.safetensors"))
        cfg = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**cfg, "mtp_num_hidden_layers": 1}))
    return path


def hf_reference(model: torch.nn.Module, ids: list[int], n: int) -> tuple[np.ndarray, list[int]]:
    """HF logits of ``ids`` and ``n`` greedy tokens by a plain argmax loop on HF's cache."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        logits = out.logits.numpy()
        tokens: list[int] = []
        while len(tokens) < n:
            tokens.append(int(out.logits[0, -1].argmax()))
            out = model(torch.tensor([tokens[-1:]]), cache=out.cache, use_cache=True)
    return logits, tokens


def prefill_all(gen: Generator, ids: list[int]) -> np.ndarray:
    cos, sin = gen.model.rope_tables(range(len(ids)))
    return gen.program.prefill(np.array([ids], np.int32), cos, sin,
                               *gen.model.initial_state())[0]


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    path = tmp_path_factory.mktemp("qwen35")
    model = hf_model()
    save(model, path)
    logits, tokens = hf_reference(model, PROMPT, 32)
    return {"path": path, "model": model, "logits": logits, "tokens": tokens}


@pytest.fixture(scope="module")
def gen(hf: dict) -> Generator:
    return Generator(qwen35.from_hf(hf["path"], logits="all"))


def test_matches_transformers_on_llvm_cpu(hf: dict, gen: Generator) -> None:
    c = gen.model.config
    assert (c.mtp, c.n_rot, c.v_head_order) == (True, 8, "grouped")
    assert "layers.0.lin_in" in c.packed
    assert "layers.1.attn_in" in c.packed
    assert_close(prefill_all(gen, PROMPT), hf["logits"], "f32", "prefill logits")
    assert gen.generate(PROMPT, 32) == hf["tokens"]


def test_prefill_in_two_chunks_equals_one_call(gen: Generator) -> None:
    """The state (KV caches, conv frames, delta states) carried from a first chunk makes
    the second chunk's logits and final state those of one call over both."""
    prefill, model = gen.program.prefill, gen.model
    ids = np.array([PROMPT], np.int32)

    def call(lo: int, hi: int, state: list) -> tuple:
        cos, sin = model.rope_tables(range(lo, hi))
        return prefill(ids[:, lo:hi], cos, sin, *state)

    whole = call(0, 6, model.initial_state())
    first = call(0, 4, start_state(gen.program, model))   # the state made on the device
    second = call(4, 6, list(first[2:]))
    assert_close(second[0], whole[0][:, 4:], "f32", "second chunk's logits")
    for name, a, b in zip(qwen35.state_names(model.config, model.context), second[2:],
                          whole[2:], strict=True):
        assert a.shape == b.shape, name
        assert_close(a, b, "f32", f"state {name}")


def test_state_function_is_the_initial_state(gen: Generator,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's ``state()`` returns the host's ``initial_state()`` (shapes, dtypes, all
    zero), and generation starts from it, never uploading the host's zeros."""
    model = gen.model
    assert model.context is not None
    host = model.initial_state()
    made = start_state(gen.program, model)
    assert len(made) == len(host) == len(qwen35.state_names(model.config, model.context))
    for name, a, b in zip(qwen35.state_names(model.config, model.context), made, host,
                          strict=True):
        got = a.numpy()
        assert (got.shape, got.dtype) == (b.shape, b.dtype), name
        assert not got.any(), name
    with pytest.raises(ModelError, match="'state' makes a preallocated cache on the device"):
        qwen35.build(model.config, functions=("state",), context=None)
    want = gen.generate(PROMPT, 4)

    def no_upload() -> list:
        raise AssertionError("the host's initial_state was used")

    monkeypatch.setattr(model, "initial_state", no_upload)
    assert gen.generate(PROMPT, 4) == want


@pytest.mark.parametrize("sampling", [
    Sampling(temperature=0.9, seed=5),
    Sampling(temperature=0.7, top_k=40, top_p=0.9, min_p=0.02, repetition_penalty=1.3, seed=11),
], ids=["plain", "all_filters"])
def test_sampled_tokens_follow_the_reference_chain(gen: Generator, hf: dict,
                                                   sampling: Sampling) -> None:
    """The module's ``sample`` function on Qwen3.5's logits: the tokens of the numpy
    reference's chain; top-k 1 is HF's greedy whatever the temperature."""
    got = gen.generate(PROMPT, 12, sampling=sampling)
    assert got == host_chain(gen, PROMPT, 12, sampling)
    assert gen.generate(PROMPT, 12, sampling=sampling) == got  # same seed, same tokens
    assert got != hf["tokens"][:12]
    one = Sampling(temperature=1.5, top_k=1, seed=sampling.seed)
    assert gen.generate(PROMPT, 12, sampling=one) == hf["tokens"][:12]


@pytest.mark.vulkan
def test_matches_transformers_on_vulkan(hf: dict) -> None:
    gen = Generator(qwen35.from_hf(hf["path"], logits="all"), "vulkan")
    assert_close(prefill_all(gen, PROMPT), hf["logits"], "f32", "vulkan prefill logits")
    assert gen.generate(PROMPT, 32) == hf["tokens"]


@pytest.fixture(scope="module")
def spec_program(hf: dict) -> tuple[qwen35.Qwen35Model, object]:
    """One module serving K = 1 and 3 (verify_1, verify_3): a single draft, and a round
    with drafts either side of its middle (2 and 4 are the same code at other sizes; each
    K adds a verify function's executables to this, CI's largest compile)."""
    model = qwen35.from_hf(hf["path"])
    return model, spec.load(model, [1, 3])


class Mistaken(spec.ReplayDrafter):
    """Replays the right tokens but gets every 3rd one (of the whole run) wrong, so rounds
    accept 0 .. K - 1 drafts and roll back from every verify position."""

    def propose(self, k: int, position: int) -> list[int]:
        out = super().propose(k, position)
        return [(t + 1) % 128 if (self.done + i) % 3 == 2 else t for i, t in enumerate(out)]


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_decoding_is_plain_greedy(k: int, hf: dict, spec_program: tuple) -> None:
    model, program = spec_program
    for prompt in (PROMPT[:1], PROMPT, [7, 3, 100, 2, 9, 9, 64, 1, 0, 31, 5]):
        _, longer = hf_reference(hf["model"], prompt, 24)
        want = longer[:20]
        mtp = spec.decoder(model, program, k)
        assert mtp.generate(prompt, 20) == want, f"mtp, K={k}, prompt {prompt}"
        assert mtp.stats.drafted > 0
        right = spec.decoder(model, program, k, "replay", longer)
        assert right.generate(prompt, 20) == want
        assert right.stats.acceptance == 1.0
        wrong = spec.SpeculativeDecoder(program, model, k, Mistaken(longer))
        assert wrong.generate(prompt, 20) == want, f"mistaken drafts, K={k}"
        assert 0 < wrong.stats.accepted < wrong.stats.drafted or k == 1
    _, want = hf_reference(hf["model"], PROMPT, 20)
    eos = want[7]
    stop = want.index(eos) + 1
    right = spec.decoder(model, program, k, "replay", want)
    assert right.generate(PROMPT, 20, eos_token_id=eos) == want[:stop]


def test_growing_cache_form(hf: dict, gen: Generator) -> None:
    """``context=None``, the KV cache grown by concatenation each call (the form before the
    preallocated cache, still built), in one compile, its speculative module: the prefill's
    last logits against HF's and the preallocated form's, and speculative decoding with a
    draft that makes mistakes, rolled back through its ``rollback`` call, giving HF's
    greedy tokens."""
    model = qwen35.from_hf(hf["path"], context=None)
    assert model.context is None
    assert gen.model.context == qwen35.DEFAULT_CONTEXT
    program = spec.load(model, 2)
    assert "rollback" in program.functions
    cos, sin = model.rope_tables(range(len(PROMPT)))
    logits = program.prefill(np.array([PROMPT], np.int32), cos, sin,
                             np.array([[len(PROMPT) - 1]], np.int32),
                             *model.initial_state())[0]
    assert_close(logits[0, -1], hf["logits"][0, -1], "f32", "prefill logits, growing cache")
    assert_close(logits[0, -1], prefill_all(gen, PROMPT)[0, -1], "f32", "the two cache forms")
    _, longer = hf_reference(hf["model"], PROMPT, 24)
    assert longer[:20] == hf["tokens"][:20]
    wrong = spec.SpeculativeDecoder(program, model, 2, Mistaken(longer))
    assert wrong.generate(PROMPT, 20) == longer[:20]
    assert 0 < wrong.stats.accepted < wrong.stats.drafted


def test_speculative_refuses_past_the_context(spec_program: tuple) -> None:
    """The preallocated cache (the default, 4096 positions) holds the prompt, the new
    tokens and the last verify call's drafts, or the generation is refused up front (the
    write would clamp onto the last row)."""
    model, program = spec_program
    with pytest.raises(RunError, match=f"need {6 + 4096 + 3} positions.*context 4096"):
        spec.decoder(model, program, 3).generate(PROMPT, 4096)


# --------------------------------------------------------------------------------------
# GGUF
# --------------------------------------------------------------------------------------


def as_stored(model: transformers.PreTrainedModel, fmt: str) -> transformers.PreTrainedModel:
    with torch.no_grad():
        for name, t in model.named_parameters():
            t.copy_(torch.from_numpy(stored_values(name, t.numpy(), fmt, model.config)))
    return model


@pytest.mark.parametrize("fmt", ["F32", "F16", "Q8_0"])
def test_gguf_matches_transformers(fmt: str, hf: dict, tmp_path: Path) -> None:
    tensors = {k: v.float().numpy() for k, v in
               load_file(str(hf["path"] / "model.safetensors")).items()}
    file = write_gguf(hf["model"], tmp_path / f"tiny-{fmt}.gguf", fmt, tensors=tensors)
    model = qwen35.from_gguf(file, logits="all")
    c = model.config
    assert (c.v_head_order, c.mtp) == ("tiled", True)
    assert set(c.weight_schemes.values()) == (set() if fmt == "F32" else
                                             {f"gguf_{fmt.lower()}"})
    # the default load (planes encoded ahead of time, rlx.encoding), which conftest turns off
    gen = Generator(model, options={"encode_parameters": True})
    assert gen.encoded or fmt == "F32"   # F32: planes only where IREE hoists a pack
    got = prefill_all(gen, PROMPT)
    stored = as_stored(hf_model(), fmt)
    want, want_tokens = hf_reference(stored, PROMPT, 32)
    assert_close(got, want, "f32", f"{fmt} prefill logits vs HF on the stored weights")
    tokens = gen.generate(PROMPT, 32)
    assert tokens == want_tokens
    if fmt == "Q8_0":
        ref = hf["logits"]
        rel = np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref ** 2))
        assert rel <= Q8_0_TOLERANCE, f"Q8_0 logits vs the original model: rms error {rel:.3f}"
    else:
        assert tokens == hf["tokens"]


def test_mtp_drafts_with_the_files_lm_head(hf: dict, tmp_path: Path) -> None:
    """A GGUF whose LM head is quantized (Q8_0): the MTP head's draft is the argmax of the
    trunk's head in the file's format on the head's normed state (``out``): the gguf
    package's dequantized ``output.weight`` times ``out``, in float64; no widened f32 copy
    of the head is held (``mtp.lm_head``), nor of the embedding (its state equals the one
    the gguf package's f32 table gives)."""
    import gguf

    import rlx

    tensors = {k: v.float().numpy() for k, v in
               load_file(str(hf["path"] / "model.safetensors")).items()}
    file = write_gguf(hf["model"], tmp_path / "tiny-Q8_0.gguf", "Q8_0", tensors=tensors)
    model = qwen35.from_gguf(file)
    c = model.config
    assert c.weight_schemes["lm_head"] == "gguf_q8_0"
    assert not [n for n in model.weights if n.startswith("mtp.lm")]
    built = qwen35.build(c, functions=("mtp",), context=model.context)
    program = rlx.runtime.load(rlx.compile(built, "llvm-cpu"), "local-task", model.weights)
    reader = gguf.GGUFReader(file)

    def dequantized(name: str) -> np.ndarray:
        t = next(t for t in reader.tensors if t.name == name)
        return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float64)

    w = dequantized("output.weight").reshape(c.vocab_size, c.hidden_size)
    # the embedding stays the file's Q8_0 rows; the same model with the gguf package's
    # dequantized f32 table instead must give the same MTP state
    assert c.weight_schemes["embed"] == "gguf_q8_0"
    schemes = {k: v for k, v in c.weight_schemes.items() if k != "embed"}
    table = dequantized("token_embd.weight").reshape(c.vocab_size, -1).astype(np.float32)
    f32 = qwen35.build(replace(c, weight_schemes=schemes), functions=("mtp",),
                       context=model.context)
    f32_program = rlx.runtime.load(rlx.compile(f32, "llvm-cpu"), "local-task",
                                   {**model.weights, "embed": table})
    rng = np.random.default_rng(3)
    kv = np.zeros((1, 0, c.kv_dim), np.float32)
    for s in (1, 3):
        hidden = rng.standard_normal((1, s, c.hidden_size)).astype(np.float32)
        cos, sin = model.rope_tables(range(s))
        args = (hidden, np.arange(s, dtype=np.int32)[None], np.asarray([PROMPT[:s]], np.int32),
                cos, sin, np.array([s - 1], np.int32), kv, kv)
        nxt, out, k, v = program.mtp(*args)
        for got, want in zip((out, k, v), f32_program.mtp(*args)[1:], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        logits = w @ out.reshape(-1).astype(np.float64)
        top = np.sort(logits)[-2:]
        assert top[1] - top[0] > 1e-3 * np.abs(logits).max(), "a near tie: pick another seed"
        assert int(nxt.reshape(-1)[0]) == int(np.argmax(logits))


def test_speculative_in_the_q8_mode(hf: dict, tmp_path: Path) -> None:
    """Speculative decoding of a Q8_0 GGUF under ``activation_quant="q8"``: the tokens are
    the verify calls' greedy whatever the drafts (the MTP head's, always-right ones, ones
    with mistakes rolled back). ``rlx.generate(path, speculative="mtp", ...)`` and
    ``rlx-generate --speculative mtp --activation-quant q8`` run that same q8 module: they
    find it in the cache the first load filled (the exact mode's would be another key,
    compiled anew) and give its tokens. (Speculative = HF's greedy in the exact mode:
    test_speculative_decoding_is_plain_greedy.)"""
    import rlx
    from rlx.cache import CompileCache

    tensors = {k: v.float().numpy() for k, v in
               load_file(str(hf["path"] / "model.safetensors")).items()}
    file = write_gguf(hf["model"], tmp_path / "tiny-Q8_0.gguf", "Q8_0", tensors=tensors)
    model = qwen35.from_gguf(file)
    cache = tmp_path / "cache"
    program = spec.load(model, 2, cache=CompileCache(cache), activation_quant="q8")
    entries = sorted(p.name for p in cache.rglob("*") if p.is_file())
    mtp = spec.decoder(model, program, 2)
    want = mtp.generate(PROMPT, 12)
    assert mtp.stats.drafted > 0
    right = spec.decoder(model, program, 2, "replay", want)
    assert right.generate(PROMPT, 12) == want
    assert right.stats.acceptance == 1.0
    wrong = spec.SpeculativeDecoder(program, model, 2, Mistaken(want))
    assert wrong.generate(PROMPT, 12) == want
    assert 0 < wrong.stats.accepted < wrong.stats.drafted
    assert rlx.generate(file, PROMPT, 12, speculative="mtp", draft_tokens=2,
                        cache=CompileCache(cache), activation_quant="q8") == want
    with pytest.raises(Exception, match="speculative: expected 'mtp'"):
        rlx.generate(file, PROMPT, 2, speculative="eagle")
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(file),
                           "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", "12",
                           "--speculative", "mtp", "--draft-tokens", "2",
                           "--activation-quant", "q8", "--cache-dir", str(cache)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == ",".join(map(str, want))
    assert "acceptance" in proc.stderr
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == entries


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


def test_broken_hf_checkpoints(hf: dict, tmp_path: Path) -> None:
    cfg = json.loads((hf["path"] / "config.json").read_text())
    tensors = load_file(str(hf["path"] / "model.safetensors"))

    def checkpoint(name: str, config: dict, weights: dict) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        save_file(weights, str(d / "model.safetensors"))
        return d

    moe = checkpoint("moe", {**cfg, "model_type": "qwen3_5_moe"}, tensors)
    with pytest.raises(ModelError, match=r"config.json: error: model_type 'qwen3_5_moe' is "
                                         "the MoE variant"):
        qwen35.from_hf(moe)
    layer = checkpoint("layer", {**cfg, "layer_types": [*cfg["layer_types"][:3], "mamba"]},
                       tensors)
    with pytest.raises(ModelError, match=r"'layer_types\[3\]': unknown layer type 'mamba'"):
        qwen35.from_hf(layer)
    gone = "model.layers.2.linear_attn.in_proj_a.weight"
    missing = checkpoint("missing", cfg, {k: v for k, v in tensors.items() if k != gone})
    with pytest.raises(ModelError, match=rf"model.safetensors: error: missing tensor '{gone}' "
                                         r"\(rlx weight 'layers.2.a'\)"):
        qwen35.from_hf(missing)
    bad = dict(tensors)
    bad["model.layers.0.linear_attn.conv1d.weight"] = torch.zeros(128, 1, 3)
    wrong = checkpoint("wrong", cfg, bad)
    with pytest.raises(ModelError, match=r"tensor 'model.layers.0.linear_attn.conv1d.weight': "
                                         r"expected shape \[128, 1, 4\], found \[128, 1, 3\]"):
        qwen35.from_hf(wrong)
    plain = checkpoint("plain", cfg, {k: v for k, v in tensors.items()
                                      if not k.startswith("mtp.")})
    model = qwen35.from_hf(plain)
    assert not model.config.mtp
    with pytest.raises(ModelError, match=r"plain.*error: speculative decoding with the MTP "
                                         r"head needs the checkpoint's MTP weights"):
        spec.generate(model, PROMPT, 4)
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.generate", str(plain),
                           "--prompt-ids", "1,2", "--speculative", "mtp"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "needs the checkpoint's MTP weights" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_broken_gguf(hf: dict, tmp_path: Path) -> None:
    model = hf["model"]
    with pytest.raises(ModelError, match=r"missing tensor 'blk.2.ssm_alpha.weight' \(rlx "
                                         r"weight 'layers.2.a'\)"):
        qwen35.from_gguf(write_gguf(model, tmp_path / "m.gguf", "F32", fmt_of=lambda n: (
            None if n == "blk.2.ssm_alpha.weight" else "F32")))
    tensors = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    tensors["model.layers.0.linear_attn.conv1d.weight"] = np.zeros((128, 1, 3), np.float32)
    with pytest.raises(ModelError, match=r"tensor 'blk.0.ssm_conv1d.weight': expected shape "
                                         r"\[128, 4\], found \[128, 3\] \(F32\)"):
        qwen35.from_gguf(write_gguf(model, tmp_path / "c.gguf", "F32", tensors=tensors))
    from rlx.models.qwen35_gguf import config_from_metadata

    with pytest.raises(ModelError, match=r"'qwen35moe' \(general.architecture\) is the MoE"):
        config_from_metadata({"general.architecture": "qwen35moe"}, {}, "x.gguf")
    with pytest.raises(ModelError, match=r"missing metadata 'qwen35.ssm.group_count'"):
        qwen35.from_gguf(write_gguf(model, tmp_path / "g.gguf", "F32", meta=lambda w: (
            w.kv_data[0].pop("qwen35.ssm.group_count"))))


def test_composite_checkpoint_and_layer_pattern(hf: dict, tmp_path: Path) -> None:
    """``qwen3_5`` with a ``text_config`` (``model.language_model.*`` tensors, a vision
    tower, the MTP head at the top level, as published checkpoints are) reads as the
    ``Qwen3_5ForCausalLM`` checkpoint does, the vision tower ignored; without
    ``layer_types`` the pattern comes from ``full_attention_interval``; a vision config
    alone is refused."""
    text = json.loads((hf["path"] / "config.json").read_text())
    tensors = load_file(str(hf["path"] / "model.safetensors"))
    composite = {k.replace("model.", "model.language_model.", 1): v
                 for k, v in tensors.items()}
    composite["model.visual.patch_embed.proj.weight"] = torch.zeros(4, 3)
    d = tmp_path / "composite"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "model_type": "qwen3_5", "tie_word_embeddings": False,
        "vision_config": {"model_type": "qwen3_5_vision", "depth": 1},
        "text_config": {k: v for k, v in text.items() if k != "layer_types"}
        | {"full_attention_interval": 2}}))
    save_file(composite, str(d / "model.safetensors"))
    got = qwen35.from_hf(d)
    want = qwen35.from_hf(hf["path"])
    assert got.config == want.config
    assert got.config.layer_types == ("linear_attention", "full_attention") * 2
    assert got.weights.keys() == want.weights.keys()
    for name, w in want.weights.items():
        np.testing.assert_array_equal(got.weights[name], w, err_msg=name)
    with pytest.raises(ModelError, match=r"model_type 'qwen3_5_vision' is a vision tower"):
        qwen35.Qwen35Config.from_hf({"model_type": "qwen3_5_vision"}, "v/config.json")
