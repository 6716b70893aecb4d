// Prefill-shaped (M > 1) dequant_matmul on llvm-cpu with data tiling: the weight is
// dequantized K-major in a generic that IREE fuses with the weight's data-tiling pack, so
// the only standalone flow.tensor.encode ops are those of the activations. For Q4_K that
// needs a dequant without constant tensors (its nibble shifts computed from the loop
// indices: a constant in the dispatch keeps IREE from fusing the pack into it) and with its
// mergeable K loops merged by rlx (IREE's own merging leaves a reshape between the two).
// RUN: %rlx-compile %s --target=llvm-cpu --no-prefill-kernels --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host --iree-opt-level=O3 --iree-opt-data-tiling=true | FileCheck %s

// CHECK-LABEL:   util.func public @main$async(
// CHECK-NOT:     flow.tensor.encode %{{.+}} : tensor<{{[0-9]}}
// CHECK:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_{{.+}} -> tensor<2048x512xf32, #iree_encoding.encoding<operand_index = 1
// CHECK-NOT:     flow.tensor.encode %{{.+}} : tensor<{{[0-9]}}
// CHECK:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_{{.+}} -> tensor<2048x384xf32, #iree_encoding.encoding<operand_index = 1
// CHECK-NOT:     flow.tensor.encode %{{.+}} : tensor<{{[0-9]}}
// CHECK:         util.return
module @prefill attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<?x2048xf32> {rlx.name = "x"}) -> (tensor<?x512xf32>, tensor<?x384xf32>) {
    %w0 = "rlx_hir.param"() {name = "q4_k"} : () -> tensor<512x1152xi8>
    %y0 = "rlx_hir.dequant_matmul"(%x, %w0) {scheme = "gguf_q4_k"} : (tensor<?x2048xf32>, tensor<512x1152xi8>) -> tensor<?x512xf32>
    %w1 = "rlx_hir.param"() {name = "q8_0"} : () -> tensor<384x2176xi8>
    %y1 = "rlx_hir.dequant_matmul"(%x, %w1) {scheme = "gguf_q8_0"} : (tensor<?x2048xf32>, tensor<384x2176xi8>) -> tensor<?x384xf32>
    return %y0, %y1 : tensor<?x512xf32>, tensor<?x384xf32>
  }
}
