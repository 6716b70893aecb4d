// mir-to-linalg for attention and RoPE.
// Decomposed (llvm-cpu, Vulkan): Q as [B*Hkv, G*S, hd] against K [B*Hkv, S_k, hd] (GQA
// without copying K/V), scores in f32, one masking generic, linalg.softmax, P·V, compute
// barriers on V and the result (llvm-cpu). Fused (CUDA, ROCm): iree_linalg_ext.attention.
// RUN: %rlx-opt --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=VK
// RUN: %rlx-opt --pass=mir-to-linalg --target=cuda %s | FileCheck %s --check-prefix=FUSED

// CHECK-LABEL: module @attn
// CHECK:      iree_tensor_ext.compute_barrier.start %arg2
// CHECK:      %[[Q3:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2, 3], [4]] : tensor<2x2x4x?x16xf32> into tensor<4x?x16xf32>
// CHECK:      %[[K3:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<2x2x?x16xf32> into tensor<4x?x16xf32>
// CHECK:      %[[S:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]{{.*}} ins(%[[Q3]], %[[K3]]
// CHECK:      linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]
// CHECK:        linalg.index 3
// CHECK:        linalg.index 4
// CHECK:        arith.cmpi ule
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
