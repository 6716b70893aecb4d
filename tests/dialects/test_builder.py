"""The Python builder: RLX's HirModule surface, labels, inference, policies."""

from __future__ import annotations

import re

import pytest

import rlx
from hir_zoo import build
from rlx.dialects import HIR
from rlx.ir.locations import label_of

DEFAULT_LABELS = {
    "linear": "linear",
    "linear_fused": "linear_fused",
    "shared_linear_pair": "shared_linear_pair",
    "swiglu": "swiglu_ffn",
    "depthwise_conv1d_causal": "depthwise_conv1d_causal",
    "gated_delta_net": "gated_delta_net",
    "gated_delta_net_carry": "gated_delta_net_carry",
    "lstm": "lstm",
    "gru": "gru",
    "rope_neox": "rope",
    "llama_decoder_block": "llama_decoder_block",
    "transformer_block": "transformer_block",
    "qwen35_mtp_head": "qwen35_mtp_head",
    "dequant_gguf_q4_k": "dequant_matmul(gguf_q4_k)",
    "dequant_int8": "dequant_matmul(int8/32)",
    "dequant_nvfp4": "dequant_matmul(nvfp4/16)",
}


@pytest.mark.parametrize("name", sorted(DEFAULT_LABELS))
def test_default_block_labels(name: str) -> None:
    h = build(name)
    blocks = [op for op in h.ops if op.name.startswith("rlx_hir.")
              and not op.name.endswith((".param", ".constant"))]
    assert blocks
    assert {label_of(op.location) for op in blocks} == {DEFAULT_LABELS[name]}


def test_leaves_and_escape_ops_have_no_label() -> None:
    h = build("mir_escape")
    assert all(label_of(op.location) is None for op in h.ops)


def test_named_labels_the_returned_op() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (4, 16))
    y = h.named("layer0.ffn", lambda h: h.swiglu_ffn(
        x, h.param("u", (16, 8)), h.param("g", (16, 8)), h.param("d", (8, 16))))
    assert y.label == "layer0.ffn"
    assert 'loc("layer0.ffn")' in str(h)
    with pytest.raises(rlx.BuildError, match="function input"):
        h.named("oops", lambda h: x)


def test_label_nodes_since_stamps_generic_nodes_only() -> None:
    """The seed's importer test: stamp a source op's name on everything it expanded to."""
    h = rlx.HirModule("m")
    x = h.input("x", (4,))
    start = len(h)
    e = h.mir("activation", [x], kind="exp")
    two = h.mir("binary", [e, e], kind="add")
    w = h.param("w", (4,))
    kept = h.named("explicit", lambda h: h.mir("binary", [two, w], kind="mul"))
    block = h.rms_norm(kept, w, w)
    out = h.mir("binary", [block, e], kind="div")
    h.label_nodes_since(start, "Softmax_7")
    h.set_outputs([out])
    labels = {op.name + str(i): label_of(op.location) for i, op in enumerate(h.ops)}
    assert [v for k, v in labels.items() if "param" not in k] == [
        "Softmax_7", "Softmax_7", "explicit", "Softmax_7", "Softmax_7"]
    assert label_of(w.op.location) is None
    assert h.input_names == ["x"]
    h.label_nodes_since(start, "")  # no-op
    assert label_of(e.op.location) == "Softmax_7"


def test_inference_and_out_shape() -> None:
    h = rlx.HirModule("m")
    x = h.input_batch_seq("x", 64)
    assert x.shape == (None, None, 64)
    y = h.linear(x, h.param("w", (64, 32)))
    assert (y.shape, y.dtype) == ((None, None, 32), rlx.DType.F32)
    z = h.linear(x, h.param("w2", (64, 32)), out_shape=(2, None, 32))
    assert z.shape == (2, None, 32)
    first, second = h.shared_linear_pair(x, h.param("a", (64, 8)), h.param("b", (64, 24)))
    assert (first.shape[-1], second.shape[-1]) == (8, 24)


def test_policy_and_module_attributes() -> None:
    h = rlx.HirModule("ffn")
    assert h.fusion_policy == "direct"
    assert h.with_fusion_policy("for_autodiff").fusion_policy == "for_autodiff"
    assert h.name == "ffn"
    assert 'rlx.fusion_policy = "for_autodiff"' in str(h)


def test_outputs_can_be_replaced() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (2,))
    h.set_outputs([x, x])
    h.set_outputs([x])
    assert len(h.outputs) == 1
    assert "-> tensor<2xf32>" in str(h)


def test_builders_cover_every_hir_op() -> None:
    names = set()
    for case in ("linear", "linear_fused", "shared_linear_pair", "swiglu", "norms",
                 "attention_bias", "rope_gptj", "depthwise_conv1d_causal", "dequant_int8",
                 "gated_delta_net", "lstm", "gru", "llama_decoder_block", "qwen35_mtp_head",
                 "constant"):
        names |= {op.name.split(".")[1] for op in build(case).ops
                  if op.name.startswith("rlx_hir.")}
    assert names == set(HIR.ops)


def test_wrap_mir_graph_keeps_the_ops() -> None:
    mir_text = """module @g {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "rlx_mir.activation"(%arg0) {kind = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
    h = rlx.HirModule.wrap_mir_graph(mir_text)
    assert h.fusion_policy == "direct"
    assert [op.name for op in h.ops] == ["rlx_mir.activation"]
    with pytest.raises(rlx.VerifyError, match=re.escape(
            "expected an op of rlx_mir.* or func.return, found 'rlx_hir.param'")):
        rlx.HirModule.wrap_mir_graph(str(build("norms")))


def test_constant_from_numpy() -> None:
    h = rlx.HirModule("m")
    c = h.constant([[1.0, 2.0]], "f16")
    assert (c.shape, c.dtype) == ((1, 2), rlx.DType.F16)
    assert "dense<[[1.000000e+00, 2.000000e+00]]> : tensor<1x2xf16>" in str(h)
    flags = h.constant([True, False, True])
    assert flags.dtype == rlx.DType.I1
    assert "dense<[true, false, true]>" in str(h)
