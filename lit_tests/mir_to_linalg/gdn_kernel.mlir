// mir-to-linalg on llvm-cpu: a one-step gated_delta_net with state_in_place is one
// flow.dispatch to rlx's hand-written kernel (gdn_kernel.py), its state operand tied to the
// final-state result (IREE updates the state's buffer in place), one workgroup per (row,
// head); k·q and exp(g) are computed before it as in the linalg form. Without
// state_in_place, with --no-attention-kernel and on GPU targets: the linalg step.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-attention-kernel %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: module @step
// CHECK:       stream.executable private @rlx_gdn_step_6x16
// CHECK:       func.func @rlx_gdn_step_6x16(%arg0: !stream.binding {{.*}}, %arg7: !stream.binding
// CHECK:         stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<6x16x16xf32>
// CHECK:         stream.binding.subspan %arg7[%c0] : !stream.binding -> memref<6x16xf32>
// CHECK:         scf.for
// CHECK:           vector.fma
// CHECK:         scf.for
// CHECK:           vector.store {{.*}} : memref<6x16x16xf32>, vector<16xf32>
// CHECK:       math.exp
// CHECK:       %[[S:.*]] = tensor.collapse_shape %arg2 {{\[}}[0, 1], [2], [3]] : tensor<3x2x16x16xf32> into tensor<6x16x16xf32>
// CHECK:       %[[D:.*]]:2 = flow.dispatch @rlx_gdn_step_6x16::@rlx_gdn_step_6x16[%c6](%[[S]], {{.*}}) : ({{.*}}) -> (%[[S]], tensor<6x16xf32>)
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

// CHECK-LABEL: module @not_in_place
// CHECK-NOT:   flow.dispatch
// CHECK:       scf.for
module @not_in_place {
  func.func @main(%q: tensor<3x1x2x16xf32>, %g: tensor<3x1x2xf32>, %s0: tensor<3x2x16x16xf32>) -> (tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>) {
    %y, %s = "rlx_mir.gated_delta_net"(%q, %q, %q, %g, %g, %s0) {carry_state = true, state_size = 16 : i64} : (tensor<3x1x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3x1x2x16xf32>, tensor<3x1x2xf32>, tensor<3x1x2xf32>, tensor<3x2x16x16xf32>) -> (tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>) loc("gdn")
    return %y, %s : tensor<3x1x2x16xf32>, tensor<3x2x16x16xf32>
  }
}
