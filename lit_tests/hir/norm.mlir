// Round trip of the norm HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @norms attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x5x16xf32> {rlx.name = "x"}, %arg1: tensor<2x5x16xf32> {rlx.name = "r"}) -> (tensor<2x5x16xf32>, tensor<2x5x16xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "g"} : () -> tensor<16xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<16xf32>
// CHECK-NEXT: %2 = "rlx_hir.rms_norm"(%arg0, %0, %1) {eps = 9.99999974E-6 : f32} : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32> loc("rms_norm")
// CHECK-NEXT: %3 = "rlx_hir.residual_rms_norm"(%arg0, %arg1, %0, %1) {eps = 9.99999997E-7 : f32} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32> loc("residual_rms_norm")
// CHECK-NEXT: return %2, %3 : tensor<2x5x16xf32>, tensor<2x5x16xf32>
module @norms attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x5x16xf32> {rlx.name = "x"}, %arg1: tensor<2x5x16xf32> {rlx.name = "r"}) -> (tensor<2x5x16xf32>, tensor<2x5x16xf32>) {
    %0 = "rlx_hir.param"() {name = "g"} : () -> tensor<16xf32>
    %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<16xf32>
    %2 = "rlx_hir.rms_norm"(%arg0, %0, %1) {eps = 9.99999974E-6 : f32} : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32> loc("rms_norm")
    %3 = "rlx_hir.residual_rms_norm"(%arg0, %arg1, %0, %1) {eps = 9.99999997E-7 : f32} : (tensor<2x5x16xf32>, tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32> loc("residual_rms_norm")
    return %2, %3 : tensor<2x5x16xf32>, tensor<2x5x16xf32>
  }
}
