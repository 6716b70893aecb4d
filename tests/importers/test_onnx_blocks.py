"""Block recognition of the ONNX importer: each pattern becomes its HIR block (the report
says which), near misses fall back to MIR ops, and every variant computes what ONNX Runtime
computes on the same model (one compile for all of them)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper

from onnx_models import (
    attention_graph,
    init,
    linear_graph,
    model,
    rand,
    rms_norm_graph,
    rope_graph,
    run_models,
    swiglu_graph,
    vi,
)
from rlx.reference.tolerance import assert_close

RNG = np.random.default_rng(0)


def _shared_matmul() -> object:
    """``MatMul`` used by the bias add and by a second consumer: the add cannot join the
    linear block (its input is needed elsewhere)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="fc/MatMul"),
             helper.make_node("Add", ["mm", "b"], ["y"], name="fc/Add"),
             helper.make_node("Relu", ["mm"], ["z"], name="side/Relu")]
    return model(nodes, [vi("x", [3, 16])], [vi("y", [3, 12]), vi("z", [3, 12])],
                 [init("w", rand(RNG, 16, 12)), init("b", rand(RNG, 12))])


def _rope_uneven_tables() -> object:
    """RoPE-shaped graph whose cos table halves differ: not RoPE as rlx computes it."""
    m = rope_graph()
    for t in m.graph.initializer:
        if t.name == "cos":
            arr = np.frombuffer(t.raw_data, np.float32).reshape(1, 1, 6, 8).copy()
            arr[..., 0] += 0.5
            t.CopyFrom(init("cos", arr))
    return m


def _gemm_trans_b() -> object:
    """``Gemm(x, W, b)`` with ``transB = 1`` (PyTorch's nn.Linear layout) and a ReLU."""
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fc/Gemm", transB=1),
             helper.make_node("Relu", ["g"], ["y"], name="fc/Relu")]
    return model(nodes, [vi("x", [3, 40])], [vi("y", [3, 24])],
                 [init("w", rand(RNG, 24, 40)), init("b", rand(RNG, 24))])


def _torch_sdpa(swap_view: bool = False) -> object:
    """torch.onnx (dynamo)'s decomposed ``scaled_dot_product_attention`` over a dynamic
    sequence: Q and Kᵀ each scaled by ``hd ** -0.25``, Kᵀ as ``Reshape(Transpose(Reshape(K,
    [-1, S, hd]), [0, 2, 1]), [B, H, hd, S])`` with the sizes sliced from ``Shape(K)``, an
    additive ``[1, 1, S, S]`` mask, rows of NaN zeroed. ``swap_view``: the first view is
    ``[-1, hd, S]`` (a reinterpretation, not a transpose): not attention."""
    big = np.iinfo(np.int64)
    first = ["minus1", "hd", "s"] if swap_view else ["minus1", "s", "hd"]
    nodes = [helper.make_node("Shape", ["k"], ["shape"], name="sdpa/shape"),
             helper.make_node("Slice", ["shape", "m1", "end"], ["hd"], name="sdpa/hd"),
             helper.make_node("Slice", ["shape", "m2", "m1"], ["s"], name="sdpa/s"),
             helper.make_node("Slice", ["shape", "start", "m2"], ["bh"], name="sdpa/bh"),
             helper.make_node("Concat", first, ["view1"], name="sdpa/view1", axis=0),
             helper.make_node("Reshape", ["k", "view1"], ["k3"], name="sdpa/k3"),
             helper.make_node("Transpose", ["k3"], ["k3t"], name="sdpa/k3t", perm=[0, 2, 1]),
             helper.make_node("Concat", ["bh", "hd", "s"], ["view2"], name="sdpa/view2",
                              axis=0),
             helper.make_node("Reshape", ["k3t", "view2"], ["kt"], name="sdpa/kt"),
             helper.make_node("Mul", ["q", "c"], ["qs"], name="sdpa/qs"),
             helper.make_node("Mul", ["kt", "c"], ["ks"], name="sdpa/ks"),
             helper.make_node("MatMul", ["qs", "ks"], ["qk"], name="sdpa/qk"),
             helper.make_node("Add", ["qk", "mask"], ["sc"], name="sdpa/mask"),
             helper.make_node("Softmax", ["sc"], ["p"], name="sdpa/softmax", axis=-1),
             helper.make_node("IsNaN", ["p"], ["nan"], name="sdpa/isnan"),
             helper.make_node("Where", ["nan", "zero", "p"], ["pz"], name="sdpa/where"),
             helper.make_node("MatMul", ["pz", "v"], ["o"], name="sdpa/pv")]
    inits = [init("m1", np.array([-1], np.int64)), init("m2", np.array([-2], np.int64)),
             init("end", np.array([big.max], np.int64)),
             init("start", np.array([big.min], np.int64)),
             init("minus1", np.array([-1], np.int64)), init("c", np.float32(8 ** -0.25)),
             init("zero", np.float32(0))]
    qkv = [vi(n, [1, 2, "s", 8]) for n in "qkv"]
    return model(nodes, [*qkv, vi("mask", [1, 1, "s", "s"])], [vi("o", [1, 2, "s", 8])],
                 inits)


def _sdpa_feed(seq: int) -> dict[str, np.ndarray]:
    mask = np.where(RNG.random((1, 1, seq, seq)) < 0.3, np.finfo(np.float32).min, 0)
    return {**{n: q(1, 2, seq, 8) for n in "qkv"}, "mask": mask.astype(np.float32)}


def q(*shape: int) -> np.ndarray:
    return rand(RNG, *shape)


CASES = {
    "linear_relu": (linear_graph(RNG, "Relu"), {"x": q(2, 5, 16)}),
    "linear_silu": (linear_graph(RNG, "silu"), {"x": q(3, 5, 16)}),
    "linear_gelu_tanh": (linear_graph(RNG, "GeluTanh"), {"x": q(1, 5, 16)}),
    "linear_plain": (linear_graph(RNG, None, bias=False), {"x": q(2, 5, 16)}),
    "rms_norm": (rms_norm_graph(RNG), {"x": q(2, 7, 32)}),
    "rms_norm_div": (rms_norm_graph(RNG, gamma=False, div=True), {"x": q(2, 3, 32)}),
    "swiglu": (swiglu_graph(RNG), {"x": q(1, 4, 16)}),
    "rope": (rope_graph(), {"x": q(2, 6, 3, 8)}),
    "attention_gqa_causal": (attention_graph(RNG), {n: q(1, h, 6, 8) for n, h in
                                                    (("q", 4), ("k", 2), ("v", 2))}),
    "attention_bias_scale": (attention_graph(RNG, heads=2, kv_heads=2, mask="bias",
                                             scale="div_custom"),
                             {n: q(1, 2, 6, 8) for n in "qkv"}),
    "attention_plain": (attention_graph(RNG, heads=3, kv_heads=1, mask="none", scale="none"),
                        {n: q(1, h, 6, 8) for n, h in (("q", 3), ("k", 1), ("v", 1))}),
    "shared_matmul": (_shared_matmul(), {"x": q(3, 16)}),
    "gemm_trans_b": (_gemm_trans_b(), {"x": q(3, 40)}),
    "rope_uneven": (_rope_uneven_tables(), {"x": q(2, 6, 3, 8)}),
    "attention_torch_sdpa": (_torch_sdpa(), _sdpa_feed(7)),
    "attention_torch_sdpa_swapped_view": (_torch_sdpa(swap_view=True), _sdpa_feed(5)),
}
EXPECTED = {
    "linear_relu": {"linear": 1}, "linear_silu": {"linear": 1},
    "linear_gelu_tanh": {"linear": 1}, "linear_plain": {"linear": 1},
    "rms_norm": {"rms_norm": 1}, "rms_norm_div": {"rms_norm": 1}, "swiglu": {"swiglu": 1},
    "rope": {"rope": 1}, "attention_gqa_causal": {"attention": 1},
    "attention_bias_scale": {"attention": 1}, "attention_plain": {"attention": 1},
    "shared_matmul": {"linear": 1}, "rope_uneven": {}, "gemm_trans_b": {"linear": 1},
    "attention_torch_sdpa": {"attention": 1}, "attention_torch_sdpa_swapped_view": {},
}


@pytest.fixture(scope="module")
def ran() -> dict:
    return run_models(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_block_is_recognized_and_computes_what_ort_does(ran: dict, name: str) -> None:
    r = ran[name]
    assert dict(r.report.block_counts()) == EXPECTED[name], r.report.summary()
    for i, (got, want) in enumerate(zip(r.got, r.want, strict=True)):
        assert_close(got, want, "f32", f"{name} output #{i}")


def test_blocks_carry_the_last_node_name_and_list_their_nodes(ran: dict) -> None:
    attn = ran["attention_gqa_causal"]
    block = attn.report.blocks[0]
    assert block.label == "attn/pv"
    assert {"k/unsq", "k/expand", "k/view", "attn/kT", "attn/softmax", "attn/mask"} <= set(
        block.nodes)
    text = attn.hir
    assert '"rlx_hir.attention"' in text
    assert 'mask = "causal"' in text
    assert 'loc("attn/pv")' in text
    rope = ran["rope"].report.blocks[0]
    assert "attn/transpose" in rope.nodes  # the head transpose moves behind the block
    assert ran["swiglu"].report.blocks[0].label == "mlp/down"


def test_gemm_weights_are_stored_transposed(ran: dict) -> None:
    hir = ran["gemm_trans_b"].hir
    assert '"rlx_hir.param"() {name = "gemm_trans_b.w.T"} : () -> tensor<40x24xf32>' in hir
    assert ran["gemm_trans_b"].report.blocks[0].nodes == ("fc/Gemm", "fc/Relu")


def test_attention_with_another_scale_keeps_it(ran: dict) -> None:
    r = ran["attention_bias_scale"]
    assert '"rlx_mir.attention"' in r.hir
    assert "score_scale = 0.333333343" in r.hir


def test_near_misses_fall_back_to_mir_ops(ran: dict) -> None:
    shared = ran["shared_matmul"].report
    assert shared.converted == Counter({"Add": 1, "Relu": 1})
    uneven = ran["rope_uneven"].report
    assert not uneven.blocks
    assert uneven.converted["Concat"] == 1


def test_node_by_node_import_computes_the_same() -> None:
    subset = {k: CASES[k] for k in ("swiglu", "attention_gqa_causal", "rope", "rms_norm")}
    ran = run_models(subset, blocks=False)
    for name, r in ran.items():
        assert not r.report.blocks
        assert_close(r.got[0], r.want[0], "f32", name)
