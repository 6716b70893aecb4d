// mir-to-linalg on llvm-cpu: attention of S query rows (packed [B, S, H*hd] f32, S dynamic
// or static above 1) with heads wider than 128 (Qwen3.5's 256; narrower heads take the
// kernel of prefill_rows.mlir) becomes one flow.dispatch to rlx's prefill kernel, which
// never stores a score: a workgroup is a tile of up to 8 query rows of one head of one
// sequence (workload B * H * ceil(S / 8), computed on the host from Q's rows, and checked
// again in the kernel from the same value, its binding's dim). Each row's visible keys
// (signed position rows - S + m, its count clamped to [0, rows]) are kept in i32 stack
// buffers; the kernel walks the union of the tile's keys in groups of 128 and blocks of
// 16 (its key rows min(j0 + i, bend - 1), inside the block): a row's 16 scores of the
// block as one vector (16 vectors of q * k partial sums summed across lanes by a shuffle
// tree, no reduction a key), its running max (by a tree of rotations and selects, no
// NaN-checked reduction), one vector exp for the block's weights,
// the weighted sums of V rescaled when the max grows; at a group's end the partial sums are
// folded into the totals; each row's output is totals / sum of weights. A window starts at
// max(0, pos - window); causal_lengths reads n_b from the device instead of rows.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-attention-kernel %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: module @prefill
// CHECK:       stream.executable private @rlx_attention_prefill_2x1x256_s3d800000_c
// CHECK:         stream.return %arg0, %c1, %c1
// CHECK:       func.func @rlx_attention_prefill_2x1x256_s3d800000_c(%arg0: !stream.binding {{.*}}, %arg1: !stream.binding {{.*}}, %arg2: !stream.binding {{.*}}, %arg3: index {{.*}}, %arg4: index {{.*}}, %arg5: index {{.*}}, %arg6: !stream.binding
// CHECK:         %[[QB:.*]] = stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<?x512xf32>{%arg3}
// CHECK:         %[[KC:.*]] = stream.binding.subspan %arg1[%c0] : !stream.binding -> memref<?x256xf32>{%arg4}
// CHECK:         %[[VC:.*]] = stream.binding.subspan %arg2[%c0] : !stream.binding -> memref<?x256xf32>{%arg5}
// CHECK:         %[[OB:.*]] = stream.binding.subspan %arg6[%c0] : !stream.binding -> memref<?x512xf32>{%arg3}
// CHECK:         %[[WG:.*]] = hal.interface.workgroup.id[0]
// CHECK:         %[[SEQ:.*]] = affine.apply affine_map<()[s0] -> (s0)>()[%arg3]
// CHECK:         %[[TILES:.*]] = affine.apply affine_map<()[s0] -> (s0 ceildiv 8)>()[%[[SEQ]]]
// CHECK:         %[[COUNT:.*]] = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%[[TILES]]]
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %[[WG]], %[[COUNT]]
// CHECK:         scf.if %[[IN]] {
// CHECK:         %[[LEN:.*]] = arith.minui %arg4, %arg5 : index
// CHECK:         %[[NQ:.*]] = affine.min affine_map<()[s0, s1] -> (s0 - s1, 8)>()[%[[SEQ]], %{{.*}}]
// CHECK:         memref.alloca() : memref<8xi32>
// CHECK:         memref.alloca() : memref<8x256xf32>
// CHECK:         %[[R:.*]]:2 = scf.for %{{.*}} = %c0 to %[[NQ]] step %c1
// CHECK:           %[[BASE:.*]] = arith.subi %{{.*}}, %[[SEQ]] : index
// CHECK:           arith.maxsi
// CHECK:           arith.minsi
// CHECK:         scf.for %[[G:.*]] = %{{.*}} to %{{.*}} step %c128{{.*}} {
// CHECK:           scf.for %[[J0:.*]] = %[[G]] to %{{.*}} step %c16{{.*}}
// CHECK:             %[[BEND:.*]] = affine.min affine_map<(d0)[s0] -> (d0 + 16, s0)>(%[[J0]])
// CHECK:             affine.min affine_map<(d0)[s0] -> (d0 + 15, s0 - 1)>(%[[J0]])[%[[BEND]]]
// CHECK:             scf.for %{{.*}} = %c0 to %[[NQ]] step %c1 {
// CHECK:               scf.if
// CHECK:                 vector.load %[[QB]]
// CHECK-NOT:             scf.for
// CHECK-NOT:             vector.reduction
// CHECK:                 vector.load %[[KC]]
// CHECK:                 vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
// CHECK:                 vector.shuffle %{{.*}}, %{{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]
// CHECK-NOT:             vector.reduction
// CHECK:                 vector.shuffle %{{.*}}, %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK:                 arith.cmpf ogt
// CHECK-NOT:             vector.reduction
// CHECK:                 vector.shuffle %{{.*}}, %{{.*}} [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]
// CHECK-NOT:             vector.reduction
// CHECK:                 arith.cmpf ogt, %{{.*}} : f32
// CHECK:                 math.exp %{{.*}} : f32
// CHECK:                 math.exp %{{.*}} : vector<16xf32>
// CHECK:                 scf.for
// CHECK:                   vector.load %[[VC]]
// CHECK:                   vector.fma
// CHECK:           scf.for %{{.*}} = %c0 to %[[NQ]] step %c1 {
// CHECK:             math.exp
// CHECK:         scf.for %{{.*}} = %c0 to %[[NQ]] step %c1 {
// CHECK:           arith.divf
// CHECK:           vector.store %{{.*}}, %[[OB]]
// CHECK:       func.func @main
// CHECK:       %[[S:.*]] = tensor.dim %arg0, %c1
// CHECK:       %[[Q:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<1x?x512xf32> into tensor<?x512xf32>
// CHECK:       %[[ROWS:.*]] = tensor.dim %arg0, %c1
// CHECK:       %[[T:.*]] = arith.ceildivui %[[S]], %c8
// CHECK:       %[[WORK:.*]] = arith.muli %[[T]], %c2
// CHECK:       flow.dispatch @rlx_attention_prefill_2x1x256_s3d800000_c::@rlx_attention_prefill_2x1x256_s3d800000_c[%[[WORK]]](%[[Q]], {{.*}}) : (tensor<?x512xf32>{%[[ROWS]]}, tensor<?x256xf32>{{.*}}, tensor<?x256xf32>{{.*}}, index, index, index) -> tensor<?x512xf32>{%[[ROWS]]}
// CHECK-NOT:   linalg.softmax
// OFF-LABEL:   module @prefill
// OFF-NOT:     flow.dispatch
// OFF:         linalg.softmax
module @prefill attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x?x512xf32>, %k: tensor<1x?x256xf32>, %v: tensor<1x?x256xf32>) -> tensor<1x?x512xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 256 : i64, mask_kind = "causal", num_heads = 2 : i64} : (tensor<1x?x512xf32>, tensor<1x?x256xf32>, tensor<1x?x256xf32>) -> tensor<1x?x512xf32>
    return %0 : tensor<1x?x512xf32>
  }
}

// -----

// A window: the first key max(0, pos - window), never past the last one the query sees.
// CHECK-LABEL: module @window
// CHECK:       stream.executable private @rlx_attention_prefill_2x2x256_s3d800000_w3_b2_c
// CHECK:       affine_map<()[s0] -> (s0 floordiv 2)>
// CHECK:       %[[WIN:.*]] = arith.constant 3 : index
// CHECK:       %[[LO:.*]] = arith.subi %{{.*}}, %[[WIN]] : index
// CHECK:       arith.maxsi %[[LO]]
// CHECK:       flow.dispatch @rlx_attention_prefill_2x2x256_s3d800000_w3_b2_c
module @window attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<2x5x512xf32>, %k: tensor<2x?x512xf32>, %v: tensor<2x?x512xf32>) -> tensor<2x5x512xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 256 : i64, mask_kind = "sliding_window", num_heads = 2 : i64, window = 3 : i64} : (tensor<2x5x512xf32>, tensor<2x?x512xf32>, tensor<2x?x512xf32>) -> tensor<2x5x512xf32>
    return %0 : tensor<2x5x512xf32>
  }
}

// -----

// causal_lengths: a query's position is n_b - S + m, n_b read from the device.
// CHECK-LABEL: module @filled
// CHECK:       stream.executable private @rlx_attention_prefill_2x2x256_s3d800000_n
// CHECK:       %[[FILL:.*]] = memref.load %{{.*}} : memref<1xi32>
// CHECK:       arith.index_cast %[[FILL]] : i32 to index
// CHECK:       flow.dispatch @rlx_attention_prefill_2x2x256_s3d800000_n
// OFF-LABEL:   module @filled
// OFF-NOT:     flow.dispatch
// OFF:         linalg.softmax
module @filled attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x?x512xf32>, %k: tensor<1x64x512xf32>, %v: tensor<1x64x512xf32>, %n: tensor<1xi32>) -> tensor<1x?x512xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v, %n) {head_dim = 256 : i64, mask_kind = "causal_lengths", num_heads = 2 : i64} : (tensor<1x?x512xf32>, tensor<1x64x512xf32>, tensor<1x64x512xf32>, tensor<1xi32>) -> tensor<1x?x512xf32>
    return %0 : tensor<1x?x512xf32>
  }
}
