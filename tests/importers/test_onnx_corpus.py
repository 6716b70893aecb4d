"""Real exports, continued (issue 22, point 1): the tiny HF ViT of test_onnx_exports, a
Whisper-style encoder (the conv1d front end and transformer encoder of transformers'
WhisperModel, tiny config, random weights), a GPT-2 decoding step with past-key-values
inputs (transformers' GPT2LMHeadModel over a DynamicCache) and the same for LLaMA (GQA,
position ids), exported by both torch.onnx exporters with a dynamic batch (and, for the
decoding steps, dynamic new and past lengths). All imported into one module, compiled
once for llvm-cpu and run at several sizes against ONNX Runtime on the same files."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_onnx_exports import _vit

from onnx_models import compile_together, ort_run
from rlx.importers.onnx import OnnxImport
from rlx.reference.tolerance import assert_close

HEADS, HEAD_DIM, LAYERS = 2, 16, 2  # GPT-2's step takes the past of 2 layers
MELS, FRAMES = 8, 32


def _export(module: object, args: tuple, path: Path, names: list[str],
            outputs: list[str], axes: dict[str, dict[int, str]], dynamo: bool) -> Path:
    import torch

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, args, str(path), input_names=names, output_names=outputs,
                          dynamo=dynamo, opset_version=18, dynamic_axes=axes)
    return path


def _whisper(path: Path, dynamo: bool) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=100, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        decoder_start_token_id=1, d_model=HEADS * HEAD_DIM, encoder_layers=LAYERS,
        encoder_attention_heads=HEADS, encoder_ffn_dim=64, decoder_layers=1,
        decoder_attention_heads=HEADS, decoder_ffn_dim=64, num_mel_bins=MELS,
        max_source_positions=FRAMES // 2, max_target_positions=16)
    encoder = transformers.WhisperModel(config).get_encoder().eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = encoder

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return self.m(input_features=features).last_hidden_state

    return _export(Encoder().eval(), (torch.randn(2, MELS, FRAMES),), path,
                   ["input_features"], ["hidden"], {"input_features": {0: "b"}}, dynamo)


PAST = [f"past_{kind}{i}" for i in range(LAYERS) for kind in "kv"]


def _cached_step(lm: object, config: object, ids: object, mask: object, past: tuple,
                 **extra: object) -> tuple:
    """One step of a transformers causal LM over a DynamicCache holding ``past`` (k, v of
    each layer): its logits, then the grown keys and values, layer by layer."""
    import transformers

    cache = transformers.DynamicCache(ddp_cache_data=list(zip(past[::2], past[1::2],
                                                              strict=True)), config=config)
    out = lm(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True,
             **extra)
    grown = out.past_key_values.layers
    return out.logits, *(t for layer in grown for t in (layer.keys, layer.values))


def _gpt2(path: Path, dynamo: bool) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=HEADS * HEAD_DIM,
                                     n_layer=LAYERS, n_head=HEADS, bos_token_id=1,
                                     eos_token_id=2)
    gpt = transformers.GPT2LMHeadModel(config).eval()

    class Step(torch.nn.Module):
        """Logits and the grown cache from new ids, the mask over past + new, the past."""

        def __init__(self) -> None:
            super().__init__()
            self.m = gpt

        def forward(self, ids: torch.Tensor, mask: torch.Tensor, k0: torch.Tensor,
                    v0: torch.Tensor, k1: torch.Tensor, v1: torch.Tensor
                    ) -> tuple[torch.Tensor, ...]:
            return _cached_step(self.m, config, ids, mask, (k0, v0, k1, v1))

    b, s, p = 2, 3, 5
    args = (torch.randint(0, 100, (b, s)), torch.ones(b, p + s, dtype=torch.int64),
            *(torch.randn(b, HEADS, p, HEAD_DIM) for _ in PAST))
    axes = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"},
            **{n: {0: "b", 2: "p"} for n in PAST}}
    outputs = ["logits", *(n.replace("past", "present") for n in PAST)]
    return _export(Step().eval(), args, path, ["input_ids", "attention_mask", *PAST], outputs,
                   axes, dynamo)


LLAMA_HEADS, LLAMA_KV = 4, 2  # GQA


def _llama(path: Path, dynamo: bool) -> Path:
    """A LLaMA step over a KV cache (transformers' LlamaForCausalLM, GQA, RoPE from the
    position ids at run time): logits and the grown cache from new ids, the mask over
    past + new, the positions, the past."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=100, hidden_size=LLAMA_HEADS * HEAD_DIM, intermediate_size=96,
        num_hidden_layers=LAYERS, num_attention_heads=LLAMA_HEADS,
        num_key_value_heads=LLAMA_KV, max_position_embeddings=64, tie_word_embeddings=False)
    llama = transformers.LlamaForCausalLM(config).eval()

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = llama

        def forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                    k0: torch.Tensor, v0: torch.Tensor, k1: torch.Tensor, v1: torch.Tensor
                    ) -> tuple[torch.Tensor, ...]:
            return _cached_step(self.m, config, ids, mask, (k0, v0, k1, v1),
                                position_ids=positions)

    b, s, p = 2, 3, 5
    args = (torch.randint(0, 100, (b, s)), torch.ones(b, p + s, dtype=torch.int64),
            torch.arange(p, p + s)[None].repeat(b, 1),
            *(torch.randn(b, LLAMA_KV, p, HEAD_DIM) for _ in PAST))
    axes = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"},
            "position_ids": {0: "b", 1: "s"}, **{n: {0: "b", 2: "p"} for n in PAST}}
    outputs = ["logits", *(n.replace("past", "present") for n in PAST)]
    return _export(Step().eval(), args, path,
                   ["input_ids", "attention_mask", "position_ids", *PAST], outputs, axes,
                   dynamo)


def _vit_at(path: Path, dynamo: bool) -> Path:
    return _vit(path.parent, dynamo)


CASES = {"vit_dynamo": (_vit_at, True), "whisper_dynamo": (_whisper, True),
         "whisper_torchscript": (_whisper, False), "gpt2_dynamo": (_gpt2, True),
         "gpt2_torchscript": (_gpt2, False), "llama_dynamo": (_llama, True),
         "llama_torchscript": (_llama, False)}

Compiled = tuple[dict[str, Path], dict[str, OnnxImport], object]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    tmp = tmp_path_factory.mktemp("corpus")
    paths = {name: make(tmp / f"{name}.onnx", dynamo) for name, (make, dynamo) in CASES.items()}
    results, program = compile_together(paths, "corpus")
    return paths, results, program


def _step_feeds(rng: np.random.Generator, b: int, s: int, p: int, pad: int = 0,
                kv_heads: int = HEADS, positions: bool = False) -> dict[str, np.ndarray]:
    """New ids, a mask over past + new (the first ``pad`` past positions of row 0 masked
    out), the new positions where the model takes them, and a random past."""
    mask = np.ones((b, p + s), np.int64)
    mask[0, :pad] = 0
    feeds = {"input_ids": rng.integers(0, 100, (b, s)), "attention_mask": mask}
    if positions:
        feeds["position_ids"] = np.repeat(np.arange(p, p + s)[None], b, 0)
    feeds |= {n: rng.standard_normal((b, kv_heads, p, HEAD_DIM)).astype(np.float32)
              for n in PAST}
    return feeds


def _feeds(name: str) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(2)
    if name.startswith("vit"):
        return [{"pixel_values": rng.standard_normal((b, 3, 32, 32)).astype(np.float32)}
                for b in (1, 3)]
    if name.startswith("whisper"):
        return [{"input_features": rng.standard_normal((b, MELS, FRAMES)).astype(np.float32)}
                for b in (1, 3)]
    kw = {"kv_heads": LLAMA_KV, "positions": True} if name.startswith("llama") else {}
    return [_step_feeds(rng, 2, 3, 5, **kw), _step_feeds(rng, 1, 1, 9, **kw),
            _step_feeds(rng, 3, 4, 2, 1, **kw)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_onnxruntime_at_several_sizes(name: str, compiled: Compiled) -> None:
    paths, _, program = compiled
    model = onnx.load(str(paths[name]))
    for feeds in _feeds(name):
        got = program[name](**feeds)  # type: ignore[index]
        got = list(got) if isinstance(got, tuple) else [got]
        want = ort_run(model, feeds)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            assert_close(g, w, "f32")


@pytest.mark.parametrize(("name", "attention", "linear"), [
    ("vit_dynamo", 2, 12), ("whisper_dynamo", 2, 12), ("whisper_torchscript", 2, 12),
    ("gpt2_dynamo", 2, 9), ("gpt2_torchscript", 2, 9), ("llama_dynamo", 2, 9),
    ("llama_torchscript", 2, 9)])
def test_blocks(name: str, attention: int, linear: int, compiled: Compiled) -> None:
    """Each encoder / decoder layer's attention is one ``attention`` block (the GPT-2
    step's over the concatenated past, its padding-and-causal mask a bias); q / k / v /
    out and the MLP projections (and GPT-2's head) are ``linear`` blocks. The LLaMA
    step's MLP is a ``swiglu`` block a layer, its norms ``rms_norm`` blocks; the
    TorchScript exporter's q (RoPE of a reshape over ``Shape(h)``, with run-time tables)
    has its head count only by carrying sizes through the rotation."""
    _, results, _ = compiled
    counts = results[name].report.block_counts()
    assert counts["attention"] == attention
    assert counts["linear"] == linear
    assert "Softmax" not in results[name].report.converted
    if name.startswith("llama"):
        assert counts["swiglu"] == LAYERS
        assert counts["rms_norm"] == 2 * LAYERS + 1
