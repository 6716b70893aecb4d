// mir-to-linalg for leaves: one util.global per weight name, bound to a parameter of the
// "model" scope (no weight bytes in the module), loaded where the param op was.
// RUN: %rlx-opt --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @leaf
// CHECK:     util.global private @param.layers.0.w = #flow.parameter.named<"model"::"layers.0.w"> : tensor<4xf32>
// CHECK-NOT: util.global
// CHECK:     func.func @main
// CHECK-DAG: %[[W:.*]] = util.global.load @param.layers.0.w : tensor<4xf32>
// CHECK-DAG: %[[C:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK:     linalg.generic {{.*}} ins(%[[W]], %[[C]] : tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: rlx_mir
module @leaf {
  func.func @main() -> tensor<4xf32> {
    %w = "rlx_mir.param"() {name = "layers.0.w"} : () -> tensor<4xf32>
    %w2 = "rlx_mir.param"() {name = "layers.0.w"} : () -> tensor<4xf32>
    %c = "rlx_mir.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
    %y = "rlx_mir.binary"(%w, %c) {kind = "mul"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %z = "rlx_mir.binary"(%y, %w2) {kind = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %z : tensor<4xf32>
  }
}
