// mir-to-linalg on llvm-cpu: attention of S query rows (packed [B, S, H*hd] f32, S dynamic
// or static above 1, hd <= 128) becomes one flow.dispatch to rlx's prefill kernel with a
// tile's 16 query rows in the 16 lanes of a vector (mir_to_linalg/prefill_rows.py):
// workload B * H * ceil(S / 16), checked again in the kernel from Q's binding dim. Each
// lane's visible keys (its row min(r, nq - 1), signed position, clamped to [0, rows]) are
// loaded as i32 vectors; the tile's Q is transposed once by 16 x 16 shuffles into a
// [hd, 16] stack buffer; the keys are walked in groups of 128 and blocks of 16. A block
// reads 16 consecutive key rows first + min(j0, rows - 16) + i where the sequence has 16
// rows (else the rows min(j0 + i, bend - 1)): its scores are 16 vectors of 16 rows, one
// FMA of a broadcast K element against a column of Q^T per key and head dim, no lane
// reduction; the block max and weights of every row at once; the partial sums of V
// updated a column of the head at a time. Totals / sums are transposed back into rows,
// and only the rows the tile holds are stored.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @prefill
// CHECK:       stream.executable private @rlx_attention_prefill_rows_6x2x32_s3e3504f3_c
// CHECK:         stream.return %arg0, %c1, %c1
// CHECK:       func.func @rlx_attention_prefill_rows_6x2x32_s3e3504f3_c(%arg0: !stream.binding {{.*}}, %arg1: !stream.binding {{.*}}, %arg2: !stream.binding {{.*}}, %arg3: index {{.*}}, %arg4: index {{.*}}, %arg5: index {{.*}}, %arg6: !stream.binding
// CHECK:         %[[QB:.*]] = stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<?x192xf32>{%arg3}
// CHECK:         %[[KC:.*]] = stream.binding.subspan %arg1[%c0] : !stream.binding -> memref<?x64xf32>{%arg4}
// CHECK:         %[[VC:.*]] = stream.binding.subspan %arg2[%c0] : !stream.binding -> memref<?x64xf32>{%arg5}
// CHECK:         %[[OB:.*]] = stream.binding.subspan %arg6[%c0] : !stream.binding -> memref<?x192xf32>{%arg3}
// CHECK:         %[[WG:.*]] = hal.interface.workgroup.id[0]
// CHECK:         %[[SEQ:.*]] = affine.apply affine_map<()[s0] -> (s0)>()[%arg3]
// CHECK:         %[[TILES:.*]] = affine.apply affine_map<()[s0] -> (s0 ceildiv 16)>()[%[[SEQ]]]
// CHECK:         %[[COUNT:.*]] = affine.apply affine_map<()[s0] -> (s0 * 6)>()[%[[TILES]]]
// CHECK:         %[[IN:.*]] = arith.cmpi ult, %[[WG]], %[[COUNT]]
// CHECK:         scf.if %[[IN]] {
// CHECK:         %[[LEN:.*]] = arith.minui %arg4, %arg5 : index
// CHECK:         %[[ROWS:.*]] = affine.apply affine_map<()[s0] -> (s0)>()[%[[LEN]]]
// CHECK:         %[[NQ:.*]] = affine.min affine_map<()[s0, s1] -> (s0 - s1, 16)>()[%[[SEQ]], %{{.*}}]
// CHECK:         %[[QT:.*]] = memref.alloca() : memref<32x16xf32>
// CHECK:         %[[ACC:.*]] = memref.alloca() : memref<32x16xf32>
// CHECK:         %[[ACCT:.*]] = memref.alloca() : memref<32x16xf32>
// CHECK:         %[[R:.*]]:2 = scf.for %[[QI:.*]] = %c0 to %c16{{.*}} step %c1
// CHECK:           affine.min affine_map<(d0)[s0, s1] -> (d0 + s1, s0 + s1 - 1)>(%[[QI]])[%[[NQ]], %{{.*}}]
// CHECK:           %[[BASE:.*]] = arith.subi %{{.*}}, %[[SEQ]] : index
// CHECK:           arith.maxsi
// CHECK:           arith.minsi
// CHECK:         vector.load %{{.*}} : memref<16xi32>, vector<16xi32>
// CHECK:         %[[FULL:.*]] = arith.cmpi uge, %[[ROWS]], %c16
// CHECK:         affine.min affine_map<()[s0, s1] -> (s1 + 15, s0 + s1 - 1)>()[%[[NQ]], %{{.*}}]
// CHECK:         vector.load %[[QB]]
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30]
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
// CHECK:         vector.store %{{.*}}, %[[QT]]
// CHECK:         scf.for %[[G:.*]] = %{{.*}} to %{{.*}} step %c128 iter_args
// CHECK:           scf.for %[[J0:.*]] = %[[G]] to %{{.*}} step %c16{{.*}} iter_args
// CHECK:             scf.if %[[FULL]] -> (vector<16xf32>, vector<16xf32>) {
// CHECK:               %[[JB:.*]] = affine.min affine_map<(d0)[s0] -> (d0, s0 - 16)>(%[[J0]])[%[[ROWS]]]
// CHECK:               %[[KB:.*]] = arith.addi %{{.*}}, %[[JB]] : index
// CHECK:               affine.apply affine_map<(d0) -> (d0 + 15)>(%[[KB]])
// CHECK:               scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args
// CHECK:                 vector.load %[[QT]]
// CHECK:                 memref.load %[[KC]]
// CHECK:                 vector.broadcast
// CHECK:                 vector.fma
// CHECK-NOT:             vector.reduction
// CHECK-NOT:             vector.shuffle
// CHECK:               arith.cmpf ogt
// CHECK:               math.exp %{{.*}} : vector<16xf32>
// CHECK:               scf.for %{{.*}} = %c0 to %c32 step %c1 {
// CHECK:                 vector.load %[[ACC]]
// CHECK:                 memref.load %[[VC]]
// CHECK:                 vector.fma
// CHECK:                 vector.store %{{.*}}, %[[ACC]]
// CHECK:             } else {
// CHECK:               affine.min affine_map<(d0)[s0] -> (d0 + 15, s0 - 1)>(%[[J0]])
// CHECK:           math.exp %{{.*}} : vector<16xf32>
// CHECK:           scf.for %{{.*}} = %c0 to %c32 step %c1 {
// CHECK:             vector.store %{{.*}}, %[[ACCT]]
// CHECK:         arith.divf %{{.*}} : vector<16xf32>
// CHECK:         vector.load %[[ACCT]]
// CHECK:         vector.shuffle
// CHECK:         scf.if
// CHECK:           vector.store %{{.*}}, %[[OB]]
// CHECK:       func.func @main
// CHECK:       %[[S:.*]] = tensor.dim %arg0, %c1
// CHECK:       %[[Q:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<1x?x192xf32> into tensor<?x192xf32>
// CHECK:       %[[T:.*]] = arith.ceildivui %[[S]], %c16
// CHECK:       %[[WORK:.*]] = arith.muli %[[T]], %c6
// CHECK:       flow.dispatch @rlx_attention_prefill_rows_6x2x32_s3e3504f3_c::@rlx_attention_prefill_rows_6x2x32_s3e3504f3_c[%[[WORK]]](%[[Q]], {{.*}}) : (tensor<?x192xf32>{%{{.*}}}, tensor<?x64xf32>{{.*}}, tensor<?x64xf32>{{.*}}, index, index, index) -> tensor<?x192xf32>
// CHECK-NOT:   linalg.softmax
module @prefill attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x?x192xf32>, %k: tensor<1x?x64xf32>, %v: tensor<1x?x64xf32>) -> tensor<1x?x192xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 32 : i64, mask_kind = "causal", num_heads = 6 : i64} : (tensor<1x?x192xf32>, tensor<1x?x64xf32>, tensor<1x?x64xf32>) -> tensor<1x?x192xf32>
    return %0 : tensor<1x?x192xf32>
  }
}

// -----

// A window: the first key max(0, pos - window), never past the last one the query sees.
// CHECK-LABEL: module @window
// CHECK:       stream.executable private @rlx_attention_prefill_rows_2x2x16_s3e800000_w3_b2_c
// CHECK:       affine_map<()[s0] -> (s0 floordiv 2)>
// CHECK:       %[[WIN:.*]] = arith.constant 3 : index
// CHECK:       %[[LO:.*]] = arith.subi %{{.*}}, %[[WIN]] : index
// CHECK:       arith.maxsi %[[LO]]
// CHECK:       flow.dispatch @rlx_attention_prefill_rows_2x2x16_s3e800000_w3_b2_c
module @window attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<2x5x32xf32>, %k: tensor<2x?x32xf32>, %v: tensor<2x?x32xf32>) -> tensor<2x5x32xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v) {head_dim = 16 : i64, mask_kind = "sliding_window", num_heads = 2 : i64, window = 3 : i64} : (tensor<2x5x32xf32>, tensor<2x?x32xf32>, tensor<2x?x32xf32>) -> tensor<2x5x32xf32>
    return %0 : tensor<2x5x32xf32>
  }
}

// -----

// causal_lengths: a query's position is n_b - S + m, n_b read from the device.
// CHECK-LABEL: module @filled
// CHECK:       stream.executable private @rlx_attention_prefill_rows_2x2x16_s3e800000_n
// CHECK:       %[[FILL:.*]] = memref.load %{{.*}} : memref<1xi32>
// CHECK:       arith.index_cast %[[FILL]] : i32 to index
// CHECK:       flow.dispatch @rlx_attention_prefill_rows_2x2x16_s3e800000_n
module @filled attributes {rlx.fusion_policy = "direct"} {
  func.func @main(%q: tensor<1x?x32xf32>, %k: tensor<1x64x32xf32>, %v: tensor<1x64x32xf32>, %n: tensor<1xi32>) -> tensor<1x?x32xf32> {
    %0 = "rlx_mir.attention"(%q, %k, %v, %n) {head_dim = 16 : i64, mask_kind = "causal_lengths", num_heads = 2 : i64} : (tensor<1x?x32xf32>, tensor<1x64x32xf32>, tensor<1x64x32xf32>, tensor<1xi32>) -> tensor<1x?x32xf32>
    return %0 : tensor<1x?x32xf32>
  }
}
