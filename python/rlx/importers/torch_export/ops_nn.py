"""ATen neural-network ops: linear and matrix products, 2-D convolution, batch and layer
norm, pooling, LSTM / GRU, and attention that was not recognized as a block."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.torch_export.convert import Op, Value, converter


def _pair(op: Op, v: Any, what: str, n: int = 2) -> list[int]:
    if isinstance(v, str):
        op.fail(f"{what} '{v}' is not supported (give sizes)")
    values = [int(v)] * n if isinstance(v, int) else [int(e) for e in v]
    if len(values) == 1:
        values *= n
    if len(values) != n:
        op.fail(f"{what} {values}: expected {n} values")
    return values


def _unflattened(op: Op, x: HirValue) -> HirValue | None:
    """The tensor ``x [R, K]`` is a view of, when that is ``[..., K]`` of a higher rank
    (``x.view(-1, k)``: GPT-2's Conv1D, OPT's MLP), so that a product can be taken on its
    own dims and the view back to them needs no two dynamic sizes from one."""
    src = op.importer.reshaped_from.get(x.value)
    if src is not None and len(x.shape) == 2 and len(src.shape) > 2 \
            and src.shape[-1] == x.shape[-1]:
        return src
    return None


def _flattened_back(op: Op, y: HirValue, src: HirValue) -> Value:
    """``y [..., N]`` computed on ``src``'s dims, viewed as the program's ``[R, N]``."""
    dims = [*op.dims(src)[:-1], op.out_dims()[-1]]
    return op.reshape(op.importer.known(y, dims), op.out_dims())


@converter("linear")
def convert_linear(op: Op) -> Value:
    x = op.tensor(0, "input")
    src = _unflattened(op, x)
    w = op.arg(1, "weight")
    b = op.arg(2, "bias", None)
    bias = None if b is None else op.as_tensor(b, op.raw(2, "bias"))
    if isinstance(w, np.ndarray):
        name = op.g.weight_name(op.raw(1, "weight")) if op.raw(1, "weight") in op.g.weights \
            else op.raw(1, "weight").name
        wt = op.importer.weight_tensor(np.ascontiguousarray(w.T), f"{name}.T", op.node)
        if src is not None:
            return _flattened_back(op, op.h.linear(src, wt, bias), src)
        return op.h.linear(x, wt, bias)
    wt = op.mir("transpose", [op.as_tensor(w)], perm=[1, 0])
    y = op.mir("matmul", [x, wt])
    return y if bias is None else op.mir("binary", [y, bias], kind="add")


@converter("mm", "bmm", "matmul")
def convert_matmul(op: Op) -> Value:
    a, b = op.tensor(0), op.tensor(1, "other")
    if len(a.shape) < 2 or len(b.shape) < 2:
        op.fail("a matrix product of a vector (rank 1) is not supported")
    return op.mir("matmul", [a, b])


@converter("baddbmm")
def convert_baddbmm(op: Op) -> Value:
    """``beta input + alpha (batch1 @ batch2)`` (BLOOM's ALiBi scores)."""
    base, a, b = op.tensor(0), op.tensor(1, "batch1"), op.tensor(2, "batch2")
    beta = float(op.node.kwargs.get("beta", op.raw(3, "beta", 1)))
    alpha = float(op.node.kwargs.get("alpha", op.raw(4, "alpha", 1)))
    y = op.mir("matmul", [a, b])
    if alpha != 1:
        y = op.mir("binary", [y, op.scalar(alpha, y.dtype)], kind="mul")
    if beta == 0:                           # torch ignores input then (NaN and inf too)
        return y
    if beta != 1:
        base = op.mir("binary", [op.cast(base, y.dtype), op.scalar(beta, y.dtype)], kind="mul")
    return op.mir("binary", [y, op.cast(base, y.dtype)], kind="add")


@converter("addmm")
def convert_addmm(op: Op) -> Value:
    bias, a, b = op.tensor(0), op.tensor(1, "mat1"), op.tensor(2, "mat2")
    if op.arg(3, "beta", 1) != 1 or op.node.kwargs.get("alpha", 1) != 1:
        op.fail("addmm with alpha or beta other than 1")
    src = _unflattened(op, a)
    if src is not None:  # x.view(-1, k) @ w + b, GPT-2's Conv1D
        return _flattened_back(op, op.mir("binary", [op.mir("matmul", [src, b]), bias],
                                          kind="add"), src)
    return op.mir("binary", [op.mir("matmul", [a, b]), bias], kind="add")


def _conv1d(op: Op, x: HirValue, w: Any, w_src: Any, bias: Any, args: Sequence[Any]
            ) -> Value:
    """A 1-D convolution (``[N, C, L]``: Whisper's and wav2vec2's front ends) as the 2-D
    one over ``[N, C, 1, L]`` with a ``1 x k`` kernel, its result viewed back."""
    stride, padding, dilation, groups = args
    if isinstance(padding, str):
        op.fail(f"padding '{padding}' is not supported (give sizes)")
    one = [_pair(op, v, what, 1)[0] for v, what in
           ((stride, "stride"), (padding, "padding"), (dilation, "dilation"))]
    lifted = op.mir("reshape", [x], new_shape=[-2 if x.shape[0] is None else x.shape[0],
                                               x.shape[1], 1, -4 if x.shape[2] is None
                                               else x.shape[2]])
    wt = (w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]) if isinstance(w, np.ndarray)
          else op.mir("reshape", [op.as_tensor(w, w_src)], new_shape=[
              w.shape[0], w.shape[1], 1, w.shape[2]]))
    y = _conv(op, lifted, wt, w_src, bias, [[1, one[0]], [0, one[1]], [1, one[2]], groups])
    return op.mir("reshape", [y], new_shape=[-2 if y.shape[0] is None else y.shape[0],
                                             y.shape[1], -5 if y.shape[3] is None
                                             else y.shape[3]])


def _conv(op: Op, x: HirValue, w: Any, w_src: Any, bias: Any, args: Sequence[Any]) -> Value:
    stride, padding, dilation, groups = args
    if len(x.shape) == 3:
        return _conv1d(op, x, w, w_src, bias, args)
    wt = op.as_tensor(w, w_src)
    if len(x.shape) != 4:
        op.fail(f"convolution of a rank-{len(x.shape)} input: rlx convolves NCW and NCHW "
                "(1-D and 2-D)")
    y = op.mir("conv", [x, wt], kernel_size=list(wt.shape[2:]),
               stride=_pair(op, stride, "stride"), padding=_pair(op, padding, "padding"),
               dilation=_pair(op, dilation, "dilation"), groups=int(groups))
    if bias is None:
        return y
    b = bias.reshape(1, -1, 1, 1) if isinstance(bias, np.ndarray) else op.mir(
        "reshape", [bias], new_shape=[1, -1, 1, 1])
    return op.mir("binary", [y, b], kind="add")


@converter("_weight_norm")
def convert_weight_norm(op: Op) -> Value:
    """``g * v / ||v||``, the norm over every dim but ``dim`` (the whole tensor for -1),
    computed at import time in float64 from the weights (wav2vec2's positional
    convolution)."""
    v, g, dim = op.arg(0, "v"), op.arg(1, "g"), int(op.arg(2, "dim", 0))
    if not (isinstance(v, np.ndarray) and isinstance(g, np.ndarray)):
        op.fail("a weight norm of tensors computed at run time is not supported")
    axes = tuple(range(v.ndim)) if dim == -1 else tuple(
        a for a in range(v.ndim) if a != dim % v.ndim)
    v64 = v.astype(np.float64)
    norm = np.sqrt(np.sum(v64 * v64, axis=axes, keepdims=True))
    return (g.astype(np.float64) * v64 / norm).astype(v.dtype)


@converter("conv1d", "conv2d")
def convert_conv2d(op: Op) -> Value:
    args = [op.arg(3, "stride", 1), op.arg(4, "padding", 0), op.arg(5, "dilation", 1),
            op.arg(6, "groups", 1)]
    return _conv(op, op.tensor(0, "input"), op.arg(1, "weight"), op.raw(1, "weight"),
                 op.arg(2, "bias", None), args)


@converter("convolution")
def convert_convolution(op: Op) -> Value:
    if op.arg(6, "transposed"):
        op.fail("transposed convolution is not supported")
    args = [op.arg(3, "stride"), op.arg(4, "padding"), op.arg(5, "dilation"),
            op.arg(8, "groups")]
    return _conv(op, op.tensor(0, "input"), op.arg(1, "weight"), op.raw(1, "weight"),
                 op.arg(2, "bias"), args)


def _const(op: Op, i: int, name: str, what: str) -> np.ndarray | None:
    v = op.arg(i, name, None)
    if v is not None and not isinstance(v, np.ndarray):
        op.fail(f"{what} must be a weight known at import time")
    return v


@converter("batch_norm", "_native_batch_norm_legit_no_training")
def convert_batch_norm(op: Op) -> Value | list[Value]:
    name = op.name
    x = op.tensor(0, "input")
    if name == "batch_norm" and op.arg(5, "training"):
        op.fail("batch norm in training mode (export the model after model.eval())")
    eps = float(op.arg(7 if name == "batch_norm" else 6, "eps"))
    mean, var = _const(op, 3, "running_mean", "the mean"), _const(op, 4, "running_var",
                                                                   "the variance")
    if mean is None or var is None:
        op.fail("batch norm without running statistics")
    w = _const(op, 1, "weight", "the scale")
    b = _const(op, 2, "bias", "the shift")
    c = mean.shape[0]
    scale = (w if w is not None else np.ones(c, np.float32)) / np.sqrt(var.astype(
        np.float64) + eps)
    shift = (b if b is not None else np.zeros(c, np.float32)) - mean * scale
    shape = [1, c] + [1] * (len(x.shape) - 2)
    dtype = op.scalar(0, x.dtype).dtype
    y = op.mir("binary", [x, scale.astype(dtype).reshape(shape)], kind="mul")
    y = op.mir("binary", [y, shift.astype(dtype).reshape(shape)], kind="add")
    return y if name == "batch_norm" else [y, None, None]


@converter("layer_norm", "native_layer_norm")
def convert_layer_norm(op: Op) -> Value | list[Value]:
    name = op.name
    x = op.tensor(0, "input")
    shape = list(op.arg(1, "normalized_shape"))
    if len(shape) != 1:
        op.fail(f"layer norm over {len(shape)} dims: rlx normalizes the last dim")
    d = int(shape[0])
    dtype = op.scalar(0, x.dtype).dtype
    w, b = op.arg(2, "weight", None), op.arg(3, "bias", None)
    gamma = np.ones(d, dtype) if w is None else w
    beta = np.zeros(d, dtype) if b is None else b
    eps = float(op.arg(4, "eps", 1e-5))
    y = op.mir("layer_norm", [x, op.as_tensor(gamma, op.raw(2, "weight")),
                              op.as_tensor(beta, op.raw(3, "bias"))], axis=-1, eps=eps)
    return y if name == "layer_norm" else [y, None, None]


def _pool(op: Op, kind: str, args: Sequence[Any], ceil: bool, include_pad: bool) -> Value:
    x = op.tensor(0)
    kernel, stride, padding, dilation = args
    k = _pair(op, kernel, "kernel_size")
    s = _pair(op, stride if stride not in (None, []) else k, "stride")
    p = _pair(op, padding, "padding")
    return op.mir("pool", [x], kind=kind, kernel_size=k, stride=s,
                  dilation=_pair(op, dilation, "dilation"), padding=p + p, ceil_mode=ceil,
                  count_include_pad=include_pad)


@converter("max_pool2d", "max_pool2d_with_indices")
def convert_max_pool(op: Op) -> Value | list[Value]:
    y = _pool(op, "max", [op.arg(1, "kernel_size"), op.arg(2, "stride", None),
                          op.arg(3, "padding", 0), op.arg(4, "dilation", 1)],
              bool(op.arg(5, "ceil_mode", False)), False)
    with_indices = op.name != "max_pool2d"  # type: ignore[union-attr]
    return [y, None] if with_indices else y


@converter("avg_pool2d")
def convert_avg_pool(op: Op) -> Value:
    if op.arg(6, "divisor_override", None) is not None:
        op.fail("avg_pool2d with divisor_override")
    return _pool(op, "avg", [op.arg(1, "kernel_size"), op.arg(2, "stride", None),
                             op.arg(3, "padding", 0), 1],
                 bool(op.arg(4, "ceil_mode", False)), bool(op.arg(5, "count_include_pad",
                                                                  True)))


@converter("adaptive_avg_pool2d", "_adaptive_avg_pool2d")
def convert_adaptive_avg_pool(op: Op) -> Value:
    x = op.tensor(0)
    out = _pair(op, op.arg(1, "output_size"), "output_size")
    if out == [1, 1]:
        return op.mir("reduce", [x], kind="mean", axes=[2, 3], keep_dim=True)
    h, w = x.shape[2], x.shape[3]
    if h is None or w is None or h % out[0] or w % out[1]:
        op.fail(f"adaptive pooling of {x.type} to {out}: rlx pools to 1x1, or to sizes that "
                "divide static spatial dims")
    k = [h // out[0], w // out[1]]
    return op.mir("pool", [x], kind="avg", kernel_size=k, stride=k, dilation=[1, 1],
                  padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=False)


def _rnn(op: Op, gates: int) -> list[Value]:
    """``aten.lstm.input`` / ``gru.input``: PyTorch's packed weights are rlx's."""
    name = op.name
    x = op.tensor(0, "input")
    states = op.raw(1, "hx")
    states = list(states) if isinstance(states, list | tuple) else [states]
    params = [op.value(p) for p in op.raw(2, "params")]
    has_biases, layers, _, train, bidirectional, batch_first = (
        op.arg(i, n) for i, n in enumerate(("has_biases", "num_layers", "dropout", "train",
                                            "bidirectional", "batch_first"), start=3))
    if train:
        op.fail(f"{name} in training mode (export after model.eval())")
    if not all(isinstance(p, np.ndarray) for p in params):
        op.fail(f"{name} weights must be known at import time")
    per = 4 if has_biases else 2
    if len(params) % per or any(p.ndim == 2 and p.shape[0] != gates * params[1].shape[1]
                                for p in params):
        op.fail(f"{name} weights with projections are not supported")
    groups = [params[i:i + per] for i in range(0, len(params), per)]
    hidden = params[1].shape[1]
    zeros = [np.zeros(gates * hidden, params[0].dtype)] * 2
    w_ih = np.concatenate([g[0].reshape(-1) for g in groups])
    w_hh = np.concatenate([g[1].reshape(-1) for g in groups])
    b = [g[2:] if has_biases else zeros for g in groups]
    seq = x if batch_first else op.mir("transpose", [x], perm=[1, 0, 2])
    weights = [op.importer.weight_tensor(w_ih, f"{op.node.name}.w_ih", op.node),
               op.importer.weight_tensor(w_hh, f"{op.node.name}.w_hh", op.node)]
    if gates == 4:
        weights.append(op.importer.weight_tensor(np.concatenate([bi + bh for bi, bh in b]),
                                                 f"{op.node.name}.bias", op.node))
    else:
        weights += [op.importer.weight_tensor(np.concatenate([g[k] for g in b]),
                                              f"{op.node.name}.b_{n}", op.node)
                    for k, n in ((0, "ih"), (1, "hh"))]
    init = [op.as_tensor(op.value(s), s) for s in states]
    build = op.h.lstm_carry if gates == 4 else op.h.gru_carry
    outs = list(build(seq, *weights, *init, hidden_size=int(hidden),  # type: ignore[operator]
                      num_layers=int(layers), bidirectional=bool(bidirectional)))
    y = outs[0] if batch_first else op.mir("transpose", [outs[0]], perm=[1, 0, 2])
    return [y, *outs[1:]]


@converter("lstm")
def convert_lstm(op: Op) -> list[Value]:
    return _rnn(op, 4)


@converter("gru")
def convert_gru(op: Op) -> list[Value]:
    return _rnn(op, 3)


@converter("scaled_dot_product_attention")
def convert_attention(op: Op) -> Value:
    from rlx.importers.torch_export.blocks import attention_of

    found = attention_of(op.importer, op.node)
    if isinstance(found, str):
        op.fail(found)
    return found.emit(op.importer)


__all__: list[str] = []
