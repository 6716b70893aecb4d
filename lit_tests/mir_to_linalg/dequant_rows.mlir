// mir-to-linalg for dequant: a model's embedding kept in the file's format. The token's raw
// rows are gathered (ids clamped to the table), then dequantized by the dequant_matmul's
// block generics over a dynamic row count (no row padding), and put back in [..., K].
// RUN: %rlx-opt --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @rows
// CHECK:       util.global private @param.embed = #flow.parameter.named<"model"::"embed"> : tensor<10x68xi8>
// CHECK:       %[[T:.*]] = util.global.load @param.embed
// CHECK:       arith.minsi
// CHECK:       tensor.extract %[[T]]
// CHECK:       %[[R:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<1x?x68xi8> into tensor<?x68xi8>
// CHECK:       %[[B:.*]] = tensor.expand_shape %[[R]] {{\[\[}}0], [1, 2]] output_shape [%{{.*}}, 2, 34] : tensor<?x68xi8> into tensor<?x2x34xi8>
// CHECK:       -> tensor<?x2x32xi8>
// CHECK:       -> tensor<?x2xf16>
// CHECK:       arith.sitofp
// CHECK:       arith.mulf
// CHECK:       -> tensor<?x2x32xf32>
// CHECK:       tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<?x2x32xf32> into tensor<?x64xf32>
// CHECK:       tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [1, %{{.*}}, 64] : tensor<?x64xf32> into tensor<1x?x64xf32>
// CHECK-NOT:   rlx_mir
module @rows {
  func.func @main(%ids: tensor<1x?xi32> {rlx.name = "ids"}) -> tensor<1x?x64xf32> {
    %t = "rlx_mir.param"() {name = "embed"} : () -> tensor<10x68xi8>
    %r = "rlx_mir.gather"(%t, %ids) {axis = 0, batch_dims = 0} : (tensor<10x68xi8>, tensor<1x?xi32>) -> tensor<1x?x68xi8>
    %e = "rlx_mir.dequant"(%r) {scheme = "gguf_q8_0"} : (tensor<1x?x68xi8>) -> tensor<1x?x64xf32>
    return %e : tensor<1x?x64xf32>
  }
}
