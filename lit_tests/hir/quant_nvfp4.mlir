// Round trip of the quant_nvfp4 HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// No IRDL run: IRDL cannot express nvfp4's differently-typed scale operands
// (see python/rlx/dialects/irdl.py).

// CHECK-LABEL: module @dequant_nvfp4 attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<256x4xi8>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "s"} : () -> tensor<16x8xi8>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "z"} : () -> tensor<1xf32>
// CHECK-NEXT: %3 = "rlx_hir.dequant_matmul"(%arg0, %0, %1, %2) {block_size = 16 : i64, scheme = "nvfp4"} : (tensor<1x256xf32>, tensor<256x4xi8>, tensor<16x8xi8>, tensor<1xf32>) -> tensor<1x8xf32> loc("dequant_matmul(nvfp4/16)")
// CHECK-NEXT: return %3 : tensor<1x8xf32>
module @dequant_nvfp4 attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<256x4xi8>
    %1 = "rlx_hir.param"() {name = "s"} : () -> tensor<16x8xi8>
    %2 = "rlx_hir.param"() {name = "z"} : () -> tensor<1xf32>
    %3 = "rlx_hir.dequant_matmul"(%arg0, %0, %1, %2) {block_size = 16 : i64, scheme = "nvfp4"} : (tensor<1x256xf32>, tensor<256x4xi8>, tensor<16x8xi8>, tensor<1xf32>) -> tensor<1x8xf32> loc("dequant_matmul(nvfp4/16)")
    return %3 : tensor<1x8xf32>
  }
}
