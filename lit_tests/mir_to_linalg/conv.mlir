// mir-to-linalg for conv: zero padding, then one contraction generic over grouped views
// (loops n, g, o, h, w | c, kh, kw; strided and dilated input map). pool: padding with the
// kind's neutral value (plus the ceil-mode overhang), one reduction generic over
// (n, c, out..., window...) with a window-shaped operand for the loop bounds; avg divides
// by a constant tensor of window counts.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @conv
// CHECK:      tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:      tensor.expand_shape {{.*}} into tensor<2x2x2x10x10xf32>
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6, d4 * 2 + d7)>
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// CHECK:      tensor.collapse_shape {{.*}} into tensor<2x6x4x4xf32>
module @conv {
  func.func @main(%x: tensor<2x4x8x8xf32>) -> tensor<2x6x4x4xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<6x2x3x3xf32>
    %y = "rlx_mir.conv"(%x, %w) {dilation = array<i64: 1, 1>, groups = 2 : i64, kernel_size = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
    return %y : tensor<2x6x4x4xf32>
  }
}

// -----

// CHECK-LABEL: module @pool
// CHECK-DAG:  %[[COUNTS:.*]] = arith.constant dense<{{\[\[}}4.000000e+00, 6.000000e+00, {{.*}} : tensor<5x6xf32>
// CHECK-DAG:  %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:      %[[PADMAX:.*]] = tensor.pad %arg0 low[0, 0, 1, 0] high[0, 0, 1, 1]
// CHECK:        tensor.yield %[[NEGINF]]
// CHECK:      %[[WIN:.*]] = tensor.empty() : tensor<3x2xf32>
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5 * 2)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%[[PADMAX]], %[[WIN]] : tensor<?x3x11x11xf32>, tensor<3x2xf32>)
// CHECK:        arith.maximumf
// CHECK:      tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 2]
// CHECK:      %[[SUM:.*]] = linalg.generic
// CHECK:        arith.addf
// CHECK:      linalg.generic {{.*}} ins(%[[SUM]], %[[COUNTS]] : tensor<?x3x5x6xf32>, tensor<5x6xf32>)
// CHECK:        arith.divf
module @pool {
  func.func @main(%x: tensor<?x3x9x10xf32>) -> (tensor<?x3x5x5xf32>, tensor<?x3x5x6xf32>) {
    %m = "rlx_mir.pool"(%x) {ceil_mode = true, count_include_pad = false, dilation = array<i64: 1, 2>, kernel_size = array<i64: 3, 2>, kind = "max", padding = array<i64: 1, 0, 1, 1>, stride = array<i64: 2, 2>} : (tensor<?x3x9x10xf32>) -> tensor<?x3x5x5xf32>
    %a = "rlx_mir.pool"(%x) {ceil_mode = true, count_include_pad = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 3>, kind = "avg", padding = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>} : (tensor<?x3x9x10xf32>) -> tensor<?x3x5x6xf32>
    return %m, %a : tensor<?x3x5x5xf32>, tensor<?x3x5x6xf32>
  }
}

// -----

// Dynamic spatial sizes: a run-time check that the kernel fits, the window counts and the
// extent the windows read computed from tensor.dim (ceil mode), x padded by the pads and
// stride - 1 more and cut to that extent; avg divides by the window counts, computed from
// each output position's indices (a generic with no inputs: linalg.index, tap compares).
// CHECK-LABEL: module @pool_dynamic
// CHECK:      %[[H:.*]] = tensor.dim %arg0, %c2
// CHECK:      arith.cmpi ult, %[[H]], %c1
// CHECK:        util.status.check_ok
// CHECK:      arith.cmpi uge
// CHECK:      %[[OH:.*]] = arith.select
// CHECK:      %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:      %[[MORE:.*]] = tensor.pad %[[PAD]] low[0, 0, 0, 0] high[0, 0, 1, 1]
// CHECK:      %[[CUT:.*]] = tensor.extract_slice %[[MORE]][0, 0, 0, 0] [1, 3, %{{.*}}, %{{.*}}]
// CHECK:      tensor.empty(%[[OH]], %{{.*}}) : tensor<1x3x?x?xf32>
// CHECK:      %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[CUT]], %{{.*}} : tensor<1x3x?x?xf32>, tensor<3x3xf32>)
// CHECK:      %[[COUNTS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x1x?x?xf32>)
// CHECK:        linalg.index 2
// CHECK:        arith.cmpi sge
// CHECK:        arith.cmpi slt
// CHECK:        arith.sitofp
// CHECK:      linalg.generic {{.*}} ins(%[[SUM]], %[[COUNTS]] : tensor<1x3x?x?xf32>, tensor<1x1x?x?xf32>)
// CHECK:        arith.divf
module @pool_dynamic {
  func.func @main(%x: tensor<1x3x?x?xf32>) -> tensor<1x3x?x?xf32> {
    %a = "rlx_mir.pool"(%x) {ceil_mode = true, count_include_pad = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 3>, kind = "avg", padding = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x3x?x?xf32>) -> tensor<1x3x?x?xf32>
    return %a : tensor<1x3x?x?xf32>
  }
}
