// mir-to-linalg for matmul: leading dims collapse into rows and a plain linalg.matmul
// (what IREE data-tiles); batched operands go through linalg.batch_matmul; f16 accumulates
// in f32 and is rounded once; i32 accumulates in i32.
// An f32 prefill (M dynamic) of a parameter weight whose K is whole blocks of 32 and N whole
// column blocks of 32 stays linalg.matmul on a CPU without the wide prefill tile (x86-64-v3,
// znver4) and, on an Intel CPU with AVX-512 (sapphirerapids, prefix F32), runs rlx's column-
// block GEMM (quant/f32_matmul.py): the weight held as its column blocks [N / 32, 32 K] by an
// initializer (a transpose of the parameter, once at load), x packed [T, K, 8], per k two loads
// of the plane's run of 32 weights and two FMAs for each of the pass's 8 rows of x, and hints
// (into L2) for the same lines of the next chunk.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=x86-64-v3 %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=znver4 %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=sapphirerapids %s | FileCheck %s --check-prefix=F32

// CHECK-LABEL: module @rows
// CHECK:      %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<2x?x16xf32> into tensor<?x16xf32>
// CHECK:      %[[MM:.*]] = linalg.matmul ins(%[[X]], %{{.*}} : tensor<?x16xf32>, tensor<16x32xf32>) outs(%{{.*}} : tensor<?x32xf32>)
// CHECK:      tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] {{.*}} : tensor<?x32xf32> into tensor<2x?x32xf32>
// CHECK-NOT:  linalg.transpose
module @rows {
  func.func @main(%x: tensor<2x?x16xf32>) -> tensor<2x?x32xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %y = "rlx_mir.matmul"(%x, %w) : (tensor<2x?x16xf32>, tensor<16x32xf32>) -> tensor<2x?x32xf32> loc("fc")
    return %y : tensor<2x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @batched
// CHECK-NOT: compilation_info
// CHECK: linalg.batch_matmul ins(%arg0, %arg1 : tensor<3x4x8xf32>, tensor<3x8x5xf32>)
module @batched {
  func.func @main(%a: tensor<3x4x8xf32>, %b: tensor<3x8x5xf32>) -> tensor<3x4x5xf32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<3x4x8xf32>, tensor<3x8x5xf32>) -> tensor<3x4x5xf32>
    return %y : tensor<3x4x5xf32>
  }
}

// -----

// A dynamic batch (f32): IREE 3.13's data tiling computed such products wrong beside some
// fused consumers; a preset compilation_info keeps it out of data tiling. A static batch
// (@batched above) is data-tiled.
// CHECK-LABEL: module @dynamic_batch
// CHECK: linalg.batch_matmul {compilation_info = #iree_codegen.compilation_info<lowering_config = #iree_cpu.lowering_config<{{.*}}vector_common_parallel = [1, 8, {{8|32}}, 0]{{.*}}DoubleTilingExpert{{.*}} ins(%arg0, %arg1 : tensor<?x4x8xf32>, tensor<?x8x5xf32>)
module @dynamic_batch {
  func.func @main(%a: tensor<?x4x8xf32>, %b: tensor<?x8x5xf32>) -> tensor<?x4x5xf32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<?x4x8xf32>, tensor<?x8x5xf32>) -> tensor<?x4x5xf32>
    return %y : tensor<?x4x5xf32>
  }
}

// -----

// A static batch beside a dynamic length: the same (IREE failed to compile YOSO's export so).
// CHECK-LABEL: module @static_batch_dynamic_length
// CHECK: linalg.batch_matmul {compilation_info = #iree_codegen.compilation_info<{{.*}} ins(%arg0, %arg1 : tensor<8x?x8xf32>, tensor<8x8x?xf32>)
module @static_batch_dynamic_length {
  func.func @main(%a: tensor<8x?x8xf32>, %b: tensor<8x8x?xf32>) -> tensor<8x?x?xf32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<8x?x8xf32>, tensor<8x8x?xf32>) -> tensor<8x?x?xf32>
    return %y : tensor<8x?x?xf32>
  }
}

// -----

// CHECK-LABEL: module @half
// CHECK:      %[[ACC:.*]] = linalg.matmul ins(%arg0, %{{.*}} : tensor<4x16xf16>, tensor<16x8xf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:      linalg.generic {{.*}} ins(%[[ACC]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xf16>)
// CHECK:      arith.truncf {{.*}} : f32 to f16
module @half {
  func.func @main(%x: tensor<4x16xf16>) -> tensor<4x8xf16> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x8xf16>
    %y = "rlx_mir.matmul"(%x, %w) : (tensor<4x16xf16>, tensor<16x8xf16>) -> tensor<4x8xf16>
    return %y : tensor<4x8xf16>
  }
}

// -----

// CHECK-LABEL: module @integer
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK:      %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : i32)
// CHECK:      linalg.matmul ins(%arg0, %arg1 : tensor<4x16xi32>, tensor<16x8xi32>) outs(%[[INIT]] : tensor<4x8xi32>)
module @integer {
  func.func @main(%a: tensor<4x16xi32>, %b: tensor<16x8xi32>) -> tensor<4x8xi32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<4x16xi32>, tensor<16x8xi32>) -> tensor<4x8xi32>
    return %y : tensor<4x8xi32>
  }
}

// -----

// CHECK-LABEL: module @f32_prefill
// CHECK:       linalg.matmul ins(%{{.*}} : tensor<?x64xf32>, tensor<64x96xf32>)
// CHECK-NOT:   flow.dispatch
// F32-LABEL:   module @f32_prefill
// F32:         stream.executable private @rlx_gemv_f32_96x64_mdynwc32
// F32:           stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64x8xf32>{%{{arg[0-9]+}}}
// F32:           stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<3x2048xf32>
// The first pass over a chunk hints the next chunk's lines into L2; the later passes run a
// loop without the hints (the lines are there by then).
// F32:                 scf.if %{{[0-9]+}} -> (vector<16xf32>
// F32-NEXT:              scf.for
// F32:                     memref.prefetch %{{.*}}[%{{.*}}], read, locality<2>, data : memref<6144xf32>
// F32:                     %[[W0:.*]] = vector.load %{{.*}} : memref<3x2048xf32>, vector<16xf32>
// F32:                     %[[W1:.*]] = vector.load %{{.*}} : memref<3x2048xf32>, vector<16xf32>
// F32:                     memref.load %{{.*}} : memref<?x64x8xf32>
// F32-NEXT:                %[[X0:.*]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// F32-NEXT:                vector.fma %[[W0]], %[[X0]], %{{.*}} : vector<16xf32>
// F32-NEXT:                vector.fma %[[W1]], %[[X0]], %{{.*}} : vector<16xf32>
// F32:                 } else {
// F32-NEXT:              scf.for
// F32-NOT:                 memref.prefetch
// F32:                     vector.fma
// F32-NOT:                 memref.prefetch
// F32:                 scf.yield
// F32:         func.func @main(
// F32:           %[[P:.*]] = util.global.load @planes.w.0.0 : tensor<3x2048xf32>
// F32:           linalg.pack %{{.*}} inner_tiles = [8] into %{{.*}} : tensor<?x64xf32> -> tensor<?x64x8xf32>
// F32-NEXT:      flow.dispatch @rlx_gemv_f32_96x64_mdynwc32::@rlx_gemv_f32_96x64_mdynwc32[%c96](%{{.*}}, %[[P]], %{{.*}}, %{{.*}}) : (tensor<?x64x8xf32>{%{{.*}}}, tensor<3x2048xf32>, index, index) -> tensor<?x96xf32>{%{{.*}}}
// F32-NOT:       linalg.matmul
// F32:         util.global private @planes.w.0.0 : tensor<3x2048xf32>
// F32:         util.initializer {
// F32:           linalg.transpose ins(%{{.*}} : tensor<64x3x32xf32>) outs(%{{.*}} : tensor<3x64x32xf32>) permutation = [1, 0, 2]
// F32:           util.global.store %{{.*}}, @planes.w.0.0 : tensor<3x2048xf32>
module @f32_prefill {
  func.func @main(%x: tensor<?x64xf32>) -> tensor<?x96xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<64x96xf32>
    %y = "rlx_mir.matmul"(%x, %w) : (tensor<?x64xf32>, tensor<64x96xf32>) -> tensor<?x96xf32>
    return %y : tensor<?x96xf32>
  }
}
