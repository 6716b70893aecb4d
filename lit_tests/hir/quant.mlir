// Round trip of the quant HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @dequant_gguf_q4_k attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<8x144xi8>
// CHECK-NEXT: %1 = "rlx_hir.dequant_matmul"(%arg0, %0) {scheme = "gguf_q4_k"} : (tensor<1x256xf32>, tensor<8x144xi8>) -> tensor<1x8xf32> loc("dequant_matmul(gguf_q4_k)")
// CHECK-NEXT: return %1 : tensor<1x8xf32>
module @dequant_gguf_q4_k attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<8x144xi8>
    %1 = "rlx_hir.dequant_matmul"(%arg0, %0) {scheme = "gguf_q4_k"} : (tensor<1x256xf32>, tensor<8x144xi8>) -> tensor<1x8xf32> loc("dequant_matmul(gguf_q4_k)")
    return %1 : tensor<1x8xf32>
  }
}

// -----

// CHECK-LABEL: module @dequant_int8 attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<256x8xi8>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "s"} : () -> tensor<8x8xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "z"} : () -> tensor<8x8xf32>
// CHECK-NEXT: %3 = "rlx_hir.dequant_matmul"(%arg0, %0, %1, %2) {block_size = 32 : i64, scheme = "int8"} : (tensor<1x256xf32>, tensor<256x8xi8>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32> loc("dequant_matmul(int8/32)")
// CHECK-NEXT: return %3 : tensor<1x8xf32>
module @dequant_int8 attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x8xf32> {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<256x8xi8>
    %1 = "rlx_hir.param"() {name = "s"} : () -> tensor<8x8xf32>
    %2 = "rlx_hir.param"() {name = "z"} : () -> tensor<8x8xf32>
    %3 = "rlx_hir.dequant_matmul"(%arg0, %0, %1, %2) {block_size = 32 : i64, scheme = "int8"} : (tensor<1x256xf32>, tensor<256x8xi8>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<1x8xf32> loc("dequant_matmul(int8/32)")
    return %3 : tensor<1x8xf32>
  }
}
