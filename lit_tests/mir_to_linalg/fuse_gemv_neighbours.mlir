// fuse-gemv-neighbours (mir_to_linalg/quant/fuse.py; mir-to-linalg runs it before its rules):
// an llvm-cpu decode GEMV that runs a hand-written kernel is lowered together with the
// residual add that is its only use, the RMSNorm or the SwiGLU that computes its x, and those
// ops go; every other op is left as it is. Only what the pass changes is checked here (the
// kernels' bodies and the planes: gemv_kernels.mlir).
// RUN: %rlx-opt --pass=fuse-gemv-neighbours --cpu=x86-64-v3 %s | FileCheck %s
// RUN: %rlx-opt --pass=fuse-gemv-neighbours --no-gemv-kernels %s | FileCheck %s --check-prefix=OFF
// RUN: %rlx-opt --pass=fuse-gemv-neighbours --target=vulkan %s | FileCheck %s --check-prefix=OFF

// CHECK-DAG:   stream.executable private @rlx_gemv_q8_0_40x64_add
// CHECK-DAG:   stream.executable private @rlx_gemv_q8_0_40x64_rms3727c5ac
// CHECK-DAG:   stream.executable private @rlx_gemv_q8_0_40x64_glu
// CHECK-DAG:   stream.executable private @rlx_gemv_q8_0_40x64_m2_add

// The residual add y + r: the kernel reads r; the add and the dequant_matmul are gone.
// CHECK-LABEL: func.func @residual(
// CHECK-NOT:     rlx_mir.dequant_matmul
// CHECK:         %[[R:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1]] : tensor<1x40xf32> into tensor<40xf32>
// CHECK:         %[[Y:.*]] = flow.dispatch @rlx_gemv_q8_0_40x64_add::@rlx_gemv_q8_0_40x64_add[%c40](%{{.*}}, %{{.*}}, %{{.*}}, %[[R]]) : (tensor<64xf32>, tensor<10x256xi8>, tensor<10x8xf16>, tensor<40xf32>) -> tensor<40xf32>
// CHECK:         %[[OUT:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1]] output_shape [1, 40]
// CHECK-NOT:     rlx_mir.binary
// CHECK:         return %[[OUT]]
func.func @residual(%x: tensor<1x64xf32>, %r: tensor<1x40xf32>) -> tensor<1x40xf32> {
  %w = "rlx_mir.param"() {name = "w1"} : () -> tensor<40x68xi8>
  %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
  %s = "rlx_mir.binary"(%y, %r) {kind = "add"} : (tensor<1x40xf32>, tensor<1x40xf32>) -> tensor<1x40xf32>
  return %s : tensor<1x40xf32>
}

// The RMSNorm of x (eps 1e-5: 0x3727c5ac): the kernel reads the norm's input, gamma and beta.
// CHECK-LABEL: func.func @norm(
// CHECK-NOT:     rlx_mir.rms_norm
// CHECK:         %[[XIN:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1]] : tensor<1x64xf32> into tensor<64xf32>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_rms3727c5ac::@rlx_gemv_q8_0_40x64_rms3727c5ac[%c40](%[[XIN]], %arg1, %arg2, %{{.*}}, %{{.*}}) : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<10x256xi8>, tensor<10x8xf16>) -> tensor<40xf32>
// CHECK-NOT:     rlx_mir.
// CHECK:         return
func.func @norm(%x: tensor<1x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x40xf32> {
  %n = "rlx_mir.rms_norm"(%x, %g, %b) {axis = -1 : i64, eps = 1.0e-05 : f32} : (tensor<1x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
  %w = "rlx_mir.param"() {name = "w2"} : () -> tensor<40x68xi8>
  %y = "rlx_mir.dequant_matmul"(%n, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
  return %y : tensor<1x40xf32>
}

// SwiGLU silu(gu[..., :K]) * gu[..., K:]: the kernel reads gu; the slices, the activation and
// the multiply are gone.
// CHECK-LABEL: func.func @glu(
// CHECK-NOT:     rlx_mir.slice
// CHECK:         %[[GU2:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]] : tensor<1x1x128xf32> into tensor<1x128xf32>
// CHECK:         %[[GU:.*]] = tensor.collapse_shape %[[GU2]] {{\[}}[0, 1]] : tensor<1x128xf32> into tensor<128xf32>
// CHECK:         flow.dispatch @rlx_gemv_q8_0_40x64_glu::@rlx_gemv_q8_0_40x64_glu[%c40](%[[GU]], %{{.*}}, %{{.*}}) : (tensor<128xf32>, tensor<10x256xi8>, tensor<10x8xf16>) -> tensor<40xf32>
// CHECK-NOT:     rlx_mir.
// CHECK:         return
func.func @glu(%gu: tensor<1x1x128xf32>) -> tensor<1x1x40xf32> {
  %g = "rlx_mir.slice"(%gu) {sizes = array<i64: -1, -1, 64>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<1x1x128xf32>) -> tensor<1x1x64xf32>
  %u = "rlx_mir.slice"(%gu) {sizes = array<i64: -1, -1, 64>, starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : (tensor<1x1x128xf32>) -> tensor<1x1x64xf32>
  %s = "rlx_mir.activation"(%g) {kind = "silu"} : (tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %x = "rlx_mir.binary"(%s, %u) {kind = "mul"} : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %w = "rlx_mir.param"() {name = "w3"} : () -> tensor<40x68xi8>
  %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x1x64xf32>, tensor<40x68xi8>) -> tensor<1x1x40xf32>
  return %y : tensor<1x1x40xf32>
}

// A batched decode step's GEMV (x [1, 2, K]: two sequences): the residual add goes into its
// kernel (r [M, N]); the RMSNorm stays an op of its own (the prologues take one row of x).
// CHECK-LABEL: func.func @batched(
// CHECK:         %[[N:.*]] = "rlx_mir.rms_norm"(%arg0, %arg1, %arg2)
// CHECK:         %[[X:.*]] = tensor.collapse_shape %[[N]] {{\[}}[0, 1], [2]] : tensor<1x2x64xf32> into tensor<2x64xf32>
// CHECK:         %[[R:.*]] = tensor.collapse_shape %arg3 {{\[}}[0, 1], [2]] : tensor<1x2x40xf32> into tensor<2x40xf32>
// CHECK:         %[[Y:.*]] = flow.dispatch @rlx_gemv_q8_0_40x64_m2_add::@rlx_gemv_q8_0_40x64_m2_add[%c40](%[[X]], %{{.*}}, %{{.*}}, %[[R]]) : (tensor<2x64xf32>, tensor<10x256xi8>, tensor<10x8xf16>, tensor<2x40xf32>) -> tensor<2x40xf32>
// CHECK:         %[[OUT:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [1, 2, 40]
// CHECK-NOT:     rlx_mir.binary
// CHECK:         return %[[OUT]]
func.func @batched(%x: tensor<1x2x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %r: tensor<1x2x40xf32>) -> tensor<1x2x40xf32> {
  %n = "rlx_mir.rms_norm"(%x, %g, %b) {axis = -1 : i64, eps = 1.0e-05 : f32} : (tensor<1x2x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x2x64xf32>
  %w = "rlx_mir.param"() {name = "w5"} : () -> tensor<40x68xi8>
  %y = "rlx_mir.dequant_matmul"(%n, %w) {scheme = "gguf_q8_0"} : (tensor<1x2x64xf32>, tensor<40x68xi8>) -> tensor<1x2x40xf32>
  %s = "rlx_mir.binary"(%y, %r) {kind = "add"} : (tensor<1x2x40xf32>, tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  return %s : tensor<1x2x40xf32>
}

// Not fired: a GEMV result with a second use (the add stays), a residual defined after the
// GEMV, a GEMV with no neighbour (left to the dequant_matmul rule).
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT:     flow.dispatch
// CHECK:         %[[A:.*]] = "rlx_mir.dequant_matmul"(%arg0, %{{.*}}) {scheme = "gguf_q8_0"}
// CHECK:         "rlx_mir.binary"(%[[A]], %arg1) {kind = "add"}
// CHECK:         %[[B:.*]] = "rlx_mir.dequant_matmul"(%arg0, %{{.*}}) {scheme = "gguf_q8_0"}
// CHECK:         %[[M:.*]] = "rlx_mir.binary"(%arg1, %arg1) {kind = "mul"}
// CHECK:         "rlx_mir.binary"(%[[B]], %[[M]]) {kind = "add"}
// CHECK:         "rlx_mir.dequant_matmul"(%arg0, %{{.*}}) {scheme = "gguf_q8_0"}
// CHECK-NOT:     flow.dispatch
// CHECK:         return
// OFF-NOT:     stream.executable
// OFF-LABEL:   func.func @residual(
// OFF:           "rlx_mir.dequant_matmul"
// OFF:           "rlx_mir.binary"
// OFF-LABEL:   func.func @norm(
// OFF:           "rlx_mir.rms_norm"
// OFF:           "rlx_mir.dequant_matmul"
// OFF-LABEL:   func.func @glu(
// OFF:           "rlx_mir.binary"
// OFF:           "rlx_mir.dequant_matmul"
// OFF-LABEL:   func.func @batched(
// OFF:           "rlx_mir.dequant_matmul"
// OFF:           "rlx_mir.binary"
// OFF-NOT:     flow.dispatch
func.func @untouched(%x: tensor<1x64xf32>, %r: tensor<1x40xf32>) -> (tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>) {
  %w = "rlx_mir.param"() {name = "w4"} : () -> tensor<40x68xi8>
  %a = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
  %s = "rlx_mir.binary"(%a, %r) {kind = "add"} : (tensor<1x40xf32>, tensor<1x40xf32>) -> tensor<1x40xf32>
  %b = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
  %m = "rlx_mir.binary"(%r, %r) {kind = "mul"} : (tensor<1x40xf32>, tensor<1x40xf32>) -> tensor<1x40xf32>
  %t = "rlx_mir.binary"(%b, %m) {kind = "add"} : (tensor<1x40xf32>, tensor<1x40xf32>) -> tensor<1x40xf32>
  %c = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"} : (tensor<1x64xf32>, tensor<40x68xi8>) -> tensor<1x40xf32>
  return %a, %s, %t, %c : tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>
}
