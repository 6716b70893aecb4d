// mir-to-linalg for dequant_matmul: GGUF bytes are repacked by gathering generics (hoisted
// by IREE: they read only the parameter), the dequant is one all-parallel arith-only generic
// over [N, G, *group] whose bit fields come from byte planes and a shift table, and the
// contraction runs over the same grouped space with x expanded to [M, G, *group].
// (llvm-cpu decode GEMVs of Q8_0 / Q4_K go to hand-written kernels by default, see
// gemv_kernels.mlir; here the fused form they replace.)
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-gemv-kernels %s | FileCheck %s

// llvm-cpu: Q4_K's 32-element groups are loops (l1, l0) so that the quantized bytes stay the
// highest-rank input beside the f32 per-group products d * sc and dmin * m.
// CHECK-LABEL: module @q4_k
// CHECK:      %[[RAW:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [128, 2, 144] : tensor<128x288xi8> into tensor<128x2x144xi8>
// CHECK:      %[[QS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x4x2x16xi8>)
// CHECK:        affine.apply affine_map<(d0, d1, d2, d3, d4) -> (d4 + d3 * 16 + d2 * 32 + 16)>
// CHECK:        tensor.extract %[[RAW]]
// CHECK:      %[[A:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x4x2xf32>)
// CHECK:        affine.apply affine_map<(d0, d1, d2, d3) -> ((d2 * 2 + d3) mod 4 + 4)>
// CHECK:        arith.bitcast %{{.*}} : i16 to f16
// CHECK:      %[[B:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x4x2xf32>)
// CHECK:      %[[W:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[QS]], %[[A]], %[[B]], %[[SHIFT:.*]] : tensor<128x2x4x2x16xi8>, tensor<128x2x4x2xf32>, tensor<128x2x4x2xf32>, tensor<2xi8>)
// CHECK-NOT:    math.
// CHECK:        arith.shrui
// CHECK:        arith.uitofp
// CHECK:        arith.subf
// CHECK:      } -> tensor<128x2x4x2x2x16xf32>
// CHECK:      %[[X:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1, 2, 3, 4, 5]] output_shape [1, 2, 4, 2, 2, 16]
// CHECK:      linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "reduction"]} ins(%[[X]], %[[W]] : tensor<1x2x4x2x2x16xf32>, tensor<128x2x4x2x2x16xf32>) outs(%{{.*}} : tensor<1x128xf32>)
// CHECK-NOT:  tensor.collapse_shape
// CHECK:      return
module @q4_k {
  func.func @main(%x: tensor<1x512xf32>) -> tensor<1x128xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<128x288xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q4_k"} : (tensor<1x512xf32>, tensor<128x288xi8>) -> tensor<1x128xf32> loc("ffn.up")
    return %y : tensor<1x128xf32>
  }
}

// -----

// 40 rows are computed as 128 (zero rows appended to the hoisted arrays) and sliced off.
// CHECK-LABEL: module @q8_0_padded
// CHECK:      %[[Q:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<40x2x32xi8>)
// CHECK:      %[[QP:.*]] = tensor.insert_slice %[[Q]] into %{{.*}}[0, 0, 0] [40, 2, 32] [1, 1, 1] : tensor<40x2x32xi8> into tensor<128x2x32xi8>
// CHECK:      linalg.generic {{.*}} ins(%[[QP]], %{{.*}} : tensor<128x2x32xi8>, tensor<128x2xf16>)
// CHECK:        arith.sitofp %{{.*}} : i8 to f32
// CHECK:      %[[Y:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x128xf32>)
// CHECK:      tensor.extract_slice %[[Y]][0, 0] [1, 40] [1, 1] : tensor<1x128xf32> to tensor<1x40xf32>
module @q8_0_padded {
  func.func @main(%x: tensor<1x64xf32>) -> tensor<1x40xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
    return %y : tensor<1x40xf32>
  }
}

// -----

// F16 / BF16: the bytes viewed as [N, K] f16 / i16, converted inside the contraction.
// CHECK-LABEL: module @half
// CHECK:      %[[H:.*]] = flow.tensor.bitcast %{{.*}} : tensor<64x1024xi8> -> tensor<64x512xf16>
// CHECK:      linalg.generic {{.*}} ins(%arg0, %[[H]] : tensor<1x512xf32>, tensor<64x512xf16>)
// CHECK:        arith.extf %{{.*}} : f16 to f32
// CHECK:      %[[B:.*]] = flow.tensor.bitcast %{{.*}} : tensor<64x1024xi8> -> tensor<64x512xi16>
// CHECK:      linalg.generic {{.*}} ins(%arg0, %[[B]] : tensor<1x512xf32>, tensor<64x512xi16>)
// CHECK:        arith.shli %{{.*}}, %{{.*}} : i32
// CHECK:        arith.bitcast %{{.*}} : i32 to f32
module @half {
  func.func @main(%x: tensor<1x512xf32>) -> (tensor<1x64xf32>, tensor<1x64xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<64x1024xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_f16"} : (tensor<1x512xf32>, tensor<64x1024xi8>) -> tensor<1x64xf32>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<64x1024xi8>
    %z = "rlx_mir.dequant_matmul"(%x, %v) {scheme = "gguf_bf16"} : (tensor<1x512xf32>, tensor<64x1024xi8>) -> tensor<1x64xf32>
    return %y, %z : tensor<1x64xf32>, tensor<1x64xf32>
  }
}

// -----

// Legacy int8 [K, N]: transposed to rows by the repack, w = (q - zp) * scale per block.
// CHECK-LABEL: module @int8
// CHECK:      %[[Q:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2x32xi8>)
// CHECK:        affine.apply affine_map<(d0, d1, d2) -> (d1 * 32 + d2)>
// CHECK:      %[[QP:.*]] = tensor.insert_slice %[[Q]] into %{{.*}} : tensor<8x2x32xi8> into tensor<128x2x32xi8>
// CHECK:      linalg.generic {{.*}} ins(%[[QP]], %{{.*}}, %{{.*}} : tensor<128x2x32xi8>, tensor<128x2xf32>, tensor<128x2xf32>)
// CHECK:        %[[V:.*]] = arith.sitofp %{{.*}} : i8 to f32
// CHECK:        %[[C:.*]] = arith.subf %[[V]], %{{.*}} : f32
// CHECK:        arith.mulf %[[C]], %{{.*}} : f32
// CHECK:      tensor.expand_shape %arg0 {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 2, 32] : tensor<?x64xf32> into tensor<?x2x32xf32>
// CHECK:      tensor.extract_slice %{{.*}}[0, 0] [%{{.*}}, 8] [1, 1] : tensor<?x128xf32> to tensor<?x8xf32>
module @int8 {
  func.func @main(%x: tensor<?x64xf32>) -> tensor<?x8xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<64x8xi8>
    %s = "rlx_mir.param"() {name = "s"} : () -> tensor<2x8xf32>
    %z = "rlx_mir.param"() {name = "z"} : () -> tensor<2x8xf32>
    %y = "rlx_mir.dequant_matmul"(%x, %w, %s, %z) {block_size = 32 : i64, scheme = "int8"} : (tensor<?x64xf32>, tensor<64x8xi8>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
}

// -----

// NVFP4: E2M1 nibbles regrouped along K (byte j: elements j and 8 + j of a 16-block), the
// E4M3FN scale rebuilt as f32 bits, times the global scale.
// CHECK-LABEL: module @nvfp4
// CHECK:      %[[Q:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2x8xi8>)
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>, affine_map<(d0, d1, d2, d3) -> (0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-NOT:    math.
// CHECK:        arith.addi %{{.*}}, %c120_i32 : i32
// CHECK:        arith.bitcast %{{.*}} : i32 to f32
// CHECK:      } -> tensor<128x2x2x8xf32>
module @nvfp4 {
  func.func @main(%x: tensor<1x32xf32>) -> tensor<1x8xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<32x4xi8>
    %s = "rlx_mir.param"() {name = "s"} : () -> tensor<2x8xi8>
    %g = "rlx_mir.param"() {name = "g"} : () -> tensor<1xf32>
    %y = "rlx_mir.dequant_matmul"(%x, %w, %s, %g) {block_size = 16 : i64, scheme = "nvfp4"} : (tensor<1x32xf32>, tensor<32x4xi8>, tensor<2x8xi8>, tensor<1xf32>) -> tensor<1x8xf32>
    return %y : tensor<1x8xf32>
  }
}

// -----

// Leading dims collapse into rows; f16 activations accumulate in f32, rounded once.
// CHECK-LABEL: module @rows_f16
// CHECK:      %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<2x?x256xf16> into tensor<?x256xf16>
// CHECK:      tensor.expand_shape %[[X]] {{\[}}[0], [1, 2, 3, 4, 5, 6]]
// CHECK:        arith.extf %{{.*}} : f16 to f32
// CHECK:      tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [2, %{{.*}}, 128] : tensor<?x128xf32> into tensor<2x?x128xf32>
// CHECK:      arith.truncf %{{.*}} : f32 to f16
module @rows_f16 {
  func.func @main(%x: tensor<2x?x256xf16>) -> tensor<2x?x128xf16> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<128x210xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q6_k"} : (tensor<2x?x256xf16>, tensor<128x210xi8>) -> tensor<2x?x128xf16>
    return %y : tensor<2x?x128xf16>
  }
}

// -----

// GPU targets: the loops that only pick bits within a byte come last, (p, l, h) for Q4_K, and
// x is read through the same permutation (IREE 3.13's SPIR-V reduction miscomputes the
// llvm-cpu order at M = 1).
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan --vulkan-target=ampere %s | FileCheck %s --check-prefix=GPU
// Vulkan's llvmpipe target (lavapipe, a CPU) and any Vulkan prefill: the dequant in K order
// behind a compute barrier (a dispatch of its own), then a plain [M, K] x [N, K] contraction
// (quant.rule.separate_dequant: the fused forms overflowed shared memory / ran for minutes).
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=LVP
// LVP-LABEL: module @q4_k_gpu
// LVP:      } -> tensor<128x2x4x32x2xf32>
// LVP:      %[[T:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4, d3)>]
// LVP-SAME:   outs(%{{.*}} : tensor<128x2x4x2x32xf32>)
// LVP:      %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2, 3, 4]] : tensor<128x2x4x2x32xf32> into tensor<128x512xf32>
// LVP:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[C]] : tensor<128x512xf32>
// LVP:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// LVP-SAME:   ins(%arg0, %[[B]] : tensor<1x512xf32>, tensor<128x512xf32>)
// GPU-LABEL: module @q4_k_gpu
// GPU:      %[[W:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>, affine_map<(d0, d1, d2, d3, d4) -> (d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>]
// GPU:      } -> tensor<128x2x4x32x2xf32>
// GPU:      %[[X:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1, 2, 3, 4]] output_shape [1, 2, 4, 2, 32]
// GPU:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d2, d3, d5, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d2, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1)>]
// GPU-SAME:   ins(%[[X]], %[[W]] : tensor<1x2x4x2x32xf32>, tensor<128x2x4x32x2xf32>)
module @q4_k_gpu {
  func.func @main(%x: tensor<1x512xf32>) -> tensor<1x128xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<128x288xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q4_k"} : (tensor<1x512xf32>, tensor<128x288xi8>) -> tensor<1x128xf32>
    return %y : tensor<1x128xf32>
  }
}

// -----

// llvm-cpu prefill (M > 1 or dynamic; data tiling on): F16 / BF16 / Q8_0 weights are
// dequantized K-major, rows last, so that the generic IREE fuses into the weight's pack
// reads 16 adjacent rows per [16, 1] tile; the contraction reads that layout. GPU targets
// keep the row-major form.
// CHECK-LABEL: module @f16_prefill
// CHECK:      %[[H:.*]] = flow.tensor.bitcast %{{.*}} : tensor<32x128xi8> -> tensor<32x64xf16>
// CHECK:      %[[W:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>]{{.*}} ins(%[[H]] : tensor<32x64xf16>) outs(%{{.*}} : tensor<64x32xf32>)
// CHECK:        arith.extf
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]{{.*}} ins(%arg0, %[[W]] : tensor<?x64xf32>, tensor<64x32xf32>)
// GPU-LABEL: module @f16_prefill
// GPU-NOT:  tensor<64x32xf32>
// GPU:      linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<?x64xf32>, tensor<32x64xf16>)
module @f16_prefill {
  func.func @main(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<32x128xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_f16"} : (tensor<?x64xf32>, tensor<32x128xi8>) -> tensor<?x32xf32>
    return %y : tensor<?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @q8_0_prefill
// CHECK:      %[[W:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d1, d2, d0)>]{{.*}} outs(%{{.*}} : tensor<2x32x128xf32>)
// CHECK:      %[[X:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 2, 32]
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>]{{.*}} ins(%[[X]], %[[W]] : tensor<?x2x32xf32>, tensor<2x32x128xf32>)
// GPU-LABEL: module @q8_0_prefill
// GPU:      } -> tensor<128x2x32xf32>
// GPU:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %{{.*}} : tensor<128x64xf32>
// GPU:      linalg.generic {{.*}} ins(%arg0, %[[B]] : tensor<?x64xf32>, tensor<128x64xf32>)
// LVP-LABEL: module @q8_0_prefill
// LVP:      iree_tensor_ext.compute_barrier.start %{{.*}} : tensor<128x64xf32>
module @q8_0_prefill {
  func.func @main(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<128x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<?x64xf32>, tensor<128x68xi8>) -> tensor<?x128xf32>
    return %y : tensor<?x128xf32>
  }
}
