// mir-to-linalg for data movement: reshape is a collapse or expand when the shapes line up,
// transpose a linalg.transpose, narrow an extract_slice, concat a tensor.concat, gather a
// generic that reads the (f32-encoded, clamped) index and then the table; write_rows a
// scatter at clamped indices; dim and iota make sizes data; dynamic_slice clamps run-time
// bounds into the axis.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @moves
// CHECK:      tensor.expand_shape %arg0 {{\[}}[0], [1], [2, 3]] {{.*}} : tensor<2x?x24xf32> into tensor<2x?x4x6xf32>
// CHECK:      linalg.transpose ins(%arg0 : tensor<2x?x24xf32>) {{.*}} permutation = [1, 2, 0]
// CHECK:      tensor.extract_slice %arg0[0, 0, 5] [2, %{{.*}}, 7] [1, 1, 1]
// CHECK:      tensor.concat dim(1) %arg0, %arg0
module @moves {
  func.func @main(%x: tensor<2x?x24xf32>) -> (tensor<2x?x4x6xf32>, tensor<?x24x2xf32>, tensor<2x?x7xf32>, tensor<2x?x24xf32>) {
    %r = "rlx_mir.reshape"(%x) {new_shape = array<i64: 2, -1, 4, 6>} : (tensor<2x?x24xf32>) -> tensor<2x?x4x6xf32>
    %t = "rlx_mir.transpose"(%x) {perm = array<i64: 1, 2, 0>} : (tensor<2x?x24xf32>) -> tensor<?x24x2xf32>
    %n = "rlx_mir.narrow"(%x) {axis = 2 : i64, len = 7 : i64, start = 5 : i64} : (tensor<2x?x24xf32>) -> tensor<2x?x7xf32>
    %c = "rlx_mir.concat"(%x, %x) {axis = 1 : i64} : (tensor<2x?x24xf32>, tensor<2x?x24xf32>) -> tensor<2x?x24xf32>
    return %r, %t, %n, %c : tensor<2x?x4x6xf32>, tensor<?x24x2xf32>, tensor<2x?x7xf32>, tensor<2x?x24xf32>
  }
}

// -----

// narrow with a negative start: the last entries of a dynamic axis, the offset dim - 3.
// CHECK-LABEL: module @narrow_from_end
// CHECK:      %[[D:.*]] = tensor.dim %arg0, %c1
// CHECK:      %[[O:.*]] = arith.subi %{{.*}}, %c3
// CHECK:      tensor.extract_slice %arg0[0, %[[O]], 0] [1, 2, 8] [1, 1, 1]
module @narrow_from_end {
  func.func @main(%x: tensor<1x?x8xf32>) -> tensor<1x2x8xf32> {
    %n = "rlx_mir.narrow"(%x) {axis = 1 : i64, len = 2 : i64, start = -3 : i64} : (tensor<1x?x8xf32>) -> tensor<1x2x8xf32>
    return %n : tensor<1x2x8xf32>
  }
}

// -----

// expand: a generic that broadcasts through its input map (a size-1 or missing dim reads
// index 0 or nothing); -1 keeps the input's dim, dynamic ones included.
// CHECK-LABEL: module @expand
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%arg0 : tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK-NEXT:   ^bb0(%[[IN:[a-z0-9_]+]]: f32
// CHECK-NEXT:     linalg.yield %[[IN]] : f32
// CHECK:      %[[N:.*]] = tensor.dim %arg1, %c0 : tensor<?x1x8xf32>
// CHECK:      %[[INIT:.*]] = tensor.empty(%[[N]]) : tensor<?x3x8xf32>
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, 0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]{{.*}} ins(%arg1 : tensor<?x1x8xf32>) outs(%[[INIT]] : tensor<?x3x8xf32>)
module @expand {
  func.func @main(%b: tensor<8xf32>, %x: tensor<?x1x8xf32>) -> (tensor<4x8xf32>, tensor<?x3x8xf32>) {
    %a = "rlx_mir.expand"(%b) {target_shape = array<i64: 4, 8>} : (tensor<8xf32>) -> tensor<4x8xf32>
    %c = "rlx_mir.expand"(%x) {target_shape = array<i64: -1, 3, -1>} : (tensor<?x1x8xf32>) -> tensor<?x3x8xf32>
    return %a, %c : tensor<4x8xf32>, tensor<?x3x8xf32>
  }
}

// -----

// CHECK-LABEL: module @embed
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK:        arith.fptosi
// CHECK:        arith.maxsi
// CHECK:        arith.minsi
// CHECK:        tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<10x24xf32>
module @embed {
  func.func @main(%ids: tensor<2x?xf32>) -> tensor<2x?x24xf32> {
    %t = "rlx_mir.param"() {name = "table"} : () -> tensor<10x24xf32>
    %e = "rlx_mir.gather"(%t, %ids) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<10x24xf32>, tensor<2x?xf32>) -> tensor<2x?x24xf32>
    return %e : tensor<2x?x24xf32>
  }
}

// -----

// slice: positive strides are one strided extract_slice (size -1 keeps a dynamic axis); a
// negative stride reads x[start + i * stride] in a generic. pad: tensor.pad with the value.
// CHECK-LABEL: module @slices
// CHECK:      tensor.extract_slice %arg0[0, 1] [%{{.*}}, 3] [1, 2] : tensor<?x8xf32> to tensor<?x3xf32>
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:        %[[I:.*]] = linalg.index 1 : index
// CHECK:        %[[J:.*]] = arith.muli %[[I]], %c-2
// CHECK:        %[[K:.*]] = arith.addi %[[J]], %c7
// CHECK:        tensor.extract %arg0[%{{.*}}, %[[K]]] : tensor<?x8xf32>
// CHECK:      tensor.pad %arg0 low[0, 1] high[2, 0]
// CHECK:        tensor.yield %cst : f32
// A size up to k before the end with a stride (x[1 : dim - 2 : 3] of the dynamic axis):
// ceil((dim - 1 - 2) / 3) entries, counted at run time.
// CHECK:      %[[D:.*]] = tensor.dim %arg0, %c0
// CHECK:      %[[S:.*]] = arith.subi %[[D]], %c3
// CHECK:      %[[N:.*]] = arith.ceildivui %[[S]], %c3
// CHECK:      tensor.extract_slice %arg0[1, 0] [%[[N]], 4] [3, 2] : tensor<?x8xf32> to tensor<?x4xf32>
module @slices {
  func.func @main(%x: tensor<?x8xf32>) -> (tensor<?x3xf32>, tensor<?x4xf32>, tensor<?x9xf32>, tensor<?x4xf32>) {
    %a = "rlx_mir.slice"(%x) {sizes = array<i64: -1, 3>, starts = array<i64: 0, 1>, strides = array<i64: 1, 2>} : (tensor<?x8xf32>) -> tensor<?x3xf32>
    %b = "rlx_mir.slice"(%x) {sizes = array<i64: -1, 4>, starts = array<i64: 0, 7>, strides = array<i64: 1, -2>} : (tensor<?x8xf32>) -> tensor<?x4xf32>
    %c = "rlx_mir.pad"(%x) {high = array<i64: 2, 0>, low = array<i64: 0, 1>, value = 2.5 : f32} : (tensor<?x8xf32>) -> tensor<?x9xf32>
    %d = "rlx_mir.slice"(%x) {sizes = array<i64: -3, -1>, starts = array<i64: 1, 0>, strides = array<i64: 3, 2>} : (tensor<?x8xf32>) -> tensor<?x4xf32>
    return %a, %b, %c, %d : tensor<?x3xf32>, tensor<?x4xf32>, tensor<?x9xf32>, tensor<?x4xf32>
  }
}

// -----

// dim: tensor.dim cast to i64 and filled into a 0-d tensor (no kernel: IREE resolves it to
// the inputs). iota: one generic that writes its loop index, behind a compute barrier (its
// own dispatch; a negative axis counts from the end).
// CHECK-LABEL: module @sizes
// CHECK:      %[[D:.*]] = tensor.dim %arg0, %c1 : tensor<2x?xf32>
// CHECK-NEXT: %[[N:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<i64>
// CHECK-NEXT: %[[SIZE:.*]] = linalg.fill ins(%[[N]] : i64) outs(%[[E]] : tensor<i64>)
// CHECK:      %[[L:.*]] = tensor.dim %arg0, %c1 : tensor<2x?xf32>
// CHECK-NEXT: %[[INIT:.*]] = tensor.empty(%[[L]]) : tensor<?xi64>
// CHECK-NEXT: %[[IOTA:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%[[INIT]] : tensor<?xi64>)
// CHECK:        %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT:   %[[V:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:   linalg.yield %[[V]] : i64
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[IOTA]] : tensor<?xi64>{%[[L]]}
// CHECK:      return %[[SIZE]], %[[B]]
module @sizes {
  func.func @main(%x: tensor<2x?xf32>) -> (tensor<i64>, tensor<?xi64>) {
    %n = "rlx_mir.dim"(%x) {axis = 1 : i64} : (tensor<2x?xf32>) -> tensor<i64>
    %i = "rlx_mir.iota"(%x) {axis = -1 : i64} : (tensor<2x?xf32>) -> tensor<?xi64>
    return %n, %i : tensor<i64>, tensor<?xi64>
  }
}

// -----

// barrier: a compute barrier on llvm-cpu (data tiling), nothing else.
// CHECK-LABEL: module @barrier
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %arg0
// CHECK:      return %[[B]]
module @barrier {
  func.func @main(%x: tensor<1x?x8xf32>) -> tensor<1x?x8xf32> {
    %b = "rlx_mir.barrier"(%x) : (tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
    return %b : tensor<1x?x8xf32>
  }
}

// -----

// write_rows: the (slot, row) indices of each row written, clamped into the cache (slot
// in [0, 3], row pos + t in [0, 15], in i64) on the device, behind a compute barrier;
// then one scatter that updates the cache operand (the destination) in place.
// CHECK-LABEL: module @write_rows
// CHECK-DAG:  %[[SLOTS:.*]] = arith.constant 3 : i64
// CHECK-DAG:  %[[ROWS:.*]] = arith.constant 15 : i64
// CHECK:      %[[T:.*]] = tensor.dim %arg1, %c1 : tensor<2x?x8xf32>
// CHECK:      %[[IDX:.*]] = linalg.generic {{.*}} ins(%arg2, %arg3 : tensor<2xi32>, tensor<2xi32>) outs(%{{.*}} : tensor<2x?x2xi32>)
// CHECK:        %[[ROW:.*]] = arith.addi
// CHECK:        %[[IS_SLOT:.*]] = arith.cmpi eq
// CHECK:        %[[V:.*]] = arith.select %[[IS_SLOT]], %{{.*}}, %[[ROW]] : i64
// CHECK-NEXT:   %[[HI:.*]] = arith.select %[[IS_SLOT]], %[[SLOTS]], %[[ROWS]] : i64
// CHECK-NEXT:   %[[LO:.*]] = arith.maxsi %[[V]], %{{.*}} : i64
// CHECK-NEXT:   %[[C:.*]] = arith.minsi %[[LO]], %[[HI]] : i64
// CHECK-NEXT:   arith.trunci %[[C]] : i64 to i32
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[IDX]] : tensor<2x?x2xi32>{%[[T]]}
// CHECK:      %[[W:.*]] = iree_linalg_ext.scatter dimension_map = [0, 1] unique_indices(false) ins(%arg1, %[[B]] : tensor<2x?x8xf32>, tensor<2x?x2xi32>) outs(%arg0 : tensor<4x16x8xf32>)
// CHECK:        iree_linalg_ext.yield %{{.*}} : f32
// CHECK:      return %[[W]]
module @write_rows {
  func.func @main(%cache: tensor<4x16x8xf32>, %new: tensor<2x?x8xf32>, %slot: tensor<2xi32>, %pos: tensor<2xi32>) -> tensor<4x16x8xf32> {
    %w = "rlx_mir.write_rows"(%cache, %new, %slot, %pos) : (tensor<4x16x8xf32>, tensor<2x?x8xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<4x16x8xf32>
    return %w : tensor<4x16x8xf32>
  }
}

// -----

// dynamic_slice: bounds read from 0-d tensors and clamped into the axis (s into [0, n],
// e into [s, n]) before one extract_slice: no bound the model computes reads outside x.
// CHECK-LABEL: module @dynamic_slice
// CHECK:       %[[N:.*]] = tensor.dim %arg0, %c1 : tensor<2x?x8xf32>
// CHECK:       %[[S0:.*]] = tensor.extract %arg1[] : tensor<i64>
// CHECK:       %[[S1:.*]] = arith.index_cast %[[S0]] : i64 to index
// CHECK:       %[[S2:.*]] = arith.maxsi %[[S1]], %c0 : index
// CHECK:       %[[S:.*]] = arith.minsi %[[S2]], %[[N]] : index
// CHECK:       %[[E0:.*]] = tensor.extract %arg2[] : tensor<i64>
// CHECK:       %[[E1:.*]] = arith.index_cast %[[E0]] : i64 to index
// CHECK:       %[[E2:.*]] = arith.maxsi %[[E1]], %[[S]] : index
// CHECK:       %[[E:.*]] = arith.minsi %[[E2]], %[[N]] : index
// CHECK:       %[[LEN:.*]] = arith.subi %[[E]], %[[S]] : index
// CHECK:       tensor.extract_slice %arg0[0, %[[S]], 0] [2, %[[LEN]], 8] [1, 1, 1] : tensor<2x?x8xf32> to tensor<2x?x8xf32>
module @dynamic_slice {
  func.func @main(%x: tensor<2x?x8xf32>, %s: tensor<i64>, %e: tensor<i64>) -> tensor<2x?x8xf32> {
    %y = "rlx_mir.dynamic_slice"(%x, %s, %e) {axis = 1 : i64} : (tensor<2x?x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x?x8xf32> loc("chunk")
    return %y : tensor<2x?x8xf32>
  }
}

// -----

// A reshape's inferred dim: the element count over the known sizes. The count is a product
// of a tensor's sizes, so it does not wrap (overflow<nuw>), which lets MLIR fold a size read
// back through a later reshape, (s · c) / c, to s: IREE then sees one size where the same
// length runs through many ops, and reuses their transient memory.
// CHECK-LABEL: module @inferred
// CHECK:       util.status.check_ok
// CHECK:       %[[D:.*]] = tensor.dim %arg0, %c1
// CHECK:       %[[A:.*]] = arith.muli %[[D]], %c2 overflow<nuw> : index
// CHECK:       %[[B:.*]] = arith.muli %[[A]], %c24 overflow<nuw> : index
// CHECK-NEXT:  arith.divui %[[B]], %c6 : index
module @inferred {
  func.func @main(%x: tensor<2x?x24xf32>) -> tensor<?x6xf32> {
    %r = "rlx_mir.reshape"(%x) {new_shape = array<i64: -1, 6>} : (tensor<2x?x24xf32>) -> tensor<?x6xf32>
    return %r : tensor<?x6xf32>
  }
}

// -----

// scatter: each coordinate wrapped when negative (+ its dim) and clamped into [0, dim - 1]
// on the device, behind a compute barrier; the updates, already [N, slice], read as they
// are on llvm-cpu; one iree_linalg_ext.scatter whose region adds (reduction "add").
// CHECK-LABEL: module @scatter
// CHECK:      %[[IDX:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<?x2xi64>) outs(%{{.*}} : tensor<?x2xi32>)
// CHECK:        arith.cmpi slt
// CHECK:        arith.addi
// CHECK:        arith.maxsi
// CHECK:        arith.minsi
// CHECK:        arith.trunci {{.*}} : i64 to i32
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[IDX]]
// CHECK:      %[[S:.*]] = iree_linalg_ext.scatter dimension_map = [0, 1] unique_indices(false) ins(%arg2, %[[B]] : tensor<?x5xf32>, tensor<?x2xi32>) outs(%arg0 : tensor<3x4x5xf32>)
// CHECK:        arith.addf
// CHECK:      return %[[S]]
module @scatter {
  func.func @main(%data: tensor<3x4x5xf32>, %idx: tensor<?x2xi64>, %upd: tensor<?x5xf32>) -> tensor<3x4x5xf32> {
    %y = "rlx_mir.scatter"(%data, %idx, %upd) {reduction = "add"} : (tensor<3x4x5xf32>, tensor<?x2xi64>, tensor<?x5xf32>) -> tensor<3x4x5xf32>
    return %y : tensor<3x4x5xf32>
  }
}

// -----

// A reshape over dynamic dims whose sizes line up in groups, as products of the input's
// dynamic dims (the -1 of the second one is s0 / 4, checked whole at run time): one collapse
// or expand by those groups, not a trip through 1-D. A collapse that merges a dynamic dim
// with others starts behind a compute barrier (IREE 3.13 rejected the transpose fused into
// it in front of a data-tiled batch matmul: "no basis element may be statically
// non-positive").
// CHECK-LABEL: module @grouped
// CHECK:       %[[B:.*]] = iree_tensor_ext.compute_barrier.start %arg0
// CHECK:       tensor.collapse_shape %[[B]] {{\[}}[0, 1], [2], [3]] : tensor<?x4x?x8xf32> into tensor<?x?x8xf32>
// CHECK:       tensor.expand_shape %arg1 {{\[}}[0, 1], [2], [3]] output_shape [%{{.*}}, 4, %{{.*}}, 8] : tensor<?x?x8xf32> into tensor<?x4x?x8xf32>
// CHECK-NOT:   tensor.collapse_shape %arg1
module @grouped {
  func.func @main(%x: tensor<?x4x?x8xf32>, %y: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x4x?x8xf32>) {
    %a = "rlx_mir.reshape"(%x) {new_shape = array<i64: -1, -4, 8>} : (tensor<?x4x?x8xf32>) -> tensor<?x?x8xf32>
    %b = "rlx_mir.reshape"(%y) {new_shape = array<i64: -1, 4, -3, 8>} : (tensor<?x?x8xf32>) -> tensor<?x4x?x8xf32>
    return %a, %b : tensor<?x?x8xf32>, tensor<?x4x?x8xf32>
  }
}

// -----

// Copied dims in another order are not a regrouping: through 1-D, [a, b] -> [b, a].
// CHECK-LABEL: module @swapped
// CHECK:       tensor.collapse_shape %arg0 {{\[}}[0, 1]] : tensor<?x?xf32> into tensor<?xf32>
// CHECK:       tensor.expand_shape
module @swapped {
  func.func @main(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %a = "rlx_mir.reshape"(%x) {new_shape = array<i64: -3, -2>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
    return %a : tensor<?x?xf32>
  }
}
