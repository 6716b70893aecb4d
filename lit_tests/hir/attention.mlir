// Round trip of the attention HIR ops: rlx-opt prints its input back unchanged, twice.
// RUN: %rlx-opt --split-input-file %s | FileCheck %s
// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null

// CHECK-LABEL: module @attention_none attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "none", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
// CHECK-NEXT: return %0 : tensor<2x6x32xf32>
module @attention_none attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
    %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "none", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
    return %0 : tensor<2x6x32xf32>
  }
}

// -----

// CHECK-LABEL: module @attention_causal attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
// CHECK-NEXT: return %0 : tensor<2x6x32xf32>
module @attention_causal attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
    %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
    return %0 : tensor<2x6x32xf32>
  }
}

// -----

// CHECK-LABEL: module @attention_sliding_window attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "sliding_window", num_heads = 4 : i64, window = 2 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
// CHECK-NEXT: return %0 : tensor<2x6x32xf32>
module @attention_sliding_window attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}) -> tensor<2x6x32xf32> {
    %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, mask = "sliding_window", num_heads = 4 : i64, window = 2 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x6x32xf32> loc("attention")
    return %0 : tensor<2x6x32xf32>
  }
}

// -----

// CHECK-LABEL: module @attention_custom attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}, %arg3: tensor<2x6xf32> {rlx.name = "mask"}) -> tensor<2x6x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2, %arg3) {head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>, tensor<2x6xf32>) -> tensor<2x6x32xf32> loc("attention")
// CHECK-NEXT: return %0 : tensor<2x6x32xf32>
module @attention_custom attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}, %arg3: tensor<2x6xf32> {rlx.name = "mask"}) -> tensor<2x6x32xf32> {
    %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2, %arg3) {head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>, tensor<2x6xf32>) -> tensor<2x6x32xf32> loc("attention")
    return %0 : tensor<2x6x32xf32>
  }
}

// -----

// CHECK-LABEL: module @attention_bias attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}, %arg3: tensor<2x4x6x6xf32> {rlx.name = "mask"}) -> tensor<2x6x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2, %arg3) {head_dim = 8 : i64, mask = "bias", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>, tensor<2x4x6x6xf32>) -> tensor<2x6x32xf32> loc("attention")
// CHECK-NEXT: return %0 : tensor<2x6x32xf32>
module @attention_bias attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<2x6x32xf32> {rlx.name = "q"}, %arg1: tensor<2x6x16xf32> {rlx.name = "k"}, %arg2: tensor<2x6x16xf32> {rlx.name = "v"}, %arg3: tensor<2x4x6x6xf32> {rlx.name = "mask"}) -> tensor<2x6x32xf32> {
    %0 = "rlx_hir.attention"(%arg0, %arg1, %arg2, %arg3) {head_dim = 8 : i64, mask = "bias", num_heads = 4 : i64} : (tensor<2x6x32xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>, tensor<2x4x6x6xf32>) -> tensor<2x6x32xf32> loc("attention")
    return %0 : tensor<2x6x32xf32>
  }
}

// -----

// CHECK-LABEL: module @rope_neox attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.rope"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 4 : i64, rope_style = "neox"} : (tensor<1x?x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("rope")
// CHECK-NEXT: return %0 : tensor<1x?x32xf32>
module @rope_neox attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
    %0 = "rlx_hir.rope"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 4 : i64, rope_style = "neox"} : (tensor<1x?x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("rope")
    return %0 : tensor<1x?x32xf32>
  }
}

// -----

// CHECK-LABEL: module @rope_gptj attributes {rlx.fusion_policy = "direct"} {
// CHECK-NEXT: func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
// CHECK-NEXT: %0 = "rlx_hir.rope"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 4 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("rope")
// CHECK-NEXT: return %0 : tensor<1x?x32xf32>
module @rope_gptj attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%arg0: tensor<1x?x32xf32> {rlx.name = "x"}, %arg1: tensor<?x4xf32> {rlx.name = "cos"}, %arg2: tensor<?x4xf32> {rlx.name = "sin"}) -> tensor<1x?x32xf32> {
    %0 = "rlx_hir.rope"(%arg0, %arg1, %arg2) {head_dim = 8 : i64, n_rot = 4 : i64, rope_style = "gptj"} : (tensor<1x?x32xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x?x32xf32> loc("rope")
    return %0 : tensor<1x?x32xf32>
  }
}
