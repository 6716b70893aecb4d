// mir-to-linalg on llvm-cpu: a decode (M = 1) dequant_matmul of Q4_K, Q5_K, Q8_0, Q6_K, Q5_0,
// Q4_0, Q5_1, Q4_1, F16 or BF16 weights becomes a flow.dispatch to rlx's hand-written kernel (a stream.executable in vector /
// scf / memref, one per scheme and shape, its body only in the workgroups it was written for),
// fed by repacking generics that read only the parameter (in an initializer, into globals
// that every function reading the weight shares); so does a batched decode step's
// (M = 2 .. 8 rows of x: x [M, K], y [M, N]). Prefill (M > 8 or dynamic), row counts not a
// multiple of 4, other schemes, --no-gemv-kernels and GPU targets
// keep the fused dequant + contraction (quant.mlir). A GEMV whose only use is a residual add
// takes the residual into its kernel, one of an RMSNorm the normalization, one of a SwiGLU
// its activation.
// The batched bodies' lane count follows the CPU (16 with AVX-512F): the default checks run
// for an AVX2 CPU (x86-64-v3), WIDE for an AVX-512 one (znver4).
// On an Intel CPU (prefix HINT, sapphirerapids) the M = 1 kernels also hint their weight planes into
// the cache 4 KiB ahead of their reads (LoweringOptions.prefetch_bytes).
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=x86-64-v3 %s | FileCheck %s
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=sapphirerapids %s | FileCheck %s --check-prefix=HINT
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=znver4 %s | FileCheck %s --check-prefix=WIDE
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --no-gemv-kernels %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --target=vulkan %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --activation-quant q8 %s | FileCheck %s --check-prefix=Q8
// RUN: %rlx-opt --split-input-file --pass=mir-to-linalg --cpu=znver4 --activation-quant q8 %s | FileCheck %s --check-prefix=Q8W

// Q4_K: nibbles repacked so that lane l of i32 vector c holds nibble j of weight 128c + 16j + l
// at bits 4j; each becomes the f32 1 + q/16 by integer ops and a bitcast (no conversion). The
// scales stay small: the 6-bit sc and m as a byte a group of 32 and the f16 d and dmin per
// superblock (0.58 bytes a weight in all). Per row tile the kernel first forms S = 16 d sc
// into a stack buffer (one 16-byte load of sc a chunk, converted, times d shuffled to the
// tile's rows) and sums M X (M = S + dmin m) into 16 lanes; the reduction then broadcasts S
// from the buffer. Every plane is then tile-interleaved ([N, C * w] stored as [N / 4, C, 4,
// w]: the four rows a loop iteration reads are one sequential stream).
// CHECK-LABEL: module @q4_k
// CHECK:       stream.executable private @rlx_gemv_q4_k_128x512
// CHECK:         stream.executable.export public @rlx_gemv_q4_k_128x512 workgroups(
// CHECK:           affine.apply affine_map<()[s0] -> (s0 ceildiv 32)>
// CHECK:         func.func @rlx_gemv_q4_k_128x512(
// CHECK:           %[[WG:.*]] = hal.interface.workgroup.id[0]
// CHECK:           %[[COUNT:.*]] = arith.constant 4 : index
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[WG]], %[[COUNT]]
// CHECK:           scf.if %[[IN]] {
// CHECK:           memref.alloca() : memref<16xf32>
// CHECK:           %[[SBUF:.*]] = memref.alloca() : memref<64xf32>
// CHECK:           vector.load %{{.*}} : memref<32x64xi8>, vector<16xi8>
// CHECK:           vector.load %{{.*}} : memref<32x8xf16>, vector<4xf16>
// CHECK:           vector.shuffle %{{.*}} [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
// CHECK:           vector.store %{{.*}}, %[[SBUF]][%{{.*}}] : memref<64xf32>, vector<16xf32>
// CHECK:           vector.fma %{{.*}} : vector<16xf32>
// CHECK:           vector.load %{{.*}} : memref<32x256xi32>, vector<16xi32>
// CHECK:           arith.andi %{{.*}} : vector<16xi32>
// CHECK:           arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK-NOT:       arith.uitofp
// CHECK:           memref.load %[[SBUF]][%{{.*}}] : memref<64xf32>
// CHECK:           vector.fma %{{.*}} : vector<16xf32>
// CHECK:           vector.reduction <add>, %{{.*}} : vector<16xf32> into f32
// The planes live in globals that one initializer per weight fills at load (every function
// reading the weight loads the same ones); the function loads them and dispatches.
// CHECK:       func.func @main(
// CHECK:         %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1]] : tensor<1x512xf32> into tensor<512xf32>
// CHECK:         %[[QT:.*]] = util.global.load @planes.w.0.0 : tensor<32x256xi32>
// CHECK:         %[[ST:.*]] = util.global.load @planes.w.0.1 : tensor<32x64xi8>
// CHECK:         %[[MT:.*]] = util.global.load @planes.w.0.2 : tensor<32x64xi8>
// CHECK:         %[[DT:.*]] = util.global.load @planes.w.0.3 : tensor<32x8xf16>
// CHECK:         %[[NT:.*]] = util.global.load @planes.w.0.4 : tensor<32x8xf16>
// CHECK:         %[[Y:.*]] = flow.dispatch @rlx_gemv_q4_k_128x512::@rlx_gemv_q4_k_128x512[%c128](%[[X]], %[[QT]], %[[ST]], %[[MT]], %[[DT]], %[[NT]]) : (tensor<512xf32>, tensor<32x256xi32>, tensor<32x64xi8>, tensor<32x64xi8>, tensor<32x8xf16>, tensor<32x8xf16>) -> tensor<128xf32>
// CHECK:         tensor.expand_shape %[[Y]] {{\[}}[0, 1]] output_shape [1, 128] : tensor<128xf32> into tensor<1x128xf32>
// CHECK:       util.global private @planes.w.0.0 : tensor<32x256xi32>
// CHECK:       util.global private @planes.w.0.4 : tensor<32x8xf16>
// CHECK:       util.initializer {
// CHECK:         %[[W:.*]] = util.global.load @param.w : tensor<128x288xi8>
// CHECK:         %[[RAW:.*]] = tensor.expand_shape %[[W]] {{.*}} : tensor<128x288xi8> into tensor<128x2x144xi8>
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x2x16xi32>)
// CHECK:           affine.apply affine_map<(d0, d1, d2, d3) -> (d2 * 64 + d3 + 16)>
// CHECK:           tensor.extract %[[RAW]]
// CHECK:         %[[Q:.*]] = tensor.collapse_shape %{{.*}} : tensor<128x2x2x16xi32> into tensor<128x64xi32>
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x4x2xi8>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2x4x2xi8>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2xf16>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x2xf16>)
// CHECK:         tensor.expand_shape %[[Q]] {{\[}}[0, 1], [2, 3]] output_shape [32, 4, 4, 16]
// CHECK:         linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
// CHECK:         %[[QP:.*]] = tensor.collapse_shape %{{.*}} : tensor<32x4x4x16xi32> into tensor<32x256xi32>
// CHECK:         %[[SP:.*]] = tensor.collapse_shape %{{.*}} : tensor<32x4x4x4xi8> into tensor<32x64xi8>
// CHECK:         %[[MP:.*]] = tensor.collapse_shape %{{.*}} : tensor<32x4x4x4xi8> into tensor<32x64xi8>
// CHECK:         util.global.store %[[QP]], @planes.w.0.0 : tensor<32x256xi32>
// CHECK:         util.global.store %[[SP]], @planes.w.0.1 : tensor<32x64xi8>
// CHECK:         util.global.store %[[MP]], @planes.w.0.2 : tensor<32x64xi8>
// CHECK:         util.global.store %{{.*}}, @planes.w.0.4 : tensor<32x8xf16>
// CHECK:         util.return
// OFF-LABEL:   module @q4_k
// OFF-NOT:     stream.executable
// OFF-NOT:     flow.dispatch
// OFF:         return
module @q4_k {
  func.func @main(%x: tensor<1x512xf32>) -> tensor<1x128xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<128x288xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q4_k"} : (tensor<1x512xf32>, tensor<128x288xi8>) -> tensor<1x128xf32> loc("ffn.up")
    return %y : tensor<1x128xf32>
  }
}

// -----

// Q8_0: the i8 plane and the f16 scales as in the file, tile-interleaved (every 32 bytes, every
// scale); one kernel for both GEMVs of the same shape; an f16 activation is converted to f32
// for the kernel and the result back.
// CHECK-LABEL: module @q8_0
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x576
// CHECK:           affine.apply affine_map<()[s0] -> (s0 ceildiv 4)>
// CHECK:           vector.load %{{.*}} : memref<10x2304xi8>, vector<16xi8>
// CHECK:           arith.sitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CHECK:           memref.load %{{.*}} : memref<10x72xf16>
// CHECK-NOT:   stream.executable
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x576::@rlx_gemv_q8_0_40x576[%c40](%{{.*}}) : (tensor<576xf32>, tensor<10x2304xi8>, tensor<10x72xf16>) -> tensor<40xf32>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x576::@rlx_gemv_q8_0_40x576[%c40](%{{.*}}) : (tensor<576xf32>, tensor<10x2304xi8>, tensor<10x72xf16>) -> tensor<40xf32>
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// OFF-LABEL:   module @q8_0
// OFF-NOT:     flow.dispatch
// OFF:         return
module @q8_0 {
  func.func @main(%x: tensor<1x576xf16>) -> (tensor<1x40xf16>, tensor<1x40xf16>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x612xi8>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<40x612xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x576xf16>, tensor<40x612xi8>) -> tensor<1x40xf16>
    %z = "rlx_mir.dequant_matmul"(%x, %v) {scheme = "gguf_q8_0"} : (tensor<1x576xf16>, tensor<40x612xi8>) -> tensor<1x40xf16>
    return %y, %z : tensor<1x40xf16>, tensor<1x40xf16>
  }
}

// -----

// Q5_K (M = 1): Q4_K's kernel with a fifth bit. The nibble lanes as Q4_K's (qs at byte 48),
// a byte a lane of high bits (qh at byte 16: bit j of lane l is weight 128c + 16j + l's),
// S = 32 d sc and M = S + dmin m formed from the scale bytes (32.0 for Q4_K's 16.0); each
// weight is the f32 bits 0x3F800000 | q << 18 (nibble masked at bits 18..21: 3932160, high
// bit at bit 22: 4194304). q8: Q4_K's q8 body on
// the file's qs and qh bytes, the pair's fifth bits shifted down by 2 (p mod 4), masked to bit
// 4 (16) and or'ed into the nibbles (unsigned 0..31).
// CHECK-LABEL: module @q5_k
// CHECK:       stream.executable private @rlx_gemv_q5_k_8x256
// CHECK-DAG:       arith.constant dense<3932160> : vector<16xi32>
// CHECK-DAG:       arith.constant dense<4194304> : vector<16xi32>
// CHECK-DAG:       arith.constant dense<3.200000e+01> : vector<16xf32>
// CHECK:           vector.load %{{.*}} : memref<2x128xi32>, vector<16xi32>
// CHECK:           vector.load %{{.*}} : memref<2x128xi8>, vector<16xi8>
// CHECK:           arith.extui %{{.*}} : vector<16xi8> to vector<16xi32>
// CHECK:           arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_q5_k_8x256::@rlx_gemv_q5_k_8x256[%c8](%{{.*}}) : (tensor<256xf32>, tensor<2x128xi32>, tensor<2x128xi8>, tensor<2x32xi8>, tensor<2x32xi8>, tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<8xf32>
// OFF-LABEL:   module @q5_k
// OFF-NOT:     flow.dispatch
// OFF:         return
// Q8-LABEL:    module @q5_k
// Q8:          stream.executable private @rlx_gemv_q5_k_8x256_q8{{[a-z0-9]+}}
// Q8-DAG:          arith.constant dense<16> : vector<32xi8>
// Q8-DAG:          affine.apply affine_map<()[s0] -> ((s0 mod 4) * 2)>
// Q8:              vector.load %{{.*}} : memref<2x512xi8>, vector<32xi8>
// Q8:              vector.load %{{.*}} : memref<2x128xi8>, vector<32xi8>
// Q8:              arith.shrui %{{.*}} : vector<32xi8>
// Q8:              arith.ori %{{.*}} : vector<32xi8>
// Q8:          flow.dispatch @rlx_gemv_q5_k_8x256_q8{{[a-z0-9]+}}::{{.*}} : (tensor<256xf32>, tensor<2x512xi8>, tensor<2x128xi8>, tensor<2x32xi8>, tensor<2x32xi8>, tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<8xf32>
module @q5_k {
  func.func @main(%x: tensor<1x256xf32>) -> tensor<1x8xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<8x176xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q5_k"} : (tensor<1x256xf32>, tensor<8x176xi8>) -> tensor<1x8xf32>
    return %y : tensor<1x8xf32>
  }
}

// -----

// F16 / BF16 (M = 1): the file's 16-bit values viewed as f16 / i16 (flow.tensor.bitcast, no
// copy) and tile-interleaved every 32 values; in the kernel F16 is widened by extf, BF16's
// bits by a zero extension and a 16-bit shift into the top of an f32. No q8 form: the q8
// mode keeps these exact kernels. A batched step (M = 2) keeps IREE's contraction.
// CHECK-LABEL: module @half
// CHECK:       stream.executable private @rlx_gemv_bf16_40x64
// CHECK-NOT:       memref.prefetch
// CHECK:           vector.load %{{.*}} : memref<10x256xi16>, vector<16xi16>
// CHECK:           arith.extui %{{.*}} : vector<16xi16> to vector<16xi32>
// CHECK:           arith.shli
// CHECK:           arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK:       stream.executable private @rlx_gemv_f16_40x64
// CHECK:           vector.load %{{.*}} : memref<10x256xf16>, vector<16xf16>
// CHECK:           arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK-NOT:   stream.executable
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_f16_40x64::@rlx_gemv_f16_40x64[%c40](%{{.*}}) : (tensor<64xf32>, tensor<10x256xf16>) -> tensor<40xf32>
// CHECK:         flow.dispatch @rlx_gemv_bf16_40x64::@rlx_gemv_bf16_40x64[%c40](%{{.*}}) : (tensor<64xf32>, tensor<10x256xi16>) -> tensor<40xf32>
// CHECK-NOT:     flow.dispatch
// CHECK:         return
// CHECK:       util.initializer {
// CHECK:         flow.tensor.bitcast %{{.*}} : tensor<40x128xi8> -> tensor<40x64xf16>
// OFF-LABEL:   module @half
// OFF-NOT:     flow.dispatch
// OFF:         return
// Q8-LABEL:    module @half
// Q8:          stream.executable private @rlx_gemv_bf16_40x64 {
// Q8:          stream.executable private @rlx_gemv_f16_40x64 {
// Q8:          func.func @main(
// The hints: the plane's flat view, per iteration the four lines read 4 KiB (2048 f16) later,
// each index clamped to the view's last element.
// HINT-LABEL:  module @half
// HINT:        stream.executable private @rlx_gemv_f16_40x64
// HINT:          %[[FLAT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<10x256xf16> into memref<2560xf16>
// HINT:          %[[LAST:.*]] = arith.constant 2559 : index
// HINT:          %[[AT:.*]] = affine.apply affine_map<()[s0, s1] -> (s0 * 256 + s1 * 128 + 2048)>
// HINT:          %[[IN:.*]] = arith.minui %[[AT]], %[[LAST]] : index
// HINT:          memref.prefetch %[[FLAT]][%[[IN]]], read, locality<2>, data : memref<2560xf16>
// HINT-COUNT-3:  memref.prefetch %[[FLAT]]
// HINT:          vector.load %{{.*}} : memref<10x256xf16>, vector<16xf16>
module @half {
  func.func @main(%x: tensor<1x64xf32>, %x2: tensor<2x64xf32>) -> (tensor<1x40xf32>, tensor<1x40xf32>, tensor<2x40xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x128xi8>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<40x128xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_f16"} : (tensor<1x64xf32>, tensor<40x128xi8>) -> tensor<1x40xf32>
    %z = "rlx_mir.dequant_matmul"(%x, %v) {scheme = "gguf_bf16"} : (tensor<1x64xf32>, tensor<40x128xi8>) -> tensor<1x40xf32>
    %b = "rlx_mir.dequant_matmul"(%x2, %w) {scheme = "gguf_f16"} : (tensor<2x64xf32>, tensor<40x128xi8>) -> tensor<2x40xf32>
    return %y, %z, %b : tensor<1x40xf32>, tensor<1x40xf32>, tensor<2x40xf32>
  }
}

// -----

// Q6_K (M = 1) from planes of the file's size: first the 8 signed scale bytes of each chunk
// of 128 weights as f32 times the superblock's f16 d, into a stack buffer (here K = 256:
// two chunks, 4 rows x 8 groups each); then per chunk the low nibbles as 16 i32 lanes and
// the 2-bit highs as 16 i16 lanes, each group's scale a scalar load from the buffer.
// CHECK-LABEL: module @q6_k
// CHECK:       stream.executable private @rlx_gemv_q6_k_8x256
// CHECK:           %[[SBUF:.*]] = memref.alloca() : memref<64xf32>
// CHECK:           vector.load %{{.*}} : memref<2x64xi8>, vector<8xi8>
// CHECK:           arith.sitofp %{{.*}} : vector<8xi8> to vector<8xf32>
// CHECK:           memref.load %{{.*}} : memref<2x4xf16>
// CHECK:           vector.store %{{.*}}, %[[SBUF]][%{{.*}}] : memref<64xf32>, vector<8xf32>
// CHECK:           vector.load %{{.*}} : memref<2x128xi32>, vector<16xi32>
// CHECK:           vector.load %{{.*}} : memref<2x128xi16>, vector<16xi16>
// CHECK:           arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK:           memref.load %[[SBUF]][%{{.*}}] : memref<64xf32>
// CHECK-NOT:       vector.extract
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_q6_k_8x256::@rlx_gemv_q6_k_8x256[%c8](%{{.*}}) : (tensor<256xf32>, tensor<2x128xi32>, tensor<2x128xi16>, tensor<2x64xi8>, tensor<2x4xf16>) -> tensor<8xf32>
// CHECK:       util.initializer {
// CHECK:         %[[RAW:.*]] = tensor.expand_shape %{{.*}} : tensor<8x210xi8> into tensor<8x1x210xi8>
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x1x2x16xi32>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x1x2x16xi16>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x1x16xi8>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x1xf16>)
// The q8 mode's Q6_K body reads the file's bytes: ql [N / 4, 2 K], qh [N / 4, K], the scale
// bytes and d; its dot takes the 6-bit q as the unsigned operand (no q - 32 formed) and adds
// -32 Σ x per 16 weights from the stack sums xh [K / 16] (the dot form is the host CPU's).
// Q8-LABEL:    module @q6_k
// Q8:          stream.executable private @rlx_gemv_q6_k_8x256_q8{{[a-z0-9]+}}
// Q8:            memref.alloca() : memref<16xf32>
// Q8:              vector.load %{{.*}} : memref<2x512xi8>, vector<32xi8>
// Q8:              vector.load %{{.*}} : memref<2x256xi8>, vector<32xi8>
// Q8-NOT:          arith.subi %{{.*}} : vector<32xi8>
// Q8:              vector.fma %{{.*}} : vector<8xf32>
// Q8-NOT:          arith.subi %{{.*}} : vector<32xi8>
// Q8:          flow.dispatch @rlx_gemv_q6_k_8x256_q8{{[a-z0-9]+}}::{{.*}} : (tensor<256xf32>, tensor<2x512xi8>, tensor<2x256xi8>, tensor<2x64xi8>, tensor<2x4xf16>) -> tensor<8xf32>
// OFF-LABEL:   module @q6_k
// OFF-NOT:     flow.dispatch
// OFF:         return
module @q6_k {
  func.func @main(%x: tensor<1x256xf32>) -> tensor<1x8xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<8x210xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q6_k"} : (tensor<1x256xf32>, tensor<8x210xi8>) -> tensor<1x8xf32>
    return %y : tensor<1x8xf32>
  }
}

// -----

// Q5_0 and Q4_0 through the Q8_0 kernel, their quants widened to signed bytes at load
// (q5 - 16, q4 - 8) beside the f16 scale of each 32 weights.
// CHECK-LABEL: module @q5_0_q4_0
// CHECK-DAG:   stream.executable private @rlx_gemv_q5_0_8x64
// CHECK-DAG:   stream.executable private @rlx_gemv_q4_0_8x64
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_q5_0_8x64::@rlx_gemv_q5_0_8x64[%c8](%{{.*}}) : (tensor<64xf32>, tensor<2x256xi8>, tensor<2x8xf16>) -> tensor<8xf32>
// CHECK:         flow.dispatch @rlx_gemv_q4_0_8x64::@rlx_gemv_q4_0_8x64[%c8](%{{.*}}) : (tensor<64xf32>, tensor<2x256xi8>, tensor<2x8xf16>) -> tensor<8xf32>
// CHECK:       util.initializer {
// CHECK:         util.global.load @param.v
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2x2x16xi8>)
// CHECK:           arith.shrui %{{.*}} : i8
// CHECK:           arith.subi %{{.*}} : i8
// CHECK:       util.initializer {
// CHECK:         util.global.load @param.w
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2x2x16xi8>)
// CHECK:           arith.ori %{{.*}} : i32
// CHECK:           arith.subi %{{.*}} : i32
// CHECK:           arith.trunci %{{.*}} : i32 to i8
// OFF-LABEL:   module @q5_0_q4_0
// OFF-NOT:     flow.dispatch
// OFF:         return
module @q5_0_q4_0 {
  func.func @main(%x: tensor<1x64xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<8x44xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q5_0"} : (tensor<1x64xf32>, tensor<8x44xi8>) -> tensor<1x8xf32>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<8x36xi8>
    %z = "rlx_mir.dequant_matmul"(%x, %v) {scheme = "gguf_q4_0"} : (tensor<1x64xf32>, tensor<8x36xi8>) -> tensor<1x8xf32>
    return %y, %z : tensor<1x8xf32>, tensor<1x8xf32>
  }
}

// -----

// Q5_1 and Q4_1 (w = d q + m) through the Q8_0 kernel with a min: their quants widened to
// unsigned bytes at load (q5, q4) beside the f16 d and m of each 32 weights; the kernel
// converts them unsigned and adds m times the block's x0 + x1. M = 1 only: a batched step
// (x [2, K]) keeps the fused form.
// CHECK-LABEL: module @q5_1_q4_1
// CHECK:       stream.executable private @rlx_gemv_q4_1_8x64
// CHECK:       stream.executable private @rlx_gemv_q5_1_8x64
// CHECK-NOT:       arith.sitofp
// CHECK:           arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:           arith.uitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CHECK:           vector.fma
// CHECK:       func.func @main(
// CHECK:         flow.dispatch @rlx_gemv_q5_1_8x64::@rlx_gemv_q5_1_8x64[%c8](%{{.*}}) : (tensor<64xf32>, tensor<2x256xi8>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<8xf32>
// CHECK:         flow.dispatch @rlx_gemv_q4_1_8x64::@rlx_gemv_q4_1_8x64[%c8](%{{.*}}) : (tensor<64xf32>, tensor<2x256xi8>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<8xf32>
// CHECK-NOT:     flow.dispatch
// CHECK:         return
// CHECK:       util.initializer {
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2x2x16xi8>)
// CHECK:           arith.ori %{{.*}} : i32
// CHECK-NOT:       arith.subi
// CHECK:           arith.trunci %{{.*}} : i32 to i8
// Q8:          flow.dispatch @rlx_gemv_q5_1_8x64::
// Q8:          flow.dispatch @rlx_gemv_q4_1_8x64::
// OFF-LABEL:   module @q5_1_q4_1
// OFF-NOT:     flow.dispatch
// OFF:         return
module @q5_1_q4_1 {
  func.func @main(%x: tensor<1x64xf32>, %x2: tensor<2x64xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<2x8xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<8x48xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q5_1"} : (tensor<1x64xf32>, tensor<8x48xi8>) -> tensor<1x8xf32>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<8x40xi8>
    %z = "rlx_mir.dequant_matmul"(%x, %v) {scheme = "gguf_q4_1"} : (tensor<1x64xf32>, tensor<8x40xi8>) -> tensor<1x8xf32>
    %b = "rlx_mir.dequant_matmul"(%x2, %w) {scheme = "gguf_q5_1"} : (tensor<2x64xf32>, tensor<8x48xi8>) -> tensor<2x8xf32>
    return %y, %z, %b : tensor<1x8xf32>, tensor<1x8xf32>, tensor<2x8xf32>
  }
}

// -----

// A batched decode step (x [1, 3, K]: three sequences) and x [2, K]: the kernels for M rows,
// x [M, K] and y [M, N] (r [M, N] in the residual form). A row tile's weights are dequantized
// once per chunk into an f32 stack buffer [4, C], then multiplied with every row of x, two at a
// time, min(2 p + j, M - 1) (M = 3: the last pass takes row 2 twice), the partial sums kept in
// a second buffer [M, 32] between chunks.
// CHECK-LABEL: module @batched
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x64_m3_add
// CHECK:           %[[X:.*]] = stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<3x64xf32>
// CHECK:           %[[R:.*]] = stream.binding.subspan %arg3[%c0] : !stream.binding -> memref<3x40xf32>
// CHECK:           %[[Y:.*]] = stream.binding.subspan %arg4[%c0] : !stream.binding -> memref<3x40xf32>
// CHECK:           %[[WT:.*]] = memref.alloca() alignment = 64 : memref<4x64xf32>
// CHECK:           %[[ACC:.*]] = memref.alloca() alignment = 64 : memref<3x32xf32>
// CHECK:             arith.sitofp %{{.*}} : vector<16xi8> to vector<16xf32>
// CHECK:             arith.mulf
// CHECK:             vector.store %{{.*}}, %[[WT]][%{{.*}}, %{{.*}}] : memref<4x64xf32>, vector<16xf32>
// CHECK:             scf.for %[[P:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK-NEXT:          %[[U0:.*]] = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%[[P]]]
// CHECK-NEXT:          %[[V0:.*]] = arith.minui %[[U0]], %[[LAST:.*]] : index
// CHECK:               %[[U1:.*]] = affine.apply affine_map<()[s0] -> (s0 * 2 + 1)>()[%[[P]]]
// CHECK-NEXT:          %[[V1:.*]] = arith.minui %[[U1]], %[[LAST]] : index
// CHECK:               scf.for
// CHECK:                 vector.load %[[WT]][%{{.*}}, %{{.*}}] : memref<4x64xf32>, vector<8xf32>
// CHECK:                 vector.load %[[X]][%[[V0]], %{{.*}}] : memref<3x64xf32>, vector<8xf32>
// CHECK:                 vector.fma %{{.*}} : vector<8xf32>
// CHECK:                 vector.load %[[X]][%[[V1]], %{{.*}}] : memref<3x64xf32>, vector<8xf32>
// CHECK:               vector.store %{{.*}}, %[[ACC]][%[[V1]], %{{.*}}] : memref<3x32xf32>, vector<8xf32>
// CHECK:           scf.for %[[V:.*]] = %c0 to %c3{{(_[0-9]+)?}} step %c1 {
// CHECK:             vector.reduction <add>, %{{.*}} : vector<8xf32> into f32
// CHECK:             memref.load %[[R]][%[[V]], %{{.*}}] : memref<3x40xf32>
// CHECK:             memref.store %{{.*}}, %[[Y]][%[[V]], %{{.*}}] : memref<3x40xf32>
// CHECK:       stream.executable private @rlx_gemv_q4_k_8x256_m2
// CHECK:           memref.alloca() alignment = 64 : memref<4x256xf32>
// CHECK:           memref.alloca() alignment = 64 : memref<2x32xf32>
// CHECK:       func.func @main(
// CHECK:         %[[XB:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<1x3x64xf32> into tensor<3x64xf32>
// CHECK:         %[[RB:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1], [2]] : tensor<1x3x40xf32> into tensor<3x40xf32>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_m3_add::@rlx_gemv_q8_0_40x64_m3_add[%c40](%[[XB]], %{{.*}}, %{{.*}}, %[[RB]]) : (tensor<3x64xf32>, tensor<10x256xi8>, tensor<10x8xf16>, tensor<3x40xf32>) -> tensor<3x40xf32>
// CHECK:         flow.dispatch @rlx_gemv_q4_k_8x256_m2::@rlx_gemv_q4_k_8x256_m2[%c8](%arg2, %{{.*}}) : (tensor<2x256xf32>, tensor<2x128xi32>, tensor<2x32xi8>, tensor<2x32xi8>, tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x8xf32>
// With 16 lanes: acc [M, 64], up to four rows of x a pass (M = 3: one pass of three).
// WIDE-LABEL:  module @batched
// WIDE:        stream.executable private @rlx_gemv_q8_0_40x64_m3w_add
// WIDE:            memref.alloca() alignment = 64 : memref<4x64xf32>
// WIDE:            memref.alloca() alignment = 64 : memref<3x64xf32>
// WIDE:                affine.apply affine_map<()[s0] -> (s0 * 3)>()
// WIDE:                affine.apply affine_map<()[s0] -> (s0 * 3 + 2)>()
// WIDE:                  vector.fma %{{.*}} : vector<16xf32>
// WIDE:              vector.reduction <add>, %{{.*}} : vector<16xf32> into f32
// WIDE:        stream.executable private @rlx_gemv_q4_k_8x256_m2w
// The q8 mode: Q8_0's three rows run the batched q8 GEMV (gemv_q8_batched): x [3, 64]
// quantized on the stack (xq [3 K] i8, xd [3 K / 32] f32), then one pass of the three rows
// over each row tile, a weight block loaded once for all of them (4 x 3 accumulators), each
// row's result stored with its residual. Q4_K at M = 2 keeps the f32 body here (40 / 8 rows:
// not whole column blocks of the integer GEMM).
// Q8-LABEL:    module @batched
// Q8:          stream.executable private @rlx_gemv_q8_0_40x64_m3{{w?}}_q8{{[a-z0-9]+}}_add
// Q8:              %[[QX:.*]] = stream.binding.subspan %arg0[%c0] : !stream.binding -> memref<3x64xf32>
// Q8:              %[[QR:.*]] = stream.binding.subspan %arg3[%c0] : !stream.binding -> memref<3x40xf32>
// Q8:              %[[QY:.*]] = stream.binding.subspan %arg4[%c0] : !stream.binding -> memref<3x40xf32>
// Q8:              %[[XQ:.*]] = memref.alloca() : memref<192xi8>
// Q8:              memref.alloca() : memref<6xf32>
// Q8:                vector.load %[[QX]][%{{.*}}, %{{.*}}] : memref<3x64xf32>, vector<32xf32>
// Q8:                vector.store %{{.*}}, %[[XQ]][%{{.*}}] : memref<192xi8>, vector<32xi8>
// Q8:                %{{.*}}:12 = scf.for
// Q8-COUNT-3:          vector.load %[[XQ]][%{{.*}}] : memref<192xi8>, vector<32xi8>
// Q8:                memref.load %[[QR]][%{{.*}}, %{{.*}}] : memref<3x40xf32>
// Q8:                memref.store %{{.*}}, %[[QY]][%{{.*}}, %{{.*}}] : memref<3x40xf32>
// Q8:          stream.executable private @rlx_gemv_q4_k_8x256_m2{{w?}} {
// Q8:          flow.dispatch @rlx_gemv_q8_0_40x64_m3{{w?}}_q8{{[a-z0-9]+}}_add::
// OFF-LABEL:   module @batched
// OFF-NOT:     stream.executable
// OFF-NOT:     flow.dispatch
// OFF:         return
module @batched {
  func.func @main(%x: tensor<1x3x64xf32>, %r: tensor<1x3x40xf32>, %x2: tensor<2x256xf32>) -> (tensor<1x3x40xf32>, tensor<2x8xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x3x64xf32>, tensor<40x68xi8>) -> tensor<1x3x40xf32>
    %s = "rlx_mir.binary"(%r, %y) {kind = "add"} : (tensor<1x3x40xf32>, tensor<1x3x40xf32>) -> tensor<1x3x40xf32>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<8x144xi8>
    %z = "rlx_mir.dequant_matmul"(%x2, %v) {scheme = "gguf_q4_k"} : (tensor<2x256xf32>, tensor<8x144xi8>) -> tensor<2x8xf32>
    return %s, %z : tensor<1x3x40xf32>, tensor<2x8xf32>
  }
}

// -----

// A prefill (M dynamic, or above 8) of a Q8_0 weight: the batched body with M an index operand
// (%m_rows), its rows a block at a time (64; with 16 lanes and workgroups of 4 rows, as
// here, acc [64, 64]: one row tile a pass).
// With 8 lanes (x86-64-v3) and workgroups of a multiple of 16 rows (64 x 64), the outer-product
// form on 8 lanes: x packed [T, K, 6], 6 rows of x a pass, each broadcast against the two
// 8-lane halves of a wtT row.
// CHECK-LABEL: module @prefill
// CHECK:       stream.executable private @rlx_gemv_q8_0_64x64_mdyn
// CHECK:           stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64x6xf32>{%{{arg[0-9]+}}}
// CHECK:           memref.alloca() alignment = 64 : memref<64x16xf32>
// CHECK:                 memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x64x6xf32>
// CHECK-NEXT:            vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK-NEXT:            vector.fma %{{.*}} : vector<8xf32>
// CHECK-NEXT:            vector.fma %{{.*}} : vector<8xf32>
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x64_mdyn
// CHECK:         func.func @rlx_gemv_q8_0_40x64_mdyn(
// CHECK:           stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64xf32>{%[[M:arg[0-9]+]]}
// CHECK:           stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x40xf32>{%[[M]]}
// CHECK:           memref.alloca() alignment = 64 : memref<4x64xf32>
// CHECK:           memref.alloca() alignment = 64 : memref<64x32xf32>
// CHECK:             scf.for %{{.*}} = %c0 to %[[M]] step %c64
// CHECK:       flow.dispatch @rlx_gemv_q8_0_40x64_mdyn::@rlx_gemv_q8_0_40x64_mdyn[%c40](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x64xf32>{%{{.*}}}, tensor<10x256xi8>, tensor<10x8xf16>, index) -> tensor<?x40xf32>{%{{.*}}}
// CHECK:       flow.dispatch @rlx_gemv_q8_0_40x64_mdyn::@rlx_gemv_q8_0_40x64_mdyn[%c40](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<9x64xf32>, tensor<10x256xi8>, tensor<10x8xf16>, index) -> tensor<9x40xf32>
// CHECK:       linalg.pack %{{.*}} padding_value(%{{.*}} : f32) inner_dims_pos = [0] inner_tiles = [6] into %{{.*}} : tensor<?x64xf32> -> tensor<?x64x6xf32>
// CHECK:       flow.dispatch @rlx_gemv_q8_0_64x64_mdyn::@rlx_gemv_q8_0_64x64_mdyn[%c64](%{{.*}}) : (tensor<?x64x6xf32>{%{{.*}}}, tensor<16x256xi8>, tensor<16x8xf16>, index, index) -> tensor<?x64xf32>{%{{.*}}}
// With 16 lanes and workgroups of a multiple of 16 rows (64 x 64: 4 of 16), the outer-product
// form (gemm_prefill): x packed [T, K, 16] by a linalg.pack before the dispatch (T after M among
// the index operands), each chunk dequantized into wt [4, C] and transposed into wtT [C, 16],
// 16 rows of x a pass broadcast against one wtT row, the partial sums in y.
// WIDE-LABEL:  module @prefill
// WIDE:        stream.executable private @rlx_gemv_q8_0_64x64_mdynw
// WIDE:          func.func @rlx_gemv_q8_0_64x64_mdynw(
// WIDE:            stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64x16xf32>{%{{arg[0-9]+}}}
// WIDE:            memref.alloca() alignment = 64 : memref<4x64xf32>
// WIDE:            memref.alloca() alignment = 64 : memref<64x16xf32>
// WIDE:                vector.transpose %{{.*}}, [1, 0] : vector<4x16xf32> to vector<16x4xf32>
// WIDE:                  memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x64x16xf32>
// WIDE-NEXT:             vector.broadcast %{{.*}} : f32 to vector<16xf32>
// WIDE-NEXT:             vector.fma %{{.*}} : vector<16xf32>
// WIDE:        stream.executable private @rlx_gemv_q8_0_40x64_mdynw
// WIDE:            memref.alloca() alignment = 64 : memref<4x64xf32>
// WIDE:            memref.alloca() alignment = 64 : memref<64x64xf32>
// WIDE:        func.func @main(
// WIDE:          linalg.pack %{{.*}} inner_tiles = [16] into %{{.*}} : tensor<?x64xf32> -> tensor<?x64x16xf32>
// WIDE:          flow.dispatch @rlx_gemv_q8_0_64x64_mdynw::@rlx_gemv_q8_0_64x64_mdynw[%c64](%{{.*}}) : (tensor<?x64x16xf32>{%{{.*}}}, tensor<16x256xi8>, tensor<16x8xf16>, index, index) -> tensor<?x64xf32>{%{{.*}}}
// On an Intel CPU with AVX-512 (sapphirerapids) the exact prefill's column blocks hold 32 rows
// of W (prefill_columns): x packed [T, K, 8] (zero past M), wtT [C, 32], per k two wtT loads
// and two FMAs for each of the pass's 8 rows of x; a row past M is computed, not stored.
// HINT-LABEL:  module @prefill
// HINT:        stream.executable private @rlx_gemv_q8_0_64x64_mdynwc32
// HINT:            stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64x8xf32>{%{{arg[0-9]+}}}
// HINT:            stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64xf32>{%[[M:arg[0-9]+]]}
// HINT:            memref.alloca() alignment = 64 : memref<4x64xf32>
// HINT:            memref.alloca() alignment = 64 : memref<64x32xf32>
// HINT:                  %[[W0:.*]] = vector.load %{{.*}} : memref<64x32xf32>, vector<16xf32>
// HINT-NEXT:             %[[W1:.*]] = vector.load %{{.*}} : memref<64x32xf32>, vector<16xf32>
// HINT:                  memref.load %{{.*}} : memref<?x64x8xf32>
// HINT-NEXT:             %[[X0:.*]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// HINT-NEXT:             vector.fma %[[W0]], %[[X0]], %{{.*}} : vector<16xf32>
// HINT-NEXT:             vector.fma %[[W1]], %[[X0]], %{{.*}} : vector<16xf32>
// HINT:                vector.store %{{.*}} : memref<?x64xf32>, vector<16xf32>
// HINT-NEXT:           vector.store %{{.*}} : memref<?x64xf32>, vector<16xf32>
// HINT-NEXT:           %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %[[M]] : index
// HINT-NEXT:           scf.if %[[IN]] {
// HINT-NEXT:             vector.store %{{.*}} : memref<?x64xf32>, vector<16xf32>
// HINT:        func.func @main(
// HINT:          linalg.pack %{{.*}} inner_tiles = [8] into %{{.*}} : tensor<?x64xf32> -> tensor<?x64x8xf32>
// HINT-NEXT:     flow.dispatch @rlx_gemv_q8_0_64x64_mdynwc32::
// The F16 prefill in column blocks of 32 (Intel) hints each tile's next chunk into L2 while it
// converts this one: the hint's index clamped to the plane's last element.
// HINT-LABEL:  module @prefill_half
// HINT:        stream.executable private @rlx_gemv_f16_64x256_mdynwc32
// HINT:              %[[LAST:.*]] = arith.constant 16383 : index
// HINT:              %[[AT:.*]] = affine.apply affine_map<()[s0, s1] -> (s0 * 1024 + s1 * 512 + 512)>
// HINT-NEXT:         %[[IN:.*]] = arith.minui %[[AT]], %[[LAST]] : index
// HINT-NEXT:         memref.prefetch %{{.*}}[%[[IN]]], read, locality<2>, data : memref<16384xf16>
// HINT:              arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// Under --activation-quant q8 on an AVX-512 VNNI CPU (znver4), the prefill of whole column
// blocks (64 x 64) is the integer GEMM (gemm_q8): x quantized by a dispatch of its own
// (rlx_q8_rows: q + 128 as bytes in quads [T, K / 4, 16], the block scales [T, K / 32, 16]),
// the decode's planes repacked into 16-column quads (4 x 8 dword transposes) on the stack,
// vpdpbusd on 512-bit vectors, converted and scaled into f32 accumulators. The 40-row
// weight (not whole column blocks) keeps the f32 dot form.
// Q8W-LABEL:   module @prefill
// Q8W:         stream.executable private @rlx_gemv_q8_0_64x64_mdynw_q8vnni_i8mm
// Q8W:             stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x16x16xi32>{%{{arg[0-9]+}}}
// Q8W:             stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x2x16xf32>{%{{arg[0-9]+}}}
// Q8W:             memref.alloca() alignment = 64 : memref<16x16xi32>
// Q8W:                 vector.transpose %{{.*}}, [1, 0] : vector<4x8xi32> to vector<8x4xi32>
// Q8W:                 llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
// Q8W:                 arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// Q8W:                 vector.fma %{{.*}} : vector<16xf32>
// Q8W:         stream.executable private @rlx_q8_rows_64_p16_vnni
// Q8W:             stream.binding.subspan %{{.*}}[%c0] : !stream.binding -> memref<?x64xf32>{%{{arg[0-9]+}}}
// Q8W:               llvm.intr.roundeven
// Q8W:               arith.xori %{{.*}} : vector<32xi8>
// Q8W:         stream.executable private @rlx_gemv_q8_0_40x64_mdynw {
// Q8W:         func.func @main(
// Q8W:           flow.dispatch @rlx_gemv_q8_0_40x64_mdynw::
// Q8W:           %[[Q:.*]]:2 = flow.dispatch @rlx_q8_rows_64_p16_vnni::@rlx_q8_rows_64_p16_vnni[%{{.*}}](%{{.*}}) : (tensor<?x64xf32>{%{{.*}}}, index, index) -> (tensor<?x16x16xi32>{%{{.*}}}, tensor<?x2x16xf32>{%{{.*}}})
// Q8W:           flow.dispatch @rlx_gemv_q8_0_64x64_mdynw_q8vnni_i8mm::@rlx_gemv_q8_0_64x64_mdynw_q8vnni_i8mm[%c64](%[[Q]]#0, %[[Q]]#1,
// OFF-LABEL:   module @prefill
// OFF-NOT:     stream.executable
// OFF:         return
module @prefill {
  func.func @main(%x: tensor<1x?x64xf32>, %x9: tensor<9x64xf32>) -> (tensor<1x?x40xf32>, tensor<9x40xf32>, tensor<1x?x64xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x?x64xf32>, tensor<40x68xi8>) -> tensor<1x?x40xf32>
    %z = "rlx_mir.dequant_matmul"(%x9, %w) {scheme = "gguf_q8_0"} : (tensor<9x64xf32>, tensor<40x68xi8>) -> tensor<9x40xf32>
    %u = "rlx_mir.param"() {name = "u"} : () -> tensor<64x68xi8>
    %o = "rlx_mir.dequant_matmul"(%x, %u) {scheme = "gguf_q8_0"} : (tensor<1x?x64xf32>, tensor<64x68xi8>) -> tensor<1x?x64xf32>
    return %y, %z, %o : tensor<1x?x40xf32>, tensor<9x40xf32>, tensor<1x?x64xf32>
  }
}

// -----

// Not a decode GEMV (M = 9 > 8) of a scheme with no prefill form (Q5_K), a row count that is
// not a multiple of 4, another scheme: the fused form.
// CHECK-LABEL: module @fused
// CHECK-NOT:   stream.executable
// CHECK-NOT:   flow.dispatch
// CHECK:       return
module @fused {
  func.func @main(%x: tensor<9x256xf32>, %x1: tensor<1x64xf32>, %x2: tensor<1x256xf32>) -> (tensor<9x40xf32>, tensor<1x6xf32>, tensor<1x40xf32>) {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x176xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q5_k"} : (tensor<9x256xf32>, tensor<40x176xi8>) -> tensor<9x40xf32>
    %v = "rlx_mir.param"() {name = "v"} : () -> tensor<6x144xi8>
    %z = "rlx_mir.dequant_matmul"(%x2, %v) {scheme = "gguf_q4_k"} : (tensor<1x256xf32>, tensor<6x144xi8>) -> tensor<1x6xf32>
    %u = "rlx_mir.param"() {name = "u"} : () -> tensor<40x110xi8>
    %t = "rlx_mir.dequant_matmul"(%x2, %u) {scheme = "gguf_q3_k"} : (tensor<1x256xf32>, tensor<40x110xi8>) -> tensor<1x40xf32>
    return %y, %z, %t : tensor<9x40xf32>, tensor<1x6xf32>, tensor<1x40xf32>
  }
}

// -----

// A GEMV whose only use is a residual add: its kernel's residual form reads r and adds it
// before the store, and the add is gone (IREE cannot fuse it into a hand-written dispatch).
// CHECK-LABEL: module @residual
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x64_add
// CHECK:           %[[RES:.*]] = stream.binding.subspan %{{.*}} -> memref<40xf32>
// CHECK:           memref.load %[[RES]]
// CHECK:           arith.addf
// CHECK:       func.func @main(
// CHECK:         %[[R:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1]] : tensor<1x40xf32> into tensor<40xf32>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_add::@rlx_gemv_q8_0_40x64_add[%c40](%{{.*}}, %{{.*}}, %{{.*}}, %[[R]]) : (tensor<64xf32>, tensor<10x256xi8>, tensor<10x8xf16>, tensor<40xf32>) -> tensor<40xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return
// OFF-LABEL:   module @residual
// OFF-NOT:     flow.dispatch
// OFF:         linalg.generic
// OFF:           arith.addf
module @residual {
  func.func @main(%x: tensor<1x64xf32>, %r: tensor<1x40xf32>) -> tensor<1x40xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
    %s = "rlx_mir.binary"(%r, %y) {kind = "add"} : (tensor<1x40xf32>, tensor<1x40xf32>) -> tensor<1x40xf32>
    return %s : tensor<1x40xf32>
  }
}

// -----

// A GEMV of an RMSNorm's result: the kernel takes the norm's input, gamma and beta and
// normalizes x into a stack buffer first (eps in the symbol, as f32 bits); the norm is gone.
// CHECK-LABEL: module @norm
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x64_rms3727c5ac
// CHECK:           vector.fma
// CHECK:           math.rsqrt
// CHECK:           memref.alloca() : memref<64xf32>
// CHECK:           vector.store
// CHECK:       func.func @main(
// CHECK-NOT:     linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_rms3727c5ac::@rlx_gemv_q8_0_40x64_rms3727c5ac[%c40](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<10x256xi8>, tensor<10x8xf16>) -> tensor<40xf32>
// OFF-LABEL:   module @norm
// OFF-NOT:     flow.dispatch
// OFF:         math.rsqrt
module @norm {
  func.func @main(%x: tensor<1x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x40xf32> {
    %n = "rlx_mir.rms_norm"(%x, %g, %b) {axis = -1 : i64, eps = 1.0e-05 : f32} : (tensor<1x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%n, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
    return %y : tensor<1x40xf32>
  }
}

// -----

// A GEMV of silu(gu[:K]) * gu[K:] (a SwiGLU FFN's down projection after a packed gate / up
// projection): the kernel reads gu [2K] and computes x into a stack buffer first; the
// activation, the multiply and the slices are gone.
// CHECK-LABEL: module @glu
// CHECK:       stream.executable private @rlx_gemv_q8_0_40x64_glu
// CHECK:           memref.alloca() : memref<64xf32>
// CHECK:           math.exp
// CHECK:           arith.divf
// CHECK:           vector.store
// CHECK:       func.func @main(
// CHECK-NOT:     math.exp
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_glu::@rlx_gemv_q8_0_40x64_glu[%c40](%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<128xf32>, tensor<10x256xi8>, tensor<10x8xf16>) -> tensor<40xf32>
// CHECK-NOT:     math.exp
// OFF-LABEL:   module @glu
// OFF-NOT:     flow.dispatch
// OFF:         math.exp
module @glu {
  func.func @main(%gu: tensor<1x1x128xf32>) -> tensor<1x1x40xf32> {
    %g = "rlx_mir.slice"(%gu) {sizes = array<i64: -1, -1, 64>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<1x1x128xf32>) -> tensor<1x1x64xf32>
    %u = "rlx_mir.slice"(%gu) {sizes = array<i64: -1, -1, 64>, starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : (tensor<1x1x128xf32>) -> tensor<1x1x64xf32>
    %s = "rlx_mir.activation"(%g) {kind = "silu"} : (tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %x = "rlx_mir.binary"(%s, %u) {kind = "mul"} : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x1x64xf32>, tensor<40x68xi8>) -> tensor<1x1x40xf32>
    return %y : tensor<1x1x40xf32>
  }
}

// -----

// One weight read by two functions (a model's decode and prefill): one set of plane globals,
// filled by one initializer and loaded by both (IREE would hoist a copy per function).
// CHECK-LABEL: module @shared
// CHECK:       func.func @decode(
// CHECK:         %[[Q:.*]] = util.global.load @planes.w.0.0 : tensor<10x256xi8>
// CHECK:         %[[D:.*]] = util.global.load @planes.w.0.1 : tensor<10x8xf16>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64::@rlx_gemv_q8_0_40x64[%c40](%{{.*}}, %[[Q]], %[[D]])
// CHECK:       func.func @prefill(
// CHECK:         %[[Q2:.*]] = util.global.load @planes.w.0.0 : tensor<10x256xi8>
// CHECK:         %[[D2:.*]] = util.global.load @planes.w.0.1 : tensor<10x8xf16>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_mdyn::@rlx_gemv_q8_0_40x64_mdyn[%c40](%{{.*}}, %[[Q2]], %[[D2]], %{{.*}})
// CHECK:       util.global private @planes.w.0.0 : tensor<10x256xi8>
// CHECK:       util.global private @planes.w.0.1 : tensor<10x8xf16>
// CHECK:       util.initializer {
// CHECK:         util.global.load @param.w : tensor<40x68xi8>
// CHECK-NOT:   util.initializer
// The q8 mode's Q8_0 decode kernel reads the same planes as the exact prefill kernel: still
// one set.
// Q8-LABEL:    module @shared
// Q8:          func.func @decode(
// Q8:            util.global.load @planes.w.0.0 : tensor<10x256xi8>
// Q8:            flow.dispatch @rlx_gemv_q8_0_40x64_q8{{[a-z0-9]+}}::
// Q8:          func.func @prefill(
// Q8:            util.global.load @planes.w.0.0 : tensor<10x256xi8>
// Q8:            flow.dispatch @rlx_gemv_q8_0_40x64_mdyn{{w?}}::
// Q8:          util.initializer {
// Q8-NOT:      util.initializer
// OFF-LABEL:   module @shared
// OFF-NOT:     util.initializer
// OFF:         return
module @shared {
  func.func @decode(%x: tensor<1x64xf32>) -> tensor<1x40xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
    return %y : tensor<1x40xf32>
  }
  func.func @prefill(%x: tensor<?x64xf32>) -> tensor<?x40xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<40x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<?x64xf32>, tensor<40x68xi8>) -> tensor<?x40xf32>
    return %y : tensor<?x40xf32>
  }
}

// -----

// A packed weight (q / k / v of a model, which the file holds apart): the rows of several
// parameters concatenated. The kernels read planes of the concatenation, which the
// initializer makes from the parameters themselves (no concatenated parameter, no copy of
// it held); the function's own concatenation is left for IREE to drop (nothing reads it).
// CHECK-LABEL: module @packed
// Q8-LABEL:    module @packed
// CHECK:       func.func @decode(
// CHECK:         %[[Q:.*]] = util.global.load @planes.a.cat2.0.0 : tensor<14x256xi8>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_56x64::@rlx_gemv_q8_0_56x64[%c56](%{{.*}}, %[[Q]], %{{.*}})
// CHECK:       util.initializer {
// CHECK:         %[[A:.*]] = util.global.load @param.a : tensor<40x68xi8>
// CHECK:         %[[B:.*]] = util.global.load @param.b : tensor<16x68xi8>
// CHECK:         tensor.concat dim(0) %[[A]], %[[B]] : (tensor<40x68xi8>, tensor<16x68xi8>) -> tensor<56x68xi8>
// CHECK:         util.global.store %{{.*}}, @planes.a.cat2.0.0 : tensor<14x256xi8>
module @packed {
  func.func @decode(%x: tensor<1x64xf32>) -> tensor<1x56xf32> {
    %a = "rlx_mir.param"() {name = "a"} : () -> tensor<40x68xi8>
    %b = "rlx_mir.param"() {name = "b"} : () -> tensor<16x68xi8>
    %w = "rlx_mir.concat"(%a, %b) {axis = 0 : i64} : (tensor<40x68xi8>, tensor<16x68xi8>) -> tensor<56x68xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<56x68xi8>) -> tensor<1x56xf32>
    return %y : tensor<1x56xf32>
  }
}

// -----

module @prefill_half {
  func.func @main(%x: tensor<1x?x256xf32>) -> tensor<1x?x64xf32> {
    %w = "rlx_mir.param"() {name = "w"} : () -> tensor<64x512xi8>
    %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_f16"} : (tensor<1x?x256xf32>, tensor<64x512xi8>) -> tensor<1x?x64xf32>
    return %y : tensor<1x?x64xf32>
  }
}
