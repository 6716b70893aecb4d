"""Element types beyond the usual (issue 22, point 4), against ONNX Runtime.

Unsigned integers: an ONNX uint8 .. uint64 tensor is the signless integer of its width in
the module, the ops that read it as unsigned say so (``udiv``, ``ult``, ``umax``, a
``cast`` with ``unsigned``), and the module's inputs and outputs are marked so that callers
pass and get numpy's unsigned types; compared on values past the signed range (where
reading them as signed gives other answers). 8-bit floats: storage types, cast to (with
ONNX's ``saturate``) and from, as inputs and outputs (ml_dtypes' numpy types)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import DEVICE
from onnx import TensorProto, helper

import rlx
from onnx_models import init, model, ort_run, vi
from rlx.importers.onnx import import_model
from rlx.ir.diagnostics import ModelImportError, RunError

U8, U32, U64 = TensorProto.UINT8, TensorProto.UINT32, TensorProto.UINT64


def _image_model() -> object:
    """A uint8 image pipeline as exporters write one: the image as float scaled to [0, 1],
    a uint8 max pool, the brightest pixel's threshold mask, a per-channel integer mean and
    remainder, and a float result quantized back to uint8; uint32 and uint64 arithmetic
    that wraps and compares past the signed range."""
    nodes = [
        helper.make_node("Cast", ["img"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["f", "scale"], ["unit"]),
        helper.make_node("MaxPool", ["img"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Greater", ["img", "half"], ["bright"]),
        helper.make_node("Max", ["img", "half"], ["floor"]),
        helper.make_node("Div", ["img", "three"], ["third"]),
        helper.make_node("Mod", ["img", "seven"], ["rem"]),
        helper.make_node("Clip", ["img", "lo", "hi"], ["clipped"]),
        helper.make_node("Mul", ["unit", "q"], ["scaled"]),
        helper.make_node("Cast", ["scaled"], ["requant"], to=U8),
        helper.make_node("Add", ["a32", "b32"], ["sum32"]),
        helper.make_node("LessOrEqual", ["a32", "b32"], ["le32"]),
        helper.make_node("Cast", ["a32"], ["wide"], to=TensorProto.INT64),
        helper.make_node("Min", ["a64", "b64"], ["min64"]),
        helper.make_node("Div", ["a64", "b64"], ["div64"]),
        helper.make_node("Cast", ["a64"], ["f64"], to=TensorProto.DOUBLE),
    ]
    inits = [init("scale", np.array(255.0, np.float32)), init("half", np.array(128, np.uint8)),
             init("three", np.array(3, np.uint8)), init("seven", np.array(7, np.uint8)),
             init("lo", np.array(20, np.uint8)), init("hi", np.array(200, np.uint8)),
             init("q", np.array(250.0, np.float32))]
    outs = [vi("unit", ["n", 3, 4, 4]), vi("pooled", ["n", 3, 2, 2], U8),
            vi("bright", ["n", 3, 4, 4], TensorProto.BOOL), vi("floor", ["n", 3, 4, 4], U8),
            vi("third", ["n", 3, 4, 4], U8), vi("rem", ["n", 3, 4, 4], U8),
            vi("clipped", ["n", 3, 4, 4], U8), vi("requant", ["n", 3, 4, 4], U8),
            vi("sum32", [5], U32), vi("le32", [5], TensorProto.BOOL),
            vi("wide", [5], TensorProto.INT64), vi("min64", [4], U64), vi("div64", [4], U64),
            vi("f64", [4], TensorProto.DOUBLE)]
    return model(nodes, [vi("img", ["n", 3, 4, 4], U8), vi("a32", [5], U32),
                         vi("b32", [5], U32), vi("a64", [4], U64), vi("b64", [4], U64)],
                 outs, inits)


def _feeds(batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    top32, top64 = np.iinfo(np.uint32).max, np.iinfo(np.uint64).max
    return {"img": rng.integers(0, 256, (batch, 3, 4, 4)).astype(np.uint8),
            "a32": np.array([top32, 2 ** 31, 5, 0, 2 ** 31 + 7], np.uint32),
            "b32": np.array([2, 2 ** 31 - 1, 7, top32, 9], np.uint32),
            "a64": np.array([top64, 2 ** 63 + 5, 10, 2 ** 40], np.uint64),
            "b64": np.array([3, 2 ** 63, 4, 2 ** 63 + 1], np.uint64)}


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_unsigned_model_matches_onnxruntime(target: str) -> None:
    m = _image_model()
    result = import_model(m)
    assert result.module.unsigned_inputs == [0, 1, 2, 3, 4]
    assert result.module.unsigned_outputs == [1, 3, 4, 5, 6, 7, 8, 11, 12]
    if target == "vulkan":  # f64 is llvm-cpu's only (rlx refuses it for the GPU targets)
        m.graph.node.pop()
        m.graph.output.pop()
        result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    for batch in (2, 1):
        feeds = _feeds(batch)
        got = program.main(**feeds)
        want = ort_run(m, feeds)
        for name, g, w in zip([o.name for o in m.graph.output], got, want, strict=True):
            assert g.dtype == w.dtype, name
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)


def test_unsigned_inputs_take_numpys_unsigned_types() -> None:
    """An unsigned input refuses the signed array of its width (whose values it would read
    differently), naming the input and both types."""
    m = model([helper.make_node("Max", ["x", "y"], ["z"])], [vi("x", [3], U8),
                                                              vi("y", [3], U8)],
              [vi("z", [3], U8)])
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"))
    x, y = np.array([1, 200, 255], np.uint8), np.array([128, 3, 0], np.uint8)
    np.testing.assert_array_equal(program.main(x, y), np.maximum(x, y))
    with pytest.raises(RunError, match=r"input 'x': expected uint8 \[3\], found int8"):
        program.main(x.view(np.int8), y)


def test_sign_sensitive_op_without_unsigned_form_is_refused() -> None:
    """An op whose converter would read unsigned integers as signed refuses them, naming
    the node, rather than computing a wrong answer."""
    m = model([helper.make_node("ReduceMax", ["x", "ax"], ["z"], keepdims=0, name="peak")],
              [vi("x", [2, 3], U8)], [vi("z", [2], U8)],
              [init("ax", np.array([1], np.int64))])
    with pytest.raises(ModelImportError) as info:
        import_model(m)
    message = str(info.value)
    assert "node 'peak' (ReduceMax" in message
    assert "input 0 ('x') is uint8" in message
    assert "\n" not in message


def test_float8_casts_match_onnxruntime() -> None:
    """f32 to each 8-bit float saturating (ONNX's default: beyond the range, inf included,
    becomes the largest finite value) and not, f16 to f8, and an f8 input back to f32:
    the same values as ONNX's reference evaluator (ONNX Runtime's Python API takes no 8-bit
    float arrays; NaN compared by position)."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    kinds = {TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
             TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
             TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
             TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}
    nodes, outs = [], []
    for i, elem in enumerate(kinds):
        nodes += [helper.make_node("Cast", ["x"], [f"sat{i}"], to=elem),
                  helper.make_node("Cast", ["x"], [f"raw{i}"], to=elem, saturate=0),
                  helper.make_node("Cast", ["x16"], [f"h{i}"], to=elem),
                  helper.make_node("Cast", [f"sat{i}"], [f"back{i}"], to=TensorProto.FLOAT)]
        outs += [vi(f"sat{i}", ["n"], elem), vi(f"raw{i}", ["n"], elem),
                 vi(f"h{i}", ["n"], elem), vi(f"back{i}", ["n"])]
    nodes.append(helper.make_node("Cast", ["e4"], ["e4f"], to=TensorProto.FLOAT16))
    outs.append(vi("e4f", ["n"], TensorProto.FLOAT16))
    m = model(nodes, [vi("x", ["n"]), vi("x16", ["n"], TensorProto.FLOAT16),
                      vi("e4", ["n"], TensorProto.FLOAT8E4M3FN)], outs, opset=21)
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"))
    x = np.array([0.1, -1.7, 300.0, 1000.0, -6e4, np.inf, -np.inf, np.nan, 1e-9, 239.9],
                 np.float32)
    feeds = {"x": x, "x16": x.astype(np.float16), "e4": x.astype(ml_dtypes.float8_e4m3fn)}
    got = program.main(**feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for out, g, w in zip(outs, got, want, strict=True):
        assert g.dtype == w.dtype, out.name
        g32, w32 = g.astype(np.float32), w.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g32), np.isnan(w32), err_msg=out.name)
        same = ~np.isnan(w32)
        np.testing.assert_array_equal(g32[same], w32[same], err_msg=out.name)
