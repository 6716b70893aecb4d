// mir-to-linalg for the fused ops: a matmul (or reduction) plus one elementwise generic
// that IREE fuses into the same dispatch.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @bias_act
// CHECK:      %[[MM:.*]] = linalg.matmul ins(%arg0, %{{.*}} : tensor<4x16xf32>, tensor<16x32xf32>)
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%[[MM]], %{{.*}} : tensor<4x32xf32>, tensor<32xf32>)
// CHECK:        arith.addf
// CHECK:        math.exp
module @bias_act {
  func.func @main(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<32xf32>
    %y = "rlx_mir.fused_matmul_bias_act"(%x, %w, %b) {activation = "silu"} : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    return %y : tensor<4x32xf32>
  }
}

// -----

// CHECK-LABEL: module @swiglu
// CHECK-DAG:  %[[UP:.*]] = tensor.extract_slice %arg0[0, 0] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
// CHECK-DAG:  %[[GATE:.*]] = tensor.extract_slice %arg0[0, 32] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
// CHECK:      linalg.generic {{.*}} ins(%[[UP]], %[[GATE]] : tensor<4x32xf32>, tensor<4x32xf32>)
module @swiglu {
  func.func @main(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
    %y = "rlx_mir.fused_swiglu"(%x) {gate_first = false} : (tensor<4x64xf32>) -> tensor<4x32xf32>
    return %y : tensor<4x32xf32>
  }
}
