// Schema violations in .hir text: one error each, at the op's file:line:col, naming
// the op, its label, what was expected and what was found.
// RUN: not %rlx-opt --split-input-file %s 2>&1 | FileCheck %s

// CHECK: invalid.mlir:7:8: error: 'rlx_hir.linear' "fc1": operands: expected 3 (x, weight, bias) for activation = "relu", has_bias = true, found 2
func.func @missing_bias(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %y = "rlx_hir.linear"(%x, %w) {activation = "relu", has_bias = true} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32> loc("fc1")
  return %y : tensor<4x8xf32>
}

// -----

// CHECK: invalid.mlir:15:8: error: 'rlx_hir.swiglu' "ffn": operand 'down_w' dim 0: expected 32 (F = 'up_w' dim 1), found 16 (tensor<16x16xf32>)
func.func @ffn_width(%x: tensor<4x16xf32>, %u: tensor<16x32xf32>, %d: tensor<16x16xf32>) -> tensor<4x16xf32> {
  %y = "rlx_hir.swiglu"(%x, %u, %u, %d) : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x16xf32>) -> tensor<4x16xf32> loc("ffn")
  return %y : tensor<4x16xf32>
}

// -----

// CHECK: invalid.mlir:23:8: error: 'rlx_hir.attention' "attention": attribute 'mask': expected one of "none", "causal", "sliding_window", "custom", "bias", "causal_lengths", found "future"
func.func @mask_kind(%q: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %y = "rlx_hir.attention"(%q, %q, %q) {head_dim = 8 : i64, mask = "future", num_heads = 2 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32> loc("attention")
  return %y : tensor<1x4x16xf32>
}

// -----

// CHECK: invalid.mlir:31:8: error: 'rlx_hir.rms_norm': attribute 'eps': expected a value > 0, found 0.0
func.func @eps(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = "rlx_hir.rms_norm"(%x, %g, %g) {eps = 0.0 : f32} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// CHECK: invalid.mlir:39:8: error: 'rlx_hir.rope': attribute 'n_rot': expected an even value in 1..8 (head_dim), found 5
func.func @n_rot(%x: tensor<1x4x16xf32>, %t: tensor<4x4xf32>) -> tensor<1x4x16xf32> {
  %y = "rlx_hir.rope"(%x, %t, %t) {head_dim = 8 : i64, n_rot = 5 : i64, rope_style = "neox"} : (tensor<1x4x16xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}

// -----

// CHECK: invalid.mlir:47:8: error: 'rlx_hir.llama_decoder_block': attribute 'num_kv_heads': expected a divisor of num_heads = 4, found 3
func.func @gqa(%x: tensor<1x4x32xf32>, %v: tensor<32xf32>) -> tensor<1x4x32xf32> {
  %y = "rlx_hir.llama_decoder_block"(%x, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v) {eps = 1.0e-05 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, num_kv_heads = 3 : i64, rope_style = "neox"} : (tensor<1x4x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x4x32xf32>
  return %y : tensor<1x4x32xf32>
}

// -----

// CHECK: invalid.mlir:55:8: error: 'rlx_hir.depthwise_conv1d_causal': operand 'left_pad': expected shape [2, 3, 16] ([B, kernel_size - 1, C]: the frames before the first input frame), found [2, 2, 16] (tensor<2x2x16xf32>)
func.func @pad(%x: tensor<2x8x16xf32>, %w: tensor<16x1x1x4xf32>, %p: tensor<2x2x16xf32>) -> tensor<2x8x16xf32> {
  %y = "rlx_hir.depthwise_conv1d_causal"(%x, %w, %p) {kernel_size = 4 : i64} : (tensor<2x8x16xf32>, tensor<16x1x1x4xf32>, tensor<2x2x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// CHECK: invalid.mlir:63:8: error: 'rlx_hir.dequant_matmul': operand 'x' dim -1: expected a multiple of 256 (the gguf_q4_k block size), found K = 128
func.func @qblock(%x: tensor<1x128xf32>, %w: tensor<8x72xi8>) -> tensor<1x8xf32> {
  %y = "rlx_hir.dequant_matmul"(%x, %w) {scheme = "gguf_q4_k"} : (tensor<1x128xf32>, tensor<8x72xi8>) -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

// CHECK: invalid.mlir:71:8: error: 'rlx_hir.frobnicate': op: expected a known rlx_hir op (attention, constant, depthwise_conv1d_causal, dequant_matmul, gated_delta_net, gru, linear, linear_fused, llama_decoder_block, lstm, param, qwen35_mtp_head, residual_rms_norm, rms_norm, rope, shared_linear_pair, swiglu), found unknown op 'rlx_hir.frobnicate'
func.func @unknown(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = "rlx_hir.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Malformed text gets MLIR's own diagnostic.
// CHECK: invalid.mlir:80:9: error: expected '}' in attribute dictionary
func.func @malformed(%x: tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// CHECK: invalid.mlir:87:8: error: 'rlx_mir.transpose': attribute 'perm': expected a permutation of 0..1, found [0, 0]
func.func @escape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = "rlx_mir.transpose"(%x) {perm = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// CHECK: invalid.mlir:95:8: error: 'rlx_hir.attention' "attention": operand 'mask': expected an i32 or i64 tensor (the keys filled in each row), found tensor<2xf32>
func.func @filled_counts(%q: tensor<2x1x16xf32>, %k: tensor<2x8x16xf32>, %n: tensor<2xf32>) -> tensor<2x1x16xf32> {
  %y = "rlx_hir.attention"(%q, %k, %k, %n) {head_dim = 8 : i64, mask = "causal_lengths", num_heads = 2 : i64} : (tensor<2x1x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2xf32>) -> tensor<2x1x16xf32> loc("attention")
  return %y : tensor<2x1x16xf32>
}

// -----

// CHECK: invalid.mlir:103:8: error: 'rlx_hir.attention' "attention": operand 'mask': expected shape [2] ([B]: the keys filled in each row), found [3] (tensor<3xi32>)
func.func @filled_rows(%q: tensor<2x1x16xf32>, %k: tensor<2x8x16xf32>, %n: tensor<3xi32>) -> tensor<2x1x16xf32> {
  %y = "rlx_hir.attention"(%q, %k, %k, %n) {head_dim = 8 : i64, mask = "causal_lengths", num_heads = 2 : i64} : (tensor<2x1x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<3xi32>) -> tensor<2x1x16xf32> loc("attention")
  return %y : tensor<2x1x16xf32>
}
