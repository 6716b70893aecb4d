// MLIR itself (IRDL via iree-opt) rejects what the generated dialect files can express.
// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file --verify-diagnostics %s

func.func @operand_count(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{op expects exactly 4 operands, but got 1}}
  %y = "rlx_hir.swiglu"(%x) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @enum_value(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'"tanhh"' does not satisfy the constraint}}
  %y = "rlx_hir.linear"(%x, %w) {activation = "tanhh", has_bias = false} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @missing_attribute(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{attribute "eps" is expected but not provided}}
  %y = "rlx_hir.rms_norm"(%x, %g, %g) : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @attribute_kind(%x: tensor<4x16xf32>, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.float' but got 'builtin.string'}}
  %y = "rlx_hir.rms_norm"(%x, %g, %g) {eps = "tiny"} : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @not_a_tensor(%x: f32, %g: tensor<16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %y = "rlx_hir.rms_norm"(%x, %g, %g) {eps = 1.0e-05 : f32} : (f32, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unregistered operation 'rlx_hir.frobnicate' found in dialect ('rlx_hir') that does not allow unknown operations}}
  %y = "rlx_hir.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @result_count(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{op expects exactly 2 results, but got 1}}
  %y = "rlx_hir.shared_linear_pair"(%x, %w, %w) : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @mir_dialect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'"swish"' does not satisfy the constraint}}
  %y = "rlx_mir.activation"(%x) {kind = "swish"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
