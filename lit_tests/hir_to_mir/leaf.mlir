// hir-to-mir for leaves: weights keep their names, constants their data; MIR ops written
// in a HIR function (the escape hatch) pass through unchanged.
// RUN: %rlx-opt --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @leaf
// CHECK:      %[[W:.*]] = "rlx_mir.param"() {name = "layers.0.w"} : () -> tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = "rlx_mir.constant"() {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>}
// CHECK-NEXT: "rlx_mir.binary"(%[[W]], %[[C]]) {kind = "mul"} {{.*}} loc("Mul_3")
module @leaf {
  func.func @main() -> tensor<4xf32> {
    %w = "rlx_hir.param"() {name = "layers.0.w"} : () -> tensor<4xf32>
    %c = "rlx_hir.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
    %y = "rlx_mir.binary"(%w, %c) {kind = "mul"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("Mul_3")
    return %y : tensor<4xf32>
  }
}
