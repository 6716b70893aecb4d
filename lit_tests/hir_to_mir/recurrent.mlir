// hir-to-mir for scans: 1:1, and the carried state stays an explicit result.
// RUN: %rlx-opt --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @scans
// CHECK: %{{.*}}:2 = "rlx_mir.gated_delta_net"(%arg0, %arg0, %arg0, %arg1, %arg1, %arg2) {carry_state = true, state_size = 4 : i64} {{.*}} -> (tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>) loc("gdn")
// CHECK: %{{.*}}:3 = "rlx_mir.lstm"(%arg3, {{.*}}) {bidirectional = false, carry = true, hidden_size = 8 : i64, num_layers = 1 : i64} {{.*}} loc("lstm")
// CHECK: "rlx_mir.gru"(%arg3, {{.*}}) {bidirectional = false, carry = false, hidden_size = 8 : i64, num_layers = 1 : i64} {{.*}} loc("gru")
module @scans {
  func.func @main(%q: tensor<1x?x2x4xf32>, %g: tensor<1x?x2xf32>, %s0: tensor<1x2x4x4xf32>, %x: tensor<1x?x4xf32>, %h0: tensor<1x1x8xf32>) -> (tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x?x8xf32>, tensor<1x1x8xf32>, tensor<1x?x8xf32>) {
    %y, %s = "rlx_hir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_size = 4 : i64} : (tensor<1x?x2x4xf32>, tensor<1x?x2x4xf32>, tensor<1x?x2x4xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>) loc("gdn")
    %wih = "rlx_hir.param"() {name = "wih"} : () -> tensor<32x4xf32>
    %whh = "rlx_hir.param"() {name = "whh"} : () -> tensor<32x8xf32>
    %b = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %ly, %hn, %cn = "rlx_hir.lstm"(%x, %wih, %whh, %b, %h0, %h0) {bidirectional = false, carry = true, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x?x4xf32>, tensor<32x4xf32>, tensor<32x8xf32>, tensor<32xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> (tensor<1x?x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) loc("lstm")
    %gih = "rlx_hir.param"() {name = "gih"} : () -> tensor<24x4xf32>
    %ghh = "rlx_hir.param"() {name = "ghh"} : () -> tensor<24x8xf32>
    %gb = "rlx_hir.param"() {name = "gb"} : () -> tensor<24xf32>
    %gy = "rlx_hir.gru"(%x, %gih, %ghh, %gb, %gb) {bidirectional = false, carry = false, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x?x4xf32>, tensor<24x4xf32>, tensor<24x8xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<1x?x8xf32> loc("gru")
    return %y, %s, %ly, %hn, %gy : tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x?x8xf32>, tensor<1x1x8xf32>, tensor<1x?x8xf32>
  }
}
