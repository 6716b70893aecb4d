// Decode-shaped (M = 1) dequant_matmul compiles to one dispatch per GEMV at --compile-to=flow
// on llvm-cpu (-O3, rlx's default), Vulkan (a GPU's target) and CUDA: the dequant is fused into the matvec,
// the repacking of the GGUF bytes runs in initializers. The weights are large enough (the
// f32 dequant of each is over IREE's 1 MiB const-expr hoisting threshold) that IREE keeps the
// dequant per call, as for real layers; shapes differ so that no executable is deduplicated.
// RUN: %rlx-compile %s --target=llvm-cpu --no-gemv-kernels --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host --iree-opt-level=O3 --iree-opt-data-tiling=true | FileCheck %s
// RUN: %rlx-compile %s --target=llvm-cpu --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host --iree-opt-level=O3 --iree-opt-data-tiling=true | FileCheck %s --check-prefix=KERNELS
// RUN: %rlx-compile %s --target=vulkan --vulkan-target=ampere --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=vulkan --iree-vulkan-target=ampere --iree-opt-level=O3 | FileCheck %s
// RUN: %rlx-compile %s --target=vulkan --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=vulkan --iree-vulkan-target=llvmpipe --iree-opt-level=O3 | FileCheck %s --check-prefix=LVP
// RUN: %rlx-compile %s --target=cuda --emit=linalg | %iree-compile - --compile-to=flow --iree-hal-target-device=cuda --iree-cuda-target=sm_80 --iree-opt-level=O3 | FileCheck %s

// CHECK-COUNT-4: flow.executable.export public @main$async_dispatch_{{[0-9]+}}_matvec_like_
// CHECK-NOT:     flow.executable.export public @main$async_dispatch
// CHECK-LABEL:   util.func public @main$async(
// CHECK-COUNT-4: flow.dispatch @main$async_dispatch_
// CHECK-NOT:     flow.dispatch @

// The body is compiled once, in main$async (the coarse-fences export); main (the
// synchronous export) calls it and waits (rlx.lowering.exports).
// CHECK-LABEL:   util.func public @main(
// CHECK-NOT:     flow.dispatch
// CHECK:         util.call @main$async(
// CHECK:         hal.fence.await

// Vulkan's llvmpipe target (lavapipe, a CPU) dequantizes in a dispatch of its own before a
// plain matvec (quant.rule.separate_dequant: there the fused matvec of rows 512 or more wide
// ran for minutes), two dispatches per GEMV.
// LVP-LABEL:   util.func public @main$async(
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_matvec_like_256x2048_f32
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_matvec_like_384x2048_f32
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_matvec_like_512x2048_f32
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_elementwise_
// LVP:         flow.dispatch @main$async_dispatch_{{[0-9]+}}::@main$async_dispatch_{{[0-9]+}}_matvec_like_640x2048_f32
// LVP-NOT:     flow.dispatch @main$async_dispatch_

// llvm-cpu by default: Q4_K, Q8_0, Q5_0 (widened to bytes) and Q6_K (widened to bytes with
// a scale per 16) through rlx's GEMV kernels (one dispatch each, the repacking in
// initializers); no IREE-generated matvec is left.
// KERNELS-NOT:     flow.executable.export public @main$async_dispatch
// KERNELS-LABEL:   util.func public @main$async(
// KERNELS-DAG:     flow.dispatch @rlx_gemv_q4_k_256x2048::@rlx_gemv_q4_k_256x2048
// KERNELS-DAG:     flow.dispatch @rlx_gemv_q8_0_384x2048::@rlx_gemv_q8_0_384x2048
// KERNELS-DAG:     flow.dispatch @rlx_gemv_q6_k_512x2048::@rlx_gemv_q6_k_512x2048
// KERNELS-DAG:     flow.dispatch @rlx_gemv_q5_0_640x2048::@rlx_gemv_q5_0_640x2048
// KERNELS-NOT:     flow.dispatch @main$async_dispatch_
module @decode attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<1x2048xf32> {rlx.name = "x"}) -> (tensor<1x256xf32>, tensor<1x384xf32>, tensor<1x512xf32>, tensor<1x640xf32>) {
    %w0 = "rlx_hir.param"() {name = "q4_k"} : () -> tensor<256x1152xi8>
    %y0 = "rlx_hir.dequant_matmul"(%x, %w0) {scheme = "gguf_q4_k"} : (tensor<1x2048xf32>, tensor<256x1152xi8>) -> tensor<1x256xf32>
    %w1 = "rlx_hir.param"() {name = "q8_0"} : () -> tensor<384x2176xi8>
    %y1 = "rlx_hir.dequant_matmul"(%x, %w1) {scheme = "gguf_q8_0"} : (tensor<1x2048xf32>, tensor<384x2176xi8>) -> tensor<1x384xf32>
    %w2 = "rlx_hir.param"() {name = "q6_k"} : () -> tensor<512x1680xi8>
    %y2 = "rlx_hir.dequant_matmul"(%x, %w2) {scheme = "gguf_q6_k"} : (tensor<1x2048xf32>, tensor<512x1680xi8>) -> tensor<1x512xf32>
    %w3 = "rlx_hir.param"() {name = "q5_0"} : () -> tensor<640x1408xi8>
    %y3 = "rlx_hir.dequant_matmul"(%x, %w3) {scheme = "gguf_q5_0"} : (tensor<1x2048xf32>, tensor<640x1408xi8>) -> tensor<1x640xf32>
    return %y0, %y1, %y2, %y3 : tensor<1x256xf32>, tensor<1x384xf32>, tensor<1x512xf32>, tensor<1x640xf32>
  }
}
