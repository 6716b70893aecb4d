"""Every schema check gives one VerifyError naming the op, its position, expected and found."""

from __future__ import annotations

import pytest

import rlx
from rlx.ir.diagnostics import VerifyError


def one_op(op: str, operands: list[str], attrs: str, results: list[str],
           label: str | None = None) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operands))
    names = ", ".join(f"%a{i}" for i in range(len(operands)))
    rtypes = ", ".join(results)
    rtype = rtypes if len(results) == 1 else f"({rtypes})"
    lhs = "%r = " if len(results) == 1 else f"%r:{len(results)} = " if results else ""
    ret = "%r" if len(results) == 1 else ", ".join(f"%r#{i}" for i in range(len(results)))
    loc = f' loc("{label}")' if label else ""
    return (f"module @t {{\n  func.func @main({args}) -> {rtype or '()'} {{\n"
            f'    {lhs}"{op}"({names}) {attrs} : ({", ".join(operands)}) -> {rtype or "()"}'
            f"{loc}\n    return {ret + ' : ' + rtypes if results else ''}\n  }}\n}}\n")


F = "f32"
X = "tensor<4x16xf32>"
W = "tensor<16x32xf32>"
B = "tensor<32xf32>"
Y = "tensor<4x32xf32>"
V16 = "tensor<16xf32>"
Q = "tensor<2x6x32xf32>"
KV = "tensor<2x6x16xf32>"

CASES = {
    # operand counts, with the optional operands decided by attributes
    "linear_bias_missing": ("rlx_hir.linear", [X, W], '{activation = "none", has_bias = true}',
                            [Y], "expected 3 (x, weight, bias) for activation = \"none\", "
                                 "has_bias = true, found 2"),
    "linear_extra_bias": ("rlx_hir.linear", [X, W, B], '{activation = "none", has_bias = '
                          'false}', [Y], "expected 2 (x, weight)"),
    "attention_mask_missing": ("rlx_hir.attention", [Q, KV, KV],
                               '{head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64}',
                               [Q], "expected 4 (q, k, v, mask)"),
    "dequant_gguf_with_scales": ("rlx_hir.dequant_matmul",
                                 ["tensor<1x256xf32>", "tensor<8x144xi8>", "tensor<8x8xf32>",
                                  "tensor<8x8xf32>"], '{scheme = "gguf_q4_k"}',
                                 ["tensor<1x8xf32>"], "expected 2 (x, w)"),
    "dequant_legacy_without_scales": ("rlx_hir.dequant_matmul",
                                      ["tensor<1x256xf32>", "tensor<256x8xi8>"],
                                      '{block_size = 32 : i64, scheme = "int8"}',
                                      ["tensor<1x8xf32>"], "expected 4 (x, w, scale, zp)"),
    "gdn_carry_missing_state": ("rlx_hir.gated_delta_net",
                                ["tensor<1x3x2x8xf32>"] * 3 + ["tensor<1x3x2xf32>"] * 2,
                                '{carry_state = true, state_size = 8 : i64}',
                                ["tensor<1x3x2x8xf32>", "tensor<1x2x8x8xf32>"],
                                "expected 6 (q, k, v, g, beta, state)"),
    "lstm_carry_missing_c0": ("rlx_hir.lstm",
                              ["tensor<1x3x4xf32>", "tensor<32x4xf32>", "tensor<32x8xf32>",
                               "tensor<32xf32>", "tensor<1x1x8xf32>"],
                              '{bidirectional = false, carry = true, hidden_size = 8 : i64, '
                              'num_layers = 1 : i64}',
                              ["tensor<1x3x8xf32>"] , "expected 6 (x, w_ih, w_hh, bias, h0, c0)"),
    "gru_results_without_carry": ("rlx_hir.gru",
                                  ["tensor<1x3x4xf32>", "tensor<24x4xf32>", "tensor<24x8xf32>",
                                   "tensor<24xf32>", "tensor<24xf32>"],
                                  '{bidirectional = false, carry = false, hidden_size = 8 : '
                                  'i64, num_layers = 1 : i64}',
                                  ["tensor<1x3x8xf32>", "tensor<1x1x8xf32>"],
                                  "results: expected 1 (y), found 2"),
    # ranks and dtypes
    "linear_weight_rank": ("rlx_hir.linear", [X, "tensor<16x32x1xf32>"],
                           '{activation = "none", has_bias = false}', [Y],
                           "operand 'weight': expected rank 2, found rank 3"),
    "rms_norm_int": ("rlx_hir.rms_norm", ["tensor<4x16xi32>", V16, V16],
                     "{eps = 1.0e-05 : f32}", ["tensor<4x16xi32>"],
                     "operand 'x': expected element type bf16/f16/f32/f64, found i32"),
    "mixed_dtypes": ("rlx_hir.rms_norm", [X, "tensor<16xf16>", V16], "{eps = 1.0e-05 : f32}",
                     [X], "operand 'gamma': expected element type f32 (as 'x'), found f16"),
    "non_tensor": ("rlx_hir.rms_norm", ["f32", V16, V16], "{eps = 1.0e-05 : f32}", [X],
                   "operand 'x': expected a ranked tensor"),
    # shape agreement
    "hidden_mismatch": ("rlx_hir.linear", [X, "tensor<8x32xf32>"],
                        '{activation = "none", has_bias = false}', [Y],
                        "operand 'weight' dim 0: expected 16 (the contraction size K"),
    "bias_width": ("rlx_hir.linear", [X, W, "tensor<31xf32>"],
                   '{activation = "none", has_bias = true}', [Y],
                   "operand 'bias' dim 0: expected 32"),
    "result_shape": ("rlx_hir.linear", [X, W], '{activation = "none", has_bias = false}',
                     ["tensor<4x31xf32>"],
                     "result 'y' type: expected tensor<4x32xf32>, found tensor<4x31xf32>"),
    "heads_times_head_dim": ("rlx_hir.attention", [Q, KV, KV],
                             '{head_dim = 8 : i64, mask = "none", num_heads = 3 : i64}', [Q],
                             "operand 'q' dim -1: expected 24 (num_heads * head_dim)"),
    "gqa_not_dividing": ("rlx_hir.attention", ["tensor<2x6x24xf32>", KV, KV],
                         '{head_dim = 8 : i64, mask = "none", num_heads = 3 : i64}',
                         ["tensor<2x6x24xf32>"],
                         "operand 'k': expected a KV head count dividing num_heads = 3"),
    "custom_mask_shape": ("rlx_hir.attention", [Q, KV, KV, "tensor<2x5xf32>"],
                          '{head_dim = 8 : i64, mask = "custom", num_heads = 4 : i64}', [Q],
                          "operand 'mask': expected shape [2, 6]"),
    "sliding_without_window": ("rlx_hir.attention", [Q, KV, KV],
                               '{head_dim = 8 : i64, mask = "sliding_window", num_heads = 4 : '
                               'i64}', [Q], "attribute 'window': expected an integer"),
    "window_without_sliding": ("rlx_hir.attention", [Q, KV, KV],
                               '{head_dim = 8 : i64, mask = "causal", num_heads = 4 : i64, '
                               'window = 3 : i64}', [Q],
                               "attribute 'window': expected no such attribute"),
    "n_rot_odd": ("rlx_hir.rope", [Q, "tensor<6x4xf32>", "tensor<6x4xf32>"],
                  '{head_dim = 8 : i64, n_rot = 3 : i64, rope_style = "neox"}', [Q],
                  "attribute 'n_rot': expected an even value in 1..8 (head_dim), found 3"),
    "n_rot_too_big": ("rlx_hir.rope", [Q, "tensor<6x4xf32>", "tensor<6x4xf32>"],
                      '{head_dim = 8 : i64, n_rot = 10 : i64, rope_style = "neox"}', [Q],
                      "found 10"),
    "rope_table_too_short": ("rlx_hir.rope", [Q, "tensor<5x4xf32>", "tensor<5x4xf32>"],
                             '{head_dim = 8 : i64, n_rot = 8 : i64, rope_style = "neox"}',
                             [Q], "operand 'cos' dim 0: expected >= 6 (one row per position"),
    "kernel_vs_pad": ("rlx_hir.depthwise_conv1d_causal",
                      ["tensor<2x8x16xf32>", "tensor<16x1x1x3xf32>", "tensor<2x3x16xf32>"],
                      "{kernel_size = 3 : i64}", ["tensor<2x8x16xf32>"],
                      "operand 'left_pad': expected shape [2, 2, 16] ([B, kernel_size - 1, C]"),
    "kernel_vs_weight": ("rlx_hir.depthwise_conv1d_causal",
                         ["tensor<2x8x16xf32>", "tensor<16x1x1x4xf32>", "tensor<2x2x16xf32>"],
                         "{kernel_size = 3 : i64}", ["tensor<2x8x16xf32>"],
                         "operand 'weight': expected shape [16, 1, 1, 3]"),
    "k_not_block_multiple": ("rlx_hir.dequant_matmul", ["tensor<1x100xf32>", "tensor<8x68xi8>"],
                             '{scheme = "gguf_q8_0"}', ["tensor<1x8xf32>"],
                             "operand 'x' dim -1: expected a multiple of 32 (the gguf_q8_0 "
                             "block size), found K = 100"),
    "gguf_row_bytes": ("rlx_hir.dequant_matmul", ["tensor<1x64xf32>", "tensor<8x64xi8>"],
                       '{scheme = "gguf_q8_0"}', ["tensor<1x8xf32>"],
                       "operand 'w' dim 1: expected 68 (bytes per row for K = 64"),
    "legacy_block_divides_k": ("rlx_hir.dequant_matmul",
                               ["tensor<1x100xf32>", "tensor<100x8xi8>", "tensor<4x8xf32>",
                                "tensor<4x8xf32>"], '{block_size = 32 : i64, scheme = "int8"}',
                               ["tensor<1x8xf32>"],
                               "attribute 'block_size': expected a positive divisor of K = 100"),
    "lstm_packed_size": ("rlx_hir.lstm",
                         ["tensor<1x3x4xf32>", "tensor<31x4xf32>", "tensor<32x8xf32>",
                          "tensor<32xf32>"],
                         '{bidirectional = false, carry = false, hidden_size = 8 : i64, '
                         'num_layers = 1 : i64}', ["tensor<1x3x8xf32>"],
                         "operand 'w_ih': expected 128 elements"),
    "gdn_state_shape": ("rlx_hir.gated_delta_net",
                        ["tensor<1x3x2x8xf32>"] * 3 + ["tensor<1x3x2xf32>"] * 2
                        + ["tensor<1x2x8x4xf32>"],
                        '{carry_state = true, state_size = 8 : i64}',
                        ["tensor<1x3x2x8xf32>", "tensor<1x2x8x8xf32>"],
                        "operand 'state' dim 3: expected 8"),
    # attribute values
    "bad_enum": ("rlx_hir.linear", [X, W], '{activation = "swish", has_bias = false}', [Y],
                 "attribute 'activation': expected one of \"none\", \"gelu\""),
    "eps_zero": ("rlx_hir.rms_norm", [X, V16, V16], "{eps = 0.0 : f32}", [X],
                 "attribute 'eps': expected a value > 0, found 0.0"),
    "eps_negative": ("rlx_hir.residual_rms_norm", [X, X, V16, V16], "{eps = -1.0 : f32}", [X],
                     "attribute 'eps': expected a value > 0, found -1.0"),
    "attr_kind": ("rlx_hir.rms_norm", [X, V16, V16], '{eps = "small"}', [X],
                  "attribute 'eps': expected a float"),
    "missing_attr": ("rlx_hir.rms_norm", [X, V16, V16], "{}", [X],
                     "attribute 'eps': expected a float attribute, found none"),
    "unknown_attr": ("rlx_hir.rms_norm", [X, V16, V16], "{eps = 1.0e-05 : f32, epsilon = 1}",
                     [X], "attribute 'epsilon': expected only the attributes of this op (eps)"),
    "nkv_divides": ("rlx_hir.llama_decoder_block", ["tensor<1x4x32xf32>"] + [V16] * 13,
                    '{eps = 1.0e-05 : f32, head_dim = 8 : i64, mask = "causal", num_heads = 4 '
                    ': i64, num_kv_heads = 3 : i64, rope_style = "neox"}',
                    ["tensor<1x4x32xf32>"],
                    "attribute 'num_kv_heads': expected a divisor of num_heads = 4, found 3"),
    "unknown_op": ("rlx_hir.nope", [X], "{}", [X], "unknown op 'rlx_hir.nope'"),
    "foreign_op": ("arith.addf", [X, X], "", [X], "found 'arith.addf'"),
    # escape hatch ops are checked against the MIR schemas
    "mir_broadcast": ("rlx_mir.binary", [X, "tensor<3x16xf32>"], '{kind = "add"}', [X],
                      "operand 'rhs' dim 0: expected 4 or 1 (numpy broadcasting"),
    "mir_reshape": ("rlx_mir.reshape", [X], "{new_shape = array<i64: 5, -1>}",
                    ["tensor<5x?xf32>"], "attribute 'new_shape': expected sizes whose product "
                                         "divides 64"),
    "mir_slice_out_of_range": ("rlx_mir.slice", [X], "{sizes = array<i64: 2, 4>, starts = "
                               "array<i64: 3, 0>, strides = array<i64: 1, 4>}",
                               ["tensor<2x4xf32>"], "axis 0: expected indices inside [0, 4)"),
    "mir_rem_f64": ("rlx_mir.binary", ["tensor<4xf64>", "tensor<4xf64>"], '{kind = "rem"}',
                    ["tensor<4xf64>"], "rem is not: IREE 3.13 lowers it to a libm call"),
    "mir_dynamic_slice_bound_type": ("rlx_mir.dynamic_slice", [X, "tensor<f32>", "tensor<i64>"],
                                     "{axis = 0 : i64}", ["tensor<?x16xf32>"],
                                     "operand 'start'"),
    "mir_dynamic_slice_bound_rank": ("rlx_mir.dynamic_slice", [X, "tensor<i64>", "tensor<1xi64>"],
                                     "{axis = 0 : i64}", ["tensor<?x16xf32>"],
                                     "operand 'end'"),
    "mir_slice_kept_axis_backwards": ("rlx_mir.slice", [X], "{sizes = array<i64: -1, 4>, "
                                      "starts = array<i64: 3, 0>, strides = array<i64: -1, 1>}",
                                      ["tensor<4x4xf32>"],
                                      "a positive stride for a size up to the end"),
    "mir_write_rows_row": ("rlx_mir.write_rows", ["tensor<4x16x8xf32>", "tensor<4x1x6xf32>",
                           "tensor<4xi32>", "tensor<4xi32>"], "", ["tensor<4x16x8xf32>"],
                           "operand 'new' dim 2: expected 8 (a row of the cache)"),
    "mir_write_rows_pos_type": ("rlx_mir.write_rows", ["tensor<4x16x8xf32>",
                                "tensor<4x1x8xf32>", "tensor<4xi32>", "tensor<4xf32>"], "",
                                ["tensor<4x16x8xf32>"], "operand 'pos': expected element "
                                                        "type i32/i64"),
    "mir_write_rows_count": ("rlx_mir.write_rows", ["tensor<4x16x8xf32>", "tensor<2x1x8xf32>",
                             "tensor<3xi32>", "tensor<2xi32>"], "", ["tensor<4x16x8xf32>"],
                             "operand 'slot' dim 0: expected 2 (one per write"),
    "mir_pad_negative": ("rlx_mir.pad", [X], "{high = array<i64: 0, -1>, low = array<i64: 0, "
                         "0>, value = 0.0 : f32}", [X], "2 sizes >= 0 each"),
    "mir_pool_rank": ("rlx_mir.pool", [X], '{ceil_mode = false, count_include_pad = false, '
                      'dilation = array<i64: 1>, kernel_size = array<i64: 2>, kind = "max", '
                      "padding = array<i64: 0, 0>, stride = array<i64: 1>}", [X],
                      "rank 3, 4 or 5"),
    "mir_pool_kernel_too_big": ("rlx_mir.pool", ["tensor<1x2x3xf32>"],
                                '{ceil_mode = false, count_include_pad = false, dilation = '
                                'array<i64: 2>, kernel_size = array<i64: 3>, kind = "avg", '
                                "padding = array<i64: 0, 0>, stride = array<i64: 1>}",
                                ["tensor<1x2x1xf32>"], "spatial dim 2 that fits the kernel"),
    # the unsigned kinds read integers of 8 to 64 bits
    "mir_udiv_of_floats": ("rlx_mir.binary", [V16, V16], '{kind = "udiv"}', [V16],
                           "operand 'lhs': expected element type i16/i32/i64/i8"),
    "mir_ult_of_bools": ("rlx_mir.compare", ["tensor<4xi1>", "tensor<4xi1>"],
                         '{kind = "ult"}', ["tensor<4xi1>"], "expected element type "
                                                             "i16/i32/i64/i8, found i1"),
    "mir_cast_unsigned_float": ("rlx_mir.cast", [V16], '{to = "f16", unsigned = "result"}',
                                ["tensor<16xf16>"], 'an integer type i16/i32/i64/i8 '
                                                    '(unsigned = "result"), found f16'),
    "mir_float8_arithmetic": ("rlx_mir.binary", ["tensor<4xf8E4M3FN>", "tensor<4xf8E4M3FN>"],
                              '{kind = "add"}', ["tensor<4xf8E4M3FN>"],
                              "8-bit floats are storage"),
    "mir_cast_round_not_e8m0": ("rlx_mir.cast", [V16], '{round = "up", to = "f8E4M3FN"}',
                                ["tensor<16xf8E4M3FN>"], "only with to = \"f8E8M0FNU\""),
    "mir_cast_unsigned_side": ("rlx_mir.cast", ["tensor<4xi8>"], '{to = "f32", unsigned = '
                               '"left"}', ["tensor<4xf32>"], "attribute 'unsigned'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_violation_is_one_clear_error(case: str) -> None:
    op, operands, attrs, results, fragment = CASES[case]
    text = one_op(op, operands, attrs, results)
    with pytest.raises(rlx.RlxError) as info:
        rlx.HirModule.parse(text, "t.hir")
    message = str(info.value)
    assert fragment in message
    assert message.startswith("t.hir:3:"), message
    assert "\n" not in message


def test_error_names_label_and_position() -> None:
    text = one_op("rlx_hir.rms_norm", [X, V16, V16], "{eps = 0.0 : f32}", [X], label="ln1")
    with pytest.raises(VerifyError) as info:
        rlx.HirModule.parse(text, "model.hir")
    e = info.value
    assert (e.source, e.label, e.op_name) == ("model.hir:3:10", "ln1", "rlx_hir.rms_norm")
    assert str(e).startswith("model.hir:3:10: error: 'rlx_hir.rms_norm' \"ln1\": attribute 'eps'")


def test_builder_rejects_bad_shapes_before_creating_the_op() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (None, 16))
    w = h.param("w", (8, 32))
    n = len(h)
    with pytest.raises(VerifyError, match="operand 'weight' dim 0: expected 16"):
        h.linear(x, w)
    assert len(h) == n
    with pytest.raises(VerifyError, match=r"out_shape: expected a shape compatible with the "
                                          r"inferred tensor<\?x32xf32>"):
        h.linear(x, h.param("w2", (16, 32)), out_shape=(None, 31))


def test_builder_value_errors() -> None:
    h, other = rlx.HirModule("a"), rlx.HirModule("b")
    x = other.input("x", (2, 16))
    g = h.param("g", (16,))
    with pytest.raises(rlx.BuildError, match="belongs to another HirModule"):
        h.rms_norm(x, g, g)
    with pytest.raises(rlx.BuildError, match="dynamic dim; found -3"):
        h.input("y", (-3, 4))
    with pytest.raises(rlx.BuildError, match="unknown MIR op 'nope'"):
        h.mir("nope", [g])
    with pytest.raises(rlx.BuildError, match="unknown attribute"):
        h.mir("softmax", [g], axiz=0)
    with pytest.raises(rlx.BuildError, match="fusion policy"):
        h.fusion_policy = "greedy"


# -- scans, convolution and window helpers (issue 4) -----------------------------------

LSTM_ATTRS = ('{{bidirectional = {bi}, carry = {carry}, hidden_size = 8 : i64, '
              'num_layers = {layers} : i64}}')
X3 = "tensor<1x3x4xf32>"
GDN_IN = ["tensor<1x3x2x8xf32>"] * 3 + ["tensor<1x3x2xf32>"] * 2

SCAN_CASES = {
    "lstm_h0_batch": ("rlx_hir.lstm", [X3, "tensor<32x4xf32>", "tensor<32x8xf32>",
                                       "tensor<32xf32>", "tensor<1x2x8xf32>",
                                       "tensor<1x1x8xf32>"],
                      LSTM_ATTRS.format(bi="false", carry="true", layers=1),
                      ["tensor<1x3x8xf32>", "tensor<1x1x8xf32>", "tensor<1x1x8xf32>"],
                      "operand 'h0': expected shape [1, 1, 8] ([num_layers * directions, B, "
                      "hidden]), found [1, 2, 8]"),
    "lstm_bidirectional_h0_rows": ("rlx_hir.lstm", [X3, "tensor<64x4xf32>", "tensor<64x8xf32>",
                                                    "tensor<64xf32>", "tensor<1x1x8xf32>",
                                                    "tensor<1x1x8xf32>"],
                                   LSTM_ATTRS.format(bi="true", carry="true", layers=1),
                                   ["tensor<1x3x16xf32>", "tensor<2x1x8xf32>",
                                    "tensor<2x1x8xf32>"],
                                   "operand 'h0': expected shape [2, 1, 8]"),
    "gru_hidden_vs_w_hh": ("rlx_hir.gru", [X3, "tensor<24x4xf32>", "tensor<24x6xf32>",
                                           "tensor<24xf32>", "tensor<24xf32>"],
                           LSTM_ATTRS.format(bi="false", carry="false", layers=1),
                           ["tensor<1x3x8xf32>"],
                           "operand 'w_hh' dim 1: expected 8 (the width of each "
                           "[3*hidden, hidden] block), found 6"),
    "gru_hidden_vs_b_hh": ("rlx_hir.gru", [X3, "tensor<24x4xf32>", "tensor<24x8xf32>",
                                           "tensor<24xf32>", "tensor<32xf32>"],
                           LSTM_ATTRS.format(bi="false", carry="false", layers=1),
                           ["tensor<1x3x8xf32>"],
                           "operand 'b_hh': expected 24 elements (1 [3*hidden] blocks"),
    "lstm_two_layers_rank2_w_ih": ("rlx_hir.lstm", [X3, "tensor<64x4xf32>", "tensor<64x8xf32>",
                                                    "tensor<64xf32>"],
                                   LSTM_ATTRS.format(bi="false", carry="false", layers=2),
                                   ["tensor<1x3x8xf32>"],
                                   "operand 'w_ih': expected rank 1 (flat: [4*hidden, input] "
                                   "blocks differ in width [4, 8])"),
    "lstm_peephole_width": ("rlx_hir.lstm", [X3, "tensor<32x4xf32>", "tensor<32x8xf32>",
                                             "tensor<32xf32>", "tensor<32xf32>"],
                            '{bidirectional = false, carry = false, has_peephole = true, '
                            'hidden_size = 8 : i64, num_layers = 1 : i64}',
                            ["tensor<1x3x8xf32>"],
                            "operand 'peephole': expected 24 elements (1 [3*hidden] (i, f, o) "
                            "blocks"),
    "gru_lengths_float": ("rlx_hir.gru", [X3, "tensor<24x4xf32>", "tensor<24x8xf32>",
                                          "tensor<24xf32>", "tensor<24xf32>", "tensor<1xf32>"],
                          '{bidirectional = false, carry = false, has_lengths = true, '
                          'hidden_size = 8 : i64, num_layers = 1 : i64}', ["tensor<1x3x8xf32>"],
                          "operand 'lengths': expected element type i32/i64, found f32"),
    "lstm_lengths_batch": ("rlx_hir.lstm", [X3, "tensor<32x4xf32>", "tensor<32x8xf32>",
                                            "tensor<32xf32>", "tensor<2xi64>"],
                           '{bidirectional = false, carry = false, has_lengths = true, '
                           'hidden_size = 8 : i64, num_layers = 1 : i64}', ["tensor<1x3x8xf32>"],
                           "operand 'lengths' dim 0: expected 1 (one length per batch row of "
                           "x), found 2"),
    "lstm_lengths_missing": ("rlx_hir.lstm", [X3, "tensor<32x4xf32>", "tensor<32x8xf32>",
                                              "tensor<32xf32>"],
                             '{bidirectional = false, carry = false, has_lengths = true, '
                             'hidden_size = 8 : i64, num_layers = 1 : i64}',
                             ["tensor<1x3x8xf32>"],
                             "operands: expected 5 (x, w_ih, w_hh, bias, lengths)"),
    "gdn_state_batch": ("rlx_hir.gated_delta_net",
                        ["tensor<2x3x2x8xf32>"] * 3 + ["tensor<2x3x2xf32>"] * 2
                        + ["tensor<1x2x8x8xf32>"],
                        "{carry_state = true, state_size = 8 : i64}",
                        ["tensor<2x3x2x8xf32>", "tensor<1x2x8x8xf32>"],
                        "operand 'state' dim 0: expected >= 2 ([B', H, state_size, "
                        "state_size], B' >= B: row b < B is q's row b), found 1"),
    "gdn_in_place_without_carry": ("rlx_hir.gated_delta_net", GDN_IN,
                                   "{carry_state = false, state_in_place = true, "
                                   "state_size = 8 : i64}", ["tensor<1x3x2x8xf32>"],
                                   "attribute 'state_in_place': expected only with "
                                   "carry_state = true, found carry_state = false"),
    "gdn_value_dim": ("rlx_hir.gated_delta_net", [*GDN_IN[:2], "tensor<1x3x2x4xf32>",
                                                  *GDN_IN[3:]],
                      "{carry_state = false, state_size = 8 : i64}", ["tensor<1x3x2x8xf32>"],
                      "operand 'v': expected shape [1, 3, 2, 8] (the shape of 'q')"),
    "gdn_state_size_vs_head_dim": ("rlx_hir.gated_delta_net", GDN_IN,
                                   "{carry_state = false, state_size = 4 : i64}",
                                   ["tensor<1x3x2x8xf32>"],
                                   "operand 'q' dim 3: expected 4 (state_size), found 8"),
    "conv_pad_batch": ("rlx_hir.depthwise_conv1d_causal",
                       ["tensor<2x8x16xf32>", "tensor<16x1x1x3xf32>", "tensor<1x2x16xf32>"],
                       "{kernel_size = 3 : i64}", ["tensor<2x8x16xf32>"],
                       "operand 'left_pad': expected shape [2, 2, 16] ([B, kernel_size - 1, C]"),
}


@pytest.mark.parametrize("case", sorted(SCAN_CASES))
def test_scan_and_conv_errors_are_one_clear_error(case: str) -> None:
    op, operands, attrs, results, fragment = SCAN_CASES[case]
    with pytest.raises(VerifyError) as info:
        rlx.HirModule.parse(one_op(op, operands, attrs, results), "t.hir")
    message = str(info.value)
    assert fragment in message
    assert message.startswith("t.hir:3:"), message
    assert "\n" not in message


def test_builders_refuse_bad_scan_operands() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (2, None, 4))
    w_ih, w_hh, b = h.param("w_ih", (32, 4)), h.param("w_hh", (32, 8)), h.param("b", (32,))
    n = len(h)
    with pytest.raises(VerifyError, match=r"'rlx_hir.lstm' \"lstm\": operand 'c0': expected "
                                          r"shape \[1, 2, 8\]"):
        h.lstm_carry(x, w_ih, w_hh, b, h.input("h0", (1, 2, 8)), h.input("c0", (1, 1, 8)), 8)
    with pytest.raises(VerifyError, match=r"operand 'w_hh' dim 1: expected 6"):
        h.gru(x, h.param("g_ih", (18, 4)), w_hh, h.param("b1", (18,)), h.param("b2", (18,)), 6)
    pad = h.input("pad", (2, 3, 4))
    with pytest.raises(VerifyError, match=r"operand 'left_pad': expected shape \[2, 1, 4\]"):
        h.depthwise_conv1d_causal(h.input("xs", (2, 5, 4)), h.param("cw", (4, 1, 1, 2)), pad,
                                  kernel_size=2)
    assert len(h) == n + 8, "only the 5 inputs and 3 params were added, no scan or conv op"


def test_window_helpers_refuse_bad_shapes() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (1, 16, 8))
    with pytest.raises(rlx.BuildError, match=r"window_token_gather_bsn: merge_sq: expected a "
                                             r"positive divisor of n_pos = 16, found 3"):
        h.window_token_gather_bsn(x, h.input("i3", (5,)), 1, 16, 8, 3)
    with pytest.raises(rlx.BuildError, match=r"window_token_gather_bsn: inv_window_idx: "
                                             r"expected shape \[4\] \(one index per row"):
        h.window_token_gather_bsn(x, h.input("i5", (5,)), 1, 16, 8, 4)
    with pytest.raises(rlx.BuildError, match=r"window_token_scatter_bsn: x: expected shape "
                                             r"\[1, 12, 8\]"):
        h.window_token_scatter_bsn(x, h.input("i12", (12,)), 1, 12, 8)
