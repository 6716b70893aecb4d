// hir-to-mir for the linear family: `direct` emits the fused MIR ops, `fusable` (and
// `for_autodiff`) primitive chains.
// RUN: %rlx-opt --split-input-file --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @linear_direct
// CHECK:      %[[W:.*]] = "rlx_mir.param"() {name = "w"}
// CHECK:      %[[B:.*]] = "rlx_mir.param"() {name = "b"}
// CHECK:      "rlx_mir.fused_matmul_bias_act"(%arg0, %[[W]], %[[B]]) {activation = "silu"} {{.*}} loc("fc")
// CHECK:      %[[MM:.*]] = "rlx_mir.matmul"(%arg0, %[[W]]) {{.*}} loc("proj")
// CHECK-NEXT: "rlx_mir.activation"(%[[MM]]) {kind = "gelu"} {{.*}} loc("proj")
// CHECK-NOT:  rlx_hir
module @linear_direct attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<?x16xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
    %w = "rlx_hir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %y = "rlx_hir.linear"(%x, %w, %b) {activation = "silu", has_bias = true} : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<?x32xf32> loc("fc")
    %z = "rlx_hir.linear"(%x, %w) {activation = "gelu", has_bias = false} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32> loc("proj")
    return %y, %z : tensor<?x32xf32>, tensor<?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @linear_fusable
// CHECK:      %[[MM:.*]] = "rlx_mir.matmul"(%arg0, %{{.*}}) {{.*}} loc("fc")
// CHECK-NEXT: %[[ADD:.*]] = "rlx_mir.binary"(%[[MM]], %{{.*}}) {kind = "add"} {{.*}} loc("fc")
// CHECK-NEXT: "rlx_mir.activation"(%[[ADD]]) {kind = "silu"} {{.*}} loc("fc")
// CHECK:      "rlx_mir.fused_matmul_bias_act"{{.*}}{activation = "relu"}{{.*}} loc("always_fused")
module @linear_fusable attributes {rlx.fusion_policy = "fusable"} {
  func.func @main(%x: tensor<?x16xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
    %w = "rlx_hir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %y = "rlx_hir.linear"(%x, %w, %b) {activation = "silu", has_bias = true} : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<?x32xf32> loc("fc")
    %z = "rlx_hir.linear_fused"(%x, %w, %b) {activation = "relu"} : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<?x32xf32> loc("always_fused")
    return %y, %z : tensor<?x32xf32>, tensor<?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @swiglu_direct
// CHECK:      %[[UP:.*]] = "rlx_mir.param"() {name = "up"}
// CHECK:      %[[GATE:.*]] = "rlx_mir.param"() {name = "gate"}
// CHECK:      %[[DOWN:.*]] = "rlx_mir.param"() {name = "down"}
// CHECK:      %[[CAT:.*]] = "rlx_mir.concat"(%[[UP]], %[[GATE]]) {axis = 1 : i64} {{.*}} -> tensor<16x64xf32> loc("ffn")
// CHECK-NEXT: %[[UG:.*]] = "rlx_mir.matmul"(%arg0, %[[CAT]]) {{.*}} -> tensor<4x64xf32> loc("ffn")
// CHECK-NEXT: %[[SW:.*]] = "rlx_mir.fused_swiglu"(%[[UG]]) {gate_first = false} {{.*}} -> tensor<4x32xf32> loc("ffn")
// CHECK-NEXT: "rlx_mir.matmul"(%[[SW]], %[[DOWN]]) {{.*}} loc("ffn")
// CHECK-LABEL: module @swiglu_fusable
// CHECK:      %[[U:.*]] = "rlx_mir.matmul"(%arg0, %{{.*}})
// CHECK-NEXT: %[[G:.*]] = "rlx_mir.matmul"(%arg0, %{{.*}})
// CHECK-NEXT: %[[S:.*]] = "rlx_mir.activation"(%[[G]]) {kind = "silu"}
// CHECK-NEXT: %[[M:.*]] = "rlx_mir.binary"(%[[U]], %[[S]]) {kind = "mul"}
// CHECK-NEXT: "rlx_mir.matmul"(%[[M]], %{{.*}})
module @swiglu_direct attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
    %up = "rlx_hir.param"() {name = "up"} : () -> tensor<16x32xf32>
    %gate = "rlx_hir.param"() {name = "gate"} : () -> tensor<16x32xf32>
    %down = "rlx_hir.param"() {name = "down"} : () -> tensor<32x16xf32>
    %y = "rlx_hir.swiglu"(%x, %up, %gate, %down) : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32> loc("ffn")
    return %y : tensor<4x16xf32>
  }
}
// -----
module @swiglu_fusable attributes {rlx.fusion_policy = "for_autodiff"} {
  func.func @main(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
    %up = "rlx_hir.param"() {name = "up"} : () -> tensor<16x32xf32>
    %gate = "rlx_hir.param"() {name = "gate"} : () -> tensor<16x32xf32>
    %down = "rlx_hir.param"() {name = "down"} : () -> tensor<32x16xf32>
    %y = "rlx_hir.swiglu"(%x, %up, %gate, %down) : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32> loc("ffn")
    return %y : tensor<4x16xf32>
  }
}

// -----

// CHECK-LABEL: module @pair
// CHECK: "rlx_mir.matmul"(%arg0, %{{.*}}) {{.*}} -> tensor<2x8xf32> loc("qk")
// CHECK: "rlx_mir.matmul"(%arg0, %{{.*}}) {{.*}} -> tensor<2x24xf32> loc("qk")
module @pair {
  func.func @main(%x: tensor<2x16xf32>) -> (tensor<2x8xf32>, tensor<2x24xf32>) {
    %a = "rlx_hir.param"() {name = "a"} : () -> tensor<16x8xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<16x24xf32>
    %y:2 = "rlx_hir.shared_linear_pair"(%x, %a, %b) : (tensor<2x16xf32>, tensor<16x8xf32>, tensor<16x24xf32>) -> (tensor<2x8xf32>, tensor<2x24xf32>) loc("qk")
    return %y#0, %y#1 : tensor<2x8xf32>, tensor<2x24xf32>
  }
}
