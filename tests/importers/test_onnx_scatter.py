"""Scatters as exporters write them (issue 22): ``cache[:, pos] = new`` (``index_put``,
ScatterND) and ``scatter_add`` (ScatterElements with ``reduction = add``) from a torch
module exported by both exporters, with a dynamic number of positions and a dynamic
histogram input, against ONNX Runtime at two sizes from one compile (dynamo also on
Vulkan); TensorScatter, opset 24's KV-cache update (linear and circular), against ONNX's
reference evaluator (ONNX Runtime does not run opset 24); indices out of range never
write outside the tensor."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import rlx
from onnx_models import model, ort_run, vi
from rlx.importers.onnx import import_model
from rlx.reference.tolerance import assert_close

SIZES = [(3, 3, 10), (5, 2, 7)]
"""(positions written, histogram rows, histogram inputs a row)."""


def _export(path: Path, dynamo: bool) -> onnx.ModelProto:
    import torch
    from torch import nn

    class Scatters(nn.Module):
        def forward(self, cache: torch.Tensor, new: torch.Tensor, pos: torch.Tensor,
                    labels: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            c = cache.clone()
            c[:, pos] = new
            hist = torch.zeros(x.shape[0], 6).scatter_add(1, labels, x)
            return c * 2, hist

    args = (torch.randn(2, 16, 8), torch.randn(2, 3, 8), torch.tensor([4, 5, 6]),
            torch.randint(0, 6, (3, 10)), torch.randn(3, 10))
    names = ["cache", "new", "pos", "labels", "x"]
    if dynamo:
        s, n, length = (torch.export.Dim(d, max=12) for d in ("s", "n", "l"))
        dynamic = {"dynamic_shapes": {"cache": None, "new": {1: s}, "pos": {0: s},
                                      "labels": {0: n, 1: length}, "x": {0: n, 1: length}}}
    else:
        dynamic = {"dynamic_axes": {"new": {1: "s"}, "pos": {0: "s"},
                                    "labels": {0: "n", 1: "l"}, "x": {0: "n", 1: "l"}}}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(Scatters().eval(), args, str(path), input_names=names,
                          output_names=["c", "hist"], dynamo=dynamo, opset_version=18,
                          **dynamic)  # type: ignore[arg-type]
    return onnx.load(str(path))


def _feeds(m: onnx.ModelProto, size: tuple[int, int, int], seed: int) -> dict[str, np.ndarray]:
    s, n, length = size
    rng = np.random.default_rng(seed)
    feeds = {"cache": rng.standard_normal((2, 16, 8)).astype(np.float32),
             "new": rng.standard_normal((2, s, 8)).astype(np.float32),
             "pos": np.arange(4, 4 + s, dtype=np.int64),
             "labels": rng.integers(0, 6, (n, length)).astype(np.int64),
             "x": rng.standard_normal((n, length)).astype(np.float32)}
    names = {i.name for i in m.graph.input}
    return {k: v for k, v in feeds.items() if k in names}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, onnx.ModelProto]:
    tmp = tmp_path_factory.mktemp("scatter")
    return {"torchscript": _export(tmp / "s.onnx", False),
            "dynamo": _export(tmp / "d.onnx", True)}


def _check(m: onnx.ModelProto, target: str, device: str) -> None:
    result = import_model(m)
    ops = result.report.converted
    assert ops["ScatterND"] == 1, dict(ops)
    assert ops["ScatterElements"] == 1, dict(ops)
    program = rlx.runtime.load(rlx.compile(result.module, target), device, result.params)
    for k, size in enumerate(SIZES):
        feeds = _feeds(m, size, k)
        got = program.main(**feeds)
        for g, w in zip(got, ort_run(m, feeds), strict=True):
            assert_close(g, w, "f32", f"{size}")


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_index_put_and_scatter_add_match_onnxruntime(
        exports: dict[str, onnx.ModelProto], exporter: str) -> None:
    _check(exports[exporter], "llvm-cpu", "local-task")


@pytest.mark.vulkan
def test_scatters_on_vulkan(exports: dict[str, onnx.ModelProto]) -> None:
    _check(exports["dynamo"], "vulkan", "vulkan")


def _tensor_scatter(mode: str) -> onnx.ModelProto:
    """A [B, H, L, D] cache updated with S rows per head at each sample's write index."""
    node = helper.make_node("TensorScatter", ["past", "update", "write"], ["present"],
                            mode=mode, axis=2)
    return model([node], [vi("past", [2, 3, 8, 4]), vi("update", [2, 3, "s", 4]),
                          vi("write", [2], TensorProto.INT64)],
                 [vi("present", [2, 3, 8, 4])], opset=24)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_matches_the_reference(mode: str) -> None:
    """Decode (one row) and prefill-sized (three rows) updates from one compile; circular
    writes wrap past the cache's end."""
    m = _tensor_scatter(mode)
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task")
    rng = np.random.default_rng(3)
    writes = {"linear": [[2, 7], [0, 5]], "circular": [[6, 7], [7, 2]]}[mode]
    for s, write in zip((1, 3), writes, strict=True):
        feeds = {"past": rng.standard_normal((2, 3, 8, 4)).astype(np.float32),
                 "update": rng.standard_normal((2, 3, s, 4)).astype(np.float32),
                 "write": np.asarray(write, np.int64)}
        want = ReferenceEvaluator(m).run(None, feeds)[0]
        np.testing.assert_array_equal(program.main(**feeds), want)


def test_scatter_positions_out_of_range_stay_inside() -> None:
    """ScatterND positions far outside the data (and negative ones past the start) are
    clamped into it: the result is the data with the clamped rows replaced, nothing else
    in memory is touched (the module's other output, computed after, is intact)."""
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"]),
             helper.make_node("Mul", ["data", "data"], ["sq"])]
    m = model(nodes, [vi("data", [4, 3]), vi("idx", ["n", 1], TensorProto.INT64),
                      vi("upd", ["n", 3])], [vi("y", [4, 3]), vi("sq", [4, 3])])
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task")
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[1 << 40], [-(1 << 40)], [-1]], np.int64)
    upd = np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3]], np.float32)
    y, sq = program.main(data=data, idx=idx, upd=upd)
    want = data.copy()
    want[3], want[0] = upd[2], upd[1]  # 2^40 -> row 3, then -1 -> row 3 again (last wins)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(sq, data * data)


def test_scatter_into_an_empty_dim_writes_nothing() -> None:
    """Data with a dynamic dim that is 0 at run time has no position to clamp an index to:
    the updates are dropped, never written past the (empty) buffer."""
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"]),
             helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0)]
    m = model(nodes, [vi("data", ["rows", 3]), vi("idx", ["n", 1], TensorProto.INT64),
                      vi("upd", ["n", 3])], [vi("y", ["rows", 3]), vi("total", [])])
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task")
    y, total = program.main(data=np.zeros((0, 3), np.float32),
                            idx=np.array([[0], [5]], np.int64),
                            upd=np.ones((2, 3), np.float32))
    assert y.shape == (0, 3)
    assert float(total) == 0.0
    y, _ = program.main(data=np.zeros((2, 3), np.float32), idx=np.array([[0], [5]], np.int64),
                        upd=np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(y, np.ones((2, 3), np.float32))
