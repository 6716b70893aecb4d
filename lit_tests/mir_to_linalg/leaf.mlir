// mir-to-linalg for leaves: one util.global per weight name, bound to a parameter of the
// "model" scope (no weight bytes in the module), loaded where the param op was.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

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

// -----

// An i1 constant is stored as i8 and compared with 0 (IREE 3.13's data tiling cannot pack
// i1 constants); splats too.
// CHECK-LABEL: module @mask
// CHECK-DAG:  %[[BITS:.*]] = arith.constant dense<{{\[\[}}1, 0], [1, 1]]> : tensor<2x2xi8>
// CHECK-DAG:  %[[ONES:.*]] = arith.constant dense<1> : tensor<2x2xi8>
// CHECK:      linalg.generic {{.*}} ins(%[[BITS]] : tensor<2x2xi8>) outs(%{{.*}} : tensor<2x2xi1>)
// CHECK:        arith.cmpi ne
// CHECK:      linalg.generic {{.*}} ins(%[[ONES]] : tensor<2x2xi8>) outs(%{{.*}} : tensor<2x2xi1>)
module @mask {
  func.func @main() -> (tensor<2x2xi1>, tensor<2x2xi1>) {
    %m = "rlx_mir.constant"() {value = dense<[[true, false], [true, true]]> : tensor<2x2xi1>} : () -> tensor<2x2xi1>
    %s = "rlx_mir.constant"() {value = dense<true> : tensor<2x2xi1>} : () -> tensor<2x2xi1>
    return %m, %s : tensor<2x2xi1>, tensor<2x2xi1>
  }
}

// -----

// A weight with a lead: its parameter holds `lead` bytes before the weight's, declared as
// one flat i8 global; the weight is a slice of it from `lead`, reshaped (nothing copied).
// CHECK-LABEL: module @lead
// CHECK:     util.global private @param.q = #flow.parameter.named<"model"::"q"> : tensor<168xi8>
// CHECK:     func.func @main
// CHECK:       %[[G:.*]] = util.global.load @param.q : tensor<168xi8>
// CHECK:       %[[S:.*]] = tensor.extract_slice %[[G]][32] [136] [1] : tensor<168xi8> to tensor<136xi8>
// CHECK:       %[[W:.*]] = tensor.expand_shape %[[S]] {{\[\[}}0, 1]] output_shape [4, 34] : tensor<136xi8> into tensor<4x34xi8>
// CHECK:       return %[[W]]
module @lead {
  func.func @main() -> tensor<4x34xi8> {
    %w = "rlx_mir.param"() {name = "q", lead = 32} : () -> tensor<4x34xi8>
    return %w : tensor<4x34xi8>
  }
}
