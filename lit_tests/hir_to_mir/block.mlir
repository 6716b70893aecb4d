// hir-to-mir for composite blocks: the llama decoder block and the Qwen3.5 MTP head become
// the same primitive chain under every policy; every op keeps the block's label.
// RUN: %rlx-opt --split-input-file --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @transformer_block
// CHECK:      %[[N1:.*]] = "rlx_mir.rms_norm"(%arg0, {{.*}} loc("transformer_block")
// CHECK-NEXT: %[[Q:.*]] = "rlx_mir.matmul"(%[[N1]], {{.*}}
// CHECK-NEXT: %[[QR:.*]] = "rlx_mir.rope"(%[[Q]], %arg1, %arg2) {head_dim = 8 : i64, n_rot = 8 : i64, style = "neox"}
// CHECK-NEXT: %[[K:.*]] = "rlx_mir.matmul"(%[[N1]], {{.*}}
// CHECK-NEXT: %[[KR:.*]] = "rlx_mir.rope"(%[[K]], %arg1, %arg2)
// CHECK-NEXT: %[[V:.*]] = "rlx_mir.matmul"(%[[N1]], {{.*}}
// CHECK-NEXT: %[[A:.*]] = "rlx_mir.attention"(%[[QR]], %[[KR]], %[[V]]) {head_dim = 8 : i64, mask_kind = "causal", num_heads = 4 : i64} : (tensor<1x?x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>)
// CHECK-NEXT: %[[O:.*]] = "rlx_mir.matmul"(%[[A]], {{.*}}
// CHECK-NEXT: %[[H1:.*]] = "rlx_mir.binary"(%arg0, %[[O]]) {kind = "add"}
// CHECK-NEXT: %[[N2:.*]] = "rlx_mir.rms_norm"(%[[H1]], {{.*}}
// CHECK-NEXT: %[[G:.*]] = "rlx_mir.matmul"(%[[N2]], {{.*}}
// CHECK-NEXT: %[[S:.*]] = "rlx_mir.activation"(%[[G]]) {kind = "silu"}
// CHECK-NEXT: %[[U:.*]] = "rlx_mir.matmul"(%[[N2]], {{.*}}
// CHECK-NEXT: %[[M:.*]] = "rlx_mir.binary"(%[[S]], %[[U]]) {kind = "mul"}
// CHECK-NEXT: %[[D:.*]] = "rlx_mir.matmul"(%[[M]], {{.*}}
// CHECK-NEXT: "rlx_mir.binary"(%[[H1]], %[[D]]) {kind = "add"} {{.*}} loc("transformer_block")
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

// CHECK-LABEL: module @qwen35_mtp_head
// CHECK: "rlx_mir.gather"(%{{.*}}, %arg1) {axis = 0 : i64, batch_dims = 0 : i64}
// CHECK: "rlx_mir.concat"(%{{.*}}, %{{.*}}) {axis = -1 : i64} : (tensor<1x?x32xf32>, tensor<1x?x32xf32>) -> tensor<1x?x64xf32>
// CHECK: "rlx_mir.rope"({{.*}}) {head_dim = 8 : i64, n_rot = 4 : i64, style = "neox"} : (tensor<1x?x4x8xf32>
// CHECK: "rlx_mir.attention"({{.*}}) {head_dim = 8 : i64, mask_kind = "causal", num_heads = 4 : i64}
// CHECK: "rlx_mir.activation"({{.*}}) {kind = "sigmoid"}
// CHECK: %[[IDX:.*]] = "rlx_mir.reshape"(%arg4) {new_shape = array<i64: 1, 1>}
// CHECK: "rlx_mir.gather"(%{{.*}}, %[[IDX]]) {axis = 1 : i64, batch_dims = 1 : i64} : (tensor<1x?x32xf32>, tensor<1x1xf32>) -> tensor<1x1x32xf32>
// CHECK: -> tensor<1x1x40xf32> loc("qwen35_mtp_head")
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

// -----

// carry_kv: the new keys / values after the cache's, and the head-normed row and the grown
// caches returned with the logits.
// CHECK-LABEL: module @qwen35_mtp_head_carry
// CHECK: %[[K:.*]] = "rlx_mir.concat"(%arg5, %{{.*}}) {axis = 1 : i64} : (tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
// CHECK: %[[V:.*]] = "rlx_mir.concat"(%arg6, %{{.*}}) {axis = 1 : i64}
// CHECK: "rlx_mir.attention"(%{{.*}}, %[[K]], %[[V]]) {head_dim = 8 : i64, mask_kind = "causal", num_heads = 4 : i64}
// CHECK: %[[H:.*]] = "rlx_mir.rms_norm"({{.*}}) -> tensor<1x1x32xf32>
// CHECK: %[[L:.*]] = "rlx_mir.matmul"(%[[H]], %{{.*}}) {{.*}} -> tensor<1x1x40xf32>
// CHECK: return %[[L]], %[[H]], %[[K]], %[[V]]
module @qwen35_mtp_head_carry attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "h_pre_norm"}, %arg1: tensor<1x?xf32> {rlx.name = "input_ids"}, %arg2: tensor<?x4xf32> {rlx.name = "cos"}, %arg3: tensor<?x4xf32> {rlx.name = "sin"}, %arg4: tensor<1xf32> {rlx.name = "last_token_idx"}, %arg5: tensor<1x?x16xf32> {rlx.name = "past_k"}, %arg6: tensor<1x?x16xf32> {rlx.name = "past_v"}) -> (tensor<1x1x40xf32>, tensor<1x1x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) {
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
    %24:4 = "rlx_hir.qwen35_mtp_head"(%arg0, %arg1, %arg2, %arg3, %arg4, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %arg5, %arg6) {carry_kv = true, eps = 9.99999997E-7 : f32, head_dim = 8 : i64, mtp_vocab = 40 : i64, n_embd = 32 : i64, n_ff = 48 : i64, n_rot = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x?x32xf32>, tensor<1x?xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<1xf32>, tensor<50x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>, tensor<32x48xf32>, tensor<48x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x40xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> (tensor<1x1x40xf32>, tensor<1x1x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) loc("qwen35_mtp_head")
    return %24#0, %24#1, %24#2, %24#3 : tensor<1x1x40xf32>, tensor<1x1x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>
  }
}
