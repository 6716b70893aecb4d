// mir-to-linalg for scans: one scf.for over the sequence (dynamic S through tensor.dim)
// carrying the state and the output, filled with tensor.insert_slice at step t. Work that
// does not depend on the previous step is hoisted before the loop (LSTM/GRU: the input
// projection of every step, one matmul; GDN: exp(g), k·q / sqrt(n)); the reverse
// direction walks t' = S-1-t and writes at t' (time-aligned), at feature offset H. The
// carried tensors are pinned to the device (flow.tensor.transfer) so that IREE updates them
// in place instead of cloning them every trip. The loop carries no value computed before it
// (IREE 3.13 enters such a value at offset 0 of the allocation it was packed into, see
// lowering/loops.py): it carries blank tensors and step 0 reads the initial state as a
// captured value (GDN on llvm-cpu: an scf.if; LSTM / GRU: a select in a generic). A
// returned final state is copied out of the loop's buffer by one elementwise generic (stale
// on Vulkan otherwise: `_settled`).
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @gdn
// CHECK:       util.status.check_ok %{{.*}}, "{{.*}}: error: 'rlx_mir.gated_delta_net' \22gdn\22: operand 'g' dim 1: expected the size of operand 'q' dim 1
// CHECK:       util.status.check_ok %{{.*}}, "{{.*}}operand 'beta' dim 1: expected the size of operand 'q' dim 1
// CHECK:       %[[S:.*]] = tensor.dim %arg0, %c1 : tensor<1x?x2x4xf32>
// CHECK:       %[[E:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<1x?x2xf32>)
// CHECK:         math.exp
// CHECK:       %[[KQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %arg0 :
// CHECK:         arith.mulf
// CHECK:         arith.mulf %{{.*}}, %cst
// CHECK:       %[[YE:.*]] = tensor.empty(%[[S]]) : tensor<1x?x2x4xf32>
// CHECK:       %[[SE:.*]] = tensor.empty() : tensor<1x2x4x4xf32>
// CHECK:       %[[R:.*]]:2 = scf.for %[[T:.*]] = %c0 to %[[S]] step %c1 iter_args(%[[STA:.*]] = %[[SE]], %[[YA:.*]] = %[[YE]]) -> (tensor<1x2x4x4xf32>, tensor<1x?x2x4xf32>)
// CHECK:         %[[SC:.*]] = flow.tensor.transfer %[[STA]] : tensor<1x2x4x4xf32> to #hal.device.affinity<@__device_0>
// CHECK:         %[[Y:.*]] = flow.tensor.transfer %[[YA]] : tensor<1x?x2x4xf32>{%{{.*}}} to #hal.device.affinity<@__device_0>
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %c0 : index
// CHECK:         %[[ST:.*]] = scf.if %[[FIRST]] -> (tensor<1x2x4x4xf32>) {
// CHECK:           %[[S0:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<1x2x4x4xf32>)
// CHECK:           scf.yield %[[S0]]
// CHECK:         } else {
// CHECK:           scf.yield %[[SC]]
// CHECK:         %[[KT:.*]] = tensor.extract_slice %arg0[0, %[[T]], 0, 0] [1, 1, 2, 4]
// CHECK:         %[[QT:.*]] = tensor.extract_slice %arg0[0, %[[T]], 0, 0] [1, 1, 2, 4]
// CHECK:         %[[RD:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[ST]], %[[KT]], %[[QT]] :
// CHECK:         %[[DY:.*]]:2 = linalg.generic {{.*}} ins(%{{.*}}, %[[RD]]#0, %[[RD]]#1,
// CHECK:         %[[NEW:.*]] = linalg.generic {{.*}} ins(%[[ST]], %[[KT]], %[[DY]]#0,
// CHECK:         %[[YT:.*]] = tensor.expand_shape %[[DY]]#1
// CHECK:         %[[YN:.*]] = tensor.insert_slice %[[YT]] into %[[Y]][0, %[[T]], 0, 0] [1, 1, 2, 4]
// CHECK:         scf.yield %[[NEW]], %[[YN]]
// CHECK:       %[[NONE:.*]] = arith.cmpi eq, %[[S]], %c0 : index
// CHECK:       %[[FINAL:.*]] = scf.if %[[NONE]] -> (tensor<1x2x4x4xf32>) {
// CHECK:         linalg.generic {{.*}} ins(%arg2 : tensor<1x2x4x4xf32>)
// CHECK:       } else {
// CHECK:         scf.yield %[[R]]#0
// CHECK-NOT:   scf.for
// CHECK:       return %[[R]]#1, %[[FINAL]]
module @gdn {
  func.func @main(%q: tensor<1x?x2x4xf32>, %g: tensor<1x?x2xf32>, %s0: tensor<1x2x4x4xf32>) -> (tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>) {
    %y, %s = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_size = 4 : i64} : (tensor<1x?x2x4xf32>, tensor<1x?x2x4xf32>, tensor<1x?x2x4xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>) loc("gdn")
    return %y, %s : tensor<1x?x2x4xf32>, tensor<1x2x4x4xf32>
  }
}

// -----

// CHECK-LABEL: module @lstm
// CHECK:       %[[S:.*]] = tensor.dim %arg0, %c1 : tensor<2x?x4xf32>
// CHECK:       %[[LAST:.*]] = arith.subi %[[S]], %c1 : index
// CHECK:       tensor.extract_slice %param.wih[0, 0] [32, 4]
// CHECK:       linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4x32xf32>)
// CHECK:       tensor.extract_slice %param.wih[32, 0] [32, 4]
// CHECK:       linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4x32xf32>)
// CHECK:       %[[HF:.*]] = linalg.transpose ins(%{{.*}} : tensor<32x8xf32>)
// CHECK:       %[[YF:.*]] = tensor.empty(%[[S]]) : tensor<2x?x8xf32>
// CHECK:       %[[FWD:.*]]:3 = scf.for %[[T:.*]] = %c0 to %[[S]] step %c1 iter_args(%[[HA:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %[[YA:.*]] = %[[YF]]) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x?x8xf32>)
// CHECK:         %[[HC:.*]] = flow.tensor.transfer %[[HA]]
// CHECK:         %[[Y:.*]] = flow.tensor.transfer %[[YA]]
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %c0 : index
// CHECK:         %[[H:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[HC]] :
// CHECK:           arith.select %[[FIRST]]
// CHECK:         tensor.extract_slice %{{.*}}[0, %[[T]], 0] [2, 1, 32]
// CHECK:         linalg.matmul ins(%[[H]], %[[HF]] : tensor<2x8xf32>, tensor<8x32xf32>)
// CHECK:         %[[G:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-COUNT-2:   math.tanh
// CHECK:         tensor.insert_slice %{{.*}} into %[[Y]][0, %[[T]], 0] [2, 1, 8]
// CHECK:         scf.yield %[[G]]#0, %[[G]]#1,
// CHECK:       %[[YB:.*]] = tensor.empty(%[[S]]) : tensor<2x?x8xf32>
// CHECK:       %[[BWD:.*]]:3 = scf.for %[[T2:.*]] = %c0 to %[[S]] step %c1 iter_args({{.*}}, %[[Y2A:.*]] = %[[YB]])
// CHECK:         %[[Y2:.*]] = flow.tensor.transfer %[[Y2A]]
// CHECK:         %[[REV:.*]] = arith.subi %[[LAST]], %[[T2]] : index
// CHECK:         tensor.extract_slice %{{.*}}[0, %[[REV]], 0] [2, 1, 32]
// CHECK:         tensor.insert_slice %{{.*}} into %[[Y2]][0, %[[REV]], 0] [2, 1, 8]
// CHECK:       %[[CAT:.*]] = tensor.concat dim(2) %[[FWD]]#2, %[[BWD]]#2
// CHECK:       return %[[CAT]]
module @lstm {
  func.func @main(%x: tensor<2x?x4xf32>) -> tensor<2x?x16xf32> {
    %wih = "rlx_mir.param"() {name = "wih"} : () -> tensor<64x4xf32>
    %whh = "rlx_mir.param"() {name = "whh"} : () -> tensor<64x8xf32>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<64xf32>
    %y = "rlx_mir.lstm"(%x, %wih, %whh, %b) {bidirectional = true, carry = false, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<2x?x4xf32>, tensor<64x4xf32>, tensor<64x8xf32>, tensor<64xf32>) -> tensor<2x?x16xf32> loc("lstm")
    return %y : tensor<2x?x16xf32>
  }
}

// -----

// Two layers, flat w_ih (block widths 4, then 8): layer 1 projects layer 0's output into
// an output of its own; the loop carries a blank state and selects h0[l] at step 0 (IREE
// 3.13 packs a carried input slice into a transient it then misreads, see
// lowering/loops.py); the final
// states are stacked into hn. The gate generic reads each gate (and each gate of b_ih,
// b_hh) as its own [B, H] / [H] slice.
// CHECK-LABEL: module @gru
// CHECK:       tensor.extract_slice %param.wih[0] [96] [1] : tensor<288xf32> to tensor<96xf32>
// CHECK:       %[[BIH:.*]] = tensor.collapse_shape %{{.*}} : tensor<1x24xf32> into tensor<24xf32>
// CHECK:       %[[BIR:.*]] = tensor.extract_slice %[[BIH]][0] [8] [1] : tensor<24xf32> to tensor<8xf32>
// CHECK:       %[[BIZ:.*]] = tensor.extract_slice %[[BIH]][8] [8] [1]
// CHECK:       %[[BIN:.*]] = tensor.extract_slice %[[BIH]][16] [8] [1]
// CHECK:       %[[H0:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<1x1x8xf32> into tensor<1x8xf32>
// CHECK:       %[[Z:.*]] = tensor.empty() : tensor<1x8xf32>
// CHECK:       %[[L0:.*]]:2 = scf.for %[[T:.*]] = {{.*}} iter_args(%[[HA:.*]] = %[[Z]], %{{.*}} = %{{.*}}) -> (tensor<1x8xf32>, tensor<1x?x8xf32>)
// CHECK:         %[[HC:.*]] = flow.tensor.transfer %[[HA]]
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK:         %[[H:.*]] = linalg.generic {{.*}} ins(%[[H0]], %[[HC]] :
// CHECK:           arith.select %[[FIRST]]
// CHECK:         %[[HW:.*]] = linalg.matmul ins(%[[H]], %{{.*}} : tensor<1x8xf32>, tensor<8x24xf32>)
// CHECK:         %[[HR:.*]] = tensor.extract_slice %[[HW]][0, 0] [1, 8]
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[HR]], %{{.*}}, %{{.*}}, %[[BIR]], %[[BIZ]], %[[BIN]], %{{.*}}, %{{.*}}, %{{.*}}, %[[H]] :
// CHECK:       %[[E0:.*]] = linalg.generic {{.*}} ins(%[[H0]], %[[L0]]#0 : tensor<1x8xf32>, tensor<1x8xf32>)
// CHECK:         arith.select
// CHECK:       %[[F0:.*]] = linalg.generic {{.*}} ins(%[[E0]] : tensor<1x8xf32>)
// CHECK:       tensor.extract_slice %param.wih[96] [192] [1] : tensor<288xf32> to tensor<192xf32>
// CHECK:       tensor.collapse_shape %[[L0]]#1 {{\[\[}}0, 1], [2]] : tensor<1x?x8xf32> into tensor<?x8xf32>
// CHECK:       %[[L1:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<1x8xf32>, tensor<1x?x8xf32>)
// CHECK:       %[[E1:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[L1]]#0 : tensor<1x8xf32>, tensor<1x8xf32>)
// CHECK:       %[[F1:.*]] = linalg.generic {{.*}} ins(%[[E1]] : tensor<1x8xf32>)
// CHECK:       %[[A:.*]] = tensor.expand_shape %[[F0]] {{.*}} into tensor<1x1x8xf32>
// CHECK:       %[[B:.*]] = tensor.expand_shape %[[F1]] {{.*}} into tensor<1x1x8xf32>
// CHECK:       %[[HN:.*]] = tensor.concat dim(0) %[[A]], %[[B]]
// CHECK:       return %[[L1]]#1, %[[HN]]
module @gru {
  func.func @main(%x: tensor<1x?x4xf32>, %h0: tensor<2x1x8xf32>) -> (tensor<1x?x8xf32>, tensor<2x1x8xf32>) {
    %wih = "rlx_mir.param"() {name = "wih"} : () -> tensor<288xf32>
    %whh = "rlx_mir.param"() {name = "whh"} : () -> tensor<48x8xf32>
    %bih = "rlx_mir.param"() {name = "bih"} : () -> tensor<2x24xf32>
    %bhh = "rlx_mir.param"() {name = "bhh"} : () -> tensor<2x24xf32>
    %y, %hn = "rlx_mir.gru"(%x, %wih, %whh, %bih, %bhh, %h0) {bidirectional = false, carry = true, hidden_size = 8 : i64, num_layers = 2 : i64} : (tensor<1x?x4xf32>, tensor<288xf32>, tensor<48x8xf32>, tensor<2x24xf32>, tensor<2x24xf32>, tensor<2x1x8xf32>) -> (tensor<1x?x8xf32>, tensor<2x1x8xf32>) loc("gru")
    return %y, %hn : tensor<1x?x8xf32>, tensor<2x1x8xf32>
  }
}

// -----

// ONNX's default GRU (linear_before_reset = false): the reset gate scales h before its
// matmul, so a step is h·W_rzᵀ (the r and z columns of W_hhᵀ, sliced before the loop), a
// generic giving (r ⊙ h, z), (r ⊙ h)·W_nᵀ, and a generic for n and h'.
// CHECK-LABEL: module @gru_reset_first
// CHECK:       %[[WRZ:.*]] = tensor.extract_slice %{{.*}}[0, 0] [8, 16] [1, 1] : tensor<8x24xf32> to tensor<8x16xf32>
// CHECK:       %[[WN:.*]] = tensor.extract_slice %{{.*}}[0, 16] [8, 8] [1, 1] : tensor<8x24xf32> to tensor<8x8xf32>
// CHECK:       scf.for
// CHECK:         linalg.matmul ins(%{{.*}}, %[[WRZ]] : tensor<1x8xf32>, tensor<8x16xf32>)
// CHECK:         %[[RZ:.*]]:2 = linalg.generic
// CHECK:         linalg.matmul ins(%[[RZ]]#0, %[[WN]] : tensor<1x8xf32>, tensor<8x8xf32>)
// CHECK:         linalg.generic
// CHECK:           math.tanh
// CHECK:         scf.yield
module @gru_reset_first {
  func.func @main(%x: tensor<1x?x4xf32>) -> tensor<1x?x8xf32> {
    %wih = "rlx_mir.param"() {name = "wih"} : () -> tensor<24x4xf32>
    %whh = "rlx_mir.param"() {name = "whh"} : () -> tensor<24x8xf32>
    %bih = "rlx_mir.param"() {name = "bih"} : () -> tensor<24xf32>
    %bhh = "rlx_mir.param"() {name = "bhh"} : () -> tensor<24xf32>
    %y = "rlx_mir.gru"(%x, %wih, %whh, %bih, %bhh) {bidirectional = false, carry = false, hidden_size = 8 : i64, linear_before_reset = false, num_layers = 1 : i64} : (tensor<1x?x4xf32>, tensor<24x4xf32>, tensor<24x8xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<1x?x8xf32> loc("gru")
    return %y : tensor<1x?x8xf32>
  }
}
