// mir-to-linalg for norms: the input passes a compute barrier (llvm-cpu: keeps IREE from
// fusing a residual sum and the norm into the previous matmul's encoding), then a row
// sum of squares in f32 and one generic that applies rsqrt(mean + eps) * gamma + beta.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=VK

// CHECK-LABEL: module @rms
// CHECK:      %[[X:.*]] = iree_tensor_ext.compute_barrier.start %arg0 : tensor<?x64xf16>{%{{.*}}} -> tensor<?x64xf16>
// CHECK:      %[[SS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x64xf16>) outs(%{{.*}} : tensor<?xf32>)
// CHECK:        arith.extf
// CHECK:      linalg.generic {{.*}} ins(%[[X]], %[[SS]], %{{.*}}, %{{.*}} : tensor<?x64xf16>, tensor<?xf32>, tensor<64xf16>, tensor<64xf16>)
// CHECK:        math.rsqrt
// CHECK:        arith.truncf
// VK-LABEL:   module @rms
// VK-NOT:     compute_barrier
module @rms {
  func.func @main(%x: tensor<?x64xf16>) -> tensor<?x64xf16> {
    %g = "rlx_mir.param"() {name = "g"} : () -> tensor<64xf16>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<64xf16>
    %y = "rlx_mir.rms_norm"(%x, %g, %b) {axis = -1 : i64, eps = 9.99999997E-7 : f32} : (tensor<?x64xf16>, tensor<64xf16>, tensor<64xf16>) -> tensor<?x64xf16> loc("ln")
    return %y : tensor<?x64xf16>
  }
}

// -----

// CHECK-LABEL: module @layer
// CHECK-COUNT-2: iterator_types = ["parallel", "reduction"]
// CHECK:         math.rsqrt
module @layer {
  func.func @main(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
    %g = "rlx_mir.param"() {name = "g"} : () -> tensor<64xf32>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<64xf32>
    %y = "rlx_mir.layer_norm"(%x, %g, %b) {axis = -1 : i64, eps = 9.99999974E-6 : f32} : (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    return %y : tensor<8x64xf32>
  }
}
