// mir-to-linalg on llvm-cpu: a gated_delta_net of static heads and state size (a multiple
// of 16) is one flow.dispatch to rlx's hand-written scan kernel (gdn_kernel.py),
// which walks every step inside, its state operand tied to the final-state result (IREE
// updates the state's buffer in place), one workgroup per (row, head); exp(g) is computed
// before it, k·q in it. A dynamic length: each view sized by its own
// operand's rows, the kernel walks min(rows) / B steps. With --no-attention-kernel and on
// GPU targets: the linalg step in an scf.for.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-attention-kernel %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: module @step
// CHECK:       stream.executable private @rlx_gdn_scan_3x2x16_s1
// CHECK:       func.func @rlx_gdn_scan_3x2x16_s1(%arg0: !stream.binding {{.*}}, %arg6: !stream.binding
// CHECK:         stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<6x16x16xf32>
// CHECK:         stream.binding.subspan %arg6[%c0] : !stream.binding -> memref<3x32xf32>
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             vector.fma
// CHECK:           scf.for
// CHECK:             vector.store {{.*}} : memref<6x16x16xf32>, vector<16xf32>
// CHECK:       math.exp
// CHECK:       %[[S:.*]] = tensor.collapse_shape %arg2 {{\[}}[0, 1], [2], [3]] : tensor<3x2x16x16xf32> into tensor<6x16x16xf32>
// CHECK:       %[[D:.*]]:2 = flow.dispatch @rlx_gdn_scan_3x2x16_s1::@rlx_gdn_scan_3x2x16_s1[%c6](%[[S]], {{.*}}) : ({{.*}}) -> (%[[S]], tensor<3x32xf32>)
// CHECK:       tensor.expand_shape %[[D]]#0 {{\[}}[0, 1], [2], [3]] {{.*}} into tensor<3x2x16x16xf32>
// OFF-LABEL:   module @step
// OFF-NOT:     flow.dispatch
// OFF:         scf.for
module @step {
  func.func @main(%q: tensor<3x1x2x16xf32>, %g: tensor<3x1x2xf32>, %s0: tensor<3x2x16x16xf32>) -> (tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>) {
    %y, %s = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_in_place = true, state_size = 16 : i64} : (tensor<3x1x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3x1x2xf32>, tensor<3x1x2xf32>, tensor<3x2x16x16xf32>) -> (tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>) loc("gdn")
    return %y, %s : tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>
  }
}

// -----

// A prompt of dynamic length from the zero state: one view's rows a push constant each,
// the steps min(rows) / B; the zero state filled and tied to the final state.
// CHECK-LABEL: module @prefill
// CHECK:       func.func @rlx_gdn_scan_1x2x16_dyn(
// CHECK-SAME:    %arg6: index {{.*}} %arg10: index {{.*}} %arg11: !stream.binding
// CHECK:         stream.binding.subspan %arg1[%c0] : !stream.binding -> memref<?x32xf32>{%arg6}
// CHECK:         stream.binding.subspan %arg5[%c0] : !stream.binding -> memref<?x2xf32>{%arg10}
// CHECK:         stream.binding.subspan %arg11[%c0] : !stream.binding -> memref<?x32xf32>{%arg6}
// CHECK-COUNT-4: arith.minui
// CHECK:         %[[N:.*]] = arith.divui
// CHECK:         scf.for %{{.*}} = %c0 to %[[N]] step %c1
// CHECK:       %[[Z:.*]] = linalg.fill {{.*}} -> tensor<1x2x16x16xf32>
// CHECK:       %[[S:.*]] = tensor.collapse_shape %[[Z]]
// CHECK:       flow.dispatch @rlx_gdn_scan_1x2x16_dyn::@rlx_gdn_scan_1x2x16_dyn[%c2](%[[S]], {{.*}}) -> (%[[S]], tensor<?x32xf32>{{.*}})
// OFF-LABEL:   module @prefill
// OFF-NOT:     flow.dispatch
// OFF:         scf.for
module @prefill {
  func.func @main(%q: tensor<1x?x2x16xf32>, %g: tensor<1x?x2xf32>) -> tensor<1x?x2x16xf32> {
    %y = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g) {carry_state = false, state_size = 16 : i64} : (tensor<1x?x2x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x2x16xf32> loc("gdn")
    return %y : tensor<1x?x2x16xf32>
  }
}

// -----

// A state size the kernel does not take (not a multiple of 16): the linalg step.
// CHECK-LABEL: module @narrow
// CHECK-NOT:   flow.dispatch
// CHECK:       scf.for
module @narrow {
  func.func @main(%q: tensor<3x1x2x8xf32>, %g: tensor<3x1x2xf32>, %s0: tensor<3x2x8x8xf32>) -> (tensor<3x1x2x8xf32>, tensor<3x2x8x8xf32>) {
    %y, %s = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_size = 8 : i64} : (tensor<3x1x2x8xf32>, tensor<3x1x2x8xf32>, tensor<3x1x2x8xf32>, tensor<3x1x2xf32>, tensor<3x1x2xf32>, tensor<3x2x8x8xf32>) -> (tensor<3x1x2x8xf32>, tensor<3x2x8x8xf32>) loc("gdn")
    return %y, %s : tensor<3x1x2x8xf32>, tensor<3x2x8x8xf32>
  }
}

// -----

// A batch and a state's rows known only at run time (rlx-serve's batched prefill): B and
// the state's B' · H rows are push constants; the kernel runs min(B, B') · H workgroups
// and walks min(rows) / B steps; the workload is B · H.
// CHECK-LABEL: module @dynamic_batch
// CHECK:       func.func @rlx_gdn_scan_dx2x16_dyn(
// CHECK-SAME:    %arg11: index {{.*}} %arg12: index {{.*}} %arg13: !stream.binding
// CHECK:         stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<?x16x16xf32>{%arg12}
// CHECK:         %[[SB:.*]] = arith.divui %arg12, %c2
// CHECK:         %[[B:.*]] = arith.minui %arg11, %[[SB]]
// CHECK:         %[[N:.*]] = arith.muli %[[B]], %c2
// CHECK:         arith.cmpi ult, %workgroup_id_x, %[[N]]
// CHECK:         arith.divui %{{.*}}, %arg11
// CHECK:       flow.dispatch @rlx_gdn_scan_dx2x16_dyn::@rlx_gdn_scan_dx2x16_dyn
// OFF-LABEL:   module @dynamic_batch
// OFF-NOT:     flow.dispatch
// OFF:         scf.for
module @dynamic_batch {
  func.func @main(%q: tensor<?x?x2x16xf32>, %g: tensor<?x?x2xf32>, %s0: tensor<?x2x16x16xf32>) -> (tensor<?x?x2x16xf32>, tensor<?x2x16x16xf32>) {
    %y, %s = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_size = 16 : i64} : (tensor<?x?x2x16xf32>, tensor<?x?x2x16xf32>, tensor<?x?x2x16xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x2x16x16xf32>) -> (tensor<?x?x2x16xf32>, tensor<?x2x16x16xf32>) loc("gdn")
    return %y, %s : tensor<?x?x2x16xf32>, tensor<?x2x16x16xf32>
  }
}
