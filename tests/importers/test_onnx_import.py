"""The ONNX importer's surface: inputs (symbolic dims stay ``?``), weights (a parameter file,
never inlined when large), outputs in order, node-name labels, the CLI, and one clear error
for every kind of bad input, with nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rlx
from onnx_models import init, model, ort_run, rand, vi
from rlx.importers.onnx import INLINE_MAX_BYTES, import_model, load
from rlx.ir.diagnostics import ModelImportError
from rlx.reference.tolerance import assert_close

RNG = np.random.default_rng(3)


def two_outputs() -> onnx.ModelProto:
    """A dynamic batch, a large weight, a small constant, a splat, a reshape through
    ``Shape`` of the dynamic dim, two outputs; some nodes unnamed."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Mul", ["hb", "ones"], ["hs"]),
        helper.make_node("Shape", ["hs"], ["shape"], name="shape", start=0, end=1),
        helper.make_node("Concat", ["shape", "tail"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["hs", "target"], ["y"], name="split_heads"),
        helper.make_node("Tanh", ["x"], ["t"], name="side"),
    ]
    inits = [init("w", rand(RNG, 16, 64)), init("b", rand(RNG, 64)),
             init("ones", np.full((64,), 2.0, np.float32)),
             init("tail", np.array([4, -1], np.int64))]
    return model(nodes, [vi("x", ["batch", 16])], [vi("t", ["batch", 16]),
                                                    vi("y", ["batch", 4, 16])], inits)


def test_inputs_weights_outputs_and_labels(tmp_path: Path) -> None:
    m = two_outputs()
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    weights = tmp_path / "m.irpa"
    h = load(path, params_out=weights)
    text = str(h)
    assert 'func.func @main(%arg0: tensor<?x16xf32> {rlx.name = "x"})' in text
    assert '"rlx_hir.param"() {name = "w"} : () -> tensor<16x64xf32>' in text
    assert 'name = "b"' not in text  # 256 bytes: inline
    assert "dense<[" in text
    assert 'loc("Add_1")' in text  # unnamed nodes: op type and index
    assert 'loc("split_heads")' in text
    assert "-> (tensor<?x16xf32>, tensor<?x4x16xf32>)" in text
    assert '"rlx_mir.reshape"' in text
    assert "new_shape = array<i64: -2, 4, 16>" in text  # dim 0 copied from the input
    program = rlx.runtime.load(rlx.compile(h, "llvm-cpu"), "local-task", weights)
    x = rand(RNG, 3, 16)
    got = program.main(x=x)
    for g, w in zip(got, ort_run(m, {"x": x}), strict=True):
        assert_close(g, w, "f32")


def test_large_constants_are_weights_unless_splats() -> None:
    big = rand(RNG, 8, 64)
    assert big.nbytes > INLINE_MAX_BYTES
    nodes = [helper.make_node("Add", ["x", "big"], ["a"], name="a"),
             helper.make_node("Add", ["a", "splat"], ["y"], name="s")]
    m = model(nodes, [vi("x", [8, 64])], [vi("y", [8, 64])],
              [init("big", big), init("splat", np.full((8, 64), 0.5, np.float32))])
    result = import_model(m)
    assert set(result.params) == {"big"}
    np.testing.assert_array_equal(result.params["big"], big)
    text = str(result.module)
    assert '"rlx_mir.expand"' in text
    assert "dense<5.000000e-01> : tensor<1x1xf32>" in text
    assert result.report.params == 1
    assert result.report.param_bytes == big.nbytes


def test_report_counts_folded_and_converted_nodes() -> None:
    report = import_model(two_outputs()).report
    assert report.nodes == 7
    # Shape of a dynamic dim is a symbolic shape vector, folded like the numbers around it
    assert report.folded == {"Shape": 1, "Concat": 1}
    assert report.converted["Reshape"] == 1
    assert "converted to MIR ops: " in report.summary()


# --------------------------------------------------------------------------------------
# Errors: one message naming the node, its op type and the opset
# --------------------------------------------------------------------------------------


def single(op: str, inputs: list[str], *, elem: int = TensorProto.FLOAT, opset: int = 18,
           domain: str = "", inits: tuple = (), **attrs: object) -> onnx.ModelProto:
    node = helper.make_node(op, inputs, ["y"], name="the_node", domain=domain, **attrs)
    ins = [vi(n, [2, 3], elem) for n in inputs if n not in {i.name for i in inits}]
    m = model([node], ins, [vi("y", [2, 3], elem)], inits, opset=opset)
    if domain:
        m.opset_import.append(helper.make_opsetid(domain, 1))
    return m


def spatial(op: str, inputs: list[str], x: list, inits: tuple = (), **attrs: object
            ) -> onnx.ModelProto:
    """``op`` over an image input ``x`` whose dims may be named (dynamic)."""
    node = helper.make_node(op, inputs, ["y"], name="the_node", **attrs)
    dims = [None] * len(x)
    outs = [vi("y", dims)] + ([vi("i", dims, TensorProto.INT64)] if op == "MaxPool" else [])
    if op == "MaxPool":
        node.output.append("i")
    return model([node], [vi("x", x)], outs, inits, opset=19)


F32, I64 = np.float32, np.int64
SIZES_HW = init("sizes", np.array([8, 6], I64))
ERRORS_SPATIAL = {
    "keep_aspect_ratio over dynamic sizes": (
        lambda: spatial("Resize", ["x", "", "", "sizes"], [1, 3, "h", "w"], (SIZES_HW,),
                        axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
        "keep_aspect_ratio_policy over the dynamic sizes [h, w]: rlx computes the common "
        "scale at import"),
    "antialias from a dynamic size": (
        lambda: spatial("Resize", ["x", "", "", "sizes"], [1, 3, "h", 5], (SIZES_HW,),
                        axes=[2, 3], mode="linear", antialias=1),
        "antialias resize from the dynamic size h to 8"),
    "roi of the wrong length": (
        lambda: spatial("Resize", ["x", "roi", "", "sizes"], [1, 3, 4, 5],
                        (init("roi", np.array([0.1, 0.2, 0.9], F32)), SIZES_HW), axes=[2, 3],
                        coordinate_transformation_mode="tf_crop_and_resize"),
        "roi of 3 values for 2 axes: expected 4 (starts, then ends)"),
    "transposed output_shape over dynamic sizes": (
        lambda: spatial("ConvTranspose", ["x", "w"], [1, 2, "h", 5],
                        (init("w", rand(RNG, 2, 3, 3, 3)),), strides=[2, 2],
                        output_shape=[9, 11]),
        "output_shape over the dynamic spatial sizes [h, 5]: rlx computes these pads at "
        "import; give pads"),
    "3-D depth stride over a dynamic depth": (
        lambda: spatial("Conv", ["x", "w"], [1, 2, "d", 6, 6],
                        (init("w", rand(RNG, 4, 2, 3, 3, 3)),), strides=[2, 1, 1]),
        "a 3-D convolution with depth stride 2 over the dynamic depth d"),
    "max pool indices over dynamic sizes": (
        lambda: spatial("MaxPool", ["x"], [1, 2, "h", 6], kernel_shape=[2, 2]),
        "the Indices output of MaxPool over the dynamic spatial sizes [h, 6]"),
}


@pytest.mark.parametrize("case", sorted(ERRORS_SPATIAL))
def test_what_a_dynamic_size_cannot_do_is_one_clear_error(case: str) -> None:
    """Import-time constants over a size known only at run time, and a malformed roi."""
    build, fragment = ERRORS_SPATIAL[case]
    with pytest.raises(ModelImportError) as info:
        import_model(build(), source="img.onnx")
    message = str(info.value)
    assert message.startswith("img.onnx: error: node 'the_node' ("), message
    assert fragment in message, message
    assert "\n" not in message


ERRORS = {
    "unsupported op": (lambda: single("Det", ["x"]),
                       "node 'the_node' (Det, opset 18): no rlx importer for this op"),
    "data-dependent output size": (lambda: single("NonZero", ["x"]),
                                   "node 'the_node' (NonZero, opset 18): the size of its "
                                   "output depends on the values of its inputs"),
    "unsupported opset": (lambda: single("Add", ["x", "z"], opset=6),
                          "node 'the_node' (Add, opset 6): opset 6 is not supported"),
    "old op version": (lambda: single("Gelu", ["x"], opset=18),
                       "node 'the_node' (Gelu, opset 18): no such op in ai.onnx opset 18"),
    "unsupported dtype": (lambda: single("StringConcat", ["x", "z"], elem=TensorProto.STRING,
                                         opset=23),
                          "node 'the_node' (StringConcat, opset 23): input 'x' is string: rlx "
                          "has no such element type"),
    "arithmetic on a 4-bit float": (
        lambda: single("Add", ["x", "z"], elem=TensorProto.FLOAT4E2M1, opset=23),
        "node 'the_node' (Add, opset 23): input 0 ('x') is float4_e2m1fn: rlx imports "
        "float4_e2m1fn in casts and data movement"),
    "8-bit float arithmetic": (lambda: single("Add", ["x", "z"], elem=TensorProto.FLOAT8E4M3FN),
                               "node 'the_node' (Add, opset 18): input 0 ('x') is "
                               "float8_e4m3fn: rlx holds 8-bit floats as storage"),
    "unsigned without an unsigned form": (
        lambda: single("Sign", ["x"], elem=TensorProto.UINT8),
        "node 'the_node' (Sign, opset 18): input 0 ('x') is uint8: rlx imports Sign of "
        "signed integers and floats"),
    "foreign domain": (lambda: single("FusedMatMul", ["x", "z"], domain="com.microsoft"),
                       "node 'the_node' (com.microsoft.FusedMatMul, opset 1): ops of domain "
                       "'com.microsoft' are not supported"),
    "data-dependent shape": (lambda: single("Reshape", ["x", "s"], inits=()),
                             "node 'the_node' (Reshape, opset 18): input 1 ('s', the new "
                             "shape) must be known at import time"),
    "cast to a string": (lambda: single("Cast", ["x"], to=TensorProto.STRING, opset=21),
                         "node 'the_node' (Cast, opset 21): cast to string: rlx has no such "
                         "element type"),
    "f64 remainder": (lambda: single("Mod", ["x", "z"], elem=TensorProto.DOUBLE, fmod=1),
                      "node 'the_node' (Mod, opset 18): Mod of float64: IREE 3.13 lowers an "
                      "f64 remainder to a libm call"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_unsupported_input_is_one_clear_error(case: str) -> None:
    build, fragment = ERRORS[case]
    m = build()
    if case == "data-dependent shape":
        m.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    with pytest.raises(ModelImportError) as info:
        import_model(m, source="bad.onnx")
    message = str(info.value)
    assert message.startswith("bad.onnx: error: "), message
    assert fragment in message
    assert "\n" not in message


def weighty(path: Path) -> bytes:
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [1, 64])],
              [vi("y", [1, 64])], [init("w", rand(RNG, 64, 64))])
    onnx.save(m, str(path))
    return path.read_bytes()


@pytest.mark.parametrize("cut", [0, 1, 7, 40, 1000, 8000, -3])
def test_truncated_file_is_one_clear_error(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "m.onnx"
    data = weighty(path)
    path.write_bytes(data[:cut])
    with pytest.raises(ModelImportError) as info:
        import_model(path)
    message = str(info.value)
    assert message.startswith(f"{path}: error: "), message
    assert "\n" not in message


def test_garbage_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ModelImportError, match="not a valid ONNX model"):
        import_model(path)
    with pytest.raises(ModelImportError, match="no such file"):
        import_model(tmp_path / "absent.onnx")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlx.tools.import_onnx", *args],
                          capture_output=True, text=True)


def test_cli_writes_both_files_or_nothing(tmp_path: Path) -> None:
    src = tmp_path / "m.onnx"
    data = weighty(src)
    hir, weights = tmp_path / "out.hir", tmp_path / "out.irpa"
    proc = cli(str(src), "-o", str(hir))  # weights but no --params-out
    assert proc.returncode == 1
    assert "give a parameter file (--params-out)" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    src.write_bytes(data[: len(data) // 2])
    proc = cli(str(src), "-o", str(hir), "--params-out", str(weights))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("error:") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    src.write_bytes(data)
    proc = cli(str(src), "-o", str(hir), "--params-out", str(weights))
    assert proc.returncode == 0, proc.stderr
    assert "blocks recognized: 1 (linear 1)" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out.hir", "out.irpa"]
    assert '"rlx_hir.linear"' in hir.read_text()
    assert rlx.load_hir(hir).input_names == ["x"]


def test_every_contrib_op_named_has_a_converter() -> None:
    """onnx_read.CONTRIB_OPS (the com.microsoft ops the reader lets through) and the
    converters registered as com.microsoft.<op> are the same set."""
    from rlx.importers.onnx_ops import CONVERTERS
    from rlx.importers.onnx_read import CONTRIB_DOMAIN, CONTRIB_OPS

    registered = {k.removeprefix(CONTRIB_DOMAIN + ".") for k in CONVERTERS
                  if k.startswith(CONTRIB_DOMAIN + ".")}
    assert registered == set(CONTRIB_OPS)
