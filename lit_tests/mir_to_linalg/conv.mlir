// mir-to-linalg for conv: zero padding, then one contraction generic over grouped views
// (loops n, g, o, h, w | c, kh, kw; strided and dilated input map).
// RUN: %rlx-opt --pass=mir-to-linalg %s | FileCheck %s

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
