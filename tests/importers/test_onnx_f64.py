"""float64 models (issue 22, point 4): f64 tensors are runtime tensors on llvm-cpu, computed
in f64 (rlx.compile turns IREE's f64-to-f32 demotion off for a module that has them), and
refused for the GPU targets, where IREE demotes f64, with one error naming the target."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import rlx
from onnx_models import init, model, ort_run, vi
from rlx.importers.onnx import import_model
from rlx.ir.diagnostics import CompileError
from rlx.reference.tolerance import assert_close

D = TensorProto.DOUBLE


def _f64_model() -> tuple[object, np.ndarray]:
    """f32 in, cast to f64, a dense layer, layer norm, softmax, a log-sum-exp and a sum
    in f64, both results out: one in f64, one cast back to f32."""
    rng = np.random.default_rng(11)
    nodes = [
        helper.make_node("Cast", ["x32"], ["x"], to=D),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], axis=-1),
        helper.make_node("Softmax", ["n"], ["p"]),
        helper.make_node("ReduceLogSumExp", ["h", "ax"], ["lse"], keepdims=1),
        helper.make_node("Add", ["p", "lse"], ["y"]),
        helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT),
    ]
    inits = [init("w", rng.standard_normal((6, 9))), init("g", rng.standard_normal(9)),
             init("b", rng.standard_normal(9)), init("ax", np.array([-1], np.int64))]
    m = model(nodes, [vi("x32", ["n", 6])], [vi("y", ["n", 9], D), vi("y32", ["n", 9])],
              inits)
    return m, (rng.standard_normal((5, 6)) * 4).astype(np.float32)


def test_f64_computes_in_f64_on_llvm_cpu() -> None:
    """Within 1e-10 of ONNX Runtime's f64: a result computed in f32 is ~1e-7 off and
    fails; the f32 copy of the result matches to f32."""
    m, x = _f64_model()
    result = import_model(m)
    assert "xf64>" in str(result.module)
    program = rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                               result.params)
    for rows in (x, x[:2]):
        got, got32 = program.main(x32=rows)
        want, want32 = ort_run(m, {"x32": rows})
        assert got.dtype == np.float64
        assert_close(got, want, "f64")
        assert_close(got32, want32, "f32")
    with pytest.raises(AssertionError):  # the tolerance tells f32 arithmetic apart
        assert_close(want.astype(np.float32).astype(np.float64) * (1 + 3e-7), want, "f64")


@pytest.mark.parametrize("target", ["vulkan", "cuda"])
def test_f64_is_refused_for_gpu_targets(target: str) -> None:
    m, _ = _f64_model()
    with pytest.raises(CompileError, match=rf"f64 tensors compile for llvm-cpu only \(IREE "
                                           rf"demotes f64 to f32 for {target}\)"):
        rlx.compile(import_model(m).module, target)


def test_f64_activation_iree_lacks_names_the_node() -> None:
    """IREE 3.13 links no libm for an f64 tanh and has no f64 erf: the import fails with
    the node, the kind and what to do, not IREE's link error."""
    from rlx.ir.diagnostics import ModelImportError

    m = model([helper.make_node("Tanh", ["x"], ["y"], name="squash")], [vi("x", [2, 3], D)],
              [vi("y", [2, 3], D)])
    with pytest.raises(ModelImportError, match=r"node 'squash' \(Tanh, opset 18\): .*cast "
                                               r"the input to f32, found tanh of f64"):
        import_model(m)
