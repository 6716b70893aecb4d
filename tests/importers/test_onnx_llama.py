"""A real model: a tiny HF LlamaForCausalLM (random weights, fixed seed, GQA) exported with
``torch.onnx.export``, imported with ``rlx-import-onnx``, compiled and run: the logits match
ONNX Runtime on the same file, every decoder layer is recognized as HIR blocks, and node
names reach the IR IREE compiles and IREE's own diagnostics."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import rlx
from onnx_models import ort_run
from rlx.importers.onnx import import_model, read_model
from rlx.ir.locations import label_of
from rlx.ir.text import walk_ops
from rlx.reference.tolerance import assert_close

LAYERS = 2
SEQ = 8
PER_LAYER = Counter({"rms_norm": 2, "linear": 4, "rope": 2, "attention": 1, "swiglu": 1})


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # distinct norm weights (all-ones ones would be deduplicated)
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.2)

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, ids: object) -> object:
            return self.m(input_ids=ids, use_cache=False).logits

    path = tmp_path_factory.mktemp("llama") / "tiny_llama.onnx"
    ids = torch.randint(0, 128, (1, SEQ))
    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(Logits().eval(), (ids,), str(path), input_names=["input_ids"],
                          output_names=["logits"], dynamo=True)
    return path


def test_decoder_layers_are_recognized_as_blocks(onnx_path: Path) -> None:
    report = import_model(onnx_path).report
    per_layer: dict[str, Counter[str]] = {}
    for b in report.blocks:
        m = re.match(r"m\.model\.layers\.(\d+)\b", b.scope)
        if m:
            per_layer.setdefault(m.group(1), Counter())[b.kind] += 1
    assert per_layer == {str(i): PER_LAYER for i in range(LAYERS)}, report.summary()
    tail = {(b.kind, b.scope) for b in report.blocks if not b.scope.startswith("m.model.layers")}
    assert tail == {("rms_norm", "m.model.norm"), ("linear", "m.lm_head")}
    summary = report.summary()
    assert "attention 2" in summary
    assert "swiglu 2" in summary
    assert "rope 4" in summary
    assert "[m.model.layers.1.self_attn]" in summary


def test_imported_logits_match_onnx_runtime(onnx_path: Path, tmp_path: Path) -> None:
    hir, weights = tmp_path / "llama.hir", tmp_path / "llama.irpa"
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.import_onnx", str(onnx_path),
                           "-o", str(hir), "--params-out", str(weights)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "blocks recognized: 22" in proc.stderr
    program = rlx.runtime.load(rlx.compile(hir, "llvm-cpu"), "local-task", weights)
    ids = np.random.default_rng(1).integers(0, 128, (1, SEQ)).astype(np.int64)
    got = program.main(input_ids=ids)
    want = ort_run(read_model(onnx_path), {"input_ids": ids})[0]
    assert got.shape == (1, SEQ, 128)
    assert_close(got, want, "f32", "logits")


def test_node_names_label_every_op_down_to_linalg(onnx_path: Path) -> None:
    result = import_model(onnx_path)
    names = {n.name for n in read_model(onnx_path).graph.node}
    ops = [op for op in result.module.ops if not op.name.endswith((".param", ".constant"))]
    assert ops
    assert all(label_of(op.location) in names for op in ops)
    linalg = rlx.compile(result.module, "llvm-cpu", emit="linalg")
    located = set(re.findall(r'loc\("([^"(]+)"\(', linalg))
    attention = [b.label for b in result.report.blocks if b.kind == "attention"]
    assert set(attention) <= located
    assert located <= names, located - names


def test_iree_diagnostics_name_the_onnx_node(onnx_path: Path) -> None:
    """IREE 3.13 cannot compile the fused attention op for SPIR-V: its error names the
    ONNX node the attention block was imported from."""
    result = import_model(onnx_path)
    attention = next(b.label for b in result.report.blocks if b.kind == "attention")
    with pytest.raises(rlx.CompileError) as info:
        rlx.compile(result.module, "vulkan", attention="fused")
    assert f'IREE rejected "{attention}" (rlx_hir.attention)' in str(info.value)


def test_mir_keeps_the_labels(onnx_path: Path) -> None:
    mir = import_model(onnx_path).module.lower_to_mir()
    labels = {label_of(op.location) for op in walk_ops(mir.mlir.operation)
              if op.name.startswith("rlx_mir.") and not op.name.endswith((".param",
                                                                            ".constant"))}
    names = {n.name for n in read_model(onnx_path).graph.node}
    assert None not in labels
    assert labels <= names
