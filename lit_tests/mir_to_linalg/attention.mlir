// mir-to-linalg for attention and RoPE.
// Decomposed (llvm-cpu, Vulkan): Q as [B*Hkv, G*S, hd] against K [B*Hkv, S_k, hd] (GQA
// without copying K/V), scores in f32, one masking generic, linalg.softmax, P·V, compute
// barriers on V and the result (llvm-cpu; here without its hand-written kernels, whose
// text prefill_attention.mlir and decode_attention.mlir check). Fused (CUDA, ROCm):
// iree_linalg_ext.attention.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-attention-kernel %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=VK
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=cuda %s | FileCheck %s --check-prefix=FUSED

// CHECK-LABEL: module @attn
// CHECK:      iree_tensor_ext.compute_barrier.start %arg2
// CHECK:      %[[Q3:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2, 3], [4]] : tensor<2x2x4x?x16xf32> into tensor<4x?x16xf32>
// CHECK:      %[[K3:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<2x2x?x16xf32> into tensor<4x?x16xf32>
// CHECK:      %[[S:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]{{.*}} ins(%[[Q3]], %[[K3]]
// CHECK:      linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]
// CHECK:        linalg.index 3
// CHECK:        linalg.index 4
// CHECK:        arith.cmpi sle
// CHECK:        arith.select {{.*}}, {{.*}}, %cst
// CHECK:      linalg.softmax dimension(4)
// CHECK:      linalg.batch_matmul
// CHECK:      iree_tensor_ext.compute_barrier.start
// VK-LABEL:   module @attn
// VK-NOT:     compute_barrier
// VK:         linalg.softmax
// VK-NOT:     iree_linalg_ext.attention
// FUSED-LABEL: module @attn
// FUSED:      %[[MASK:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x?xi1>)
// FUSED:      iree_linalg_ext.attention <indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d5)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d6, d5)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d6, d4)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> ()>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d3, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4)>]>
// FUSED-SAME: tensor<2x2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, f32, tensor<?x?xi1>
// FUSED-NOT:  linalg.softmax
module @attn {
  func.func @main(%q: tensor<2x?x128xf32>, %k: tensor<2x?x32xf32>, %v: tensor<2x?x32xf32>) -> tensor<2x?x128xf32> {
    %o = "rlx_mir.attention"(%q, %k, %v) {head_dim = 16 : i64, mask_kind = "causal", num_heads = 8 : i64} : (tensor<2x?x128xf32>, tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x?x128xf32> loc("layers.0.attn")
    return %o : tensor<2x?x128xf32>
  }
}

// -----

// RoPE: one generic over [B, S, H, 2, n_rot / 2] (NeoX: the pair is (lane i, lane i + n_rot / 2))
// or [B, S, H, n_rot / 2, 2] (GPT-J: adjacent lanes), reading the first S rows of the cos / sin
// tables; the pair's first element is a cos - b sin, the second b cos + a sin. Lanes past n_rot
// are sliced off before and concatenated back after.
// CHECK-LABEL: module @rope
// CHECK:      %[[X4:.*]] = tensor.expand_shape %arg0 {{\[}}[0], [1], [2, 3]] output_shape [2, %{{.*}}, 4, 16] : tensor<2x?x64xf32> into tensor<2x?x4x16xf32>
// CHECK:      %[[COS:.*]] = tensor.extract_slice %arg1[0, 0] [%[[S:[a-z0-9_]+]], 8] [1, 1]
// CHECK:      %[[SIN:.*]] = tensor.extract_slice %arg2[0, 0] [%[[S]], 8] [1, 1]
// CHECK:      %[[PAIRS:.*]] = tensor.expand_shape %[[X4]] {{\[}}[0], [1], [2], [3, 4]] output_shape [2, %[[S]], 4, 2, 8]
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, 0, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, 1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>]{{.*}} ins(%[[PAIRS]], %[[PAIRS]], %[[COS]], %[[SIN]] :
// CHECK:        %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0 : index
// CHECK:        %[[AC:.*]] = arith.mulf %[[A:.*]], %[[C:.*]] : f32
// CHECK:        %[[BS:.*]] = arith.mulf %[[B:.*]], %[[SN:.*]] : f32
// CHECK:        %[[Y0:.*]] = arith.subf %[[AC]], %[[BS]] : f32
// CHECK:        %[[BC:.*]] = arith.mulf %[[B]], %[[C]] : f32
// CHECK:        %[[AS:.*]] = arith.mulf %[[A]], %[[SN]] : f32
// CHECK:        %[[Y1:.*]] = arith.addf %[[BC]], %[[AS]] : f32
// CHECK:        arith.select %[[FIRST]], %[[Y0]], %[[Y1]] : f32
// CHECK:      %[[ROT:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [2, %{{.*}}, 4, 8] [1, 1, 1, 1] : tensor<2x?x4x16xf32> to tensor<2x?x4x8xf32>
// CHECK:      tensor.expand_shape %[[ROT]] {{\[}}[0], [1], [2], [3, 4]] output_shape [2, %{{.*}}, 4, 4, 2]
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, 0)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, 1)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d3)>,
// CHECK:      %[[ROTATED:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1], [2], [3, 4]] : tensor<2x?x4x4x2xf32> into tensor<2x?x4x8xf32>
// CHECK:      %[[PASS:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 8] [2, %{{.*}}, 4, 8] [1, 1, 1, 1]
// CHECK:      tensor.concat dim(3) %[[ROTATED]], %[[PASS]]
module @rope {
  func.func @main(%x: tensor<2x?x64xf32>, %cos: tensor<?x8xf32>, %sin: tensor<?x8xf32>) -> (tensor<2x?x64xf32>, tensor<2x?x64xf32>) {
    %a = "rlx_mir.rope"(%x, %cos, %sin) {head_dim = 16 : i64, n_rot = 16 : i64, style = "neox"} : (tensor<2x?x64xf32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<2x?x64xf32>
    %b = "rlx_mir.rope"(%x, %cos, %sin) {head_dim = 16 : i64, n_rot = 8 : i64, style = "gptj"} : (tensor<2x?x64xf32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<2x?x64xf32>
    return %a, %b : tensor<2x?x64xf32>, tensor<2x?x64xf32>
  }
}
