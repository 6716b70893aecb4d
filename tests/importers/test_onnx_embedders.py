"""Sentence embedders as people export them (issue 22, point 1): a tiny HF BERT (random
weights) with sentence-transformers' mean pooling and unit normalization on top, exported
by both torch.onnx exporters at the ends of the opset range (17 and 21), with a dynamic
batch and sequence or with static sizes, with and without ``token_type_ids``. All are
imported into one module, compiled once for llvm-cpu and run against ONNX Runtime on the
same files, with padded attention masks; each one's attention is recognized as blocks."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_models import compile_together, ort_run
from rlx.reference.tolerance import assert_close

VOCAB, HIDDEN, HEADS, LAYERS = 120, 48, 4, 2
STATIC = (2, 7)
EXPORTS = {
    # name: (dynamo, opset, dynamic sizes, token_type_ids input)
    "dynamo17": (True, 17, True, False),
    "torchscript17": (False, 17, True, False),
    "torchscript21_types": (False, 21, True, True),
    "dynamo21_static": (True, 21, False, False),
}


def _embedder() -> object:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     intermediate_size=2 * HIDDEN, max_position_embeddings=128)
    bert = transformers.BertModel(config, add_pooling_layer=False).eval()

    class Embedder(torch.nn.Module):
        """sentence-transformers' Transformer -> Pooling(mean) -> Normalize."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: object, attention_mask: object,
                    token_type_ids: object = None) -> object:
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).expand(h.size()).float()
            pooled = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return Embedder().eval()


def _export(module: object, path: Path, dynamo: bool, opset: int, dynamic: bool,
            types: bool) -> Path:
    import torch

    names = ["input_ids", "attention_mask", *(["token_type_ids"] if types else [])]
    ids = torch.randint(0, VOCAB, STATIC)
    args = (ids, torch.ones_like(ids), *([torch.zeros_like(ids)] if types else []))
    axes = {n: {0: "batch", 1: "sequence"} for n in names} if dynamic else None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, args, str(path), input_names=names,
                          output_names=["sentence_embedding"], dynamo=dynamo,
                          opset_version=opset, dynamic_axes=axes)
    return path


@pytest.fixture(scope="module")
def embedders(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, object]:
    tmp = tmp_path_factory.mktemp("embedders")
    module = _embedder()
    paths = {name: _export(module, tmp / f"{name}.onnx", *spec)
             for name, spec in EXPORTS.items()}
    results, program = compile_together(paths, "embedders")
    return paths, results, program


def _feeds(rng: np.random.Generator, b: int, s: int, lengths: list[int], types: bool
           ) -> dict[str, np.ndarray]:
    mask = np.zeros((b, s), np.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)), "attention_mask": mask}
    if types:
        feeds["token_type_ids"] = (np.arange(s)[None, :] >= s // 2).astype(np.int64).repeat(
            b, 0)
    return feeds


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_embedder_matches_onnxruntime(name: str, embedders: tuple[dict, dict, object]
                                      ) -> None:
    """Padded and full masks at several sizes from one compile (the static export at its
    own size), unit-norm embeddings equal to ONNX Runtime's; past 64 tokens too, where a
    dynamic batch once made the attention wrong (test_attention.py)."""
    paths, _, program = embedders
    _, _, dynamic, types = EXPORTS[name]
    rng = np.random.default_rng(3)
    sizes = [(2, 7, [7, 3]), (1, 12, [12]), (3, 5, [1, 5, 4]), (2, 100, [100, 70])
             ] if dynamic else [(*STATIC, [5, 7])]
    model = onnx.load(str(paths[name]))
    for b, s, lengths in sizes:
        feeds = _feeds(rng, b, s, lengths, types)
        got = program[name](**feeds)
        want = ort_run(model, feeds)[0]
        assert got.shape == want.shape == (b, HIDDEN)
        assert_close(got, want, "f32", f"{name} {b}x{s}")
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_embedder_blocks(name: str, embedders: tuple[dict, dict, object]) -> None:
    """Each layer's attention is one block, whichever exporter wrote it: the TorchScript
    exporter's head reshapes take ``Shape(h)`` of the hidden state whose sizes shape
    inference loses after the position embeddings, and the static dynamo export's Kᵀ
    reshapes have constant targets. The unit norm is a ReduceL2."""
    _, results, _ = embedders
    report = results[name].report
    counts = report.block_counts()
    assert counts["attention"] == LAYERS, counts
    assert counts["linear"] == 6 * LAYERS, counts
    assert "Softmax" not in report.converted
    assert report.converted["ReduceL2"] == 1
