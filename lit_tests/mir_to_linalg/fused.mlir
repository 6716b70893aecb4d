// mir-to-linalg for the fused ops: a matmul (or reduction) plus one elementwise generic
// that IREE fuses into the same dispatch.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @bias_act
// CHECK:      %[[MM:.*]] = linalg.matmul ins(%arg0, %{{.*}} : tensor<4x16xf32>, tensor<16x32xf32>)
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%[[MM]], %{{.*}} : tensor<4x32xf32>, tensor<32xf32>)
// CHECK:        arith.addf
// CHECK:        math.exp
module @bias_act {
  func.func @main(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<32xf32>
    %y = "rlx_mir.fused_matmul_bias_act"(%x, %w, %b) {activation = "silu"} : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    return %y : tensor<4x32xf32>
  }
}

// -----

// CHECK-LABEL: module @swiglu
// CHECK-DAG:  %[[UP:.*]] = tensor.extract_slice %arg0[0, 0] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
// CHECK-DAG:  %[[GATE:.*]] = tensor.extract_slice %arg0[0, 32] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
// CHECK:      linalg.generic {{.*}} ins(%[[UP]], %[[GATE]] : tensor<4x32xf32>, tensor<4x32xf32>)
module @swiglu {
  func.func @main(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
    %y = "rlx_mir.fused_swiglu"(%x) {gate_first = false} : (tensor<4x64xf32>) -> tensor<4x32xf32>
    return %y : tensor<4x32xf32>
  }
}

// -----

// fused_residual_rms_norm: one elementwise generic sums x + residual (+ bias), then the
// rms_norm lowering on the sum (on llvm-cpu behind a compute barrier, as rms_norm's input:
// see norm.py).
// CHECK-LABEL: module @residual_rms_norm
// CHECK:      %[[SUM:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<?x64xf32>, tensor<?x64xf32>)
// CHECK-NEXT:   ^bb0(%[[X:[a-z0-9_]+]]: f32 {{[^,]*}}, %[[R:[a-z0-9_]+]]: f32
// CHECK-NEXT:     %[[ADD:.*]] = arith.addf %[[X]], %[[R]] : f32
// CHECK-NEXT:     linalg.yield %[[ADD]] : f32
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[SUM]]
// CHECK:      %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[B]] : tensor<?x64xf32>)
// CHECK:      linalg.generic {{.*}} ins(%[[B]], %[[SQ]], %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<?xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK:        math.rsqrt
// CHECK:      %[[SUM3:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%arg0, %arg1, %arg2 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>)
// CHECK:        %[[XR:.*]] = arith.addf
// CHECK-NEXT:   arith.addf %[[XR]], %{{.*}} : f32
// CHECK:      iree_tensor_ext.compute_barrier.start %[[SUM3]]
// CHECK:        math.rsqrt
module @residual_rms_norm {
  func.func @main(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %bias: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
    %g = "rlx_mir.param"() {name = "g"} : () -> tensor<64xf32>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<64xf32>
    %y = "rlx_mir.fused_residual_rms_norm"(%x, %r, %g, %b) {eps = 1.0e-05 : f32, has_bias = false} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    %z = "rlx_mir.fused_residual_rms_norm"(%x, %r, %bias, %g, %b) {eps = 1.0e-05 : f32, has_bias = true} : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
  }
}
