// mir-to-linalg for the sampling ops: top-k / top-p thresholds by a 32-step bitwise search
// over order-preserving float keys (unrolled: per step one reduction over the row and one
// update of the threshold and of the bit, carried as a tensor so every step is the same
// executable), min-p and the repetition penalty as one elementwise generic, the Gumbel-max
// draw (a hash of seed, counter and index) and mark_tokens as one reduction over the ids.
// Results are fenced with compute barriers.
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @top_k
// CHECK:      arith.cmpi sle
// CHECK:      arith.cmpi sge
// CHECK:      %[[T0:.*]] = linalg.fill ins(%c0_i32 : i32) outs(%{{.*}} : tensor<1xi32>)
// CHECK:      %[[B0:.*]] = linalg.fill ins(%c-2147483648_i32 : i32) outs(%{{.*}} : tensor<1xi32>)
// CHECK:      %[[S0:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %[[T0]], %[[B0]] : tensor<1x32000xf32>, tensor<1xi32>, tensor<1xi32>) outs(%{{.*}} : tensor<1xi32>)
// CHECK:        arith.bitcast %{{.*}} : f32 to i32
// CHECK:        arith.cmpi uge
// CHECK:        arith.addi
// CHECK:      %[[U:.*]]:2 = linalg.generic {{.*}}iterator_types = ["parallel"]} ins(%[[T0]], %[[B0]], %[[S0]], %arg1 : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>)
// CHECK:        arith.cmpi sge
// CHECK:        arith.shrui
// CHECK:      %[[T1:.*]] = iree_tensor_ext.compute_barrier.start %[[U]]#0
// CHECK:      %[[B1:.*]] = iree_tensor_ext.compute_barrier.start %[[U]]#1
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %[[T1]], %[[B1]] :
// CHECK-COUNT-30: iterator_types = ["parallel", "reduction"]
// CHECK-NOT:  iterator_types = ["parallel", "reduction"]
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]}
// CHECK:        arith.cmpi uge
// CHECK:        arith.select %{{.*}}, %{{.*}}, %cst : f32
// CHECK:      iree_tensor_ext.compute_barrier.start
module @top_k {
  func.func @main(%x: tensor<1x32000xf32>, %k: tensor<1xi32>) -> tensor<1x32000xf32> {
    %y = "rlx_mir.top_k_filter"(%x, %k) : (tensor<1x32000xf32>, tensor<1xi32>) -> tensor<1x32000xf32>
    return %y : tensor<1x32000xf32>
  }
}

// -----

// top-p: the weights exp(x - max) once, their sum, then the search sums weights (addf).
// CHECK-LABEL: module @top_p
// CHECK:      arith.maximumf
// CHECK:      math.exp
// CHECK:      arith.addf
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%arg0, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x?xf32>, tensor<2x?xf32>, tensor<2xi32>, tensor<2xi32>) outs(%{{.*}} : tensor<2xf32>)
// CHECK:        arith.cmpi uge
// CHECK:        arith.addf
// CHECK:      arith.cmpf oge
// CHECK:      arith.select
module @top_p {
  func.func @main(%x: tensor<2x?xf32>, %p: tensor<2xf32>) -> tensor<2x?xf32> {
    %y = "rlx_mir.top_p_filter"(%x, %p) : (tensor<2x?xf32>, tensor<2xf32>) -> tensor<2x?xf32>
    return %y : tensor<2x?xf32>
  }
}

// -----

// CHECK-LABEL: module @min_p_and_penalty
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]}
// CHECK:        arith.maximumf
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]}
// CHECK:        math.exp
// CHECK:        arith.cmpf olt
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]}
// CHECK:        arith.cmpf une
// CHECK:        arith.mulf
// CHECK:        arith.divf
module @min_p_and_penalty {
  func.func @main(%x: tensor<1x64xf32>, %m: tensor<1xf32>, %seen: tensor<1x64xf32>, %p: tensor<1xf32>) -> tensor<1x64xf32> {
    %y = "rlx_mir.min_p_filter"(%x, %m) : (tensor<1x64xf32>, tensor<1xf32>) -> tensor<1x64xf32>
    %z = "rlx_mir.repetition_penalty"(%y, %seen, %p) : (tensor<1x64xf32>, tensor<1x64xf32>, tensor<1xf32>) -> tensor<1x64xf32>
    return %z : tensor<1x64xf32>
  }
}

// -----

// categorical: the hash (fmix32's multipliers), Gumbel noise, then the first largest index
// (the argmax lowering: a max, then the first index equal to it and the first NaN).
// CHECK-LABEL: module @categorical
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]}
// CHECK:        linalg.index 1
// CHECK:        arith.muli
// CHECK:        arith.shrui
// CHECK:        arith.uitofp
// CHECK:        math.log
// CHECK:        math.log
// CHECK:        arith.subf
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]}
// CHECK:        arith.maximumf
// CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]}
// CHECK:        arith.cmpf oeq
// CHECK:        arith.minsi
module @categorical {
  func.func @main(%x: tensor<1x64xf32>, %s: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
    %t = "rlx_mir.categorical"(%x, %s, %n) : (tensor<1x64xf32>, tensor<1xi32>, tensor<1xi32>) -> tensor<1xi32>
    return %t : tensor<1xi32>
  }
}

// -----

// CHECK-LABEL: module @mark_tokens
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg1 : tensor<1x3xi32>) outs(%arg0 : tensor<1x64xf32>)
// CHECK:        linalg.index 1
// CHECK:        arith.cmpi eq
// CHECK:        arith.select
module @mark_tokens {
  func.func @main(%m: tensor<1x64xf32>, %ids: tensor<1x3xi32>) -> tensor<1x64xf32> {
    %y = "rlx_mir.mark_tokens"(%m, %ids) : (tensor<1x64xf32>, tensor<1x3xi32>) -> tensor<1x64xf32>
    return %y : tensor<1x64xf32>
  }
}
