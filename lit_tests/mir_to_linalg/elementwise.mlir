// mir-to-linalg for elementwise ops: one generic each, numpy broadcasting in the indexing
// maps (a size-1 dim reads index 0; missing leading dims are dropped).
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg %s | FileCheck %s

// CHECK-LABEL: module @broadcast
// CHECK:      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %arg1 : tensor<2x?x8xf32>, tensor<1x8xf32>)
// CHECK:        arith.subf
module @broadcast {
  func.func @main(%a: tensor<2x?x8xf32>, %b: tensor<1x8xf32>) -> tensor<2x?x8xf32> {
    %y = "rlx_mir.binary"(%a, %b) {kind = "sub"} : (tensor<2x?x8xf32>, tensor<1x8xf32>) -> tensor<2x?x8xf32>
    return %y : tensor<2x?x8xf32>
  }
}

// -----

// f16 transcendental math runs in f32.
// CHECK-LABEL: module @gelu16
// CHECK:      arith.extf {{.*}} : f16 to f32
// CHECK:      math.erf {{.*}} : f32
// CHECK:      arith.truncf {{.*}} : f32 to f16
module @gelu16 {
  func.func @main(%a: tensor<4xf16>) -> tensor<4xf16> {
    %y = "rlx_mir.activation"(%a) {kind = "gelu"} : (tensor<4xf16>) -> tensor<4xf16>
    return %y : tensor<4xf16>
  }
}

// -----

// CHECK-LABEL: module @select
// CHECK:      %[[M:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi1>)
// CHECK:        arith.cmpf olt
// CHECK:      linalg.generic {{.*}} ins(%[[M]], %arg0, %arg1 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>)
// CHECK:        arith.select
// CHECK:      linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi32>)
// CHECK:        arith.fptosi {{.*}} : f32 to i32
module @select {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %m = "rlx_mir.compare"(%a, %b) {kind = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %y = "rlx_mir.where"(%m, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %i = "rlx_mir.cast"(%y) {to = "i32"} : (tensor<4xf32>) -> tensor<4xi32>
    return %y, %i : tensor<4xf32>, tensor<4xi32>
  }
}

// -----

// An i1 function input reaches `where` / `cast` as i8 converted behind a compute barrier
// (IREE's data tiling cannot pack i1 operands); i1 values computed in the module do not.
// CHECK-LABEL: module @flags
// CHECK:      %[[I8:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4x4xi1>) outs(%{{.*}} : tensor<4x4xi8>)
// CHECK:        arith.extui
// CHECK:      %[[B:.*]] = iree_tensor_ext.compute_barrier.start %[[I8]]
// CHECK:      linalg.generic {{.*}} ins(%[[B]], %arg1, %arg1 : tensor<4x4xi8>, tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:        %[[C:.*]] = arith.cmpi ne
// CHECK:        arith.select %[[C]]
// CHECK:      %[[CMP:.*]] = linalg.generic {{.*}} ins(%arg1, %arg1 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%{{.*}} : tensor<4x4xi1>)
// CHECK-NOT:  compute_barrier
// CHECK:      linalg.generic {{.*}} ins(%[[CMP]], %arg1, %arg1 : tensor<4x4xi1>, tensor<4x4xf32>, tensor<4x4xf32>)
module @flags {
  func.func @main(%m: tensor<4x4xi1>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %a = "rlx_mir.where"(%m, %x, %x) : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %c = "rlx_mir.compare"(%x, %x) {kind = "lt"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
    %b = "rlx_mir.where"(%c, %x, %x) : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----

// rem: arith.remf for floats; for integers arith.remsi by a divisor that is 1 where it was
// 0 or -1 (x86's idiv traps on those; the remainder is 0 either way for -1).
// CHECK-LABEL: module @rem
// CHECK:       arith.remf
// CHECK:       %[[ZERO:.*]] = arith.cmpi eq, %{{.*}}, %c0_i32 : i32
// CHECK:       %[[MINUS:.*]] = arith.cmpi eq, %{{.*}}, %c-1_i32 : i32
// CHECK:       %[[BAD:.*]] = arith.ori %[[ZERO]], %[[MINUS]] : i1
// CHECK:       %[[D:.*]] = arith.select %[[BAD]], %c1_i32, %{{.*}} : i32
// CHECK:       arith.remsi %{{.*}}, %[[D]] : i32
module @rem {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %i: tensor<4xi32>, %j: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %0 = "rlx_mir.binary"(%a, %b) {kind = "rem"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = "rlx_mir.binary"(%i, %j) {kind = "rem"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    return %0, %1 : tensor<4xf32>, tensor<4xi32>
  }
}

// -----

// The unsigned kinds: the same signless i8 tensors, arith's unsigned ops; a divisor of 0
// reads as 1; an unsigned source widens with zeros and converts with uitofp; a float
// converts to an unsigned result with fptoui.
// CHECK-LABEL: module @unsigned
// CHECK:      %[[Z:.*]] = arith.cmpi eq
// CHECK:      %[[D:.*]] = arith.select %[[Z]]
// CHECK:      arith.divui %{{.*}}, %[[D]] : i8
// CHECK:      arith.maxui {{.*}} : i8
// CHECK:      arith.cmpi ult, {{.*}} : i8
// CHECK:      arith.uitofp {{.*}} : i8 to f32
// CHECK:      arith.extui {{.*}} : i8 to i32
// CHECK:      arith.fptoui {{.*}} : f32 to i8
module @unsigned {
  func.func @main(%a: tensor<4xi8>, %b: tensor<4xi8>, %f: tensor<4xf32>) -> (tensor<4xi8>, tensor<4xi8>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>, tensor<4xi8>) {
    %d = "rlx_mir.binary"(%a, %b) {kind = "udiv"} : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
    %m = "rlx_mir.binary"(%a, %b) {kind = "umax"} : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
    %l = "rlx_mir.compare"(%a, %b) {kind = "ult"} : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi1>
    %x = "rlx_mir.cast"(%a) {to = "f32", unsigned = "source"} : (tensor<4xi8>) -> tensor<4xf32>
    %w = "rlx_mir.cast"(%a) {to = "i32", unsigned = "source"} : (tensor<4xi8>) -> tensor<4xi32>
    %u = "rlx_mir.cast"(%f) {to = "i8", unsigned = "result"} : (tensor<4xf32>) -> tensor<4xi8>
    return %d, %m, %l, %x, %w, %u : tensor<4xi8>, tensor<4xi8>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>, tensor<4xi8>
  }
}

// -----

// Casts from and to 8-bit floats are written out, not left to IREE's emulation of
// extf / truncf (wrong on E4M3FN's 0xff and below the smallest normal number): a table of
// the 256 values read with the byte; rounding to nearest even on the f32 bits.
// CHECK-LABEL: module @float8
// CHECK:      %[[T:.*]] = arith.constant dense<{{.*}}> : tensor<256xf32>
// CHECK:      linalg.generic
// CHECK:        arith.bitcast {{.*}} : f8E4M3FN to i8
// CHECK:        tensor.extract %[[T]]
// CHECK-NOT:    arith.extf
// CHECK:      linalg.generic
// CHECK:        arith.bitcast {{.*}} : f32 to i32
// CHECK:        math.roundeven
// CHECK-NOT:    arith.truncf
// CHECK:        arith.bitcast {{.*}} : i8 to f8E5M2
module @float8 {
  func.func @main(%a: tensor<4xf8E4M3FN>, %f: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf8E5M2>) {
    %x = "rlx_mir.cast"(%a) {to = "f32"} : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
    %y = "rlx_mir.cast"(%f) {to = "f8E5M2"} : (tensor<4xf32>) -> tensor<4xf8E5M2>
    return %x, %y : tensor<4xf32>, tensor<4xf8E5M2>
  }
}

// -----

// floor / ceil are exact in any width (no f32 round trip); the inverse hyperbolic functions
// go through rlx's own log1p series (no math.log1p, no math.asinh: IREE's cancel near 0).
// CHECK-LABEL: module @math_functions
// CHECK:      math.floor {{.*}} : f16
// CHECK:      math.ceil {{.*}} : f16
// CHECK:      linalg.generic
// CHECK-NOT:    math.asinh
// CHECK-NOT:    math.log1p
// CHECK:        math.log
// CHECK:        math.copysign
module @math_functions {
  func.func @main(%a: tensor<4xf16>, %b: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xf16>, tensor<4xf32>) {
    %f = "rlx_mir.activation"(%a) {kind = "floor"} : (tensor<4xf16>) -> tensor<4xf16>
    %c = "rlx_mir.activation"(%a) {kind = "ceil"} : (tensor<4xf16>) -> tensor<4xf16>
    %s = "rlx_mir.activation"(%b) {kind = "asinh"} : (tensor<4xf32>) -> tensor<4xf32>
    return %f, %c, %s : tensor<4xf16>, tensor<4xf16>, tensor<4xf32>
  }
}

// -----

// A shift count outside [0, bits) shifts every bit out: the count is checked (ult 32) and
// the shift given a safe count, the result selected; and / or / xor are arith's.
// CHECK-LABEL: module @bits
// CHECK:      arith.andi
// CHECK:      arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK:      arith.shli
// CHECK:      arith.select
// CHECK:      arith.cmpi ult
// CHECK:      arith.shrsi
module @bits {
  func.func @main(%a: tensor<4xi32>, %n: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
    %x = "rlx_mir.binary"(%a, %n) {kind = "and"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %l = "rlx_mir.binary"(%a, %n) {kind = "shl"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %r = "rlx_mir.binary"(%a, %n) {kind = "shr"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    return %x, %l, %r : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
  }
}
