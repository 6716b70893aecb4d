// Round trip of the block HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @llama_decoder_block attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
// CHECK-NEXT: %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("llama_decoder_block")
// CHECK-NEXT: return %11 : tensor<1x?x32xf32>
module @llama_decoder_block attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
    %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
    %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
    %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
    %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
    %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
    %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
    %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
    %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
    %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
    %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
    %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
    %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("llama_decoder_block")
    return %11 : tensor<1x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @llama_decoder_block_custom_mask attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}, %arg3: tensor<1x?xf32> {rlx.name = "mask"}) -> tensor<1x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
// CHECK-NEXT: %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2, %arg3) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<1x?xf32>) -> tensor<1x?x32xf32> loc("llama_decoder_block")
// CHECK-NEXT: return %11 : tensor<1x?x32xf32>
module @llama_decoder_block_custom_mask attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}, %arg3: tensor<1x?xf32> {rlx.name = "mask"}) -> tensor<1x?x32xf32> {
    %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
    %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
    %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
    %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
    %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
    %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
    %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
    %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
    %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
    %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
    %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
    %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2, %arg3) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<1x?xf32>) -> tensor<1x?x32xf32> loc("llama_decoder_block")
    return %11 : tensor<1x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @transformer_block attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
// CHECK-NEXT: %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "neox"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("transformer_block")
// CHECK-NEXT: return %11 : tensor<1x?x32xf32>
module @transformer_block attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
    %0 = "rlx_hir.param"() {name = "ln1_g"} : () -> tensor<32xf32>
    %1 = "rlx_hir.param"() {name = "ln1_b"} : () -> tensor<32xf32>
    %2 = "rlx_hir.param"() {name = "q_w"} : () -> tensor<32x32xf32>
    %3 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
    %4 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
    %5 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
    %6 = "rlx_hir.param"() {name = "ln2_g"} : () -> tensor<32xf32>
    %7 = "rlx_hir.param"() {name = "ln2_b"} : () -> tensor<32xf32>
    %8 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
    %9 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
    %10 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
    %11 = "rlx_hir.llama_decoder_block"(%arg0, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %arg1, %arg2) {eps = 9.99999974E-6 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_style = "neox"} : (tensor<1x?x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("transformer_block")
    return %11 : tensor<1x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @qwen35_mtp_head attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "h_pre_norm"}, %arg1: tensor<1x?xf32> {rlx.name = "input_ids"}, %arg2: tensor<?x4xf32> {rlx.name = "cos"}, %arg3: tensor<?x4xf32> {rlx.name = "sin"}, %arg4: tensor<1xf32> {rlx.name = "last_token_idx"}) -> tensor<1x1x40xf32> {
// CHECK-NEXT: %0 = "rlx_hir.param"() {name = "embed_w"} : () -> tensor<50x32xf32>
// CHECK-NEXT: %1 = "rlx_hir.param"() {name = "hnorm_w"} : () -> tensor<32xf32>
// CHECK-NEXT: %2 = "rlx_hir.param"() {name = "hnorm_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %3 = "rlx_hir.param"() {name = "enorm_w"} : () -> tensor<32xf32>
// CHECK-NEXT: %4 = "rlx_hir.param"() {name = "enorm_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %5 = "rlx_hir.param"() {name = "eh_w"} : () -> tensor<64x32xf32>
// CHECK-NEXT: %6 = "rlx_hir.param"() {name = "attn_norm_w"} : () -> tensor<32xf32>
// CHECK-NEXT: %7 = "rlx_hir.param"() {name = "attn_norm_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %8 = "rlx_hir.param"() {name = "q_gate_w"} : () -> tensor<32x64xf32>
// CHECK-NEXT: %9 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %10 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
// CHECK-NEXT: %11 = "rlx_hir.param"() {name = "q_norm_w"} : () -> tensor<8xf32>
// CHECK-NEXT: %12 = "rlx_hir.param"() {name = "q_norm_b"} : () -> tensor<8xf32>
// CHECK-NEXT: %13 = "rlx_hir.param"() {name = "k_norm_w"} : () -> tensor<8xf32>
// CHECK-NEXT: %14 = "rlx_hir.param"() {name = "k_norm_b"} : () -> tensor<8xf32>
// CHECK-NEXT: %15 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
// CHECK-NEXT: %16 = "rlx_hir.param"() {name = "post_norm_w"} : () -> tensor<32xf32>
// CHECK-NEXT: %17 = "rlx_hir.param"() {name = "post_norm_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %18 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %19 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
// CHECK-NEXT: %20 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
// CHECK-NEXT: %21 = "rlx_hir.param"() {name = "head_norm_w"} : () -> tensor<32xf32>
// CHECK-NEXT: %22 = "rlx_hir.param"() {name = "head_norm_b"} : () -> tensor<32xf32>
// CHECK-NEXT: %23 = "rlx_hir.param"() {name = "lm_head_w"} : () -> tensor<32x40xf32>
// CHECK-NEXT: %24 = "rlx_hir.qwen35_mtp_head"(%arg0, %arg1, %arg2, %arg3, %arg4, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23) {eps = 9.99999997E-7 : f32, head_dim = 8 : i64, mtp_vocab = 40 : i64, n_embd = 32 : i64, n_ff = 48 : i64, n_rot = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x?x32xf32>, tensor<1x?xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<1xf32>, tensor<50x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x40xf32>) -> tensor<1x1x40xf32> loc("qwen35_mtp_head")
// CHECK-NEXT: return %24 : tensor<1x1x40xf32>
module @qwen35_mtp_head attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "h_pre_norm"}, %arg1: tensor<1x?xf32> {rlx.name = "input_ids"}, %arg2: tensor<?x4xf32> {rlx.name = "cos"}, %arg3: tensor<?x4xf32> {rlx.name = "sin"}, %arg4: tensor<1xf32> {rlx.name = "last_token_idx"}) -> tensor<1x1x40xf32> {
    %0 = "rlx_hir.param"() {name = "embed_w"} : () -> tensor<50x32xf32>
    %1 = "rlx_hir.param"() {name = "hnorm_w"} : () -> tensor<32xf32>
    %2 = "rlx_hir.param"() {name = "hnorm_b"} : () -> tensor<32xf32>
    %3 = "rlx_hir.param"() {name = "enorm_w"} : () -> tensor<32xf32>
    %4 = "rlx_hir.param"() {name = "enorm_b"} : () -> tensor<32xf32>
    %5 = "rlx_hir.param"() {name = "eh_w"} : () -> tensor<64x32xf32>
    %6 = "rlx_hir.param"() {name = "attn_norm_w"} : () -> tensor<32xf32>
    %7 = "rlx_hir.param"() {name = "attn_norm_b"} : () -> tensor<32xf32>
    %8 = "rlx_hir.param"() {name = "q_gate_w"} : () -> tensor<32x64xf32>
    %9 = "rlx_hir.param"() {name = "k_w"} : () -> tensor<32x16xf32>
    %10 = "rlx_hir.param"() {name = "v_w"} : () -> tensor<32x16xf32>
    %11 = "rlx_hir.param"() {name = "q_norm_w"} : () -> tensor<8xf32>
    %12 = "rlx_hir.param"() {name = "q_norm_b"} : () -> tensor<8xf32>
    %13 = "rlx_hir.param"() {name = "k_norm_w"} : () -> tensor<8xf32>
    %14 = "rlx_hir.param"() {name = "k_norm_b"} : () -> tensor<8xf32>
    %15 = "rlx_hir.param"() {name = "o_w"} : () -> tensor<32x32xf32>
    %16 = "rlx_hir.param"() {name = "post_norm_w"} : () -> tensor<32xf32>
    %17 = "rlx_hir.param"() {name = "post_norm_b"} : () -> tensor<32xf32>
    %18 = "rlx_hir.param"() {name = "gate_w"} : () -> tensor<32x48xf32>
    %19 = "rlx_hir.param"() {name = "up_w"} : () -> tensor<32x48xf32>
    %20 = "rlx_hir.param"() {name = "down_w"} : () -> tensor<48x32xf32>
    %21 = "rlx_hir.param"() {name = "head_norm_w"} : () -> tensor<32xf32>
    %22 = "rlx_hir.param"() {name = "head_norm_b"} : () -> tensor<32xf32>
    %23 = "rlx_hir.param"() {name = "lm_head_w"} : () -> tensor<32x40xf32>
    %24 = "rlx_hir.qwen35_mtp_head"(%arg0, %arg1, %arg2, %arg3, %arg4, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23) {eps = 9.99999997E-7 : f32, head_dim = 8 : i64, mtp_vocab = 40 : i64, n_embd = 32 : i64, n_ff = 48 : i64, n_rot = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x?x32xf32>, tensor<1x?xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<1xf32>, tensor<50x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x40xf32>) -> tensor<1x1x40xf32> loc("qwen35_mtp_head")
    return %24 : tensor<1x1x40xf32>
  }
}
