"""Element types beyond the usual (issue 22, point 4), against ONNX Runtime and ONNX's
reference evaluator.

Unsigned integers: an ONNX uint8 .. uint64 tensor is the signless integer of its width in
the module, the ops that read it as unsigned say so (``udiv``, ``ult``, ``umax``, a
``cast`` with ``unsigned``), and the module's inputs and outputs are marked so that callers
pass and get numpy's unsigned types; compared on values past the signed range (where
reading them as signed gives other answers). 8-bit floats: storage types, cast to (with
ONNX's ``saturate``) and from, as inputs and outputs (ml_dtypes' numpy types). The types
narrower than a byte (int4, uint4, int2, uint2, E2M1): held as their values, cast to and
from, moved, with ml_dtypes' arrays at the boundary."""

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


I4, UI4, I2, UI2, F4 = (TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2,
                        TensorProto.UINT2, TensorProto.FLOAT4E2M1)


def _narrow_model(with_float4: bool) -> object:
    """Casts to each type narrower than a byte from f32, f16, int32 (wrapping), uint32
    (past the signed range) and bool, each also widened again; casts from int4 / uint4 /
    int2 / E2M1 inputs and an int4 initializer; an int4 input moved (Transpose, Reshape)
    to an int4 output."""
    targets = [I4, UI4, I2, UI2] + ([F4] if with_float4 else [])
    nodes, outs = [], []
    for elem in targets:
        tag = TensorProto.DataType.Name(elem).lower()
        for src in ("x", "x16", "xi", "xu", "xb"):
            # and widened again: the value the module holds, which the boundary's
            # conversion to ml_dtypes' type would wrap into range
            wide = TensorProto.FLOAT if elem == F4 else TensorProto.INT8
            nodes += [helper.make_node("Cast", [src], [f"{src}_{tag}"], to=elem),
                      helper.make_node("Cast", [f"{src}_{tag}"], [f"{src}_{tag}_w"], to=wide)]
            outs += [vi(f"{src}_{tag}", ["n"], elem), vi(f"{src}_{tag}_w", ["n"], wide)]
    nodes += [helper.make_node("Cast", ["i4"], ["i4_f"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["i4"], ["i4_i8"], to=TensorProto.INT8),
              helper.make_node("Cast", ["u4"], ["u4_u8"], to=U8),
              helper.make_node("Cast", ["i2"], ["i2_f"], to=TensorProto.FLOAT),
              helper.make_node("CastLike", ["x", "i4"], ["x_like_i4"]),
              helper.make_node("Cast", ["w4"], ["w4_f"], to=TensorProto.FLOAT),
              helper.make_node("Reshape", ["i4", "shape"], ["i4_2d"]),
              helper.make_node("Transpose", ["i4_2d"], ["i4_t"])]
    outs += [vi("i4_f", ["n"]), vi("i4_i8", ["n"], TensorProto.INT8), vi("u4_u8", ["n"], U8),
             vi("i2_f", ["n"]), vi("x_like_i4", ["n"], I4), vi("w4_f", [2, 3]),
             vi("i4_t", [None, 1], I4)]
    ins = [vi("x", ["n"]), vi("x16", ["n"], TensorProto.FLOAT16),
           vi("xi", ["n"], TensorProto.INT32), vi("xu", ["n"], U32),
           vi("xb", ["n"], TensorProto.BOOL), vi("i4", ["n"], I4), vi("u4", ["n"], UI4),
           vi("i2", ["n"], I2)]
    if with_float4:
        nodes += [helper.make_node("Cast", ["f4"], ["f4_f"], to=TensorProto.FLOAT),
                  helper.make_node("Cast", ["f4"], ["f4_h"], to=TensorProto.FLOAT16)]
        outs += [vi("f4_f", ["n"]), vi("f4_h", ["n"], TensorProto.FLOAT16)]
        ins.append(vi("f4", ["n"], F4))
    import ml_dtypes

    inits = [init("w4", np.array([[-8, 7, 0], [3, -1, 5]], ml_dtypes.int4)),
             init("shape", np.array([1, -1], np.int64))]
    return model(nodes, ins, outs, inits, opset=24)


def _narrow_feeds(with_float4: bool) -> dict[str, np.ndarray]:
    import ml_dtypes

    x = np.array([-9.7, -8.5, -8.0, -2.5, -0.6, -0.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0,
                  5.5, 7.6, 8.5, 15.2, 100.0, np.nan, np.inf, -np.inf, 1e-7, -1e-7, -5.0],
                 np.float32)
    n = x.size
    xi = np.array([-9, -8, 7, 8, 15, 16, 200, -200, 2 ** 31 - 1, -2 ** 31, 3, -3] * 2,
                  np.int32)
    rng = np.random.default_rng(3)
    feeds = {"x": x, "x16": x.astype(np.float16), "xi": xi,
             "xu": np.array([2 ** 32 - 1, 2 ** 31 + 9, 5, 0] * 6, np.uint32),
             "xb": np.arange(n) % 3 == 0,
             "i4": rng.integers(-8, 8, n).astype(ml_dtypes.int4),
             "u4": rng.integers(0, 16, n).astype(ml_dtypes.uint4),
             "i2": rng.integers(-2, 2, n).astype(ml_dtypes.int2)}
    if with_float4:
        feeds["f4"] = x.astype(ml_dtypes.float4_e2m1fn)
    return feeds


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_narrow_types_match_the_reference(target: str) -> None:
    """int4 / uint4 / int2 / uint2 and E2M1 (held as their values: i8, f8E4M3FN) cast to
    and from, moved, as inputs, outputs and an initializer, with ml_dtypes' arrays at the
    boundary: the same values as ONNX's reference evaluator (ml_dtypes' conversions: ONNX
    Runtime's Python API takes no int4 arrays). E2M1 is held in an 8-bit float, which rlx
    compiles for llvm-cpu only."""
    from onnx.reference import ReferenceEvaluator

    with_float4 = target == "llvm-cpu"
    m = _narrow_model(with_float4)
    result = import_model(m)
    narrow_in = result.module.narrow_inputs
    assert [narrow_in[i] for i in sorted(narrow_in)] == ["int4", "uint4", "int2"] + (
        ["float4_e2m1fn"] if with_float4 else [])
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    feeds = _narrow_feeds(with_float4)
    got = program.main(**feeds)
    with np.errstate(invalid="ignore"):
        want = ReferenceEvaluator(m).run(None, feeds)
    for out, g, w in zip(m.graph.output, got, want, strict=True):
        assert g.dtype == w.dtype, out.name
        if w.dtype.kind in "f" or w.dtype.name == "float4_e2m1fn":  # -0 kept as -0
            assert np.array_equal(np.signbit(g.astype(np.float32)),
                                  np.signbit(w.astype(np.float32))), out.name
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32),
                                      err_msg=out.name)


def test_narrow_types_are_refused_outside_casts_and_moves() -> None:
    """Arithmetic on int4 (which i8 would not wrap as int4 does) is refused, naming the
    node; an int4 input refuses an int8 array, naming both types."""
    m = model([helper.make_node("Add", ["a", "b"], ["c"], name="sum4")],
              [vi("a", [3], I4), vi("b", [3], I4)], [vi("c", [3], I4)], opset=24)
    with pytest.raises(ModelImportError) as info:
        import_model(m)
    assert "node 'sum4' (Add" in str(info.value)
    assert "input 0 ('a') is int4: rlx imports int4 in casts and data movement" in str(
        info.value)
    import ml_dtypes

    m = model([helper.make_node("Cast", ["a"], ["c"], to=TensorProto.INT8)],
              [vi("a", [3], I4)], [vi("c", [3], TensorProto.INT8)], opset=24)
    program = rlx.runtime.load(rlx.compile(import_model(m).module, "llvm-cpu"))
    a = np.array([-8, 7, -1], ml_dtypes.int4)
    np.testing.assert_array_equal(program.main(a), [-8, 7, -1])
    with pytest.raises(RunError, match=r"input 'a': expected int4 \[3\], found int8"):
        program.main(a.astype(np.int8))


def test_narrow_inputs_are_declared_in_their_storage_type() -> None:
    h = rlx.HirModule("m")
    with pytest.raises(rlx.BuildError, match="int4 is held as i8, found i32"):
        h.input("x", [3], "i32", narrow="int4")
    with pytest.raises(rlx.BuildError, match="unknown narrow type 'int3'"):
        h.input("x", [3], "i8", narrow="int3")
    x = h.input("x", [3], "f8E4M3FN", narrow="float4_e2m1fn")
    with pytest.raises(rlx.BuildError, match="float4_e2m1fn is held as f8E4M3FN, found f32"):
        h.set_outputs([h.mir("cast", [x], to="f32")], narrow={0: "float4_e2m1fn"})
    h.set_outputs([x], narrow={0: "float4_e2m1fn"})
    assert h.narrow_inputs == {0: "float4_e2m1fn"}
    assert h.narrow_outputs == {0: "float4_e2m1fn"}
