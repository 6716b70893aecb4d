// hir-to-mir for dequant_matmul: 1:1 (GGUF: 2 operands, legacy: 4 with block_size).
// RUN: %rlx-opt --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @quant
// CHECK: "rlx_mir.dequant_matmul"(%arg0, %{{.*}}) {scheme = "gguf_q8_0"} {{.*}} loc("dequant_matmul(gguf_q8_0)")
// CHECK: "rlx_mir.dequant_matmul"(%arg0, %{{.*}}, %{{.*}}, %{{.*}}) {block_size = 32 : i64, scheme = "int8"} {{.*}} loc("q")
module @quant {
  func.func @main(%x: tensor<1x64xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>) {
    %w = "rlx_hir.param"() {name = "w"} : () -> tensor<8x68xi8>
    %y = "rlx_hir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<8x68xi8>) -> tensor<1x8xf32> loc("dequant_matmul(gguf_q8_0)")
    %wq = "rlx_hir.param"() {name = "wq"} : () -> tensor<64x8xi8>
    %s = "rlx_hir.param"() {name = "s"} : () -> tensor<2x8xf32>
    %z = "rlx_hir.param"() {name = "z"} : () -> tensor<2x8xf32>
    %q = "rlx_hir.dequant_matmul"(%x, %wq, %s, %z) {block_size = 32 : i64, scheme = "int8"} : (tensor<1x64xf32>, tensor<64x8xi8>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<1x8xf32> loc("q")
    return %y, %q : tensor<1x8xf32>, tensor<1x8xf32>
  }
}
