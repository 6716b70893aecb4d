// hir-to-mir for norms: rms_norm is 1:1; residual_rms_norm is fused under `direct`, add +
// rms_norm otherwise.
// RUN: %rlx-opt --split-input-file --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @norm_direct
// CHECK: "rlx_mir.rms_norm"(%arg0, %{{.*}}, %{{.*}}) {axis = -1 : i64, eps = 9.99999997E-7 : f32} {{.*}} loc("ln")
// CHECK: "rlx_mir.fused_residual_rms_norm"(%arg0, %arg1, %{{.*}}, %{{.*}}) {eps = 9.99999974E-6 : f32, has_bias = false} {{.*}} loc("res_ln")
module @norm_direct attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
    %g = "rlx_hir.param"() {name = "g"} : () -> tensor<8xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<8xf32>
    %y = "rlx_hir.rms_norm"(%x, %g, %b) {eps = 9.99999997E-7 : f32} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc("ln")
    %z = "rlx_hir.residual_rms_norm"(%x, %r, %g, %b) {eps = 9.99999974E-6 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc("res_ln")
    return %y, %z : tensor<?x8xf32>, tensor<?x8xf32>
  }
}

// -----

// CHECK-LABEL: module @norm_fusable
// CHECK:      %[[S:.*]] = "rlx_mir.binary"(%arg0, %arg1) {kind = "add"} {{.*}} loc("res_ln")
// CHECK-NEXT: "rlx_mir.rms_norm"(%[[S]], %{{.*}}, %{{.*}}) {axis = -1 : i64, eps = 9.99999974E-6 : f32} {{.*}} loc("res_ln")
module @norm_fusable attributes {rlx.fusion_policy = "fusable"} {
  func.func @main(%x: tensor<?x8xf32>, %r: tensor<?x8xf32>) -> tensor<?x8xf32> {
    %g = "rlx_hir.param"() {name = "g"} : () -> tensor<8xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<8xf32>
    %z = "rlx_hir.residual_rms_norm"(%x, %r, %g, %b) {eps = 9.99999974E-6 : f32} : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc("res_ln")
    return %z : tensor<?x8xf32>
  }
}
