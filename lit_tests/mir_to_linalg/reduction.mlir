// mir-to-linalg for reductions: a generic with reduction iterators (f32 accumulation for
// 16-bit floats), linalg.softmax, cumsum as one masked reduction.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @reduce
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK-SAME: outs(%{{.*}} : tensor<4xf32>)
// CHECK:        arith.addf
// CHECK:      arith.mulf {{.*}}
// CHECK:      tensor.expand_shape {{.*}} into tensor<1x4x1xf16>
module @reduce {
  func.func @main(%x: tensor<3x4x5xf16>) -> tensor<1x4x1xf16> {
    %y = "rlx_mir.reduce"(%x) {axes = array<i64: 0, 2>, keep_dim = true, kind = "mean"} : (tensor<3x4x5xf16>) -> tensor<1x4x1xf16>
    return %y : tensor<1x4x1xf16>
  }
}

// -----

// CHECK-LABEL: module @softmax
// CHECK: linalg.softmax dimension(1) ins(%arg0 : tensor<8x?xf32>)
module @softmax {
  func.func @main(%x: tensor<8x?xf32>) -> tensor<8x?xf32> {
    %y = "rlx_mir.softmax"(%x) {axis = -1 : i64} : (tensor<8x?xf32>) -> tensor<8x?xf32>
    return %y : tensor<8x?xf32>
  }
}

// -----

// Over dynamic sizes, a softmax whose input's producers also feed another op (a bias every
// layer adds to its scores) starts behind a compute barrier; one whose producers feed it
// alone does not.
// CHECK-LABEL: module @softmax_shared_bias
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start
// CHECK:      linalg.softmax dimension(1) ins(%[[B]] : tensor<8x?xf32>)
// CHECK-NOT:  compute_barrier
// CHECK:      linalg.softmax dimension(1) ins(%{{.*}} : tensor<8x?xf32>)
module @softmax_shared_bias {
  func.func @main(%x: tensor<8x?xf32>, %y: tensor<8x?xf32>, %bias: tensor<8x?xf32>) -> (tensor<8x?xf32>, tensor<8x?xf32>) {
    %b = "rlx_mir.activation"(%bias) {kind = "tanh"} : (tensor<8x?xf32>) -> tensor<8x?xf32>
    %s0 = "rlx_mir.binary"(%x, %b) {kind = "add"} : (tensor<8x?xf32>, tensor<8x?xf32>) -> tensor<8x?xf32>
    %p0 = "rlx_mir.softmax"(%s0) {axis = -1 : i64} : (tensor<8x?xf32>) -> tensor<8x?xf32>
    %s1 = "rlx_mir.binary"(%y, %bias) {kind = "add"} : (tensor<8x?xf32>, tensor<8x?xf32>) -> tensor<8x?xf32>
    %t = "rlx_mir.binary"(%p0, %b) {kind = "mul"} : (tensor<8x?xf32>, tensor<8x?xf32>) -> tensor<8x?xf32>
    %p1 = "rlx_mir.softmax"(%s1) {axis = -1 : i64} : (tensor<8x?xf32>) -> tensor<8x?xf32>
    return %t, %p1 : tensor<8x?xf32>, tensor<8x?xf32>
  }
}

// -----

// CHECK-LABEL: module @cumsum
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:        arith.cmpi ult
module @cumsum {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %y = "rlx_mir.cumsum"(%x) {axis = 1 : i64, exclusive = true} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// argmax: the maximum of the non-NaN elements (a maximumf reduction), then one generic with
// two minsi reductions (first index equal to it, first NaN), then the NaN one wins.
// CHECK-LABEL: module @argmax
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 : tensor<1x1x32000xf32>) outs(%{{.*}} : tensor<1x1xf32>)
// CHECK:        arith.cmpf uno
// CHECK:        arith.maximumf
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %{{.*}} : tensor<1x1x32000xf32>, tensor<1x1xf32>) outs(%{{.*}}, %{{.*}} : tensor<1x1xi32>, tensor<1x1xi32>)
// CHECK:        linalg.index 2
// CHECK:        arith.cmpf oeq
// CHECK:        arith.minsi
// CHECK:        arith.cmpf uno
// CHECK:        arith.minsi
// CHECK:      linalg.generic
// CHECK:        arith.cmpi ne
// CHECK:        arith.select
module @argmax {
  func.func @main(%x: tensor<1x1x32000xf32>) -> tensor<1x1xi32> {
    %t = "rlx_mir.argmax"(%x) {axis = -1 : i64, keep_dim = false} : (tensor<1x1x32000xf32>) -> tensor<1x1xi32>
    return %t : tensor<1x1xi32>
  }
}

// -----

// topk: i64 sort keys (a float's bits, magnitude flipped where negative) and the i32
// positions, each behind a compute barrier; one iree_linalg_ext.topk along the axis whose
// outputs start at i64's minimum with a strict sgt; the kept keys turned back into values.
// CHECK-LABEL: module @topk
// CHECK:      arith.bitcast {{.*}} : f32 to i32
// CHECK:      %[[K:.*]] = iree_tensor_ext.compute_barrier.start
// CHECK:      linalg.index 1
// CHECK:      %[[P:.*]] = iree_tensor_ext.compute_barrier.start
// CHECK:      linalg.fill ins(%{{.*}} : i64)
// CHECK:      %[[T:.*]]:2 = iree_linalg_ext.topk {{.*}}dimension(1) ins(%[[K]], %[[P]] : tensor<?x9xi64>, tensor<?x9xi32>) outs(%{{.*}}, %{{.*}} : tensor<?x3xi64>, tensor<?x3xi32>)
// CHECK:        arith.cmpi sgt
// CHECK:      arith.bitcast {{.*}} : i32 to f32
// CHECK:      return %{{.*}}, %[[T]]#1
module @topk {
  func.func @main(%x: tensor<?x9xf32>) -> (tensor<?x3xf32>, tensor<?x3xi32>) {
    %v, %i = "rlx_mir.topk"(%x) {axis = -1 : i64, k = 3 : i64, largest = true} : (tensor<?x9xf32>) -> (tensor<?x3xf32>, tensor<?x3xi32>)
    return %v, %i : tensor<?x3xf32>, tensor<?x3xi32>
  }
}
