"""The lowering registries and passes: coverage kept as data, missing-rule errors, the
seed's structural tests, and provenance (labels on every lowered op)."""

from __future__ import annotations

import pytest

import rlx
from hir_zoo import build
from rlx.ir.diagnostics import LoweringError, VerifyError
from rlx.ir.locations import label_of
from rlx.ir.text import parse_module, walk_ops
from rlx.lowering import LoweringOptions, lower_hir_to_mir, lower_mir_to_linalg
from rlx.lowering.hir_to_mir import HIR_TO_MIR
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG, NOT_YET_LOWERED
from rlx.lowering.registry import LoweringTable


def test_every_hir_op_has_a_hir_to_mir_rule() -> None:
    assert HIR_TO_MIR.missing() == set()


def test_mir_to_linalg_gaps_are_listed() -> None:
    assert MIR_TO_LINALG.missing() == set(NOT_YET_LOWERED)


def test_duplicate_and_foreign_rules_raise() -> None:
    table = LoweringTable("t", HIR_TO_MIR.source)
    table.register("linear")(lambda ctx, op: [])
    with pytest.raises(ValueError, match="registered twice"):
        table.register("linear")(lambda ctx, op: [])
    with pytest.raises(ValueError, match="not an op of the source dialect"):
        table.register("frobnicate")


def test_missing_rule_names_op_label_and_position(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op without a rule (as a new MIR op would be) fails by label and position."""
    monkeypatch.delitem(MIR_TO_LINALG.rules, "lstm")
    module = parse_module(str(build("lstm")), "m.hir")
    lower_hir_to_mir(module, LoweringOptions())
    with pytest.raises(LoweringError, match=r"m.hir:\d+:\d+ \"[^\"]+\": error: no "
                                            r"mir-to-linalg rule for 'rlx_mir.lstm'"):
        lower_mir_to_linalg(module, LoweringOptions())


def test_seed_swiglu_fusable_has_nine_nodes() -> None:
    """RLX's test: a fusable SwiGLU lowers to 9 MIR nodes (4 leaves included)."""
    h = rlx.HirModule("ffn", "fusable")
    x = h.input("x", (4, 768))
    h.set_outputs([h.swiglu_ffn(x, h.param("up", (768, 2048)), h.param("gate", (768, 2048)),
                                h.param("down", (2048, 768)))])
    mir = h.lower_to_mir()
    assert len(mir) == 9
    assert any(op.name == "rlx_mir.matmul" for op in mir.ops)
    assert any(op.name == "rlx_mir.fused_swiglu" for op in h.lower_to_mir("direct").ops)
    assert not any(op.name == "rlx_mir.fused_swiglu" for op in h.lower_for_autodiff().ops)
    assert "rlx_hir.swiglu" in str(h), "lowering leaves the HIR module unchanged"


def test_seed_gdn_dequant_rope_rms_lower() -> None:
    names = set()
    for case in ("gated_delta_net", "rope_neox", "norms", "dequant_gguf_q4_k",
                 "depthwise_conv1d_causal"):
        names |= {op.name for op in build(case).lower_to_mir().ops}
    assert {"rlx_mir.gated_delta_net", "rlx_mir.rope", "rlx_mir.rms_norm",
            "rlx_mir.dequant_matmul", "rlx_mir.conv", "rlx_mir.concat"} <= names


def test_label_nodes_since_reaches_every_lowered_op() -> None:
    """RLX's importer test, one level further down: every op IREE sees carries the label."""
    h = rlx.HirModule("m")
    x = h.input("x", (4,))
    start = len(h)
    e = h.mir("activation", [x], kind="exp")
    two = h.mir("binary", [e, e], kind="add")
    h.set_outputs([h.mir("binary", [two, e], kind="div")])
    h.label_nodes_since(start, "Softmax_7")
    module = parse_module(str(h), "m.hir")
    lower_hir_to_mir(module, LoweringOptions())
    lower_mir_to_linalg(module, LoweringOptions())
    computes = [op for op in walk_ops(module.operation) if op.name.startswith("linalg.")]
    assert len(computes) >= 3
    assert {label_of(op.location) for op in computes} == {"Softmax_7"}


def test_block_label_survives_to_linalg() -> None:
    module = parse_module(str(build("transformer_block")), "block.hir")
    lower_hir_to_mir(module, LoweringOptions())
    lower_mir_to_linalg(module, LoweringOptions())
    labels = {label_of(op.location) for op in walk_ops(module.operation)
              if op.name in ("linalg.matmul", "linalg.softmax", "linalg.generic")}
    assert labels == {"transformer_block"}


def test_conflicting_weight_declarations_are_an_error() -> None:
    text = """module @m {
  func.func @main() -> (tensor<4xf32>, tensor<8xf32>) {
    %a = "rlx_mir.param"() {name = "w"} : () -> tensor<4xf32>
    %b = "rlx_mir.param"() {name = "w"} : () -> tensor<8xf32>
    return %a, %b : tensor<4xf32>, tensor<8xf32>
  }
}
"""
    module = parse_module(text, "w.mir")
    # the verifier that every pass runs first catches it, naming both declarations
    with pytest.raises(VerifyError, match=r"w.mir:4:10: error: 'rlx_mir.param': weight 'w': "
                                          r"expected tensor<4xf32> \(its type where it is "
                                          r"first declared, w.mir:3:10\), found tensor<8xf32>"):
        lower_mir_to_linalg(module, LoweringOptions())


def test_conflicting_weight_leads_are_an_error() -> None:
    text = """module @m {
  func.func @main() -> (tensor<2x4xi8>, tensor<2x4xi8>) {
    %a = "rlx_mir.param"() {name = "w", lead = 32} : () -> tensor<2x4xi8>
    %b = "rlx_mir.param"() {name = "w"} : () -> tensor<2x4xi8>
    return %a, %b : tensor<2x4xi8>, tensor<2x4xi8>
  }
}
"""
    with pytest.raises(VerifyError, match=r"w.mir:4:10: error: 'rlx_mir.param': weight 'w': "
                                          r"expected lead 32 \(its lead where it is first "
                                          r"declared, w.mir:3:10\), found lead 0"):
        lower_mir_to_linalg(parse_module(text, "w.mir"), LoweringOptions())


def test_depthwise_conv_is_one_parallel_generic() -> None:
    """A depthwise conv lowers with its taps unrolled (every loop parallel): as a
    contraction, at one output position IREE data-tiled it as a batched matvec (a decode
    step's causal conv: transposes, a pack and a matvec dispatch a layer)."""
    h = rlx.HirModule("m")
    x = h.input("x", (8, 1, 16))
    h.set_outputs([h.depthwise_conv1d_causal(x, h.param("w", (16, 1, 1, 4)),
                                             h.input("pad", (8, 3, 16)), kernel_size=4)])
    text = rlx.compile(h, emit="linalg")
    generics = [line for line in text.splitlines() if "linalg.generic" in line]
    convs = [g for g in generics if "reduction" in g]
    assert not convs, convs
