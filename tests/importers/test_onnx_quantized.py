"""Quantized ONNX models as ONNX Runtime's own tools write them (issue 22: the models people
actually export): a tiny HF BERT exported by torch.onnx and quantized by
``onnxruntime.quantization.quantize_dynamic`` (``DynamicQuantizeLinear`` +
``MatMulInteger`` on int8 weights), and a small CNN quantized by ``quantize_static`` in the
QDQ format with per-channel int8 weights (``QuantizeLinear`` / ``DequantizeLinear`` around
each ``Conv`` and ``Gemm``). Each is imported, compiled and run against ONNX Runtime on the
same quantized file, its graph optimizations off (so that ORT computes what the graph
says: its fused integer kernels round differently from the graph's float arithmetic).

Tolerance: the quantized graphs compute the same f32 values in rlx and ORT but the order of
a float sum (the dequantized convolutions, layer norms, softmax); an activation that lands
within an f32 rounding of a quantization boundary may then take the neighbouring level in
one of the two, a difference of one quantization step (the scale), which the layers after
it carry on. So the check is: all but 1% of the elements within f32 tolerance, and every one
within 4 steps of the output's quantization scale. Measured on the Intel Xeon (2026-12-06):
no element beyond f32 tolerance (BERT: max |difference| 7e-7 over outputs up to 3.3; the
CNN: equal)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from harness import DEVICE
from test_onnx_exports import _bert as bert_export

import rlx
from onnx_models import ort_run
from rlx.importers.onnx import import_model
from rlx.ir.types import DType
from rlx.reference.tolerance import TOLERANCES


def _close(got: np.ndarray, want: np.ndarray, step: float, what: str) -> None:
    """All but 1% of the elements within the f32 tolerance, every one within 4 steps."""
    rtol, atol = TOLERANCES[DType.F32]
    off = np.abs(got - want) > atol + rtol * np.abs(want).max()
    assert off.mean() <= 0.01, f"{what}: {off.sum()} of {off.size} elements differ"
    assert np.abs(got - want).max() <= 4 * step, f"{what}: {np.abs(got - want).max()}"


def _bert(tmp: Path) -> Path:
    """test_onnx_exports' BERT (TorchScript exporter), quantized dynamically."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    exported = bert_export(tmp, False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        quantize_dynamic(exported, tmp / "q.onnx", weight_type=QuantType.QInt8)
    return tmp / "q.onnx"


def _cnn(tmp: Path, qoperator: bool = False) -> tuple[Path, np.ndarray]:
    """A small CNN quantized by ``quantize_static``: QDQ (the default format), or, with
    ``qoperator``, ONNX Runtime's QOperator format (QLinearConv, and its contrib
    QLinearAdd / QLinearMul / QLinearSigmoid / QLinearLeakyRelu / QLinearConcat / QGemm)
    of a net with a gated residual, a leaky ReLU and a concatenation."""
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Gated(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.c = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.a(x))
            h = h + torch.sigmoid(self.b(h)) * h
            h = torch.nn.functional.leaky_relu(self.c(h), 0.1)
            h = torch.cat([h, h * 0.5], 1)[:, :16]
            return self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))

    torch.manual_seed(0)
    net = Gated().eval() if qoperator else torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()
    x = torch.randn(1, 3, 16, 16)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(net, (x,), str(tmp / "f.onnx"), input_names=["x"],
                          output_names=["y"], dynamo=False, opset_version=17,
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    rng = np.random.default_rng(0)
    images = [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter(images)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self.left, None)
            return None if x is None else {"x": x}

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        quantize_static(tmp / "f.onnx", tmp / "q.onnx", Reader(),
                        quant_format=QuantFormat.QOperator if qoperator else QuantFormat.QDQ,
                        per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return tmp / "q.onnx", np.concatenate(images[:3])


def _ops(path: Path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node}


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_dynamically_quantized_bert_matches_onnxruntime(tmp_path: Path, target: str) -> None:
    """(On both targets: DynamicQuantizeLinear's whole-tensor min / max over dynamic dims
    sits behind a barrier that IREE 3.13 needs on each, ``rlx_mir.barrier`` ``always``.)"""
    path = _bert(tmp_path)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= _ops(path)
    result = import_model(path)
    assert result.report.converted["MatMulInteger"] >= 12  # q, k, v, out, ffn x 2 layers
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    m = onnx.load(str(path))
    rng = np.random.default_rng(1)
    for b, s in ((2, 7), (1, 12)):
        ids = rng.integers(0, 100, (b, s)).astype(np.int64)
        mask = np.ones((b, s), np.int64)
        mask[0, s - 2:] = 0
        feeds = {"input_ids": ids, "attention_mask": mask}
        got = program.main(**feeds)
        want = ort_run(m, feeds)[0]
        # a hidden state's step: its layer norm's output is O(1), quantized over ~[-4, 4]
        _close(got, want, 8 / 255, f"bert [{b}, {s}] on {target}")


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_qdq_cnn_matches_onnxruntime(tmp_path: Path, target: str) -> None:
    path, images = _cnn(tmp_path)
    ops = _ops(path)
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    m = onnx.load(str(path))
    per_channel = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and any(
        a.name == "axis" for a in n.attribute)]
    assert per_channel, "no per-channel weights"
    result = import_model(path)
    assert result.report.converted["QuantizeLinear"] >= 3
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    out_scale = next(i for i in m.graph.initializer if i.name.startswith("y_scale"))
    step = float(onnx.numpy_helper.to_array(out_scale))
    for n in (3, 1):
        feeds = {"x": images[:n]}
        got = program.main(**feeds)
        want = ort_run(m, feeds)[0]
        _close(got, want, step, f"cnn n={n}")


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_qoperator_cnn_matches_onnxruntime(tmp_path: Path, target: str) -> None:
    """ONNX Runtime's QOperator format, contrib ops included: equal to ONNX Runtime but for
    rare one-step half ties (the uint8 outputs of contrib ops, whose types ONNX's shape
    inference cannot give, are recorded by the converters: read as int8 they were off)."""
    path, images = _cnn(tmp_path, qoperator=True)
    contrib = {n.op_type for n in onnx.load(str(path)).graph.node
               if n.domain == "com.microsoft"}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
            "QGemm"} <= contrib
    result = import_model(path)
    assert result.report.converted["QLinearConv"] == 3
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    m = onnx.load(str(path))
    step = float(onnx.numpy_helper.to_array(next(i for i in m.graph.initializer
                                                 if i.name == "y_scale")))
    for n in (3, 1):
        feeds = {"x": images[:n]}
        _close(program.main(**feeds), ort_run(m, feeds)[0], step, f"qoperator n={n}")


def _qlinear_graph(rng: np.random.Generator) -> onnx.ModelProto:
    """QLinearConv (uint8 activations, int8 weights per output channel, an int32 bias),
    then QLinearMatMul of its rows with an int8 matrix, and ConvInteger, as the
    ONNX Model Zoo's int8 models write them, over a dynamic batch and image size."""
    from onnx import TensorProto, helper

    from onnx_models import init, model, vi

    u8 = TensorProto.UINT8
    nodes = [
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                         ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("QLinearMatMul", ["c", "ys", "yz", "m", "ms", "mz", "os", "oz"],
                         ["y"]),
        helper.make_node("ConvInteger", ["x", "w", "xz", "wz0"], ["acc"]),
    ]
    return model(nodes, [vi("x", ["n", 3, "h", 5], u8)],
                 [vi("y", ["n", 6, None, 4], u8), vi("acc", ["n", 6, None, None],
                                              TensorProto.INT32)],
                 [init("xs", np.float32(0.05)), init("xz", np.uint8(120)),
                  init("w", rng.integers(-100, 100, (6, 3, 3, 3)).astype(np.int8)),
                  init("ws", rng.uniform(0.01, 0.03, 6).astype(np.float32)),
                  init("wz", np.zeros(6, np.int8)), init("wz0", np.int8(2)),
                  init("ys", np.float32(0.4)), init("yz", np.uint8(100)),
                  init("b", rng.integers(-500, 500, 6).astype(np.int32)),
                  init("m", rng.integers(-120, 120, (3, 4)).astype(np.int8)),
                  init("ms", np.float32(0.02)), init("mz", np.int8(3)),
                  init("os", np.float32(0.3)), init("oz", np.uint8(128))])


@pytest.mark.parametrize("target", ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_qlinear_ops_match_onnxruntime(target: str) -> None:
    """The integer sums exact (ConvInteger equal to ONNX Runtime's), the requantized
    outputs equal or one step off where ``acc * multiplier`` sits at a half (f32 against
    ONNX Runtime's own arithmetic): at most 1% of them."""
    m = _qlinear_graph(np.random.default_rng(5))
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, target), DEVICE[target],
                               result.params)
    rng = np.random.default_rng(6)
    for n, h in ((2, 9), (1, 6)):
        x = rng.integers(0, 256, (n, 3, h, 5)).astype(np.uint8)
        y, acc = program.main(x=x)
        want_y, want_acc = ort_run(m, {"x": x})
        np.testing.assert_array_equal(acc, want_acc)
        assert y.dtype == np.uint8
        off = np.abs(y.astype(np.int32) - want_y.astype(np.int32))
        assert off.max() <= 1, f"n={n} h={h}: {off.max()} steps"
        assert off.mean() <= 0.01, f"n={n} h={h}: {int((off > 0).sum())} elements differ"
