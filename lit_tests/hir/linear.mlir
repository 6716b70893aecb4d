// Round trip of the linear HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @linear attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<?x16xf32> {rlx.name = "x"}) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.linear"(%arg0, %0, %1) {activation = "silu", has_bias = true} : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<?x32xf32> loc("linear")
// CHECK-NEXT: %3 = "rlx_hir.linear"(%arg0, %0) {activation = "none", has_bias = false} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32> loc("linear")
// CHECK-NEXT: return %2, %3 : tensor<?x32xf32>, tensor<?x32xf32>
module @linear attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<?x16xf32> {rlx.name = "x"}) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %2 = "rlx_hir.linear"(%arg0, %0, %1) {activation = "silu", has_bias = true} : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<?x32xf32> loc("linear")
    %3 = "rlx_hir.linear"(%arg0, %0) {activation = "none", has_bias = false} : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32> loc("linear")
    return %2, %3 : tensor<?x32xf32>, tensor<?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @linear_fused attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<4x16xf32> {rlx.name = "x"}) -> tensor<4x8xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x8xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<8xf32>
// CHECK-NEXT: %2 = "rlx_hir.linear_fused"(%arg0, %0, %1) {activation = "gelu"} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("linear_fused")
// CHECK-NEXT: return %2 : tensor<4x8xf32>
module @linear_fused attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<4x16xf32> {rlx.name = "x"}) -> tensor<4x8xf32> {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<16x8xf32>
    %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<8xf32>
    %2 = "rlx_hir.linear_fused"(%arg0, %0, %1) {activation = "gelu"} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("linear_fused")
    return %2 : tensor<4x8xf32>
  }
}

// -----

// CHECK-LABEL: module @shared_linear_pair attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x16xf32> {rlx.name = "x"}) -> (tensor<2x?x8xf32>, tensor<2x?x24xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w1"} : () -> tensor<16x8xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "w2"} : () -> tensor<16x24xf32>
// CHECK-NEXT: %2:2 = "rlx_hir.shared_linear_pair"(%arg0, %0, %1) : (tensor<2x?x16xf32>, tensor<16x8xf32>, tensor<16x24xf32>) -> (tensor<2x?x8xf32>, tensor<2x?x24xf32>) loc("shared_linear_pair")
// CHECK-NEXT: return %2#0, %2#1 : tensor<2x?x8xf32>, tensor<2x?x24xf32>
module @shared_linear_pair attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x16xf32> {rlx.name = "x"}) -> (tensor<2x?x8xf32>, tensor<2x?x24xf32>) {
    %0 = "rlx_hir.param"() {name = "w1"} : () -> tensor<16x8xf32>
    %1 = "rlx_hir.param"() {name = "w2"} : () -> tensor<16x24xf32>
    %2:2 = "rlx_hir.shared_linear_pair"(%arg0, %0, %1) : (tensor<2x?x16xf32>, tensor<16x8xf32>, tensor<16x24xf32>) -> (tensor<2x?x8xf32>, tensor<2x?x24xf32>) loc("shared_linear_pair")
    return %2#0, %2#1 : tensor<2x?x8xf32>, tensor<2x?x24xf32>
  }
}

// -----

// CHECK-LABEL: module @swiglu attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<?x16xf32> {rlx.name = "x"}) -> tensor<?x16xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "up"} : () -> tensor<16x32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "gate"} : () -> tensor<16x32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "down"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %3 = "rlx_hir.swiglu"(%arg0, %0, %1, %2) : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<?x16xf32> loc("swiglu_ffn")
// CHECK-NEXT: return %3 : tensor<?x16xf32>
module @swiglu attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<?x16xf32> {rlx.name = "x"}) -> tensor<?x16xf32> {
    %0 = "rlx_hir.param"() {name = "up"} : () -> tensor<16x32xf32>
    %1 = "rlx_hir.param"() {name = "gate"} : () -> tensor<16x32xf32>
    %2 = "rlx_hir.param"() {name = "down"} : () -> tensor<32x16xf32>
    %3 = "rlx_hir.swiglu"(%arg0, %0, %1, %2) : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<32x16xf32>) -> tensor<?x16xf32> loc("swiglu_ffn")
    return %3 : tensor<?x16xf32>
  }
}
