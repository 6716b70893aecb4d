"""Ordinary torch exports with a dynamic batch and sequence (issue 22, point 3): causal
``scaled_dot_product_attention`` after a ``chunk(3)`` of a fused QKV projection (both
exporters), views over two dynamic dims, and chunks of the dynamic sequence. All are
imported into one module, compiled once for llvm-cpu and run at several sizes against ONNX
Runtime on the same files."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_models import compile_together, ort_run
from rlx.importers.onnx import OnnxImport, import_model
from rlx.reference.tolerance import assert_close

D = 24
SIZES = [(2, 5), (1, 9), (3, 1)]


def _modules() -> dict[str, object]:
    import torch

    class CausalSelfAttention(torch.nn.Module):
        """GPT-style: one QKV projection chunked in three, SDPA with ``is_causal``."""

        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(D, 3 * D)
            self.out = torch.nn.Linear(D, D)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = (z.view(b, t, 2, D // 2).transpose(1, 2)
                       for z in self.qkv(x).chunk(3, dim=-1))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, t, D))

    class TwoDynamicViews(torch.nn.Module):
        """``[B, S, D] -> [B S, D]``, an op, then back to ``[B, S, D]``."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            return (torch.tanh(x.reshape(b * t, D)) * 2).view(b, t, D) + x

    class Chunks(torch.nn.Module):
        """``chunk(3)`` and ``chunk(2)`` along the dynamic sequence: pieces of ``ceil(S /
        k)`` rows, the last one shorter or empty (S = 1: two empty thirds)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b, c = x.chunk(3, dim=1)
            first, second = x.chunk(2, dim=1)
            return torch.cat([c * 2, torch.tanh(b), a, second - 1, first], dim=1)

    torch.manual_seed(0)
    return {"causal": CausalSelfAttention().eval(), "views": TwoDynamicViews().eval(),
            "chunks": Chunks().eval()}


def _export(module: object, path: Path, dynamo: bool) -> Path:
    import torch

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, (torch.randn(2, 6, D),), str(path), input_names=["x"],
                          dynamo=dynamo, opset_version=18,
                          dynamic_axes={"x": {0: "b", 1: "s"}})
    return path


CASES = {"causal_torchscript": ("causal", False), "causal_dynamo": ("causal", True),
         "views_torchscript": ("views", False), "views_dynamo": ("views", True),
         "chunks_torchscript": ("chunks", False)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[dict[str, Path], dict[str, OnnxImport], object]:
    """Every case exported, imported as one function of one module, compiled once."""
    tmp = tmp_path_factory.mktemp("dynamic")
    modules = _modules()
    paths = {name: _export(modules[kind], tmp / f"{name}.onnx", dynamo)
             for name, (kind, dynamo) in CASES.items()}
    results, program = compile_together(paths, "torch_exports")
    return paths, results, program


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_onnxruntime_at_several_sizes(
        name: str, exported: tuple[dict[str, Path], dict[str, OnnxImport], object]) -> None:
    paths, _, program = exported
    model = onnx.load(str(paths[name]))
    rng = np.random.default_rng(1)
    for b, s in SIZES:
        x = rng.standard_normal((b, s, D)).astype(np.float32)
        got = program[name](x=x)  # type: ignore[index]
        want = ort_run(model, {"x": x})[0]
        assert got.shape == want.shape
        assert_close(got, want, "f32")


@pytest.mark.parametrize("name", ["causal_torchscript", "causal_dynamo"])
def test_causal_sdpa_is_one_attention_block(
        name: str, exported: tuple[dict[str, Path], dict[str, OnnxImport], object]) -> None:
    """``is_causal``'s mask, built at run time (``Trilu`` of ones over ``[S, S]``), is the
    block's ``causal`` mask kind; the Kᵀ of either exporter is undone."""
    _, results, _ = exported
    report = results[name].report
    assert report.block_counts()["attention"] == 1
    assert report.block_counts()["linear"] == 2
    assert "Trilu" not in report.converted
    assert "Softmax" not in report.converted
    attention = next(b for b in report.blocks if b.kind == "attention")
    assert any("Trilu" in n for n in attention.nodes)


def test_views_over_two_dynamic_dims(
        exported: tuple[dict[str, Path], dict[str, OnnxImport], object]) -> None:
    """``[B S, D] -> [B, S, D]`` is a gather of rows (B and S counted at run time)."""
    _, results, _ = exported
    text = str(results["views_torchscript"].module)
    assert '"rlx_mir.gather"' in text
    assert "tensor<?x?x24xf32>" in text


def test_chunks_of_a_dynamic_axis(
        exported: tuple[dict[str, Path], dict[str, OnnxImport], object]) -> None:
    """The TorchScript exporter's chunk bounds (``ceil(S / k)`` multiples, computed from
    the input's shape) are ``dynamic_slice`` bounds, clamped at run time as ONNX clamps
    them (they had been refused: "a slice of run-time length ..., which rlx cannot
    compute")."""
    _, results, _ = exported
    assert str(results["chunks_torchscript"].module).count('"rlx_mir.dynamic_slice"') >= 4


def test_static_windows_of_a_dynamic_axis() -> None:
    """Slices of a dynamic axis with static bounds: an end of 10**9 (tf2onnx's "to the
    end", as Magika's model writes it) is the whole axis, where it had been a gather of
    10**9 rows (an allocation that failed at run time); a window ``[1:4]`` is read when the
    axis reaches 4 and is a run-time error naming the Slice when it does not (ONNX would
    clamp it; rlx does not hand back a shorter result than it compiled)."""
    from onnx import helper

    import rlx
    from onnx_models import init, model, vi

    nodes = [helper.make_node("Slice", ["x", "s0", "e0", "a32"], ["whole"], name="to_end"),
             helper.make_node("Slice", ["x", "s1", "e1", "a0"], ["y"], name="window"),
             helper.make_node("Add", ["whole", "whole"], ["z"], name="twice")]
    inits = [init("s0", np.array([0], np.int32)), init("e0", np.array([10**9], np.int32)),
             init("a32", np.array([0], np.int32)), init("a0", np.array([0], np.int64)),
             init("s1", np.array([1], np.int64)),
             init("e1", np.array([4], np.int64))]
    m = model(nodes, [vi("x", ["n", 3])], [vi("z", ["n", 3]), vi("y", [3, 3])], inits)
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    for n in (4, 7):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        for got, want in zip(program.main(x=x), ort_run(m, {"x": x}), strict=True):
            assert_close(got, want, "f32")
    with pytest.raises(rlx.runtime.RunError, match="window"):
        program.main(x=np.zeros((3, 3), np.float32))


def test_a_view_by_another_inputs_batch() -> None:
    """GPT-2's ``attention_mask.view(batch, -1)``, ``batch`` read from ``input_ids``: the
    dynamo exporter with ``Dim.AUTO`` names each input's dims apart, so the view's ``-1`` is
    ``floor(s m / b)``. rlx takes the two batches as one, checked at run time: equal to ONNX
    Runtime at two sizes; a mask of another batch is one error naming the Reshape."""
    from onnx import helper

    import rlx
    from onnx_models import init, model, vi

    nodes = [helper.make_node("Shape", ["ids"], ["batch"], name="batch", start=0, end=1),
             helper.make_node("Concat", ["batch", "minus1"], ["target"], name="cat", axis=0),
             helper.make_node("Reshape", ["mask", "target"], ["viewed"], name="view_mask"),
             helper.make_node("Cast", ["ids"], ["fids"], name="cast_ids", to=1),
             helper.make_node("Cast", ["viewed"], ["fmask"], name="cast_mask", to=1),
             helper.make_node("Mul", ["fids", "fmask"], ["z"], name="masked")]
    m = model(nodes, [vi("ids", ["b", "s"], onnx.TensorProto.INT64),
                      vi("mask", ["b2", "s2"], onnx.TensorProto.INT64)],
              [vi("z", ["b", "s"]), vi("viewed", ["b", "s"], onnx.TensorProto.INT64)],
              [init("minus1", np.array([-1], np.int64))])
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    rng = np.random.default_rng(0)
    for b, n in ((2, 5), (1, 9)):
        feeds = {"ids": rng.integers(0, 50, (b, n)), "mask": rng.integers(0, 2, (b, n))}
        for got, want in zip(program.main(**feeds), ort_run(m, feeds), strict=True):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(rlx.runtime.RunError, match="view_mask"):
        program.main(ids=np.zeros((2, 6), np.int64), mask=np.zeros((3, 4), np.int64))


def test_windows_of_a_run_time_size() -> None:
    """``HannWindow`` / ``HammingWindow`` / ``BlackmanWindow`` of an input's run-time length
    (``torch.hann_window(x.shape[-1])``), periodic and symmetric, in f32 and f64: equal to
    ONNX Runtime at 2, 7 and 400 samples from one compile. A symmetric window of one sample
    (``N = 0``, where ONNX's formula divides 0 by 0 and ONNX Runtime gives NaN) is ``[1]``,
    as torch's."""
    from onnx import TensorProto, helper

    import rlx
    from onnx_models import model, vi

    nodes = [helper.make_node("Shape", ["x"], ["shape"], start=1, end=2),
             helper.make_node("Squeeze", ["shape"], ["n"]),
             helper.make_node("HannWindow", ["n"], ["hann"]),
             helper.make_node("HammingWindow", ["n"], ["hamming"], periodic=0),
             helper.make_node("BlackmanWindow", ["n"], ["blackman"], periodic=0,
                              output_datatype=TensorProto.DOUBLE),
             helper.make_node("Mul", ["x", "hann"], ["y"])]
    m = model(nodes, [vi("x", ["b", "t"])], [vi("y", ["b", "t"]), vi("hamming", ["t"]),
                                             vi("blackman", ["t"], TensorProto.DOUBLE)], [])
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    rng = np.random.default_rng(0)
    for t in (2, 7, 400):
        x = rng.standard_normal((2, t)).astype(np.float32)
        got = program.main(x=x)
        assert got[2].dtype == np.float64
        for g, w in zip(got, ort_run(m, {"x": x}), strict=True):
            assert_close(g, w.astype(g.dtype), "f32", f"{t} samples")
    _, hamming, blackman = program.main(x=np.ones((1, 1), np.float32))
    assert hamming.tolist() == [1.0]
    assert blackman.tolist() == [1.0]


@pytest.mark.parametrize(("interleaved", "rotary_dim", "rank"),
                         [(0, 0, 3), (1, 8, 3), (0, 4, 4)])
def test_rotary_embedding_over_a_dynamic_batch_and_length(
        interleaved: int, rotary_dim: int, rank: int) -> None:
    """RotaryEmbedding-23 (halves / interleaved pairs, full / partial rotation, ``[B, S, H
    * D]`` and ``[B, H, S, D]``) with per-sample position_ids, from one compile at two
    batch and sequence sizes, against ONNX's reference evaluator (ONNX Runtime does not
    run opset 23's RotaryEmbedding on every version)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    import rlx
    from onnx_models import model, vi

    heads, head = 2, 12
    shape = ["b", "s", heads * head] if rank == 3 else ["b", heads, "s", head]
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                            interleaved=interleaved, rotary_embedding_dim=rotary_dim,
                            **({"num_heads": heads} if rank == 3 else {}))
    m = model([node], [vi("x", shape), vi("cos", [32, (rotary_dim or head) // 2]),
                       vi("sin", [32, (rotary_dim or head) // 2]),
                       vi("pos", ["b", "s"], TensorProto.INT64)], [vi("y", shape)], opset=23)
    result = import_model(m)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task")
    rng = np.random.default_rng(7)
    half = (rotary_dim or head) // 2
    angles = np.arange(32)[:, None] / 10000 ** (np.arange(half)[None, :] / half)
    for b, s in ((1, 5), (3, 2)):
        x_shape = (b, s, heads * head) if rank == 3 else (b, heads, s, head)
        feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
                 "cos": np.cos(angles).astype(np.float32),
                 "sin": np.sin(angles).astype(np.float32),
                 "pos": rng.integers(0, 32, (b, s)).astype(np.int64)}
        want = ReferenceEvaluator(m).run(None, feeds)[0]
        assert_close(program.main(**feeds), want, "f32", f"b={b} s={s}")


def _scripted(path: Path, body: object, op: str = "If"
              ) -> tuple[onnx.ModelProto, OnnxImport, object]:
    """``body`` (an ``nn.Module`` with an ``if`` or a loop) through ``torch.jit.script`` and the
    TorchScript exporter over a dynamic batch of ``[n, 8]`` (an ``op`` in the graph),
    imported (one ``op`` converted), compiled for llvm-cpu and loaded."""
    import torch

    import rlx

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(torch.jit.script(body), (torch.randn(3, 8),), str(path),
                          input_names=["x"], dynamo=False, opset_version=17,
                          dynamic_axes={"x": {0: "n"}})
    m = onnx.load(str(path))
    assert op in {n.op_type for n in m.graph.node}
    result = import_model(m)
    assert result.report.converted[op] == 1
    return m, result, rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                                       result.params)


def test_a_scripted_if_on_a_static_size_is_inlined(tmp_path: Path) -> None:
    """``torch.jit.script`` keeps a Python ``if`` on a size as an ONNX ``If``; over a
    dynamic batch its condition reads a static size, so rlx folds it and inlines the branch
    it picks (a Linear there): equal to ONNX Runtime at two batch sizes."""
    import torch

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.size(-1) == 8:
                y = self.fc(x)
            else:
                y = x * 2.0
            return torch.relu(y)

    m, result, program = _scripted(tmp_path / "if.onnx", Body().eval())
    assert result.report.converted["Gemm"] == 1  # the branch's Linear
    for n in (3, 5):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        assert_close(program.main(x=x), ort_run(m, {"x": x})[0], "f32", f"n={n}")


def test_an_if_on_a_run_time_condition_selects(tmp_path: Path) -> None:
    """``torch.jit.script`` of an ``if`` on the data (``x.sum() > 0``) exports an ``If``
    whose condition is known only at run time: both branches are imported (a Linear, and a
    scale) and the output selected; equal to ONNX Runtime for inputs that take each branch,
    at two batch sizes, from one compiled module. Branches whose outputs differ in shape
    (or element type) are one error naming the node and the output."""
    import torch
    from onnx import TensorProto, helper

    import rlx
    from onnx_models import model, vi

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                y = self.fc(x)
            else:
                y = x * -3.0
            return torch.relu(y) + 1.0

    m, _, program = _scripted(tmp_path / "if_data.onnx", Body().eval())
    for n in (3, 5):
        base = np.abs(np.random.default_rng(n).standard_normal((n, 8))).astype(np.float32)
        for x in (base, -base):                  # the sum positive, then negative
            want = ort_run(m, {"x": x})[0]
            assert_close(program.main(x=x), want, "f32", f"n={n} sum={x.sum():.1f}")
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["y1"])], "t",
                             [], [vi("y1", [2])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["y2"], axis=0)], "e",
                              [], [vi("y2", [4])])
    runtime = model([helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then,
                                      else_branch=other)],
                    [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [None])])
    with pytest.raises(rlx.RlxError, match=r"node 'pick' \(If, opset 18\): output 0 \('y'\): "
                                           r"the branches give f32 \[2\] and f32 \[4\]"):
        import_model(runtime)


def test_a_loop_over_a_static_size_is_unrolled(tmp_path: Path) -> None:
    """``torch.jit.script`` keeps ``for i in range(x.size(1) // 4)`` as an ONNX ``Loop``; over a
    dynamic batch its trip count reads a static size, so rlx unrolls the body (a Linear,
    the iteration number added, tanh) twice: equal to ONNX Runtime at two batch sizes. A
    hand-built ``Loop`` with a scan output (each iteration's value stacked) against ONNX
    Runtime (ONNX's reference evaluator ran it for no iterations); a trip count read from
    the dynamic batch is one error naming the node."""
    import torch
    from onnx import TensorProto, helper

    import rlx
    from onnx_models import model, vi

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x
            for i in range(x.size(1) // 4):
                y = torch.tanh(self.fc(y) + i)
            return y

    m, result, program = _scripted(tmp_path / "loop.onnx", Body().eval(), "Loop")
    assert result.report.converted["Gemm"] == 2    # the body's Linear, once an iteration
    for n in (3, 5):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        assert_close(program.main(x=x), ort_run(m, {"x": x})[0], "f32", f"n={n}")

    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["acc", "fi"], ["acc2"]),
         helper.make_node("Mul", ["acc2", "acc2"], ["sq"]),
         helper.make_node("Identity", ["c"], ["c2"])], "body",
        [vi("i", [], TensorProto.INT64), vi("c", [], TensorProto.BOOL), vi("acc", ["n", 4])],
        [vi("c2", [], TensorProto.BOOL), vi("acc2", ["n", 4]), vi("sq", ["n", 4])])
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [3])
    scan = model([helper.make_node("Loop", ["trip", "", "x"], ["y", "ys"], name="steps",
                                   body=body)],
                 [vi("x", ["n", 4])], [vi("y", ["n", 4]), vi("ys", [3, "n", 4])], [trip])
    result = import_model(scan)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for got, want in zip(program.main(x=x), ort_run(scan, {"x": x}),
                         strict=True):
        assert_close(got, want, "f32", "the scan Loop")

    class Steps(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x
            for _ in range(x.size(0)):
                y = torch.tanh(y)
            return y

    with pytest.raises(rlx.RlxError, match=r"\(Loop, opset 17\): the trip count \(input 0\) is "
                                           r"computed at run time"):
        _scripted(tmp_path / "while.onnx", Steps().eval(), "Loop")
    long = model([helper.make_node("Loop", ["trip", "", "x"], ["y", "ys"], name="long",
                                   body=body)], [vi("x", ["n", 4])],
                 [vi("y", ["n", 4]), vi("ys", [300, "n", 4])],
                 [helper.make_tensor("trip", TensorProto.INT64, [], [300])])
    with pytest.raises(rlx.RlxError, match=r"node 'long' \(Loop, opset 18\): trip count 300: "
                                           r"rlx unrolls at most 256 iterations"):
        import_model(long)
    ended = model([helper.make_node("Loop", ["trip", "go", "x"], ["y", "ys"], name="ended",
                                    body=body)],
                  [vi("go", [], TensorProto.BOOL), vi("x", ["n", 4])],
                  [vi("y", ["n", 4]), vi("ys", [3, "n", 4])], [trip])
    with pytest.raises(rlx.RlxError, match=r"node 'ended' \(Loop, opset 18\): the condition "
                                           r"\(input 1\) is computed at run time"):
        import_model(ended)


def test_pixel_unshuffle_over_a_dynamic_image(tmp_path: Path) -> None:
    """``pixel_unshuffle(x, 2)`` over a dynamic batch, H and W, from both exporters. The
    TorchScript exporter writes reshapes whose inferred size is ``H / 2``, whole only for an
    even ``H``: the reshape keeps its ``-1`` and rlx checks at run time that ``H`` divides
    (it had been refused at import: "the inferred size h/2 is not a whole number"). The
    dynamo exporter's (``H = 2 h``) splits two dynamic dims in one reshape: one reshape a
    split (it had been refused: "rlx cannot compute the sizes"). Each equal to ONNX
    Runtime at two image sizes from one compile; an odd ``H`` is one run-time error naming
    the reshape."""
    import torch

    import rlx

    class Unshuffle(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.pixel_unshuffle(x, 2)

    rng = np.random.default_rng(0)
    for dynamo in (False, True):
        path = tmp_path / f"unshuffle{int(dynamo)}.onnx"
        axes = {"dynamic_shapes": ({0: torch.export.Dim("b"), 2: 2 * torch.export.Dim("h"),
                                    3: 2 * torch.export.Dim("w")},)} if dynamo else {
            "dynamic_axes": {"x": {0: "b", 2: "h", 3: "w"}}}
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            torch.onnx.export(Unshuffle(), (torch.randn(1, 3, 8, 6),), str(path),
                              input_names=["x"], dynamo=dynamo, opset_version=18, **axes)
        m = onnx.load(str(path))
        result = import_model(m)
        assert "tensor<?x3x?x?xf32>" in str(result.module)
        program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                                   result.params)
        for shape in [(1, 3, 8, 6), (2, 3, 4, 10)]:
            x = rng.standard_normal(shape).astype(np.float32)
            got = program.main(x=x)
            assert got.shape == (shape[0], 12, shape[2] // 2, shape[3] // 2)
            assert_close(got, ort_run(m, {"x": x})[0], "f32", f"dynamo={dynamo} {shape}")
        with pytest.raises(rlx.RlxError, match=r"'rlx_mir.reshape' \"[\w/]+\": operand 'x' "
                                               r"dim 2: expected a multiple of 2"):
            program.main(x=rng.standard_normal((1, 3, 5, 6)).astype(np.float32))


def test_a_log_mel_front_end_over_audio_of_any_length(tmp_path: Path) -> None:
    """``torch.stft`` (a Hann window, hop 8, no centering), power, a mel matmul and a log,
    exported by the dynamo exporter (the TorchScript one refuses complex STFTs): ONNX's
    ``STFT`` over a signal of run-time length (frames ``floor((t - 32) / 8) + 1``, gathered
    and transformed by the DFT's tables; "no rlx importer for this op" before), against ONNX
    Runtime at two lengths from one compiled module."""
    import torch

    import rlx

    class LogMel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hann_window(32))
            self.register_buffer("mel", torch.rand(17, 8))

        def forward(self, audio: torch.Tensor) -> torch.Tensor:
            spec = torch.stft(audio, 32, hop_length=8, window=self.window, center=False,
                              return_complex=True)
            return torch.log((spec.abs() ** 2).transpose(1, 2) @ self.mel + 1e-6)

    torch.manual_seed(0)
    path = tmp_path / "log_mel.onnx"
    dim = torch.export.Dim.AUTO
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(LogMel().eval(), (torch.randn(2, 400),), str(path),
                          input_names=["audio"], dynamo=True, opset_version=18,
                          dynamic_shapes=({0: dim, 1: dim},))
    model = onnx.load(str(path))
    assert "STFT" in {n.op_type for n in model.graph.node}
    result = import_model(model)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    rng = np.random.default_rng(5)
    for b, t in ((2, 400), (1, 731)):
        audio = rng.standard_normal((b, t)).astype(np.float32)
        got = program.main(audio=audio)
        (want,) = ort_run(model, {"audio": audio})
        assert got.shape == want.shape == (b, (t - 32) // 8 + 1, 8)
        assert_close(got, want, "f32", f"log-mel of {t} samples")
