"""IREE bugs that rlx's lowering works around, each as a pure-MLIR reproducer run through
iree-compile and the IREE runtime alone (no rlx code). Each test asserts the right answer
and is a strict xfail while the pinned IREE has the bug: when an IREE upgrade fixes it, the
test passes, fails as XPASS, and says which workaround can go."""

from __future__ import annotations

import numpy as np
import pytest

# A multi-result dispatch: an iota (exclusive cumsum of ones, a reduction) fused with its
# broadcast to [b, s] while a later op also reads the iota. IREE 3.13's CollapseDimensions
# (hoistTensorReshapesOutOfDispatchRegion) takes the collapsed second result's dynamic dims
# from the start of the dispatch's dims list, i.e. the first result's ({s, b} instead of
# {b, s}), and the [b, s] tile is stored with the wrong row stride: wrong values at O3
# (aggressive fusion), right at O0.
COLLAPSE_DIMS = """
#id1 = affine_map<(d0) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%arg0: tensor<?x?xi64>) -> tensor<?x?xi64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c0_i64 = arith.constant 0 : i64
  %c1_i64 = arith.constant 1 : i64
  %b = tensor.dim %arg0, %c0 : tensor<?x?xi64>
  %s = tensor.dim %arg0, %c1 : tensor<?x?xi64>
  %rowsrc = tensor.extract_slice %arg0[0, 0] [%b, 1] [1, 1] : tensor<?x?xi64> to tensor<?xi64>
  %e0 = tensor.empty(%s) : tensor<?xi64>
  %ones = linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]}
      outs(%e0 : tensor<?xi64>) {
  ^bb0(%out: i64):
    linalg.yield %c1_i64 : i64
  } -> tensor<?xi64>
  %e1 = tensor.empty(%s) : tensor<?xi64>
  %f1 = linalg.fill ins(%c0_i64 : i64) outs(%e1 : tensor<?xi64>) -> tensor<?xi64>
  %cs = linalg.generic {indexing_maps = [#col, #row],
                        iterator_types = ["parallel", "reduction"]}
      ins(%ones : tensor<?xi64>) outs(%f1 : tensor<?xi64>) {
  ^bb0(%in: i64, %out: i64):
    %j = linalg.index 1 : index
    %i = linalg.index 0 : index
    %lt = arith.cmpi ult, %j, %i : index
    %v = arith.select %lt, %in, %c0_i64 : i64
    %r = arith.addi %out, %v : i64
    linalg.yield %r : i64
  } -> tensor<?xi64>
  %e2 = tensor.empty(%b, %s) : tensor<?x?xi64>
  %cols = linalg.generic {indexing_maps = [#row, #col, #id2],
                          iterator_types = ["parallel", "parallel"]}
      ins(%rowsrc, %cs : tensor<?xi64>, tensor<?xi64>) outs(%e2 : tensor<?x?xi64>) {
  ^bb0(%r: i64, %c: i64, %out: i64):
    %t = arith.cmpi sge, %r, %c0_i64 : i64
    %v = arith.select %t, %c, %c0_i64 : i64
    linalg.yield %v : i64
  } -> tensor<?x?xi64>
  %e3 = tensor.empty(%b, %s) : tensor<?x?xi64>
  %rows = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%e3 : tensor<?x?xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %v = arith.index_cast %i : index to i64
    linalg.yield %v : i64
  } -> tensor<?x?xi64>
  %ra = tensor.expand_shape %rows [[0], [1, 2]] output_shape [%b, %s, 1]
      : tensor<?x?xi64> into tensor<?x?x1xi64>
  %ca = tensor.expand_shape %cols [[0], [1, 2]] output_shape [%b, %s, 1]
      : tensor<?x?xi64> into tensor<?x?x1xi64>
  %pairs = tensor.concat dim(2) %ra, %ca
      : (tensor<?x?x1xi64>, tensor<?x?x1xi64>) -> tensor<?x?x2xi64>
  %second = tensor.extract_slice %pairs[0, 0, 1] [%b, %s, 1] [1, 1, 1]
      : tensor<?x?x2xi64> to tensor<?x?xi64>
  %last_i = arith.subi %s, %c1 : index
  %last = tensor.extract %cs[%last_i] : tensor<?xi64>
  %e4 = tensor.empty(%b, %s) : tensor<?x?xi64>
  %y = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%second : tensor<?x?xi64>) outs(%e4 : tensor<?x?xi64>) {
  ^bb0(%x: i64, %out: i64):
    %neg = arith.cmpi slt, %x, %c0_i64 : i64
    %add = arith.addi %x, %last : i64
    %r = arith.select %neg, %add, %x : i64
    linalg.yield %r : i64
  } -> tensor<?x?xi64>
  return %y : tensor<?x?xi64>
}
"""


def _run_cpu(source: str, opt_level: str, *args: np.ndarray) -> np.ndarray:
    import iree.compiler
    import iree.runtime

    vmfb = iree.compiler.compile_str(
        source, target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host", f"--iree-opt-level={opt_level}"])
    module = iree.runtime.load_vm_flatbuffer(vmfb, driver="local-task")
    return np.asarray(module.main(*args))


def test_collapse_dims_reproducer_is_right_at_o0() -> None:
    """The reproducer's own semantics: y[i, j] = j (checks the MLIR, not IREE's O3)."""
    got = _run_cpu(COLLAPSE_DIMS, "O0", np.zeros((2, 7), np.int64))
    np.testing.assert_array_equal(got, np.tile(np.arange(7), (2, 1)))


@pytest.mark.xfail(strict=True, reason="IREE 3.13 CollapseDimensions gives a collapsed "
                   "multi-result dispatch result the first result's dynamic dims. Worked "
                   "around: rlx_mir.dim / rlx_mir.iota (the importers' sizes and aranges), "
                   "no cumsum shared between dispatches (rlx.importers.dims)")
def test_collapse_dims_multi_result_at_o3() -> None:
    got = _run_cpu(COLLAPSE_DIMS, "O3", np.zeros((2, 7), np.int64))
    np.testing.assert_array_equal(got, np.tile(np.arange(7), (2, 1)))
