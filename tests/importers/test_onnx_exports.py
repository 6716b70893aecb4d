"""Real exports: tiny HF BERT (attention mask) and ViT with random weights, and a
LSTM / GRU sequence model, exported by torch.onnx (dynamo and TorchScript) with a dynamic
batch and sequence, imported, compiled once for llvm-cpu and run at several sizes against
ONNX Runtime on the same file."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest

import rlx
from onnx_models import ort_run
from rlx.importers.onnx import import_model
from rlx.reference.tolerance import assert_close

RNG = np.random.default_rng(5)


def _export(module: object, args: tuple, path: Path, names: list[str],
            dynamic: dict[str, dict[int, str]], dynamo: bool) -> Path:
    import torch

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, args, str(path), input_names=names, dynamo=dynamo,
                          opset_version=18, dynamic_axes=dynamic)
    return path


def _bert(tmp: Path, dynamo: bool) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=64)
    bert = transformers.BertModel(config).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = bert

        def forward(self, ids: object, mask: object) -> object:
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 100, (2, 7))
    axes = {0: "b", 1: "s"}
    return _export(Hidden().eval(), (ids, torch.ones_like(ids)), tmp / "bert.onnx",
                   ["input_ids", "attention_mask"],
                   {"input_ids": axes, "attention_mask": axes}, dynamo)


def _vit(tmp: Path, dynamo: bool) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64)
    vit = transformers.ViTModel(config, add_pooling_layer=False).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = vit

        def forward(self, px: object) -> object:
            return self.m(pixel_values=px).last_hidden_state

    return _export(Hidden().eval(), (torch.randn(2, 3, 32, 32),), tmp / "vit.onnx",
                   ["pixel_values"], {"pixel_values": {0: "b"}}, dynamo)


def _rnn(tmp: Path, dynamo: bool) -> Path:
    import torch

    torch.manual_seed(0)

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(50, 16)
            self.lstm = torch.nn.LSTM(16, 24, num_layers=2, batch_first=True)
            self.gru = torch.nn.GRU(24, 20, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(40, 5)

        def forward(self, ids: object) -> object:
            y, _ = self.lstm(self.emb(ids))
            z, _ = self.gru(y)
            return self.head(z)

    return _export(Tagger().eval(), (torch.randint(0, 50, (2, 9)),), tmp / "rnn.onnx",
                   ["ids"], {"ids": {0: "b", 1: "s"}}, dynamo)


def _ids(b: int, s: int, lengths: list[int] | None = None) -> dict[str, np.ndarray]:
    """Token ids and an attention mask: all ones, or ``lengths[i]`` ones then padding."""
    mask = np.ones((b, s), np.int64)
    for i, n in enumerate(lengths or []):
        mask[i, n:] = 0
    return {"input_ids": RNG.integers(0, 100, (b, s)), "attention_mask": mask}


FEEDS = {
    "full_2x7": _ids(2, 7),
    "full_1x12": _ids(1, 12),
    # the exported mask builder gathers the mask with GatherND (a flat index over [B, S]);
    # it read wrong entries while its sizes came from an iota shared with another dispatch
    "padded_2x7": _ids(2, 7, [7, 5]),
    "padded_3x9": _ids(3, 9, [2, 9, 6]),
}


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The tiny BERT exported once (dynamo, dynamic batch and sequence), and its import."""
    path = _bert(tmp_path_factory.mktemp("bert"), True)
    return path, import_model(path)


@pytest.fixture(scope="module")
def bert_cpu(bert: tuple[Path, object]) -> object:
    _, result = bert
    return rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                            result.params)


@pytest.mark.parametrize("feed", sorted(FEEDS))
def test_bert_matches_onnxruntime(feed: str, bert: tuple[Path, object], bert_cpu: object
                                  ) -> None:
    """One llvm-cpu compile, several batch and sequence sizes, masks with and without
    padding, against ONNX Runtime on the same file."""
    path, _ = bert
    got = bert_cpu.main(**FEEDS[feed])
    want = ort_run(onnx.load(str(path)), FEEDS[feed])[0]
    assert got.shape == want.shape
    assert_close(got, want, "f32")


def test_bert_blocks(bert: tuple[Path, object]) -> None:
    """torch.onnx's decomposed SDPA (Q and Kᵀ each scaled by sqrt(scale), Kᵀ as reshape /
    transpose / reshape over ``Shape(K)``, the padding mask added, NaN rows zeroed) is one
    ``attention`` block a layer, its mask a bias broadcast at run time."""
    _, result = bert
    counts = result.report.block_counts()
    assert counts["linear"] == 12  # q, k, v, o, up, down a layer
    assert counts["attention"] == 2
    text = str(result.module)
    assert text.count('"rlx_hir.attention"') == 2
    assert 'mask = "bias"' in text
    assert "Softmax" not in result.report.converted


@pytest.mark.vulkan
def test_bert_padded_mask_vulkan(bert: tuple[Path, object]) -> None:
    path, result = bert
    program = rlx.runtime.load(rlx.compile(result.module, "vulkan"), "vulkan", result.params)
    for name in ("padded_2x7", "full_1x12"):
        assert_close(program.main(**FEEDS[name]), ort_run(onnx.load(str(path)),
                                                          FEEDS[name])[0], "f32")


def test_lstm_gru_model_imports(tmp_path: Path) -> None:
    """A 2-layer LSTM and a bidirectional GRU (TorchScript exporter: ONNX LSTM / GRU
    nodes) import as rlx_mir.lstm / gru with dynamic batch and sequence."""
    result = import_model(_rnn(tmp_path, False))
    assert result.report.converted["LSTM"] == 2
    assert result.report.converted["GRU"] == 1
    text = str(result.module)
    assert '"rlx_mir.lstm"' in text
    assert '"rlx_mir.gru"' in text
    assert "tensor<?x?xi64>" in text
