// hir-to-mir for attention and RoPE: 1:1, the mask kind and RoPE style carried over.
// RUN: %rlx-opt --split-input-file --pass=hir-to-mir %s | FileCheck %s

// CHECK-LABEL: module @attn
// CHECK: "rlx_mir.attention"(%arg0, %arg1, %arg1, %arg2) {head_dim = 8 : i64, mask_kind = "custom", num_heads = 4 : i64} {{.*}} loc("attn")
// CHECK: "rlx_mir.attention"(%arg0, %arg1, %arg1) {head_dim = 8 : i64, mask_kind = "sliding_window", num_heads = 4 : i64, window = 3 : i64} {{.*}} loc("swa")
// CHECK: "rlx_mir.rope"(%arg0, %arg3, %arg3) {head_dim = 8 : i64, n_rot = 4 : i64, style = "gptj"} {{.*}} loc("rope")
module @attn {
  func.func @main(%q: tensor<1x?x32xf32>, %kv: tensor<1x?x16xf32>, %m: tensor<1x?xf32>, %t: tensor<?x4xf32>) -> (tensor<1x?x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>) {
    %a = "rlx_hir.attention"(%q, %kv, %kv, %m) {head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64} : (tensor<1x?x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>, tensor<1x?xf32>) -> tensor<1x?x32xf32> loc("attn")
    %s = "rlx_hir.attention"(%q, %kv, %kv) {head_dim = 8 : i64, mask = "sliding_window", num_heads = 4 : i64, window = 3 : i64} : (tensor<1x?x32xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> tensor<1x?x32xf32> loc("swa")
    %r = "rlx_hir.rope"(%q, %t, %t) {head_dim = 8 : i64, n_rot = 4 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("rope")
    return %a, %s, %r : tensor<1x?x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>
  }
}
