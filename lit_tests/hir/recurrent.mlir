// Round trip of the recurrent HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @gated_delta_net attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x2x8xf32> {rlx.name = "q"}, %arg1: tensor<1x?x2x8xf32> {rlx.name = "k"}, %arg2: tensor<1x?x2x8xf32> {rlx.name = "v"}, %arg3: tensor<1x?x2xf32> {rlx.name = "g"}, %arg4: tensor<1x?x2xf32> {rlx.name = "beta"}) -> tensor<1x?x2x8xf32> {
// CHECK-NEXT: %0 = "rlx_hir.gated_delta_net"(%arg0, %arg1, %arg2, %arg3, %arg4) {carry_state = false, state_size = 8 : i64} : (tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2x8xf32> loc("gated_delta_net")
// CHECK-NEXT: return %0 : tensor<1x?x2x8xf32>
module @gated_delta_net attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x2x8xf32> {rlx.name = "q"}, %arg1: tensor<1x?x2x8xf32> {rlx.name = "k"}, %arg2: tensor<1x?x2x8xf32> {rlx.name = "v"}, %arg3: tensor<1x?x2xf32> {rlx.name = "g"}, %arg4: tensor<1x?x2xf32> {rlx.name = "beta"}) -> tensor<1x?x2x8xf32> {
    %0 = "rlx_hir.gated_delta_net"(%arg0, %arg1, %arg2, %arg3, %arg4) {carry_state = false, state_size = 8 : i64} : (tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2x8xf32> loc("gated_delta_net")
    return %0 : tensor<1x?x2x8xf32>
  }
}

// -----

// CHECK-LABEL: module @gated_delta_net_carry attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x2x8xf32> {rlx.name = "q"}, %arg1: tensor<1x?x2x8xf32> {rlx.name = "k"}, %arg2: tensor<1x?x2x8xf32> {rlx.name = "v"}, %arg3: tensor<1x?x2xf32> {rlx.name = "g"}, %arg4: tensor<1x?x2xf32> {rlx.name = "beta"}, %arg5: tensor<1x2x8x8xf32> {rlx.name = "s"}) -> (tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>) {
// CHECK-NEXT: %0:2 = "rlx_hir.gated_delta_net"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) {carry_state = true, state_size = 8 : i64} : (tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>, tensor<1x2x8x8xf32>) -> (tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>) loc("gated_delta_net_carry")
// CHECK-NEXT: return %0#0, %0#1 : tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>
module @gated_delta_net_carry attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x2x8xf32> {rlx.name = "q"}, %arg1: tensor<1x?x2x8xf32> {rlx.name = "k"}, %arg2: tensor<1x?x2x8xf32> {rlx.name = "v"}, %arg3: tensor<1x?x2xf32> {rlx.name = "g"}, %arg4: tensor<1x?x2xf32> {rlx.name = "beta"}, %arg5: tensor<1x2x8x8xf32> {rlx.name = "s"}) -> (tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>) {
    %0:2 = "rlx_hir.gated_delta_net"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) {carry_state = true, state_size = 8 : i64} : (tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>, tensor<1x2x8x8xf32>) -> (tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>) loc("gated_delta_net_carry")
    return %0#0, %0#1 : tensor<1x?x2x8xf32>, tensor<1x2x8x8xf32>
  }
}

// -----

// CHECK-LABEL: module @lstm attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}) -> tensor<2x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<5120xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<256x16xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<256xf32>
// CHECK-NEXT: %3 = "rlx_hir.lstm"(%arg0, %0, %1, %2) {bidirectional = true, carry = false, hidden_size = 16 : i64, num_layers = 2 : i64} : (tensor<2x?x8xf32>, tensor<5120xf32>, tensor<256x16xf32>, tensor<256xf32>) -> tensor<2x?x32xf32> loc("lstm")
// CHECK-NEXT: return %3 : tensor<2x?x32xf32>
module @lstm attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}) -> tensor<2x?x32xf32> {
    %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<5120xf32>
    %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<256x16xf32>
    %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<256xf32>
    %3 = "rlx_hir.lstm"(%arg0, %0, %1, %2) {bidirectional = true, carry = false, hidden_size = 16 : i64, num_layers = 2 : i64} : (tensor<2x?x8xf32>, tensor<5120xf32>, tensor<256x16xf32>, tensor<256xf32>) -> tensor<2x?x32xf32> loc("lstm")
    return %3 : tensor<2x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @lstm_carry attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}, %arg1: tensor<4x2x16xf32> {rlx.name = "h0"}, %arg2: tensor<4x2x16xf32> {rlx.name = "c0"}) -> (tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<5120xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<256x16xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<256xf32>
// CHECK-NEXT: %3:3 = "rlx_hir.lstm"(%arg0, %0, %1, %2, %arg1, %arg2) {bidirectional = true, carry = true, hidden_size = 16 : i64, num_layers = 2 : i64} : (tensor<2x?x8xf32>, tensor<5120xf32>, tensor<256x16xf32>, tensor<256xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) -> (tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) loc("lstm")
// CHECK-NEXT: return %3#0, %3#1, %3#2 : tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>
module @lstm_carry attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}, %arg1: tensor<4x2x16xf32> {rlx.name = "h0"}, %arg2: tensor<4x2x16xf32> {rlx.name = "c0"}) -> (tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) {
    %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<5120xf32>
    %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<256x16xf32>
    %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<256xf32>
    %3:3 = "rlx_hir.lstm"(%arg0, %0, %1, %2, %arg1, %arg2) {bidirectional = true, carry = true, hidden_size = 16 : i64, num_layers = 2 : i64} : (tensor<2x?x8xf32>, tensor<5120xf32>, tensor<256x16xf32>, tensor<256xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) -> (tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>) loc("lstm")
    return %3#0, %3#1, %3#2 : tensor<2x?x32xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>
  }
}

// -----

// CHECK-LABEL: module @gru attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}) -> tensor<2x?x16xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<48x8xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<48x16xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "bih"} : () -> tensor<48xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "bhh"} : () -> tensor<48xf32>
// CHECK-NEXT: %4 = "rlx_hir.gru"(%arg0, %0, %1, %2, %3) {bidirectional = false, carry = false, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<2x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>) -> tensor<2x?x16xf32> loc("gru")
// CHECK-NEXT: return %4 : tensor<2x?x16xf32>
module @gru attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}) -> tensor<2x?x16xf32> {
    %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<48x8xf32>
    %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<48x16xf32>
    %2 = "rlx_hir.param"() {name = "bih"} : () -> tensor<48xf32>
    %3 = "rlx_hir.param"() {name = "bhh"} : () -> tensor<48xf32>
    %4 = "rlx_hir.gru"(%arg0, %0, %1, %2, %3) {bidirectional = false, carry = false, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<2x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>) -> tensor<2x?x16xf32> loc("gru")
    return %4 : tensor<2x?x16xf32>
  }
}

// -----

// CHECK-LABEL: module @gru_carry attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}, %arg1: tensor<1x2x16xf32> {rlx.name = "h0"}) -> (tensor<2x?x16xf32>, tensor<1x2x16xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<48x8xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<48x16xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "bih"} : () -> tensor<48xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "bhh"} : () -> tensor<48xf32>
// CHECK-NEXT: %4:2 = "rlx_hir.gru"(%arg0, %0, %1, %2, %3, %arg1) {bidirectional = false, carry = true, hidden_size = 16 : i64, linear_before_reset = false, num_layers = 1 : i64} : (tensor<2x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>, tensor<1x2x16xf32>) -> (tensor<2x?x16xf32>, tensor<1x2x16xf32>) loc("gru")
// CHECK-NEXT: return %4#0, %4#1 : tensor<2x?x16xf32>, tensor<1x2x16xf32>
module @gru_carry attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x8xf32> {rlx.name = "x"}, %arg1: tensor<1x2x16xf32> {rlx.name = "h0"}) -> (tensor<2x?x16xf32>, tensor<1x2x16xf32>) {
    %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<48x8xf32>
    %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<48x16xf32>
    %2 = "rlx_hir.param"() {name = "bih"} : () -> tensor<48xf32>
    %3 = "rlx_hir.param"() {name = "bhh"} : () -> tensor<48xf32>
    %4:2 = "rlx_hir.gru"(%arg0, %0, %1, %2, %3, %arg1) {bidirectional = false, carry = true, hidden_size = 16 : i64, linear_before_reset = false, num_layers = 1 : i64} : (tensor<2x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>, tensor<1x2x16xf32>) -> (tensor<2x?x16xf32>, tensor<1x2x16xf32>) loc("gru")
    return %4#0, %4#1 : tensor<2x?x16xf32>, tensor<1x2x16xf32>
  }
}
