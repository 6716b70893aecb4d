"""A real model: a tiny HF LlamaForCausalLM (random weights, fixed seed, GQA) exported with
``torch.onnx.export``, imported with ``rlx-import-onnx``, compiled and run: the logits match
ONNX Runtime on the same file, every decoder layer is recognized as one
``llama_decoder_block`` (or as its parts when it cannot be), and node names reach the IR
IREE compiles and IREE's own diagnostics."""

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
    import torch
    import transformers

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
    """Each decoder layer is one ``llama_decoder_block`` (60 nodes: 2 RMSNorms, q/k/v/o
    projections, 2 RoPEs, GQA attention, SwiGLU, residuals); embedding, final norm and head
    around them."""
    report = import_model(onnx_path).report
    blocks = {(b.kind, b.scope) for b in report.blocks}
    layers = {("llama_decoder_block", f"m.model.layers.{i}") for i in range(LAYERS)}
    assert blocks == layers | {("rms_norm", "m.model.norm"), ("linear", "m.lm_head")}
    layer = next(b for b in report.blocks if b.kind == "llama_decoder_block")
    assert len(layer.nodes) == 60
    assert report.converted == Counter({"Gather": 1})  # the embedding
    summary = report.summary()
    assert "blocks recognized: 4 (linear 1, llama_decoder_block 2, rms_norm 1)" in summary
    assert "[m.model.layers.1] <- 60 nodes" in summary


def test_sub_blocks_without_the_layer_block(onnx_path: Path) -> None:
    """When a value inside layer 0 is a graph output (its SwiGLU's result), the layer is
    not one block: its parts are."""
    model = read_model(onnx_path)
    cut = next(n for n in model.graph.node if n.op_type == "MatMul" and any(
        p.key == "pkg.torch.onnx.name_scopes" and "layers.0.mlp.down_proj" in p.value
        for p in n.metadata_props))
    model.graph.output[0].name = cut.output[0]
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 64
    blocks = import_model(model).report.blocks
    layer0 = Counter(b.kind for b in blocks if b.scope.startswith("m.model.layers.0"))
    assert layer0 == PER_LAYER, layer0
    assert ("llama_decoder_block", "m.model.layers.1") in {(b.kind, b.scope) for b in blocks}


def test_imported_logits_match_onnx_runtime(onnx_path: Path, tmp_path: Path) -> None:
    hir, weights = tmp_path / "llama.hir", tmp_path / "llama.irpa"
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.import_onnx", str(onnx_path),
                           "-o", str(hir), "--params-out", str(weights)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "blocks recognized: 4" in proc.stderr
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
    blocks = {b.label for b in result.report.blocks}
    assert len(blocks) == 4
    assert blocks <= located
    assert located <= names, located - names


def test_iree_diagnostics_name_the_onnx_node(onnx_path: Path) -> None:
    """IREE 3.13 cannot compile the fused attention op for SPIR-V: its error names the
    ONNX node the decoder layer (with its attention) was imported from."""
    result = import_model(onnx_path)
    layer = next(b.label for b in result.report.blocks if b.kind == "llama_decoder_block")
    with pytest.raises(rlx.CompileError) as info:
        rlx.compile(result.module, "vulkan", attention="fused")
    assert f'IREE rejected "{layer}" (rlx_hir.llama_decoder_block)' in str(info.value)


def test_mir_keeps_the_labels(onnx_path: Path) -> None:
    mir = import_model(onnx_path).module.lower_to_mir()
    labels = {label_of(op.location) for op in walk_ops(mir.mlir.operation)
              if op.name.startswith("rlx_mir.") and not op.name.endswith((".param",
                                                                            ".constant"))}
    names = {n.name for n in read_model(onnx_path).graph.node}
    assert None not in labels
    assert labels <= names
