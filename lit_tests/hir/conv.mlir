// Round trip of the conv HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @depthwise_conv1d_causal attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x8x16xf32> {rlx.name = "x"}, %arg1: tensor<2x2x16xf32> {rlx.name = "pad"}) -> tensor<2x8x16xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x1x1x3xf32>
// CHECK-NEXT: %1 = "rlx_hir.depthwise_conv1d_causal"(%arg0, %0, %arg1) {kernel_size = 3 : i64} : (tensor<2x8x16xf32>, tensor<16x1x1x3xf32>, tensor<2x2x16xf32>) -> tensor<2x8x16xf32> loc("depthwise_conv1d_causal")
// CHECK-NEXT: return %1 : tensor<2x8x16xf32>
module @depthwise_conv1d_causal attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x8x16xf32> {rlx.name = "x"}, %arg1: tensor<2x2x16xf32> {rlx.name = "pad"}) -> tensor<2x8x16xf32> {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x1x1x3xf32>
    %1 = "rlx_hir.depthwise_conv1d_causal"(%arg0, %0, %arg1) {kernel_size = 3 : i64} : (tensor<2x8x16xf32>, tensor<16x1x1x3xf32>, tensor<2x2x16xf32>) -> tensor<2x8x16xf32> loc("depthwise_conv1d_causal")
    return %1 : tensor<2x8x16xf32>
  }
}
