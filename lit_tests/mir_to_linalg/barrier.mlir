// mir-to-linalg for barrier on a target that neither data-tiles matmuls nor turns compute
// barriers on (Vulkan): a plain barrier is its operand, one marked `always` is a compute
// barrier all the same (ONNX DynamicQuantizeLinear's whole-tensor min / max).
// RUN: %rlx-opt --pass=mir-to-linalg --target=vulkan %s | FileCheck %s

// CHECK-LABEL: module @barriers
// CHECK:      %[[A:.*]] = iree_tensor_ext.compute_barrier.start %arg0
// CHECK-NOT:  compute_barrier
// CHECK:      return %[[A]], %arg0
module @barriers {
  func.func @main(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
    %a = "rlx_mir.barrier"(%x) {always = true} : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %b = "rlx_mir.barrier"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    return %a, %b : tensor<?x4xf32>, tensor<?x4xf32>
  }
}
