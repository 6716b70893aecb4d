// hir-to-mir for depthwise_conv1d_causal: the spec's chain (concat, transpose, reshape,
// grouped conv with a [1, K] kernel, reshape, transpose).
// RUN: %rlx-opt --split-input-file --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @dwconv
// CHECK:      %[[P:.*]] = "rlx_mir.concat"(%arg2, %arg0) {axis = 1 : i64} {{.*}} -> tensor<2x?x16xf32> loc("conv")
// CHECK-NEXT: %[[T:.*]] = "rlx_mir.transpose"(%[[P]]) {perm = array<i64: 0, 2, 1>} {{.*}} loc("conv")
// CHECK-NEXT: %[[R:.*]] = "rlx_mir.reshape"(%[[T]]) {new_shape = array<i64: 2, 16, 1, -1>} {{.*}} loc("conv")
// CHECK-NEXT: %[[C:.*]] = "rlx_mir.conv"(%[[R]], %arg1) {dilation = array<i64: 1, 1>, groups = 16 : i64, kernel_size = array<i64: 1, 3>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} {{.*}} loc("conv")
// CHECK-NEXT: %[[R2:.*]] = "rlx_mir.reshape"(%[[C]]) {new_shape = array<i64: 2, 16, -1>} {{.*}} loc("conv")
// CHECK-NEXT: "rlx_mir.transpose"(%[[R2]]) {perm = array<i64: 0, 2, 1>} {{.*}} -> tensor<2x?x16xf32> loc("conv")
module @dwconv {
  func.func @main(%x: tensor<2x?x16xf32>, %w: tensor<16x1x1x3xf32>, %pad: tensor<2x2x16xf32>) -> tensor<2x?x16xf32> {
    %y = "rlx_hir.depthwise_conv1d_causal"(%x, %w, %pad) {kernel_size = 3 : i64} : (tensor<2x?x16xf32>, tensor<16x1x1x3xf32>, tensor<2x2x16xf32>) -> tensor<2x?x16xf32> loc("conv")
    return %y : tensor<2x?x16xf32>
  }
}

// -----

// With carry: the same chain, plus the concat's last K - 1 frames (a narrow from the end)
// as the second result.
// CHECK-LABEL: module @dwconv_carry
// CHECK:      %[[P:.*]] = "rlx_mir.concat"(%arg2, %arg0) {axis = 1 : i64} {{.*}} -> tensor<1x?x8xf32> loc("conv")
// CHECK:      %[[Y:.*]] = "rlx_mir.transpose"({{.*}}) {perm = array<i64: 0, 2, 1>} {{.*}} -> tensor<1x?x8xf32> loc("conv")
// CHECK-NEXT: %[[F:.*]] = "rlx_mir.narrow"(%[[P]]) {axis = 1 : i64, len = 3 : i64, start = -3 : i64} {{.*}} -> tensor<1x3x8xf32> loc("conv")
// CHECK:      return %[[Y]], %[[F]]
module @dwconv_carry {
  func.func @main(%x: tensor<1x?x8xf32>, %w: tensor<8x1x1x4xf32>, %pad: tensor<1x3x8xf32>) -> (tensor<1x?x8xf32>, tensor<1x3x8xf32>) {
    %y, %f = "rlx_hir.depthwise_conv1d_causal"(%x, %w, %pad) {carry = true, kernel_size = 4 : i64} : (tensor<1x?x8xf32>, tensor<8x1x1x4xf32>, tensor<1x3x8xf32>) -> (tensor<1x?x8xf32>, tensor<1x3x8xf32>) loc("conv")
    return %y, %f : tensor<1x?x8xf32>, tensor<1x3x8xf32>
  }
}

// -----

// A dynamic batch (a batched server's prompts): the reshapes copy the dynamic dims
// (-2 - k: input dim k) instead of naming the batch.
// CHECK-LABEL: module @dwconv_rows
// CHECK:      "rlx_mir.reshape"(%{{.*}}) {new_shape = array<i64: -2, -3, 1, -4>} {{.*}} -> tensor<?x8x1x?xf32> loc("conv")
// CHECK:      "rlx_mir.conv"
// CHECK-NEXT: "rlx_mir.reshape"(%{{.*}}) {new_shape = array<i64: -2, -3, -5>} {{.*}} -> tensor<?x8x?xf32> loc("conv")
module @dwconv_rows {
  func.func @main(%x: tensor<?x?x8xf32>, %w: tensor<8x1x1x4xf32>, %pad: tensor<?x3x8xf32>) -> tensor<?x?x8xf32> {
    %y = "rlx_hir.depthwise_conv1d_causal"(%x, %w, %pad) {kernel_size = 4 : i64} : (tensor<?x?x8xf32>, tensor<8x1x1x4xf32>, tensor<?x3x8xf32>) -> tensor<?x?x8xf32> loc("conv")
    return %y : tensor<?x?x8xf32>
  }
}
