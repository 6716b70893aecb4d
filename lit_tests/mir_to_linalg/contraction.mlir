// mir-to-linalg for matmul: leading dims collapse into rows and a plain linalg.matmul
// (what IREE data-tiles); batched operands go through linalg.batch_matmul; f16 accumulates
// in f32 and is rounded once; i32 accumulates in i32.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @rows
// CHECK:      %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<2x?x16xf32> into tensor<?x16xf32>
// CHECK:      %[[MM:.*]] = linalg.matmul ins(%[[X]], %{{.*}} : tensor<?x16xf32>, tensor<16x32xf32>) outs(%{{.*}} : tensor<?x32xf32>)
// CHECK:      tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] {{.*}} : tensor<?x32xf32> into tensor<2x?x32xf32>
// CHECK-NOT:  linalg.transpose
module @rows {
  func.func @main(%x: tensor<2x?x16xf32>) -> tensor<2x?x32xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x32xf32>
    %y = "rlx_mir.matmul"(%x, %w) : (tensor<2x?x16xf32>, tensor<16x32xf32>) -> tensor<2x?x32xf32> loc("fc")
    return %y : tensor<2x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @batched
// CHECK: linalg.batch_matmul ins(%arg0, %arg1 : tensor<3x4x8xf32>, tensor<3x8x5xf32>)
module @batched {
  func.func @main(%a: tensor<3x4x8xf32>, %b: tensor<3x8x5xf32>) -> tensor<3x4x5xf32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<3x4x8xf32>, tensor<3x8x5xf32>) -> tensor<3x4x5xf32>
    return %y : tensor<3x4x5xf32>
  }
}

// -----

// CHECK-LABEL: module @half
// CHECK:      %[[ACC:.*]] = linalg.matmul ins(%arg0, %{{.*}} : tensor<4x16xf16>, tensor<16x8xf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:      linalg.generic {{.*}} ins(%[[ACC]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xf16>)
// CHECK:      arith.truncf {{.*}} : f32 to f16
module @half {
  func.func @main(%x: tensor<4x16xf16>) -> tensor<4x8xf16> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<16x8xf16>
    %y = "rlx_mir.matmul"(%x, %w) : (tensor<4x16xf16>, tensor<16x8xf16>) -> tensor<4x8xf16>
    return %y : tensor<4x8xf16>
  }
}

// -----

// CHECK-LABEL: module @integer
// CHECK:      %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK:      %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : i32)
// CHECK:      linalg.matmul ins(%arg0, %arg1 : tensor<4x16xi32>, tensor<16x8xi32>) outs(%[[INIT]] : tensor<4x8xi32>)
module @integer {
  func.func @main(%a: tensor<4x16xi32>, %b: tensor<16x8xi32>) -> tensor<4x8xi32> {
    %y = "rlx_mir.matmul"(%a, %b) : (tensor<4x16xi32>, tensor<16x8xi32>) -> tensor<4x8xi32>
    return %y : tensor<4x8xi32>
  }
}
