"""ONNX op converters against ONNX Runtime where ONNX's node tests cannot show them: their
f32 versions (Einsum and CumSum tests are float64), older opset semantics, import-time
folding, ONNX's Attention op; all models in one compile."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_models import init, model, rand, run_models, vi
from rlx.reference.tolerance import assert_close

RNG = np.random.default_rng(7)


def one(op: str, inputs: dict[str, np.ndarray], out_shape: list, inits: tuple = (),
        opset: int = 18, out_elem: int = TensorProto.FLOAT, **attrs: object) -> tuple:
    names = [*inputs, *(i.name for i in inits)]
    node = helper.make_node(op, names, ["y"], name=f"{op.lower()}_node", **attrs)
    ins = [vi(n, list(a.shape), helper.np_dtype_to_tensor_dtype(a.dtype))
           for n, a in inputs.items()]
    return model([node], ins, [vi("y", out_shape, out_elem)], inits, opset=opset), inputs


def einsum(eq: str, *shapes: tuple[int, ...]) -> tuple:
    inputs = {f"x{i}": rand(RNG, *s) for i, s in enumerate(shapes)}
    want = np.einsum(eq, *inputs.values())
    return one("Einsum", inputs, list(want.shape), equation=eq)


def shape_chain() -> tuple:
    """Range / ConstantOfShape / Shape arithmetic folded at import into a reshape target."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="n", axis=0),
        helper.make_node("Mul", ["n", "two"], ["n2"], name="n2"),
        helper.make_node("Range", ["zero", "n2", "one"], ["r"], name="range"),
        helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25])),
        helper.make_node("Add", ["x", "c"], ["xc"], name="add"),
        helper.make_node("Reshape", ["xc", "flat"], ["xf"], name="flatten"),
        helper.make_node("Add", ["xf", "rf"], ["y"], name="plus_range"),
    ]
    inits = [init("zero", np.array(0, np.int64)), init("one", np.array(1, np.int64)),
             init("two", np.array(2, np.int64)), init("flat", np.array([-1], np.int64))]
    x = rand(RNG, 6, 2)
    return model(nodes, [vi("x", [6, 2])], [vi("y", [12])], inits), {"x": x}


def attention_op() -> tuple:
    """ONNX's Attention (opset 23): GQA, causal with a past cache, present outputs."""
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"],
                            ["y", "present_k", "present_v"], name="attn", is_causal=1)
    shapes = {"q": (1, 4, 3, 8), "k": (1, 2, 3, 8), "v": (1, 2, 3, 8), "pk": (1, 2, 5, 8),
              "pv": (1, 2, 5, 8)}
    inputs = {n: rand(RNG, *s) for n, s in shapes.items()}
    outs = [vi("y", [1, 4, 3, 8]), vi("present_k", [1, 2, 8, 8]), vi("present_v", [1, 2, 8, 8])]
    return model([node], [vi(n, list(s)) for n, s in shapes.items()], outs, opset=23), inputs


def scores_kept_and_normalized() -> tuple:
    """Scores plus a mask broadcast over the heads, returned and softmaxed (what ONNX
    Attention's function body does for ``qk_matmul_output``): IREE 3.13 fused the add into
    the softmax's dispatch as a second stored result and failed to compile it ("'vector.
    store' op write affecting operations on global resources are restricted to workgroup
    distributed contexts") until the softmax took its input behind a barrier."""
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
             helper.make_node("Add", ["s", "m"], ["a"], name="masked"),
             helper.make_node("Softmax", ["a"], ["p"], name="softmax", axis=3)]
    inputs = {"q": rand(RNG, 2, 3, 4, 8), "k": rand(RNG, 2, 3, 8, 18),
              "m": rand(RNG, 2, 1, 4, 18)}
    return model(nodes, [vi(n, list(a.shape)) for n, a in inputs.items()],
                 [vi("p", [2, 3, 4, 18]), vi("a", [2, 3, 4, 18])]), inputs


def dft(shape: tuple[int, ...], out_shape: list[int], opset: int = 18, length: int | None = None,
        axis: int | None = None, **attrs: int) -> tuple:
    """ONNX's DFT (matmuls by cosine and sine tables): ``axis`` an attribute before opset
    20, an input from it; ``length`` the optional dft_length (cut or zero-padded to)."""
    names = ["x", "n" if length is not None else ""]
    inits = [init("n", np.array(length, np.int64))] if length is not None else []
    if opset >= 20 and axis is not None:
        names.append("axis")
        inits.append(init("axis", np.array(axis, np.int64)))
    elif axis is not None:
        attrs["axis"] = axis
    node = helper.make_node("DFT", names, ["y"], name="dft", **attrs)
    x = rand(RNG, *shape)
    return model([node], [vi("x", list(shape))], [vi("y", out_shape)], inits,
                 opset=opset), {"x": x}


def reverse_sequence(shape: tuple[int, ...], lens: list[int], time_axis: int) -> tuple:
    """ReverseSequence: each batch entry's first ``lens[b]`` steps reversed (a gather)."""
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="reverse",
                            time_axis=time_axis, batch_axis=1 - time_axis)
    inputs = {"x": rand(RNG, *shape), "lens": np.array(lens, np.int64)}
    return model([node], [vi("x", list(shape)), vi("lens", [len(lens)], TensorProto.INT64)],
                 [vi("y", list(shape))]), inputs


def attention_op_3d() -> tuple:
    """3-D Attention with a bool mask, a scale and a softcap."""
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], name="attn3",
                            q_num_heads=2, kv_num_heads=2, scale=0.2, softcap=3.0)
    inputs = {"q": rand(RNG, 2, 4, 16), "k": rand(RNG, 2, 6, 16), "v": rand(RNG, 2, 6, 16),
              "mask": RNG.random((4, 6)) < 0.7}
    inputs["mask"][:, 0] = True
    ins = [vi(n, list(a.shape), TensorProto.BOOL if n == "mask" else TensorProto.FLOAT)
           for n, a in inputs.items()]
    return model([node], ins, [vi("y", [2, 4, 16])], opset=23), inputs


def gru_reset_first() -> tuple:
    """ONNX's default GRU (``linear_before_reset = 0``: the reset gate scales ``h`` before
    its matmul), bidirectional, with biases and an initial state; Y and Y_h."""
    seq, batch, feat, hid = 5, 2, 3, 4
    ins = {"x": rand(RNG, seq, batch, feat), "h0": rand(RNG, 2, batch, hid)}
    inits = (init("w", rand(RNG, 2, 3 * hid, feat)), init("r", rand(RNG, 2, 3 * hid, hid)),
             init("b", rand(RNG, 2, 6 * hid)))
    node = helper.make_node("GRU", ["x", "w", "r", "b", "", "h0"], ["y", "y_h"], name="gru",
                            hidden_size=hid, direction="bidirectional")
    outs = [vi("y", [seq, 2, batch, hid]), vi("y_h", [2, batch, hid])]
    return model([node], [vi(n, list(a.shape)) for n, a in ins.items()], outs, inits), ins


def resize(op: str, opset: int, shape: tuple[int, ...], out: list[int],
           scales: list[float] | None = None, sizes: list[int] | None = None,
           roi: list[float] | None = None, **attrs: object
           ) -> tuple:
    """One Resize / Upsample node over a static input; scales, sizes and roi as
    initializers."""
    inits = []
    names = ["x"]
    if op == "Upsample" or opset < 11:
        names.append("scales")
        inits.append(init("scales", np.array(scales, np.float32)))
    else:
        names += ["roi" if roi else "", "scales" if scales else "", "sizes" if sizes else ""]
        inits += [init("roi", np.array(roi, np.float32))] if roi else []
        inits += [init("scales", np.array(scales, np.float32))] if scales else []
        inits += [init("sizes", np.array(sizes, np.int64))] if sizes else []
    while names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["y"], name=f"{op.lower()}_node", **attrs)
    x = rand(RNG, *shape)
    return model([node], [vi("x", list(shape))], [vi("y", out)], inits, opset=opset), {"x": x}


def lstm_reverse() -> tuple:
    """A reverse-only LSTM (the forward scan of the time-reversed sequence, its outputs
    reversed back); Y, Y_h and Y_c."""
    seq, batch, feat, hid = 4, 2, 3, 5
    ins = {"x": rand(RNG, seq, batch, feat)}
    inits = (init("w", rand(RNG, 1, 4 * hid, feat)), init("r", rand(RNG, 1, 4 * hid, hid)),
             init("b", rand(RNG, 1, 8 * hid)))
    node = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "y_h", "y_c"], name="lstm",
                            hidden_size=hid, direction="reverse")
    outs = [vi("y", [seq, 1, batch, hid]), vi("y_h", [1, batch, hid]), vi("y_c", [1, batch, hid])]
    return model([node], [vi("x", [seq, batch, feat])], outs, inits), ins


def ragged_rnn(op: str, direction: str, peepholes: bool = False) -> tuple:
    """An LSTM / GRU over rows of different lengths (``sequence_lens`` a run-time input;
    padding steps output zeros, the reverse direction starts at each row's last step),
    the LSTM with peepholes; Y and Y_h."""
    seq, batch, feat, hid, gates = 4, 3, 3, 5, 4 if op == "LSTM" else 3
    dirs = 2 if direction == "bidirectional" else 1
    ins = {"x": rand(RNG, seq, batch, feat), "lens": np.array([4, 2, 3], np.int32)}
    inits = [init("w", rand(RNG, dirs, gates * hid, feat)),
             init("r", rand(RNG, dirs, gates * hid, hid)),
             init("b", rand(RNG, dirs, 2 * gates * hid))]
    names = ["x", "w", "r", "b", "lens"]
    if peepholes:
        inits.append(init("p", rand(RNG, dirs, 3 * hid)))
        names += ["", "", "p"]
    node = helper.make_node(op, names, ["y", "y_h"], name="rnn", hidden_size=hid,
                            direction=direction)
    outs = [vi("y", [seq, dirs, batch, hid]), vi("y_h", [dirs, batch, hid])]
    return model([node], [vi("x", [seq, batch, feat]),
                          vi("lens", [batch], TensorProto.INT32)], outs, inits), ins


def gather_nd_batched() -> tuple:
    """GatherND with two batch dims and negative indices."""
    data = rand(RNG, 2, 3, 4, 5)
    idx = RNG.integers(-4, 4, (2, 3, 6, 1)).astype(np.int64)
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], name="gnd", batch_dims=2)
    return model([node], [vi("data", [2, 3, 4, 5]), vi("idx", [2, 3, 6, 1], TensorProto.INT64)],
                 [vi("y", [2, 3, 6, 5])]), {"data": data, "idx": idx}


def batch_norm_training() -> tuple:
    """BatchNormalization in training mode over a dynamic batch: normalized by the
    batch's own statistics; the running mean and variance outputs updated by momentum."""
    x, scale, bias = rand(RNG, 3, 4, 5, 2, scale=2) + 1, rand(RNG, 4), rand(RNG, 4)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                            ["y", "rm", "rv"], name="bn", training_mode=1, momentum=0.7,
                            epsilon=1e-3)
    inits = (init("s", scale), init("b", bias), init("m", rand(RNG, 4)),
             init("v", np.abs(rand(RNG, 4)) + 0.5))
    outs = [vi("y", ["n", 4, 5, 2]), vi("rm", [4]), vi("rv", [4])]
    return model([node], [vi("x", ["n", 4, 5, 2])], outs, inits, opset=15), {"x": x}


def max_pool_indices(shape: tuple[int, ...], out: list, **attrs: object) -> tuple:
    """MaxPool with its Indices output over a dynamic batch; the input rounded to whole
    numbers, so that windows hold ties (the first maximum in row-major window order)."""
    x = np.round(rand(RNG, *shape, scale=2))
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", **attrs)
    dims = ["n", *shape[1:]]
    outs = [vi("y", ["n", *out]), vi("i", ["n", *out], TensorProto.INT64)]
    return model([node], [vi("x", dims)], outs, opset=12), {"x": x}


def mod(fmod: int, dtype: type) -> tuple:
    """Mod over mixed signs (the sign of B with ``fmod = 0``, of A with ``fmod = 1``)."""
    a = (RNG.integers(-30, 30, (3, 5)) if dtype == np.int32 else
         rand(RNG, 3, 5, scale=6)).astype(dtype)
    b = np.array([7, -7, 3, -4, 5], dtype) if dtype == np.int32 else \
        np.array([1.5, -1.5, 0.7, -2.5, 3.0], dtype)
    elem = TensorProto.INT32 if dtype == np.int32 else TensorProto.FLOAT
    # a float Mod with fmod = 0 exists from opset 28
    opset = 28 if dtype != np.int32 and not fmod else 18
    return one("Mod", {"a": a, "b": b}, [3, 5], out_elem=elem, opset=opset, fmod=fmod)


def mel_bank(upper: float = 8000.0) -> tuple:
    """A power spectrum times ONNX's mel filter bank (Whisper's 80 bins of a 400-point DFT
    at 16 kHz), its sizes constants: folded at import time."""
    names = ["bins", "dft", "rate", "lower", "upper"]
    values = [np.array(80, np.int64), np.array(400, np.int64), np.array(16000, np.int64),
              np.array(0.0, np.float32), np.array(upper, np.float32)]
    nodes = [helper.make_node("MelWeightMatrix", names, ["w"], name="mel"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    m = model(nodes, [vi("x", ["n", 201])], [vi("y", ["n", 80])],
              [init(n, v) for n, v in zip(names, values, strict=True)])
    return m, {"x": np.abs(rand(RNG, 3, 201))}


CASES = {
    "scores_kept_and_normalized": scores_kept_and_normalized(),
    "mel_filter_bank": mel_bank(),
    "reverse_sequence_time_major": reverse_sequence((5, 3, 2), [5, 1, 3], time_axis=0),
    "reverse_sequence_batch_major": reverse_sequence((2, 4, 3, 2), [3, 4], time_axis=1),
    "dft_complex_middle_axis": dft((2, 6, 3, 2), [2, 6, 3, 2], axis=1),
    "dft_rfft_cut": dft((2, 4, 9, 1), [2, 4, 4, 2], length=7, axis=2, onesided=1),
    "dft_inverse_padded": dft((3, 5, 2), [3, 8, 2], length=8, axis=1, inverse=1),
    "dft_irfft_axis_input": dft((2, 5, 4, 2), [2, 8, 4, 1], opset=20, axis=-3, onesided=1,
                                inverse=1),
    "mod_int_python_sign": mod(0, np.int32),
    "mod_int_c_sign": mod(1, np.int32),
    "mod_float_fmod": mod(1, np.float32),
    "mod_float_python_sign": mod(0, np.float32),
    "lstm_reverse": lstm_reverse(),
    "lstm_peephole_lengths_reverse": ragged_rnn("LSTM", "reverse", peepholes=True),
    "lstm_peephole_lengths_bidirectional": ragged_rnn("LSTM", "bidirectional", peepholes=True),
    "gru_lengths_forward": ragged_rnn("GRU", "forward"),
    "batch_norm_training": batch_norm_training(),
    "max_pool_indices_ceil": max_pool_indices((2, 3, 7, 8), [3, 4, 4], kernel_shape=[3, 2],
                                              strides=[2, 2], pads=[1, 0, 0, 1],
                                              ceil_mode=1),
    "max_pool_indices_dilated_1d": max_pool_indices((2, 2, 9), [2, 9], kernel_shape=[2],
                                                    dilations=[2], pads=[1, 1]),
    "max_pool_indices_column_major": max_pool_indices((1, 2, 5, 6), [2, 2, 3],
                                                      kernel_shape=[2, 2], strides=[2, 2],
                                                      storage_order=1),
    "gather_nd_batch_dims": gather_nd_batched(),
    # pads from output_shape (SAME_UPPER with an output_shape is left out: ONNX Runtime
    # splits its padding the other way round from ONNX's spec and reference evaluator,
    # which rlx follows)
    "conv_transpose_output_shape": one(
        "ConvTranspose", {"x": rand(RNG, 1, 2, 4, 5)}, [1, 3, 10, 11],
        inits=(init("w", rand(RNG, 2, 3, 3, 3)),), strides=[2, 2], output_shape=[10, 11]),
    "conv_transpose_same_lower": one(
        "ConvTranspose", {"x": rand(RNG, 1, 2, 4, 5)}, [1, 3, 9, 12],
        inits=(init("w", rand(RNG, 2, 3, 3, 3)),), strides=[2, 2],
        output_shape=[9, 12], auto_pad="SAME_LOWER"),
    "resize10_nearest_down": resize("Resize", 10, (1, 2, 5, 7), [1, 2, 3, 3],
                                    scales=[1, 1, 0.6, 0.5]),
    "upsample9_nearest": resize("Upsample", 9, (1, 2, 3, 4), [1, 2, 6, 12],
                                scales=[1, 1, 2, 3]),
    "resize_cubic_exclude_outside": resize("Resize", 19, (1, 2, 5, 6), [1, 2, 4, 10],
                                           scales=[1, 1, 0.8, 1.7], mode="cubic",
                                           cubic_coeff_a=-0.5, exclude_outside=1),
    "resize_linear_antialias": resize("Resize", 19, (1, 2, 9, 8), [1, 2, 4, 3],
                                      sizes=[1, 2, 4, 3], mode="linear", antialias=1),
    "resize_cubic_antialias": resize("Resize", 19, (1, 1, 8, 9), [1, 1, 3, 4],
                                     scales=[1, 1, 0.4, 0.5], mode="cubic", antialias=1),
    "resize_align_corners_scales": resize("Resize", 19, (1, 2, 5, 7), [1, 2, 3, 4],
                                          scales=[1, 1, 0.6, 0.6], mode="linear",
                                          coordinate_transformation_mode="align_corners"),
    "resize_crop_extrapolate": resize("Resize", 19, (1, 2, 6, 6), [1, 2, 5, 4],
                                      sizes=[5, 4], roi=[-0.2, 0.3, 0.9, 1.2], axes=[2, 3],
                                      mode="linear", extrapolation_value=7.0,
                                      coordinate_transformation_mode="tf_crop_and_resize"),
    "gru_reset_first": gru_reset_first(),
    "einsum_matmul": einsum("ij,jk->ik", (3, 4), (4, 5)),
    "einsum_batch": einsum("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    "einsum_diagonal": einsum("...ii->...i", (2, 4, 4)),
    "einsum_inner": einsum("i,i", (7,), (7,)),
    "einsum_sum": einsum("ij->i", (3, 4)),
    "einsum_transpose": einsum("ij->ji", (3, 4)),
    "einsum_three": einsum("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    "einsum_outer_implicit": einsum("i,j", (3,), (4,)),
    "cumsum_reverse_exclusive": one("CumSum", {"x": rand(RNG, 3, 5)}, [3, 5],
                                    (init("axis", np.array(1, np.int64)),), reverse=1,
                                    exclusive=1),
    "cumsum_axis0": one("CumSum", {"x": rand(RNG, 4, 3)}, [4, 3],
                        (init("axis", np.array(-2, np.int64)),)),
    "softmax_opset11": one("Softmax", {"x": rand(RNG, 2, 3, 4)}, [2, 3, 4], opset=11,
                           axis=1),
    "logsoftmax_large": one("LogSoftmax", {"x": rand(RNG, 2, 5, scale=50)}, [2, 5]),
    "tile": one("Tile", {"x": rand(RNG, 2, 3)}, [4, 9],
                (init("reps", np.array([2, 3], np.int64)),)),
    "pad_crop": one("Pad", {"x": rand(RNG, 4, 5)}, [5, 4],
                    (init("pads", np.array([1, 0, 0, -1], np.int64)),
                     init("value", np.float32(1.5)))),
    "leaky_relu": one("LeakyRelu", {"x": rand(RNG, 3, 4)}, [3, 4], alpha=0.2),
    "conv1d_bias_same": one("Conv", {"x": rand(RNG, 1, 4, 9)}, [1, 6, 5],
                            (init("w", rand(RNG, 6, 2, 3)), init("b", rand(RNG, 6))),
                            group=2, strides=[2], auto_pad="SAME_UPPER"),
    "layer_norm_axis1": one("LayerNormalization", {"x": rand(RNG, 2, 3, 4)}, [2, 3, 4],
                            (init("g", rand(RNG, 3, 4)), init("b", rand(RNG, 4))), axis=1),
    "gemm_trans": one("Gemm", {"a": rand(RNG, 4, 3)}, [3, 5],
                      (init("bw", rand(RNG, 5, 4)), init("c", rand(RNG, 5))),
                      transA=1, transB=1, alpha=0.5, beta=2.0),
    "matmul_vector": one("MatMul", {"a": rand(RNG, 2, 3, 4), "v": rand(RNG, 4)}, [2, 3]),
    "batch_norm_runtime": one("BatchNormalization",
                              {"x": rand(RNG, 2, 3, 4, 4), "s": rand(RNG, 3),
                               "bb": rand(RNG, 3), "m": rand(RNG, 3),
                               "v": np.abs(rand(RNG, 3)) + 0.5}, [2, 3, 4, 4]),
    "gather_negative": one("Gather", {"x": rand(RNG, 5, 3), "i": np.array([-1, 0, -5], np.int64)},
                           [3, 3]),
    "pow_int": one("Pow", {"x": np.array([2, 3, -4], np.int32),
                           "e": np.array([10, 5, 3], np.int32)}, [3],
                   out_elem=TensorProto.INT32),
    # the norms and log-sums on a sum (sentence-transformers' normalize is ReduceL2)
    "reduce_l2_rows": one("ReduceL2", {"x": rand(RNG, 3, 8)}, [3, 1],
                          (init("axes", np.array([-1], np.int64)),)),
    "reduce_l1_drop": one("ReduceL1", {"x": rand(RNG, 2, 3, 4)}, [3],
                          (init("axes", np.array([0, 2], np.int64)),), keepdims=0),
    "reduce_sum_square_all": one("ReduceSumSquare", {"x": rand(RNG, 2, 5)}, [1, 1]),
    "reduce_l2_opset13": one("ReduceL2", {"x": rand(RNG, 4, 6)}, [4], opset=13, axes=[1],
                             keepdims=0),
    "reduce_log_sum": one("ReduceLogSum", {"x": np.abs(rand(RNG, 3, 4)) + 0.1}, [1, 4],
                          (init("axes", np.array([0], np.int64)),)),
    # exp(x) overflows f32 from 88.7: the max comes out first
    "reduce_log_sum_exp_large": one("ReduceLogSumExp", {"x": rand(RNG, 2, 3, 5, scale=60)},
                                    [2, 5], (init("axes", np.array([1], np.int64)),),
                                    keepdims=0),
    "reduce_l2_noop": one("ReduceL2", {"x": rand(RNG, 2, 3)}, [2, 3],
                          noop_with_empty_axes=1),
    "shape_chain": shape_chain(),
    "attention_op": attention_op(),
    "attention_op_3d": attention_op_3d(),
}


@pytest.fixture(scope="module")
def ran() -> dict:
    return run_models(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_onnx_runtime(ran: dict, name: str) -> None:
    r = ran[name]
    for i, (got, want) in enumerate(zip(r.got, r.want, strict=True)):
        assert got.shape == want.shape
        assert_close(got, want, "i32" if want.dtype == np.int32 else "f32", f"{name} #{i}")


def test_shape_arithmetic_is_folded(ran: dict) -> None:
    report = ran["shape_chain"].report
    assert set(report.folded) == {"Shape", "Gather", "Mul", "Range", "Cast",
                                  "ConstantOfShape"}
    assert set(report.converted) == {"Add", "Reshape"}


@pytest.mark.parametrize(("shape", "attrs", "why"), [
    ((2, 6, 2), {"onesided": 1}, "the forward transform \\(RFFT\\) takes a real signal"),
    ((2, 6, 1), {"onesided": 1, "inverse": 1}, "the inverse \\(IRFFT\\) a complex one"),
    ((2, 6, 3), {}, r"expected \[\.\.\., signal, 1\] \(real\) or \[\.\.\., signal, 2\]"),
    ((2, 6, 1), {"axis": 2}, r"axis 2 outside \[-3, -2\] and \[0, 1\]"),
])
def test_dfts_rlx_refuses_name_the_node(shape: tuple, attrs: dict, why: str) -> None:
    """A one-sided transform of the wrong kind of signal, a last dim that is neither real
    nor complex, the complex dim as the axis: one error naming the node, at import."""
    from rlx.importers.onnx import import_model
    from rlx.ir.diagnostics import ModelImportError

    m, _ = dft(shape, [*shape[:-1], 2], **attrs)
    with pytest.raises(ModelImportError, match=rf"'dft' \(DFT.*{why}"):
        import_model(m)


@pytest.mark.parametrize(("shape", "window", "attrs", "why"), [
    ((1, 40, 2), 8, {}, "a complex signal has no one-sided transform"),
    ((1, 40, 1), 8, {"frame_length": 16}, "a window of 8 samples for frames of 16"),
    ((1, 10, 1), None, {"frame_length": 16}, "none fits"),
])
def test_stfts_rlx_refuses_name_the_node(shape: tuple, window: int | None, attrs: dict,
                                         why: str) -> None:
    """A one-sided STFT of a complex signal, a window that is not the frame length, frames
    longer than the signal: one error naming the node, at import."""
    from rlx.importers.onnx import import_model
    from rlx.ir.diagnostics import ModelImportError

    inits = [init("step", np.array(4, np.int64))]
    names = ["x", "step", ""]
    if window is not None:
        inits.append(init("w", np.hanning(window).astype(np.float32)))
        names[2] = "w"
    if "frame_length" in attrs:
        inits.append(init("fl", np.array(attrs["frame_length"], np.int64)))
        names.append("fl")
    node = helper.make_node("STFT", names, ["y"], name="stft")
    m = model([node], [vi("x", list(shape))], [vi("y", [1, 1, 1, 2])], inits, opset=17)
    with pytest.raises(ModelImportError, match=rf"'stft' \(STFT.*{why}"):
        import_model(m)


def _refused(m: object, node: str, op: str, why: str) -> None:
    from rlx.importers.onnx import import_model
    from rlx.ir.diagnostics import ModelImportError

    with pytest.raises(ModelImportError, match=rf"'{node}' \({op}.*{why}"):
        import_model(m)


def test_dft_lengths_rlx_refuses_name_the_node() -> None:
    """A dft_length read from the data, or not positive, a dft_length beside a signal of
    run-time length, an integer signal: one error naming the node."""
    def graph(x_shape: list, length: np.ndarray | None, elem: int = TensorProto.FLOAT,
              runtime_length: bool = False) -> object:
        ins = [vi("x", x_shape, elem)]
        inits = []
        if runtime_length:
            ins.append(vi("n", [], TensorProto.INT64))
        elif length is not None:
            inits.append(init("n", length))
        names = ["x", "n" if runtime_length or length is not None else ""]
        return model([helper.make_node("DFT", names, ["y"], name="dft", axis=1)], ins,
                     [vi("y", ["a", "b", 2])], inits)

    _refused(graph([2, 6, 1], None, runtime_length=True), "dft", "DFT",
             "dft_length \\(input 1\\) is computed at run time")
    _refused(graph([2, 6, 1], np.array(0, np.int64)), "dft", "DFT",
             "dft_length 0: expected a positive length")
    _refused(graph([2, "s", 1], np.array(8, np.int64)), "dft", "DFT",
             "a dft_length \\(8\\) beside a signal of run-time length")
    _refused(graph([2, 6, 1], None, elem=TensorProto.INT32), "dft", "DFT",
             "DFT takes a float input")


def test_mel_edges_past_nyquist_name_the_node() -> None:
    _refused(mel_bank(9000.0)[0], "mel", "MelWeightMatrix",
             "the last edge below upper_edge_hertz 9000.0 falls in bin 217, past the 201 bins")


def test_stft_and_reverse_sequence_arguments_rlx_refuses_name_the_node() -> None:
    """STFT: a step that is not positive, a 2-D window, a signal without its batch dim;
    ReverseSequence: time and batch on one axis, lengths that are not 1-D."""
    def stft(x_shape: list, step: int, window: np.ndarray | None) -> object:
        inits = [init("step", np.array(step, np.int64))]
        if window is not None:
            inits.append(init("w", window))
        node = helper.make_node("STFT", ["x", "step", "w" if window is not None else ""],
                                ["y"], name="stft")
        return model([node], [vi("x", x_shape)], [vi("y", [1, 1, 1, 2])], inits, opset=17)

    _refused(stft([1, 40, 1], 0, None), "stft", "STFT", "frame_step 0: expected a positive")
    _refused(stft([1, 40, 1], 4, np.ones((2, 4), np.float32)), "stft", "STFT",
             "expected a 1-D tensor")
    _refused(stft([40, 1], 4, None), "stft", "STFT", r"expected \[batch, length, 1 or 2\]")

    def reverse(lens_shape: list, **axes: int) -> object:
        node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev", **axes)
        return model([node], [vi("x", [5, 3, 2]), vi("lens", lens_shape, TensorProto.INT64)],
                     [vi("y", [5, 3, 2])])

    _refused(reverse([3], time_axis=0, batch_axis=0), "rev", "ReverseSequence",
             "expected 0 and 1, one each")
    _refused(reverse([3, 1]), "rev", "ReverseSequence", "expected a 1-D integer tensor")
