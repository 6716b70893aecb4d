"""The op schemas themselves: coverage of the seed's ops, docs, IRDL export."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from iree.compiler.tools.binaries import find_tool

from hir_zoo import HIR_ZOO, build
from rlx.dialects import HIR, MIR
from rlx.dialects.irdl import irdl_text

ROOT = Path(__file__).resolve().parents[2]
SEED_HIR_OPS = {
    "param", "constant", "linear", "linear_fused", "shared_linear_pair", "swiglu",
    "residual_rms_norm", "attention", "depthwise_conv1d_causal", "dequant_matmul",
    "gated_delta_net", "lstm", "gru", "rope", "rms_norm", "llama_decoder_block",
    "qwen35_mtp_head",
}
# Spec 3.4 (what HIR lowering emits) plus the primitives a model author needs.
MIR_OPS = {
    "param", "constant", "activation", "binary", "compare", "where", "cast", "matmul",
    "dequant_matmul", "fused_matmul_bias_act", "fused_swiglu", "fused_residual_rms_norm",
    "rms_norm", "layer_norm", "rope", "attention", "reshape", "transpose", "narrow",
    "concat", "expand", "gather", "reduce", "argmax", "softmax", "cumsum", "conv",
    "gated_delta_net", "lstm", "gru",
    # for the ONNX importer: strided slices, slices of run-time bounds, constant padding,
    # pooling, sizes as data
    "slice", "dynamic_slice", "pad", "pool", "dim", "iota",
    # sampling on the device (HF's logits processors, a seeded draw, the seen-token mask)
    "repetition_penalty", "top_k_filter", "top_p_filter", "min_p_filter", "categorical",
    "mark_tokens",
    # a point IREE does not fuse across where matmuls are data-tiled (Qwen3.5's gated norm)
    "barrier",
    # a KV cache written in place at positions read on the device (batched decode)
    "write_rows",
    # an embedding kept in the file's format: its gathered rows dequantized
    "dequant",
    # ONNX ScatterND / ScatterElements / TensorScatter, clamped into the data; TopK
    "scatter", "topk",
}


def test_hir_has_every_seed_op() -> None:
    assert set(HIR.ops) == SEED_HIR_OPS


def test_mir_op_set() -> None:
    assert set(MIR.ops) == MIR_OPS


@pytest.mark.parametrize("schema", [*HIR.ops.values(), *MIR.ops.values()],
                         ids=lambda s: s.full_name)
def test_every_op_is_documented(schema) -> None:
    doc = schema.doc
    assert schema.summary.endswith("."), f"{schema.full_name}: one-line summary ends with '.'"
    assert "Example::" in doc, f"{schema.full_name}: docstring needs an IR example"
    assert f'"{schema.full_name}"' in doc, f"{schema.full_name}: the example uses the op"


def test_family_modules_mirror_the_layout() -> None:
    for dialect, folder in ((HIR, "hir"), (MIR, "mir")):
        for schema in dialect.ops.values():
            path = ROOT / "python" / "rlx" / "dialects" / folder / f"{schema.family}.py"
            assert path.exists(), schema.full_name


@pytest.mark.parametrize("stage", ["hir", "mir"])
def test_irdl_files_are_fresh(stage: str) -> None:
    path = ROOT / "dialects" / f"rlx_{stage}.irdl.mlir"
    assert path.read_text() == irdl_text(stage), "run: python tools/gen_irdl.py"


IRDL_CANNOT_EXPRESS = {
    "dequant_nvfp4": "a variadic IRDL group needs equal types; nvfp4's scales differ "
                     "(see rlx/dialects/irdl.py)",
    "rnn_lengths_peephole": "a variadic IRDL group needs equal types; a scan's states, "
                            "peepholes and i64 lengths differ (see rlx/dialects/irdl.py)",
}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=IRDL_CANNOT_EXPRESS[n], strict=True))
    if n in IRDL_CANNOT_EXPRESS else n for n in sorted(HIR_ZOO)])
def test_irdl_accepts_every_valid_module(name: str, tmp_path: Path) -> None:
    """MLIR's own verifier (IRDL via iree-opt) accepts what rlx's builder produces."""
    iree_opt = find_tool("iree-opt")
    path = tmp_path / f"{name}.hir"
    path.write_text(str(build(name)))
    irdl = ROOT / "dialects" / "rlx_hir.irdl.mlir"
    proc = subprocess.run([iree_opt, f"--irdl-file={irdl}", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
