// mir-to-linalg on llvm-cpu: attention of one query (packed [1, 1, H*hd] f32) against the
// KV cache becomes one flow.dispatch to rlx's hand-written kernel, one workgroup per query
// head (a stream.executable in vector / scf / memref; two passes over the keys: the max
// score, then exp and the weighted sum of V, summed in blocks of 128 keys into fresh zero
// accumulators, each block's sums then added to the totals); K's and V's row counts reach
// it as two push constants, the same values as their bindings' dims, and the loops run to
// their minimum (no read past either; a block ends at min(b + 128, len)). A sliding window
// starts the loops at max(0, len - 1 - window).
// Longer queries (the prefill kernel's, prefill_attention.mlir), f16, a softcap, a mask operand, --no-attention-kernel and GPU targets keep
// the decomposed form.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-attention-kernel %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: module @decode
// CHECK:       stream.executable private @rlx_attention_decode_6x2x32_s3e3504f3
// CHECK:         stream.return %arg0, %c1, %c1
// CHECK:       func.func @rlx_attention_decode_6x2x32_s3e3504f3(%arg0: !stream.binding {{.*}}, %arg1: !stream.binding {{.*}}, %arg2: !stream.binding {{.*}}, %arg3: index {{.*}}, %arg4: index {{.*}}, %arg5: !stream.binding
// CHECK:         %[[KC:.*]] = stream.binding.subspan %arg1[%c0] : !stream.binding -> memref<?x64xf32>{%arg3}
// CHECK:         %[[VC:.*]] = stream.binding.subspan %arg2[%c0] : !stream.binding -> memref<?x64xf32>{%arg4}
// CHECK:         %[[WG:.*]] = hal.interface.workgroup.id[0]
// CHECK:         %[[HEADS:.*]] = arith.constant 6 : index
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %[[WG]], %[[HEADS]]
// CHECK:         scf.if %[[IN]] {
// CHECK:         %[[LEN:.*]] = arith.minui %arg3, %arg4 : index
// CHECK:         affine_map<()[s0] -> ((s0 floordiv 3) * 32)>()[%[[WG]]]
// CHECK:         %[[MAX:.*]] = scf.for %{{.*}} = %[[START:.*]] to %[[LEN]]
// CHECK:           vector.load %[[KC]]
// CHECK:           vector.reduction <add>
// CHECK:           arith.maximumf
// CHECK:         %[[SUMS:.*]]:3 = scf.for %[[B:.*]] = %[[START]] to %[[LEN]] step %c128 iter_args(%{{[^ ]+}} = %[[Z:[^,]+]], %{{[^ ]+}} = %[[ZV:[^,]+]], %{{[^ ]+}} = %[[ZV]])
// CHECK:           %[[END:.*]] = affine.min affine_map<(d0)[s0] -> (d0 + 128, s0)>(%[[B]])[%[[LEN]]]
// CHECK:           %[[PART:.*]]:3 = scf.for %{{.*}} = %[[B]] to %[[END]] step %c1 iter_args(%{{[^ ]+}} = %[[Z]], %{{[^ ]+}} = %[[ZV]], %{{[^ ]+}} = %[[ZV]])
// CHECK:             arith.subf %{{.*}}, %[[MAX]]
// CHECK:             math.exp
// CHECK:             vector.load %[[VC]]
// CHECK:             vector.fma
// CHECK:           arith.addf %{{.*}}, %[[PART]]#0 : f32
// CHECK:           arith.addf %{{.*}}, %[[PART]]#1 : vector<16xf32>
// CHECK:           arith.addf %{{.*}}, %[[PART]]#2 : vector<16xf32>
// CHECK:         arith.divf %{{.*}}, %[[SUMS]]#0
// CHECK:       func.func @main
// CHECK:       %[[Q:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1, 2]] : tensor<1x1x192xf32> into tensor<192xf32>
// CHECK:       %[[K:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1], [2]] : tensor<1x?x64xf32> into tensor<?x64xf32>
// CHECK:       %[[V:.*]] = tensor.collapse_shape %arg2
// CHECK:       %[[LEN:.*]] = tensor.dim %arg1, %c1
// CHECK:       %[[VLEN:.*]] = tensor.dim %arg2, %c1
// CHECK:       flow.dispatch @rlx_attention_decode_6x2x32_s3e3504f3::@rlx_attention_decode_6x2x32_s3e3504f3[%c6](%[[Q]], %[[K]], %[[V]], %[[LEN]], %[[VLEN]]) : (tensor<192xf32>, tensor<?x64xf32>{%[[LEN]]}, tensor<?x64xf32>{%[[VLEN]]}, index, index) -> tensor<192xf32>
// CHECK-NOT:   linalg.softmax
// OFF-LABEL:   module @decode
// OFF-NOT:     flow.dispatch
// OFF:         linalg.softmax
module @decode attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x1x192xf32>, %k: tensor<1x?x64xf32>, %v: tensor<1x?x64xf32>) -> tensor<1x1x192xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 32 : i64, mask_kind = "causal", num_heads = 6 : i64} : (tensor<1x1x192xf32>, tensor<1x?x64xf32>, tensor<1x?x64xf32>) -> tensor<1x1x192xf32>
    return %0 : tensor<1x1x192xf32>
  }
}

// -----

// CHECK-LABEL: module @window
// CHECK:       stream.executable private @rlx_attention_decode_2x2x16_s3e800000_w3
// CHECK:       %[[LEN:.*]] = arith.minui %arg3, %arg4 : index
// CHECK:       %[[START:.*]] = affine.max affine_map<()[s0] -> (0, s0 - 4)>()[%[[LEN]]]
// CHECK:       scf.for %{{.*}} = %[[START]] to %[[LEN]] step %c1
// CHECK:       scf.for %{{.*}} = %[[START]] to %[[LEN]] step %c128
// CHECK:       flow.dispatch @rlx_attention_decode_2x2x16_s3e800000_w3
module @window attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x1x32xf32>, %k: tensor<1x?x32xf32>, %v: tensor<1x?x32xf32>) -> tensor<1x1x32xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 16 : i64, mask_kind = "sliding_window", num_heads = 2 : i64, window = 3 : i64} : (tensor<1x1x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>) -> tensor<1x1x32xf32>
    return %0 : tensor<1x1x32xf32>
  }
}

// -----

// Not the decode kernel's: two queries (the prefill kernel's), f16, a softcap.
// CHECK-LABEL: module @others
// CHECK-NOT:   flow.dispatch @rlx_attention_decode
// CHECK:       flow.dispatch @rlx_attention_prefill_rows_2x2x16_s3e800000_c
// CHECK-NOT:   flow.dispatch
// CHECK-COUNT-2: linalg.softmax
module @others attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x2x32xf32>, %k: tensor<1x?x32xf32>, %qh: tensor<1x1x32xf16>, %kh: tensor<1x?x32xf16>, %q1: tensor<1x1x32xf32>) -> (tensor<1x2x32xf32>, tensor<1x1x32xf16>, tensor<1x1x32xf32>) {
    %0 = "rlx_mir.attention"(%q, %k, %k) {head_dim = 16 : i64, mask_kind = "causal", num_heads = 2 : i64} : (tensor<1x2x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>) -> tensor<1x2x32xf32>
    %1 = "rlx_mir.attention"(%qh, %kh, %kh) {head_dim = 16 : i64, mask_kind = "causal", num_heads = 2 : i64} : (tensor<1x1x32xf16>, tensor<1x?x32xf16>, tensor<1x?x32xf16>) -> tensor<1x1x32xf16>
    %2 = "rlx_mir.attention"(%q1, %k, %k) {head_dim = 16 : i64, mask_kind = "none", num_heads = 2 : i64, attn_logit_softcap = 5.0 : f32} : (tensor<1x1x32xf32>, tensor<1x?x32xf32>, tensor<1x?x32xf32>) -> tensor<1x1x32xf32>
    return %0, %1, %2 : tensor<1x2x32xf32>, tensor<1x1x32xf16>, tensor<1x1x32xf32>
  }
}

// -----

// causal_lengths: each row reads its own filled-key count from the device, clamped into
// its rows of the cache; none filled: every key with the masked score.
// CHECK-LABEL: module @filled
// CHECK:       stream.executable private @rlx_attention_decode_2x2x16_s3e800000_b3_n
// CHECK:       %[[FILL:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<3xi32>
// CHECK:       %[[N:.*]] = arith.index_cast %[[FILL]] : i32 to index
// CHECK:       %[[CNT:.*]] = arith.maxsi %[[N]], %{{.*}} : index
// CHECK:       arith.minsi %[[CNT]], %{{.*}} : index
// CHECK:       arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:       flow.dispatch @rlx_attention_decode_2x2x16_s3e800000_b3_n
// OFF-LABEL:   module @filled
// OFF-NOT:     flow.dispatch
// OFF:         linalg.softmax
module @filled attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<3x1x32xf32>, %k: tensor<3x?x32xf32>, %n: tensor<3xi32>) -> tensor<3x1x32xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %k, %n) {head_dim = 16 : i64, mask_kind = "causal_lengths", num_heads = 2 : i64} : (tensor<3x1x32xf32>, tensor<3x?x32xf32>, tensor<3x?x32xf32>, tensor<3xi32>) -> tensor<3x1x32xf32>
    return %0 : tensor<3x1x32xf32>
  }
}

// -----

// GQA in groups: 4 rows of 8 query heads over 2 KV heads (hd 16) run 8 workgroups of the 4
// query heads that share a KV head: row wg / 2, first head (wg mod 2) * 4, its KV head
// that over 4; each key's K row is loaded once and dotted with the four queries.
// CHECK-LABEL: module @grouped
// CHECK:       stream.executable private @rlx_attention_decode_8x2x16_s3e800000_b4_n_g4
// CHECK:         affine_map<()[s0] -> (s0 floordiv 2)>
// CHECK:         affine_map<()[s0] -> ((s0 * 4 + 3) * 16)>
// CHECK:         affine_map<()[s0] -> ((s0 mod 2) * 16)>
// CHECK:         scf.for {{.*}} -> (f32, f32, f32, f32) {
// CHECK-NEXT:      vector.load %{{.*}} : memref<?x32xf32>, vector<16xf32>
// CHECK-NOT:       vector.load
// CHECK-COUNT-4:   vector.reduction <add>
// CHECK-COUNT-4:   arith.maximumf
// CHECK:         scf.for {{.*}} -> (f32, vector<16xf32>, f32, vector<16xf32>, f32, vector<16xf32>, f32, vector<16xf32>)
// CHECK:       flow.dispatch @rlx_attention_decode_8x2x16_s3e800000_b4_n_g4::@rlx_attention_decode_8x2x16_s3e800000_b4_n_g4[%c8]
module @grouped attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<4x1x128xf32>, %k: tensor<4x?x32xf32>, %n: tensor<4xi32>) -> tensor<4x1x128xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %k, %n) {head_dim = 16 : i64, mask_kind = "causal_lengths", num_heads = 8 : i64} : (tensor<4x1x128xf32>, tensor<4x?x32xf32>, tensor<4x?x32xf32>, tensor<4xi32>) -> tensor<4x1x128xf32>
    return %0 : tensor<4x1x128xf32>
  }
}
