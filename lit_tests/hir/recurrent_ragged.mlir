// Round trip of the recurrent_ragged HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// No IRDL run: IRDL cannot express a scan's differently-typed trailing operands
// (states, peepholes, i64 lengths; see python/rlx/dialects/irdl.py).

// CHECK-LABEL: module @rnn_lengths_peephole attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<?x?x8xf32> {rlx.name = "x"}, %arg1: tensor<?xi64> {rlx.name = "lengths"}, %arg2: tensor<2x?x16xf32> {rlx.name = "h0"}, %arg3: tensor<2x?x16xf32> {rlx.name = "c0"}) -> (tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<?x?x16xf32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<128x8xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<128x16xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<128xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "peep"} : () -> tensor<2x48xf32>
// CHECK-NEXT: %4:3 = "rlx_hir.lstm"(%arg0, %0, %1, %2, %arg2, %arg3, %3, %arg1) {bidirectional = true, carry = true, has_lengths = true, has_peephole = true, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<?x?x8xf32>, tensor<128x8xf32>, tensor<128x16xf32>, tensor<128xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x48xf32>, tensor<?xi64>) -> (tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) loc("lstm")
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "gih"} : () -> tensor<48x8xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "ghh"} : () -> tensor<48x16xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "gbi"} : () -> tensor<48xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "gbh"} : () -> tensor<48xf32>
// CHECK-NEXT: %9 = "rlx_hir.gru"(%arg0, %5, %6, %7, %8, %arg1) {bidirectional = false, carry = false, has_lengths = true, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<?x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>, tensor<?xi64>) -> tensor<?x?x16xf32> loc("gru")
// CHECK-NEXT: return %4#0, %4#1, %4#2, %9 : tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<?x?x16xf32>
module @rnn_lengths_peephole attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<?x?x8xf32> {rlx.name = "x"}, %arg1: tensor<?xi64> {rlx.name = "lengths"}, %arg2: tensor<2x?x16xf32> {rlx.name = "h0"}, %arg3: tensor<2x?x16xf32> {rlx.name = "c0"}) -> (tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<?x?x16xf32>) {
    %0 = "rlx_hir.param"() {name = "wih"} : () -> tensor<128x8xf32>
    %1 = "rlx_hir.param"() {name = "whh"} : () -> tensor<128x16xf32>
    %2 = "rlx_hir.param"() {name = "b"} : () -> tensor<128xf32>
    %3 = "rlx_hir.param"() {name = "peep"} : () -> tensor<2x48xf32>
    %4:3 = "rlx_hir.lstm"(%arg0, %0, %1, %2, %arg2, %arg3, %3, %arg1) {bidirectional = true, carry = true, has_lengths = true, has_peephole = true, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<?x?x8xf32>, tensor<128x8xf32>, tensor<128x16xf32>, tensor<128xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x48xf32>, tensor<?xi64>) -> (tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>) loc("lstm")
    %5 = "rlx_hir.param"() {name = "gih"} : () -> tensor<48x8xf32>
    %6 = "rlx_hir.param"() {name = "ghh"} : () -> tensor<48x16xf32>
    %7 = "rlx_hir.param"() {name = "gbi"} : () -> tensor<48xf32>
    %8 = "rlx_hir.param"() {name = "gbh"} : () -> tensor<48xf32>
    %9 = "rlx_hir.gru"(%arg0, %5, %6, %7, %8, %arg1) {bidirectional = false, carry = false, has_lengths = true, hidden_size = 16 : i64, num_layers = 1 : i64} : (tensor<?x?x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<48xf32>, tensor<?xi64>) -> tensor<?x?x16xf32> loc("gru")
    return %4#0, %4#1, %4#2, %9 : tensor<?x?x32xf32>, tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<?x?x16xf32>
  }
}
