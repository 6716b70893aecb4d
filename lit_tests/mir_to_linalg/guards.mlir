// Run-time size checks (rlx.lowering.guards): every size relation an op's verifier could
// not decide statically (a side is dynamic) becomes an scf.if on the broken relation around
// util.status.check_ok (which IREE keeps at every opt level, unlike cf.assert), named by
// the op's label, position and both dims. Relations that hold statically emit nothing.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @kv
// CHECK:       %[[V:.*]] = tensor.dim %arg2, %c1 : tensor<1x?x32xf32>
// CHECK:       %[[K:.*]] = tensor.dim %arg1, %c1 : tensor<1x?x32xf32>
// CHECK:       %[[BAD:.*]] = arith.cmpi ne, %[[V]], %[[K]] : index
// CHECK:       scf.if %[[BAD]] {
// CHECK-NEXT:    util.status.check_ok %c3_i32, "{{.*}}guards.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'rlx_mir.attention' \22attn\22: operand 'v' dim 1: expected the size of operand 'k' dim 1 (the key length of 'k'), found another size at run time"
// CHECK-NOT:   util.status.check_ok
// CHECK:       flow.dispatch @rlx_attention_decode_
module @kv attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x1x32xf32>, %k: tensor<1x?x32xf32>, %v: tensor<1x?x32xf32>) -> tensor<1x1x32xf32> {
    %o = "rlx_mir.attention"(%q, %k, %v) {head_dim = 16 : i64, mask_kind = "none", num_heads = 2 : i64} : (tensor<1x1x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>) -> tensor<1x1x32xf32> loc("attn")
    return %o : tensor<1x1x32xf32>
  }
}

// -----

// cos/sin against the sequence: at least as many rows (uge), and sin's rows those of cos.
// CHECK-LABEL: module @rope
// CHECK:       arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK:       util.status.check_ok %c3_i32, "{{.*}}operand 'cos' dim 0: expected at least the size of operand 'x' dim 1 (one row per position of the sequence)
// CHECK:       util.status.check_ok %c3_i32, "{{.*}}operand 'sin' dim 0: expected at least the size of operand 'x' dim 1
// CHECK:       util.status.check_ok %c3_i32, "{{.*}}operand 'sin' dim 0: expected the size of operand 'cos' dim 0
module @rope attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%x: tensor<1x?x32xf32>, %c: tensor<?x8xf32>, %s: tensor<?x8xf32>) -> tensor<1x?x32xf32> {
    %y = "rlx_mir.rope"(%x, %c, %s) {head_dim = 16 : i64, n_rot = 16 : i64, style = "neox"} : (tensor<1x?x32xf32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<1x?x32xf32> loc("pos")
    return %y : tensor<1x?x32xf32>
  }
}

// -----

// Static sizes, and one value against itself: nothing to check at run time.
// CHECK-LABEL: module @static
// CHECK-NOT:   util.status.check_ok
module @static attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%a: tensor<?x4xf32>, %b: tensor<3x4xf32>) -> (tensor<?x4xf32>, tensor<3x4xf32>) {
    %s = "rlx_mir.binary"(%a, %a) {kind = "add"} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32> loc("twice")
    %t = "rlx_mir.binary"(%b, %b) {kind = "mul"} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> loc("static")
    return %s, %t : tensor<?x4xf32>, tensor<3x4xf32>
  }
}
