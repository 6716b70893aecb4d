// Round trip of the leaf HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @constant attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x3xf32> {rlx.name = "x"}) -> tensor<2x3xf32> {
// CHECK-NEXT: %0 = "rlx_hir.constant"() {value = dense<[[0.000000e+00, 1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00, 5.000000e+00]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
// CHECK-NEXT: %1 = "rlx_mir.binary"(%arg0, %0) {kind = "add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %1 : tensor<2x3xf32>
module @constant attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x3xf32> {rlx.name = "x"}) -> tensor<2x3xf32> {
    %0 = "rlx_hir.constant"() {value = dense<[[0.000000e+00, 1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00, 5.000000e+00]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %1 = "rlx_mir.binary"(%arg0, %0) {kind = "add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
}
