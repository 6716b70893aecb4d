// Round trip of the escape HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @mir_escape attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x?x16xf32> {rlx.name = "x"}) -> (tensor<?x2x16xf32>, tensor<?x16xf16>, tensor<2x?x16xf32>) {
// CHECK-NEXT: %0 = "rlx_mir.activation"(%arg0) {kind = "exp"} : (tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
// CHECK-NEXT: %1 = "rlx_mir.reduce"(%0) {axes = array<i64: -1>, keep_dim = true, kind = "sum"} : (tensor<2x?x16xf32>) -> tensor<2x?x1xf32>
// CHECK-NEXT: %2 = "rlx_mir.binary"(%0, %1) {kind = "div"} : (tensor<2x?x16xf32>, tensor<2x?x1xf32>) -> tensor<2x?x16xf32>
// CHECK-NEXT: %3 = "rlx_mir.transpose"(%2) {perm = array<i64: 1, 0, 2>} : (tensor<2x?x16xf32>) -> tensor<?x2x16xf32>
// CHECK-NEXT: %4 = "rlx_mir.reshape"(%arg0) {new_shape = array<i64: -1, 16>} : (tensor<2x?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %5 = "rlx_mir.narrow"(%4) {axis = 1 : i64, len = 8 : i64, start = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: %6 = "rlx_mir.concat"(%5, %5) {axis = 1 : i64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %7 = "rlx_mir.compare"(%6, %6) {kind = "lt"} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xi1>
// CHECK-NEXT: %8 = "rlx_mir.where"(%7, %6, %6) : (tensor<?x16xi1>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %9 = "rlx_mir.cast"(%8) {to = "f16"} : (tensor<?x16xf32>) -> tensor<?x16xf16>
// CHECK-NEXT: %10 = "rlx_mir.softmax"(%arg0) {axis = -1 : i64} : (tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
// CHECK-NEXT: return %3, %9, %10 : tensor<?x2x16xf32>, tensor<?x16xf16>, tensor<2x?x16xf32>
module @mir_escape attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x?x16xf32> {rlx.name = "x"}) -> (tensor<?x2x16xf32>, tensor<?x16xf16>, tensor<2x?x16xf32>) {
    %0 = "rlx_mir.activation"(%arg0) {kind = "exp"} : (tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
    %1 = "rlx_mir.reduce"(%0) {axes = array<i64: -1>, keep_dim = true, kind = "sum"} : (tensor<2x?x16xf32>) -> tensor<2x?x1xf32>
    %2 = "rlx_mir.binary"(%0, %1) {kind = "div"} : (tensor<2x?x16xf32>, tensor<2x?x1xf32>) -> tensor<2x?x16xf32>
    %3 = "rlx_mir.transpose"(%2) {perm = array<i64: 1, 0, 2>} : (tensor<2x?x16xf32>) -> tensor<?x2x16xf32>
    %4 = "rlx_mir.reshape"(%arg0) {new_shape = array<i64: -1, 16>} : (tensor<2x?x16xf32>) -> tensor<?x16xf32>
    %5 = "rlx_mir.narrow"(%4) {axis = 1 : i64, len = 8 : i64, start = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
    %6 = "rlx_mir.concat"(%5, %5) {axis = 1 : i64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x16xf32>
    %7 = "rlx_mir.compare"(%6, %6) {kind = "lt"} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xi1>
    %8 = "rlx_mir.where"(%7, %6, %6) : (tensor<?x16xi1>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
    %9 = "rlx_mir.cast"(%8) {to = "f16"} : (tensor<?x16xf32>) -> tensor<?x16xf16>
    %10 = "rlx_mir.softmax"(%arg0) {axis = -1 : i64} : (tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
    return %3, %9, %10 : tensor<?x2x16xf32>, tensor<?x16xf16>, tensor<2x?x16xf32>
  }
}

// -----

// CHECK-LABEL: module @mir_blocks attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "x"}, %arg1: tensor<6x4xf32> {rlx.name = "cos"}, %arg2: tensor<6x4xf32> {rlx.name = "sin"}, %arg3: tensor<2x6xi32> {rlx.name = "ids"}, %arg4: tensor<2x1xi32> {rlx.name = "last"}, %arg5: tensor<2x4x8x8xf32> {rlx.name = "img"}, %arg6: tensor<1x64xf32> {rlx.name = "xq"}, %arg7: tensor<3x8x32xf32> {rlx.name = "cache"}, %arg8: tensor<2xi32> {rlx.name = "slot"}, %arg9: tensor<2xi32> {rlx.name = "pos"}, %arg10: tensor<5x4x32xf32> {rlx.name = "grid"}, %arg11: tensor<?x2xi64> {rlx.name = "at"}, %arg12: tensor<?x32xf32> {rlx.name = "rows"}) -> (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x32xf32>, tensor<2x1x32xf32>, tensor<2x6x32xf32>, tensor<2x8x8x8xf32>, tensor<1x16xf32>, tensor<2x4x5x8xf32>, tensor<2x3x4xf32>, tensor<2x7x34xf32>, tensor<3x8x32xf32>, tensor<5x4x32xf32>, tensor<2x2x32xf32>, tensor<2x2x32xi32>) {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "g"} : () -> tensor<32xf32>
// CHECK-NEXT: %3 = "rlx_mir.matmul"(%arg0, %0) : (tensor<2x6x32xf32>, tensor<32x32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %4 = "rlx_mir.fused_matmul_bias_act"(%arg0, %0, %1) {activation = "relu"} : (tensor<2x6x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %5 = "rlx_mir.fused_swiglu"(%4) {gate_first = true} : (tensor<2x6x32xf32>) -> tensor<2x6x16xf32>
// CHECK-NEXT: %6 = "rlx_mir.fused_residual_rms_norm"(%3, %arg0, %1, %2, %1) {eps = 9.99999974E-6 : f32, has_bias = true} : (tensor<2x6x32xf32>, tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %7 = "rlx_mir.layer_norm"(%6, %2, %1) {axis = -1 : i64, eps = 9.99999974E-6 : f32} : (tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %8 = "rlx_mir.rms_norm"(%7, %2, %1) {axis = -1 : i64, eps = 9.99999997E-7 : f32} : (tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %9 = "rlx_mir.rope"(%8, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 8 : i64, style = "gptj"} : (tensor<2x6x32xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %10 = "rlx_mir.attention"(%9, %9, %9) {attn_logit_softcap = 3.000000e+01 : f32, head_dim = 8 : i64, mask_kind = "causal", num_heads = 4 : i64, score_scale = 5.000000e-01 : f32} : (tensor<2x6x32xf32>, tensor<2x6x32xf32>, tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %11 = "rlx_mir.gather"(%0, %arg3) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<32x32xf32>, tensor<2x6xi32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %12 = "rlx_mir.gather"(%arg0, %arg4) {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<2x6x32xf32>, tensor<2x1xi32>) -> tensor<2x1x32xf32>
// CHECK-NEXT: %13 = "rlx_mir.expand"(%1) {target_shape = array<i64: 2, 6, 32>} : (tensor<32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %14 = "rlx_mir.cumsum"(%13) {axis = 1 : i64, exclusive = true} : (tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
// CHECK-NEXT: %15 = "rlx_hir.param"() {name = "cw"} : () -> tensor<8x2x3x3xf32>
// CHECK-NEXT: %16 = "rlx_mir.conv"(%arg5, %15) {dilation = array<i64: 1, 1>, groups = 2 : i64, kernel_size = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<2x8x8x8xf32>
// CHECK-NEXT: %17 = "rlx_hir.param"() {name = "wq"} : () -> tensor<16x68xi8>
// CHECK-NEXT: %18 = "rlx_mir.dequant_matmul"(%arg6, %17) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<16x68xi8>) -> tensor<1x16xf32>
// CHECK-NEXT: %19 = "rlx_mir.pool"(%arg5) {ceil_mode = true, count_include_pad = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 2>, kind = "avg", padding = array<i64: 1, 0, 1, 1>, stride = array<i64: 2, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x5x8xf32>
// CHECK-NEXT: %20 = "rlx_mir.slice"(%arg0) {sizes = array<i64: -1, 3, 4>, starts = array<i64: 0, 5, 1>, strides = array<i64: 1, -2, 3>} : (tensor<2x6x32xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %21 = "rlx_mir.pad"(%arg0) {high = array<i64: 0, 0, 2>, low = array<i64: 0, 1, 0>, value = -1.000000e+00 : f32} : (tensor<2x6x32xf32>) -> tensor<2x7x34xf32>
// CHECK-NEXT: %22 = "rlx_mir.write_rows"(%arg7, %arg0, %arg8, %arg9) : (tensor<3x8x32xf32>, tensor<2x6x32xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<3x8x32xf32>
// CHECK-NEXT: %23 = "rlx_mir.scatter"(%arg10, %arg11, %arg12) {reduction = "add"} : (tensor<5x4x32xf32>, tensor<?x2xi64>, tensor<?x32xf32>) -> tensor<5x4x32xf32>
// CHECK-NEXT: %24:2 = "rlx_mir.topk"(%arg0) {axis = 1 : i64, k = 2 : i64, largest = false} : (tensor<2x6x32xf32>) -> (tensor<2x2x32xf32>, tensor<2x2x32xi32>)
// CHECK-NEXT: return %10, %5, %11, %12, %14, %16, %18, %19, %20, %21, %22, %23, %24#0, %24#1 : tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x32xf32>, tensor<2x1x32xf32>, tensor<2x6x32xf32>, tensor<2x8x8x8xf32>, tensor<1x16xf32>, tensor<2x4x5x8xf32>, tensor<2x3x4xf32>, tensor<2x7x34xf32>, tensor<3x8x32xf32>, tensor<5x4x32xf32>, tensor<2x2x32xf32>, tensor<2x2x32xi32>
module @mir_blocks attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "x"}, %arg1: tensor<6x4xf32> {rlx.name = "cos"}, %arg2: tensor<6x4xf32> {rlx.name = "sin"}, %arg3: tensor<2x6xi32> {rlx.name = "ids"}, %arg4: tensor<2x1xi32> {rlx.name = "last"}, %arg5: tensor<2x4x8x8xf32> {rlx.name = "img"}, %arg6: tensor<1x64xf32> {rlx.name = "xq"}, %arg7: tensor<3x8x32xf32> {rlx.name = "cache"}, %arg8: tensor<2xi32> {rlx.name = "slot"}, %arg9: tensor<2xi32> {rlx.name = "pos"}, %arg10: tensor<5x4x32xf32> {rlx.name = "grid"}, %arg11: tensor<?x2xi64> {rlx.name = "at"}, %arg12: tensor<?x32xf32> {rlx.name = "rows"}) -> (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x32xf32>, tensor<2x1x32xf32>, tensor<2x6x32xf32>, tensor<2x8x8x8xf32>, tensor<1x16xf32>, tensor<2x4x5x8xf32>, tensor<2x3x4xf32>, tensor<2x7x34xf32>, tensor<3x8x32xf32>, tensor<5x4x32xf32>, tensor<2x2x32xf32>, tensor<2x2x32xi32>) {
    %0 = "rlx_hir.param"() {name = "w"} : () -> tensor<32x32xf32>
    %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %2 = "rlx_hir.param"() {name = "g"} : () -> tensor<32xf32>
    %3 = "rlx_mir.matmul"(%arg0, %0) : (tensor<2x6x32xf32>, tensor<32x32xf32>) -> tensor<2x6x32xf32>
    %4 = "rlx_mir.fused_matmul_bias_act"(%arg0, %0, %1) {activation = "relu"} : (tensor<2x6x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
    %5 = "rlx_mir.fused_swiglu"(%4) {gate_first = true} : (tensor<2x6x32xf32>) -> tensor<2x6x16xf32>
    %6 = "rlx_mir.fused_residual_rms_norm"(%3, %arg0, %1, %2, %1) {eps = 9.99999974E-6 : f32, has_bias = true} : (tensor<2x6x32xf32>, tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
    %7 = "rlx_mir.layer_norm"(%6, %2, %1) {axis = -1 : i64, eps = 9.99999974E-6 : f32} : (tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
    %8 = "rlx_mir.rms_norm"(%7, %2, %1) {axis = -1 : i64, eps = 9.99999997E-7 : f32} : (tensor<2x6x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x6x32xf32>
    %9 = "rlx_mir.rope"(%8, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 8 : i64, style = "gptj"} : (tensor<2x6x32xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<2x6x32xf32>
    %10 = "rlx_mir.attention"(%9, %9, %9) {attn_logit_softcap = 3.000000e+01 : f32, head_dim = 8 : i64, mask_kind = "causal", num_heads = 4 : i64, score_scale = 5.000000e-01 : f32} : (tensor<2x6x32xf32>, tensor<2x6x32xf32>, tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
    %11 = "rlx_mir.gather"(%0, %arg3) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<32x32xf32>, tensor<2x6xi32>) -> tensor<2x6x32xf32>
    %12 = "rlx_mir.gather"(%arg0, %arg4) {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<2x6x32xf32>, tensor<2x1xi32>) -> tensor<2x1x32xf32>
    %13 = "rlx_mir.expand"(%1) {target_shape = array<i64: 2, 6, 32>} : (tensor<32xf32>) -> tensor<2x6x32xf32>
    %14 = "rlx_mir.cumsum"(%13) {axis = 1 : i64, exclusive = true} : (tensor<2x6x32xf32>) -> tensor<2x6x32xf32>
    %15 = "rlx_hir.param"() {name = "cw"} : () -> tensor<8x2x3x3xf32>
    %16 = "rlx_mir.conv"(%arg5, %15) {dilation = array<i64: 1, 1>, groups = 2 : i64, kernel_size = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<2x8x8x8xf32>
    %17 = "rlx_hir.param"() {name = "wq"} : () -> tensor<16x68xi8>
    %18 = "rlx_mir.dequant_matmul"(%arg6, %17) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<16x68xi8>) -> tensor<1x16xf32>
    %19 = "rlx_mir.pool"(%arg5) {ceil_mode = true, count_include_pad = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 2>, kind = "avg", padding = array<i64: 1, 0, 1, 1>, stride = array<i64: 2, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x5x8xf32>
    %20 = "rlx_mir.slice"(%arg0) {sizes = array<i64: -1, 3, 4>, starts = array<i64: 0, 5, 1>, strides = array<i64: 1, -2, 3>} : (tensor<2x6x32xf32>) -> tensor<2x3x4xf32>
    %21 = "rlx_mir.pad"(%arg0) {high = array<i64: 0, 0, 2>, low = array<i64: 0, 1, 0>, value = -1.000000e+00 : f32} : (tensor<2x6x32xf32>) -> tensor<2x7x34xf32>
    %22 = "rlx_mir.write_rows"(%arg7, %arg0, %arg8, %arg9) : (tensor<3x8x32xf32>, tensor<2x6x32xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<3x8x32xf32>
    %23 = "rlx_mir.scatter"(%arg10, %arg11, %arg12) {reduction = "add"} : (tensor<5x4x32xf32>, tensor<?x2xi64>, tensor<?x32xf32>) -> tensor<5x4x32xf32>
    %24:2 = "rlx_mir.topk"(%arg0) {axis = 1 : i64, k = 2 : i64, largest = false} : (tensor<2x6x32xf32>) -> (tensor<2x2x32xf32>, tensor<2x2x32xi32>)
    return %10, %5, %11, %12, %14, %16, %18, %19, %20, %21, %22, %23, %24#0, %24#1 : tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x32xf32>, tensor<2x1x32xf32>, tensor<2x6x32xf32>, tensor<2x8x8x8xf32>, tensor<1x16xf32>, tensor<2x4x5x8xf32>, tensor<2x3x4xf32>, tensor<2x7x34xf32>, tensor<3x8x32xf32>, tensor<5x4x32xf32>, tensor<2x2x32xf32>, tensor<2x2x32xi32>
  }
}

// -----

// CHECK-LABEL: module @mir_scans attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x3x2x4xf32> {rlx.name = "q"}, %arg1: tensor<1x3x2xf32> {rlx.name = "g"}, %arg2: tensor<1x2x4x4xf32> {rlx.name = "s"}, %arg3: tensor<1x3x4xf32> {rlx.name = "x"}, %arg4: tensor<1x1x8xf32> {rlx.name = "h0"}) -> (tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x1x8xf32>) {
// CHECK-NEXT: %0:2 = "rlx_mir.gated_delta_net"(%arg0, %arg0, %arg0, %arg1, %arg1, %arg2) {carry_state = true, state_size = 4 : i64} : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>)
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "wih"} : () -> tensor<32x4xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "whh"} : () -> tensor<32x8xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
// CHECK-NEXT: %4 = "rlx_mir.lstm"(%arg3, %1, %2, %3) {bidirectional = false, carry = false, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x3x4xf32>, tensor<32x4xf32>, tensor<32x8xf32>, tensor<32xf32>) -> tensor<1x3x8xf32>
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "gih"} : () -> tensor<24x4xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "ghh"} : () -> tensor<24x8xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "gbi"} : () -> tensor<24xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "gbh"} : () -> tensor<24xf32>
// CHECK-NEXT: %9:2 = "rlx_mir.gru"(%arg3, %5, %6, %7, %8, %arg4) {bidirectional = false, carry = true, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x3x4xf32>, tensor<24x4xf32>, tensor<24x8xf32>, tensor<24xf32>, tensor<24xf32>, tensor<1x1x8xf32>) -> (tensor<1x3x8xf32>, tensor<1x1x8xf32>)
// CHECK-NEXT: return %0#0, %0#1, %4, %9#0, %9#1 : tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x1x8xf32>
module @mir_scans attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x3x2x4xf32> {rlx.name = "q"}, %arg1: tensor<1x3x2xf32> {rlx.name = "g"}, %arg2: tensor<1x2x4x4xf32> {rlx.name = "s"}, %arg3: tensor<1x3x4xf32> {rlx.name = "x"}, %arg4: tensor<1x1x8xf32> {rlx.name = "h0"}) -> (tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x1x8xf32>) {
    %0:2 = "rlx_mir.gated_delta_net"(%arg0, %arg0, %arg0, %arg1, %arg1, %arg2) {carry_state = true, state_size = 4 : i64} : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>)
    %1 = "rlx_hir.param"() {name = "wih"} : () -> tensor<32x4xf32>
    %2 = "rlx_hir.param"() {name = "whh"} : () -> tensor<32x8xf32>
    %3 = "rlx_hir.param"() {name = "b"} : () -> tensor<32xf32>
    %4 = "rlx_mir.lstm"(%arg3, %1, %2, %3) {bidirectional = false, carry = false, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x3x4xf32>, tensor<32x4xf32>, tensor<32x8xf32>, tensor<32xf32>) -> tensor<1x3x8xf32>
    %5 = "rlx_hir.param"() {name = "gih"} : () -> tensor<24x4xf32>
    %6 = "rlx_hir.param"() {name = "ghh"} : () -> tensor<24x8xf32>
    %7 = "rlx_hir.param"() {name = "gbi"} : () -> tensor<24xf32>
    %8 = "rlx_hir.param"() {name = "gbh"} : () -> tensor<24xf32>
    %9:2 = "rlx_mir.gru"(%arg3, %5, %6, %7, %8, %arg4) {bidirectional = false, carry = true, hidden_size = 8 : i64, num_layers = 1 : i64} : (tensor<1x3x4xf32>, tensor<24x4xf32>, tensor<24x8xf32>, tensor<24xf32>, tensor<24xf32>, tensor<1x1x8xf32>) -> (tensor<1x3x8xf32>, tensor<1x1x8xf32>)
    return %0#0, %0#1, %4, %9#0, %9#1 : tensor<1x3x2x4xf32>, tensor<1x2x4x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x1x8xf32>
  }
}
