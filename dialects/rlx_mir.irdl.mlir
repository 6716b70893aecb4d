// Generated from the rlx op schemas by tools/gen_irdl.py; do not edit.
// Use: iree-opt --irdl-file=THIS_FILE model.hir
irdl.dialect @rlx_mir {
  // Unary float function (``Op::Activation``), elementwise.
  irdl.operation @activation {
    %kind_0 = irdl.is "gelu"
    %kind_1 = irdl.is "gelu_approx"
    %kind_2 = irdl.is "silu"
    %kind_3 = irdl.is "relu"
    %kind_4 = irdl.is "sigmoid"
    %kind_5 = irdl.is "tanh"
    %kind_6 = irdl.is "exp"
    %kind_7 = irdl.is "log"
    %kind_8 = irdl.is "sqrt"
    %kind_9 = irdl.is "rsqrt"
    %kind_10 = irdl.is "neg"
    %kind_11 = irdl.is "abs"
    %kind_12 = irdl.is "sin"
    %kind_13 = irdl.is "cos"
    %kind_14 = irdl.is "tan"
    %kind_15 = irdl.is "atan"
    %kind_16 = irdl.is "round"
    %kind_17 = irdl.is "erf"
    %kind_18 = irdl.is "softplus"
    %kind_19 = irdl.is "floor"
    %kind_20 = irdl.is "ceil"
    %kind_21 = irdl.is "asin"
    %kind_22 = irdl.is "acos"
    %kind_23 = irdl.is "sinh"
    %kind_24 = irdl.is "cosh"
    %kind_25 = irdl.is "asinh"
    %kind_26 = irdl.is "acosh"
    %kind_27 = irdl.is "atanh"
    %kind = irdl.any_of(%kind_0, %kind_1, %kind_2, %kind_3, %kind_4, %kind_5, %kind_6, %kind_7, %kind_8, %kind_9, %kind_10, %kind_11, %kind_12, %kind_13, %kind_14, %kind_15, %kind_16, %kind_17, %kind_18, %kind_19, %kind_20, %kind_21, %kind_22, %kind_23, %kind_24, %kind_25, %kind_26, %kind_27)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"kind" = %kind}
  }
  // Index of the largest element along ``axis``, as i32 (``Op::ArgMax``): the first one on ties, and NaN counts as the largest (numpy's and PyTorch's ``argmax``).
  irdl.operation @argmax {
    %axis = irdl.base "#builtin.integer"
    %keep_dim_t = irdl.is true
    %keep_dim_f = irdl.is false
    %keep_dim = irdl.any_of(%keep_dim_t, %keep_dim_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "keep_dim" = %keep_dim}
  }
  // Scaled dot-product attention (``Op::Attention``); layouts, GQA and masks as ``rlx_hir.attention``, plus an optional ``score_scale`` and ``attn_logit_softcap``.
  irdl.operation @attention {
    %num_heads = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    %mask_kind_0 = irdl.is "none"
    %mask_kind_1 = irdl.is "causal"
    %mask_kind_2 = irdl.is "sliding_window"
    %mask_kind_3 = irdl.is "custom"
    %mask_kind_4 = irdl.is "bias"
    %mask_kind_5 = irdl.is "causal_lengths"
    %mask_kind = irdl.any_of(%mask_kind_0, %mask_kind_1, %mask_kind_2, %mask_kind_3, %mask_kind_4, %mask_kind_5)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(q: %in0, k: %in1, v: %in2, mask: optional %in3)
    irdl.results(y: %out0)
    irdl.attributes {"num_heads" = %num_heads, "head_dim" = %head_dim, "mask_kind" = %mask_kind}
  }
  // ``x`` unchanged; where the target data-tiles matmuls (llvm-cpu) it is a point IREE does not fuse across (``iree_tensor_ext.compute_barrier.start``). rlx's, not RLX's: for a producer IREE would otherwise fuse into a matmul's operand encoding and then fail to compile (a per-head RMSNorm reshaped into a projection's input, Qwen3.5's gated norm before ``out_proj``). With ``always``, on every target: ONNX ``DynamicQuantizeLinear``'s whole-tensor min / max, which IREE 3.13 fails to compile on llvm-cpu and Vulkan alike when fused with a producer over dynamic dims.
  irdl.operation @barrier {
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
  }
  // Binary op with numpy broadcasting (``Op::Binary``): add, sub, mul, div, max, min, pow, rem; and, on integers read as unsigned, udiv, urem, umax, umin (a divisor of 0 reads as 1); on integers' bits, and, or, xor (i1 too), shl, shr, ushr (a count outside ``[0, bits)`` shifts every bit out).
  irdl.operation @binary {
    %kind_0 = irdl.is "add"
    %kind_1 = irdl.is "sub"
    %kind_2 = irdl.is "mul"
    %kind_3 = irdl.is "div"
    %kind_4 = irdl.is "max"
    %kind_5 = irdl.is "min"
    %kind_6 = irdl.is "pow"
    %kind_7 = irdl.is "rem"
    %kind_8 = irdl.is "udiv"
    %kind_9 = irdl.is "urem"
    %kind_10 = irdl.is "umax"
    %kind_11 = irdl.is "umin"
    %kind_12 = irdl.is "and"
    %kind_13 = irdl.is "or"
    %kind_14 = irdl.is "xor"
    %kind_15 = irdl.is "shl"
    %kind_16 = irdl.is "shr"
    %kind_17 = irdl.is "ushr"
    %kind = irdl.any_of(%kind_0, %kind_1, %kind_2, %kind_3, %kind_4, %kind_5, %kind_6, %kind_7, %kind_8, %kind_9, %kind_10, %kind_11, %kind_12, %kind_13, %kind_14, %kind_15, %kind_16, %kind_17)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %in0, rhs: %in1)
    irdl.results(y: %out0)
    irdl.attributes {"kind" = %kind}
  }
  // Element type conversion (``Op::Cast``): float <-> float rounds to nearest even, float -> int truncates toward zero, int -> float rounds, ``i1`` is 0 / 1. Integers are signed unless ``unsigned`` names their side: an unsigned source widens with zeros and converts to float as unsigned; a float converts to an unsigned result as unsigned (a value outside the result's range is undefined, as in C and ONNX). To ``f8E8M0FNU`` (a power of two) the sign is dropped, ``round`` picks the power, a finite value saturates at 2^127, inf and NaN become NaN.
  irdl.operation @cast {
    %to_0 = irdl.is "f32"
    %to_1 = irdl.is "f16"
    %to_2 = irdl.is "bf16"
    %to_3 = irdl.is "f64"
    %to_4 = irdl.is "i1"
    %to_5 = irdl.is "i8"
    %to_6 = irdl.is "i16"
    %to_7 = irdl.is "i32"
    %to_8 = irdl.is "i64"
    %to_9 = irdl.is "f8E4M3FN"
    %to_10 = irdl.is "f8E4M3FNUZ"
    %to_11 = irdl.is "f8E5M2"
    %to_12 = irdl.is "f8E5M2FNUZ"
    %to_13 = irdl.is "f8E8M0FNU"
    %to = irdl.any_of(%to_0, %to_1, %to_2, %to_3, %to_4, %to_5, %to_6, %to_7, %to_8, %to_9, %to_10, %to_11, %to_12, %to_13)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"to" = %to}
  }
  // A token drawn with the probabilities ``softmax(x)`` of each row, as i32: the index of the largest ``x + g`` where ``g`` is Gumbel noise ``-log(-log(u))`` and ``u`` a uniform number made from (``seed``, ``counter``, index) by a counter-based hash (see ``rlx.reference.ops.uniform_hash``): the same three give the same draw on every run. ``-inf`` logits are never drawn. Give each draw its own ``counter`` (e.g. the position).
  irdl.operation @categorical {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, seed: %in1, counter: %in2)
    irdl.results(y: %out0)
  }
  // Comparison with numpy broadcasting (``Op::Compare``), giving an ``i1`` tensor.
  irdl.operation @compare {
    %kind_0 = irdl.is "eq"
    %kind_1 = irdl.is "ne"
    %kind_2 = irdl.is "lt"
    %kind_3 = irdl.is "le"
    %kind_4 = irdl.is "gt"
    %kind_5 = irdl.is "ge"
    %kind_6 = irdl.is "ult"
    %kind_7 = irdl.is "ule"
    %kind_8 = irdl.is "ugt"
    %kind_9 = irdl.is "uge"
    %kind = irdl.any_of(%kind_0, %kind_1, %kind_2, %kind_3, %kind_4, %kind_5, %kind_6, %kind_7, %kind_8, %kind_9)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %in0, rhs: %in1)
    irdl.results(y: %out0)
    irdl.attributes {"kind" = %kind}
  }
  // Concatenate along ``axis`` (``Op::Concat``); other dims must agree.
  irdl.operation @concat {
    %axis = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(inputs: variadic %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis}
  }
  // Inline data (``Op::Constant``): the result is the ``value`` attribute.
  irdl.operation @constant {
    %value = irdl.any
    %out0 = irdl.base "!builtin.tensor"
    irdl.results(y: %out0)
    irdl.attributes {"value" = %value}
  }
  // 2-D grouped convolution, NCHW, PyTorch cross-correlation, no bias (``Op::Conv``); float or i32 (rlx's: sums wrap as i32's do).
  irdl.operation @conv {
    %kernel_size = irdl.base "#builtin.dense_array"
    %stride = irdl.base "#builtin.dense_array"
    %padding = irdl.base "#builtin.dense_array"
    %dilation = irdl.base "#builtin.dense_array"
    %groups = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, w: %in1)
    irdl.results(y: %out0)
    irdl.attributes {"kernel_size" = %kernel_size, "stride" = %stride, "padding" = %padding, "dilation" = %dilation, "groups" = %groups}
  }
  // Running sum along ``axis`` (``Op::Cumsum``); ``exclusive`` leaves out the element itself.
  irdl.operation @cumsum {
    %axis = irdl.base "#builtin.integer"
    %exclusive_t = irdl.is true
    %exclusive_f = irdl.is false
    %exclusive = irdl.any_of(%exclusive_t, %exclusive_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "exclusive" = %exclusive}
  }
  // Rows of a GGUF tensor's raw bytes as f32 values: ``w [..., ROWBYTES]`` i8 -> ``[..., K]`` f32, ``K = ROWBYTES / block_bytes * block_elems`` (ggml's element order, as ``dequant_matmul`` reads ``w``). A model's embedding kept in the file's format is a ``gather`` of the token's rows, then this: one row a token is dequantized, and the tensor stays the file's bytes (a tied LM head reads the same ones). Leading dims may be dynamic.
  irdl.operation @dequant {
    %scheme_0 = irdl.is "gguf_f16"
    %scheme_1 = irdl.is "gguf_q4_0"
    %scheme_2 = irdl.is "gguf_q4_1"
    %scheme_3 = irdl.is "gguf_q5_0"
    %scheme_4 = irdl.is "gguf_q5_1"
    %scheme_5 = irdl.is "gguf_q8_0"
    %scheme_6 = irdl.is "gguf_q2_k"
    %scheme_7 = irdl.is "gguf_q3_k"
    %scheme_8 = irdl.is "gguf_q4_k"
    %scheme_9 = irdl.is "gguf_q5_k"
    %scheme_10 = irdl.is "gguf_q6_k"
    %scheme_11 = irdl.is "gguf_q8_k"
    %scheme_12 = irdl.is "gguf_bf16"
    %scheme = irdl.any_of(%scheme_0, %scheme_1, %scheme_2, %scheme_3, %scheme_4, %scheme_5, %scheme_6, %scheme_7, %scheme_8, %scheme_9, %scheme_10, %scheme_11, %scheme_12)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(w: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"scheme" = %scheme}
  }
  // Matmul with quantized weights (``Op::DequantMatMul``); as ``rlx_hir.dequant_matmul``.
  irdl.operation @dequant_matmul {
    %scheme_0 = irdl.is "gguf_f16"
    %scheme_1 = irdl.is "gguf_q4_0"
    %scheme_2 = irdl.is "gguf_q4_1"
    %scheme_3 = irdl.is "gguf_q5_0"
    %scheme_4 = irdl.is "gguf_q5_1"
    %scheme_5 = irdl.is "gguf_q8_0"
    %scheme_6 = irdl.is "gguf_q2_k"
    %scheme_7 = irdl.is "gguf_q3_k"
    %scheme_8 = irdl.is "gguf_q4_k"
    %scheme_9 = irdl.is "gguf_q5_k"
    %scheme_10 = irdl.is "gguf_q6_k"
    %scheme_11 = irdl.is "gguf_q8_k"
    %scheme_12 = irdl.is "gguf_bf16"
    %scheme_13 = irdl.is "int8"
    %scheme_14 = irdl.is "nvfp4"
    %scheme = irdl.any_of(%scheme_0, %scheme_1, %scheme_2, %scheme_3, %scheme_4, %scheme_5, %scheme_6, %scheme_7, %scheme_8, %scheme_9, %scheme_10, %scheme_11, %scheme_12, %scheme_13, %scheme_14)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, w: %in1, scale_zp: variadic %in2)
    irdl.results(y: %out0)
    irdl.attributes {"scheme" = %scheme}
  }
  // The size of dim ``axis`` of ``x`` as a 0-d ``i64`` tensor (ONNX ``Shape`` / ``Size`` data, torch's ``sym_size``): only ``x``'s shape is read, not its elements.
  irdl.operation @dim {
    %axis = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis}
  }
  // ``x[..., start : end, ...]`` along ``axis`` with bounds computed at run time (0-d ``i64`` tensors), clamped as ONNX ``Slice`` clamps: ``s = clamp(start, 0, n)``, ``e = clamp(end, s, n)`` (``n`` the size of the axis), ``e - s`` entries; never a read outside ``x``. The importers' slice of a dynamic axis whose bounds are sizes the model computes (a ``chunk`` of a dynamic sequence: ``ceil(S / k)`` rows, the last piece shorter).
  irdl.operation @dynamic_slice {
    %axis = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, start: %in1, end: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis}
  }
  // Broadcast to ``target_shape`` (``Op::Expand``, numpy rules; ``-1`` keeps the input dim, which may be dynamic).
  irdl.operation @expand {
    %target_shape = irdl.base "#builtin.dense_array"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"target_shape" = %target_shape}
  }
  // ``act(x @ w + b)`` in one op (``Op::FusedMatMulBiasAct``).
  irdl.operation @fused_matmul_bias_act {
    %activation_0 = irdl.is "none"
    %activation_1 = irdl.is "gelu"
    %activation_2 = irdl.is "gelu_approx"
    %activation_3 = irdl.is "silu"
    %activation_4 = irdl.is "relu"
    %activation_5 = irdl.is "sigmoid"
    %activation_6 = irdl.is "tanh"
    %activation_7 = irdl.is "exp"
    %activation_8 = irdl.is "log"
    %activation_9 = irdl.is "sqrt"
    %activation_10 = irdl.is "rsqrt"
    %activation_11 = irdl.is "neg"
    %activation_12 = irdl.is "abs"
    %activation_13 = irdl.is "sin"
    %activation_14 = irdl.is "cos"
    %activation_15 = irdl.is "tan"
    %activation_16 = irdl.is "atan"
    %activation_17 = irdl.is "round"
    %activation_18 = irdl.is "erf"
    %activation_19 = irdl.is "softplus"
    %activation_20 = irdl.is "floor"
    %activation_21 = irdl.is "ceil"
    %activation_22 = irdl.is "asin"
    %activation_23 = irdl.is "acos"
    %activation_24 = irdl.is "sinh"
    %activation_25 = irdl.is "cosh"
    %activation_26 = irdl.is "asinh"
    %activation_27 = irdl.is "acosh"
    %activation_28 = irdl.is "atanh"
    %activation = irdl.any_of(%activation_0, %activation_1, %activation_2, %activation_3, %activation_4, %activation_5, %activation_6, %activation_7, %activation_8, %activation_9, %activation_10, %activation_11, %activation_12, %activation_13, %activation_14, %activation_15, %activation_16, %activation_17, %activation_18, %activation_19, %activation_20, %activation_21, %activation_22, %activation_23, %activation_24, %activation_25, %activation_26, %activation_27, %activation_28)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, w: %in1, b: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"activation" = %activation}
  }
  // ``rms_norm(x + residual (+ bias))`` (``Op::FusedResidualRmsNorm``).
  irdl.operation @fused_residual_rms_norm {
    %has_bias_t = irdl.is true
    %has_bias_f = irdl.is false
    %has_bias = irdl.any_of(%has_bias_t, %has_bias_f)
    %eps = irdl.base "#builtin.float"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %in4 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, residual: %in1, bias: optional %in2, gamma: %in3, beta: %in4)
    irdl.results(y: %out0)
    irdl.attributes {"has_bias" = %has_bias, "eps" = %eps}
  }
  // ``up * silu(gate)`` on a packed ``[..., 2F]`` tensor (``Op::FusedSwiGLU``).
  irdl.operation @fused_swiglu {
    %gate_first_t = irdl.is true
    %gate_first_f = irdl.is false
    %gate_first = irdl.any_of(%gate_first_t, %gate_first_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"gate_first" = %gate_first}
  }
  // Gated DeltaNet scan (``Op::GatedDeltaNet``); as ``rlx_hir.gated_delta_net``.
  irdl.operation @gated_delta_net {
    %state_size = irdl.base "#builtin.integer"
    %carry_state_t = irdl.is true
    %carry_state_f = irdl.is false
    %carry_state = irdl.any_of(%carry_state_t, %carry_state_f)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %in4 = irdl.base "!builtin.tensor"
    %in5 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    %out1 = irdl.base "!builtin.tensor"
    irdl.operands(q: %in0, k: %in1, v: %in2, g: %in3, beta: %in4, state: optional %in5)
    irdl.results(y: %out0, final_state: optional %out1)
    irdl.attributes {"state_size" = %state_size, "carry_state" = %carry_state}
  }
  // Take slices along ``axis`` (``Op::Gather``, ONNX / ``tf.gather`` semantics): ``y = table[:axis] + indices[batch_dims:] + table[axis + 1:]``.
  irdl.operation @gather {
    %axis = irdl.base "#builtin.integer"
    %batch_dims = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(table: %in0, indices: %in1)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "batch_dims" = %batch_dims}
  }
  // Packed multi-layer GRU (``Op::Gru``); as ``rlx_hir.gru``.
  irdl.operation @gru {
    %hidden_size = irdl.base "#builtin.integer"
    %num_layers = irdl.base "#builtin.integer"
    %bidirectional_t = irdl.is true
    %bidirectional_f = irdl.is false
    %bidirectional = irdl.any_of(%bidirectional_t, %bidirectional_f)
    %carry_t = irdl.is true
    %carry_f = irdl.is false
    %carry = irdl.any_of(%carry_t, %carry_f)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %in4 = irdl.base "!builtin.tensor"
    %in5 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    %out1 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, w_ih: %in1, w_hh: %in2, b_ih: %in3, b_hh: %in4, h0_lengths: variadic %in5)
    irdl.results(y: %out0, hn: optional %out1)
    irdl.attributes {"hidden_size" = %hidden_size, "num_layers" = %num_layers, "bidirectional" = %bidirectional, "carry" = %carry}
  }
  // ``[0, 1, ..., n - 1]`` as a 1-D ``i64`` tensor, ``n`` the size of dim ``axis`` of ``x`` (ONNX ``Range`` from 0 by 1, torch's ``arange``): only ``x``'s shape is read.
  irdl.operation @iota {
    %axis = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis}
  }
  // Layer normalization ``(x - mean) / sqrt(var + eps) * gamma + beta`` (``Op::LayerNorm``).
  irdl.operation @layer_norm {
    %axis = irdl.base "#builtin.integer"
    %eps = irdl.base "#builtin.float"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, gamma: %in1, beta: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "eps" = %eps}
  }
  // Packed multi-layer LSTM (``Op::Lstm``); as ``rlx_hir.lstm``.
  irdl.operation @lstm {
    %hidden_size = irdl.base "#builtin.integer"
    %num_layers = irdl.base "#builtin.integer"
    %bidirectional_t = irdl.is true
    %bidirectional_f = irdl.is false
    %bidirectional = irdl.any_of(%bidirectional_t, %bidirectional_f)
    %carry_t = irdl.is true
    %carry_f = irdl.is false
    %carry = irdl.any_of(%carry_t, %carry_f)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %in4 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    %out1 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, w_ih: %in1, w_hh: %in2, bias: %in3, h0_c0_peephole_lengths: variadic %in4)
    irdl.results(y: %out0, hn_cn: variadic %out1)
    irdl.attributes {"hidden_size" = %hidden_size, "num_layers" = %num_layers, "bidirectional" = %bidirectional, "carry" = %carry}
  }
  // ``mask [..., V]`` with 1 at each of the row's ``ids [..., N]`` (i32; ids outside ``0 .. V-1`` are ignored): the set of tokens seen so far, grown by the new ones.
  irdl.operation @mark_tokens {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(mask: %in0, ids: %in1)
    irdl.results(y: %out0)
  }
  // Batched matrix product ``[..., M, K] x [..., K, N] -> [..., M, N]`` (``Op::MatMul``).
  irdl.operation @matmul {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %in0, rhs: %in1)
    irdl.results(y: %out0)
  }
  // HF's ``MinPLogitsWarper``: keeps tokens whose probability is at least ``min_p`` times the largest one's (``x >= max(x) + log(min_p)``), ``-inf`` elsewhere; ``min_p <= 0`` keeps all.
  irdl.operation @min_p_filter {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, min_p: %in1)
    irdl.results(y: %out0)
  }
  // Contiguous slice ``x[..., start : start + len, ...]`` along ``axis`` (``Op::Narrow``).
  irdl.operation @narrow {
    %axis = irdl.base "#builtin.integer"
    %start = irdl.base "#builtin.integer"
    %len = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "start" = %start, "len" = %len}
  }
  // Constant padding (ONNX ``Pad`` in ``constant`` mode): ``low[i]`` elements before and ``high[i]`` after axis ``i``, filled with ``value``.
  irdl.operation @pad {
    %low = irdl.base "#builtin.dense_array"
    %high = irdl.base "#builtin.dense_array"
    %value = irdl.base "#builtin.float"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"low" = %low, "high" = %high, "value" = %value}
  }
  // A weight bound at load time (``Op::Param``); as ``rlx_hir.param``.
  irdl.operation @param {
    %name = irdl.base "#builtin.string"
    %out0 = irdl.base "!builtin.tensor"
    irdl.results(w: %out0)
    irdl.attributes {"name" = %name}
  }
  // Max or average pooling over the spatial dims of ``x [N, C, *spatial]`` (1-3 dims).
  irdl.operation @pool {
    %kind_0 = irdl.is "max"
    %kind_1 = irdl.is "avg"
    %kind_2 = irdl.is "umax"
    %kind = irdl.any_of(%kind_0, %kind_1, %kind_2)
    %kernel_size = irdl.base "#builtin.dense_array"
    %stride = irdl.base "#builtin.dense_array"
    %dilation = irdl.base "#builtin.dense_array"
    %padding = irdl.base "#builtin.dense_array"
    %ceil_mode_t = irdl.is true
    %ceil_mode_f = irdl.is false
    %ceil_mode = irdl.any_of(%ceil_mode_t, %ceil_mode_f)
    %count_include_pad_t = irdl.is true
    %count_include_pad_f = irdl.is false
    %count_include_pad = irdl.any_of(%count_include_pad_t, %count_include_pad_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"kind" = %kind, "kernel_size" = %kernel_size, "stride" = %stride, "dilation" = %dilation, "padding" = %padding, "ceil_mode" = %ceil_mode, "count_include_pad" = %count_include_pad}
  }
  // Reduce over ``axes`` (``Op::Reduce``): sum, mean, max, min, prod.
  irdl.operation @reduce {
    %kind_0 = irdl.is "sum"
    %kind_1 = irdl.is "mean"
    %kind_2 = irdl.is "max"
    %kind_3 = irdl.is "min"
    %kind_4 = irdl.is "prod"
    %kind = irdl.any_of(%kind_0, %kind_1, %kind_2, %kind_3, %kind_4)
    %axes = irdl.base "#builtin.dense_array"
    %keep_dim_t = irdl.is true
    %keep_dim_f = irdl.is false
    %keep_dim = irdl.any_of(%keep_dim_t, %keep_dim_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"kind" = %kind, "axes" = %axes, "keep_dim" = %keep_dim}
  }
  // HF's ``RepetitionPenaltyLogitsProcessor``: where ``seen`` is non-zero, a logit below zero is multiplied by ``penalty`` and one at or above zero divided by it.
  irdl.operation @repetition_penalty {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, seen: %in1, penalty: %in2)
    irdl.results(y: %out0)
  }
  // Row-major reshape (``Op::Reshape``); one ``-1`` entry is inferred (dynamic when the input is), and an entry ``-2 - k`` is input dim ``k`` (``-2``: dim 0, ``-3``: dim 1): how a reshape keeps several dynamic dims (``[?, ?, 512] -> [-2, -3, 8, 64]``).
  irdl.operation @reshape {
    %new_shape = irdl.base "#builtin.dense_array"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"new_shape" = %new_shape}
  }
  // RMS normalization ``x / sqrt(mean(x²) + eps) * gamma + beta`` (``Op::RmsNorm``).
  irdl.operation @rms_norm {
    %axis = irdl.base "#builtin.integer"
    %eps = irdl.base "#builtin.float"
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, gamma: %in1, beta: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis, "eps" = %eps}
  }
  // Rotary embedding (``Op::Rope``); as ``rlx_hir.rope`` with the style in ``style``.
  irdl.operation @rope {
    %head_dim = irdl.base "#builtin.integer"
    %n_rot = irdl.base "#builtin.integer"
    %style_0 = irdl.is "neox"
    %style_1 = irdl.is "gptj"
    %style = irdl.any_of(%style_0, %style_1)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, cos: %in1, sin: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"head_dim" = %head_dim, "n_rot" = %n_rot, "style" = %style}
  }
  // ``data`` with slices replaced or combined at the positions ``indices`` name (ONNX ``ScatterND``; rlx's, not RLX's): ``indices [*B, K]`` holds ``K``-coordinate positions into ``data``'s first ``K`` dims, ``updates [*B, *data.shape[K:]]`` one slice each. For each position in row-major order, ``out[idx] = update`` (``none``) or ``combine(out[idx], update)`` (``add``, ``mul``, ``max``, ``min``). A negative coordinate counts from the end of its dim (``+ dim``), and every coordinate is then clamped into ``[0, dim - 1]``: no index a caller passes writes outside ``data`` (an index still out of range lands on the dim's first or last slice, as ``gather`` clamps).
  irdl.operation @scatter {
    %reduction_0 = irdl.is "none"
    %reduction_1 = irdl.is "add"
    %reduction_2 = irdl.is "mul"
    %reduction_3 = irdl.is "max"
    %reduction_4 = irdl.is "min"
    %reduction = irdl.any_of(%reduction_0, %reduction_1, %reduction_2, %reduction_3, %reduction_4)
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(data: %in0, indices: %in1, updates: %in2)
    irdl.results(y: %out0)
    irdl.attributes {"reduction" = %reduction}
  }
  // Strided slice over every axis: ``y[i0, i1, ...] = x[s0 + i0 t0, s1 + i1 t1, ...]``.
  irdl.operation @slice {
    %starts = irdl.base "#builtin.dense_array"
    %sizes = irdl.base "#builtin.dense_array"
    %strides = irdl.base "#builtin.dense_array"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"starts" = %starts, "sizes" = %sizes, "strides" = %strides}
  }
  // Softmax along ``axis`` with the max subtracted (``Op::Softmax``).
  irdl.operation @softmax {
    %axis = irdl.base "#builtin.integer"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"axis" = %axis}
  }
  // HF's ``TopKLogitsWarper``: keeps the logits at least as large as the ``k``-th largest of the row (ties with it stay), ``-inf`` elsewhere; ``k <= 0`` or ``k >= V`` keeps all.
  irdl.operation @top_k_filter {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, k: %in1)
    irdl.results(y: %out0)
  }
  // HF's ``TopPLogitsWarper`` (nucleus): keeps the largest logits whose ``softmax(x)`` mass first reaches ``p`` (the token that crosses ``p`` stays; ties with the last kept logit stay), ``-inf`` elsewhere; ``p >= 1`` keeps all, the largest always stays.
  irdl.operation @top_p_filter {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0, p: %in1)
    irdl.results(y: %out0)
  }
  // The ``k`` largest (``largest = false``: smallest) elements along ``axis``, sorted, and their indices as i32 (ONNX ``TopK``, ``torch.topk``; rlx's, not RLX's). Equal elements keep their order (the lower index first), ``-0`` and ``0`` are equal, NaN counts as larger than every number. ``k`` is at most the axis' size (checked at run time where the axis is dynamic). One exception, i64 only: an element equal to i64's minimum (``largest``; its maximum otherwise) is kept with the right value but index 0 when fewer than ``k`` other elements are kept (it ties with the initial sort key).
  irdl.operation @topk {
    %k = irdl.base "#builtin.integer"
    %axis = irdl.base "#builtin.integer"
    %largest_t = irdl.is true
    %largest_f = irdl.is false
    %largest = irdl.any_of(%largest_t, %largest_f)
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    %out1 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(values: %out0, indices: %out1)
    irdl.attributes {"k" = %k, "axis" = %axis, "largest" = %largest}
  }
  // Permute dims (``Op::Transpose``): result dim ``i`` is input dim ``perm[i]``.
  irdl.operation @transpose {
    %perm = irdl.base "#builtin.dense_array"
    %in0 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(x: %in0)
    irdl.results(y: %out0)
    irdl.attributes {"perm" = %perm}
  }
  // Select ``cond ? on_true : on_false`` with numpy broadcasting (``Op::Where``).
  irdl.operation @where {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(cond: %in0, on_true: %in1, on_false: %in2)
    irdl.results(y: %out0)
  }
  // ``cache`` with ``T`` rows of one slot replaced per write: for ``n = 0 .. N-1`` in order, ``cache[slot[n], pos[n] + t, :] = new[n, t, :]`` for ``t < T``.
  irdl.operation @write_rows {
    %in0 = irdl.base "!builtin.tensor"
    %in1 = irdl.base "!builtin.tensor"
    %in2 = irdl.base "!builtin.tensor"
    %in3 = irdl.base "!builtin.tensor"
    %out0 = irdl.base "!builtin.tensor"
    irdl.operands(cache: %in0, new: %in1, slot: %in2, pos: %in3)
    irdl.results(y: %out0)
  }
}
