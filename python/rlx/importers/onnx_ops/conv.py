"""ONNX convolution-family ops: Conv and ConvTranspose (1-D and 2-D), MaxPool /
AveragePool (1-3 spatial dims), GlobalAveragePool / GlobalMaxPool, BatchNormalization
(inference). Spatial sizes may be dynamic."""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.reduction import reduce
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.ir.types import DType


def _spatial(x: HirValue) -> list[int | None]:
    """The spatial sizes of ``x`` (None: dynamic, known when the module runs)."""
    return [None if s is None else int(s) for s in x.shape[2:]]


def _unit_height(node: Node, v: HirValue) -> HirValue:
    """``[N, C, L]`` as ``[N, C, 1, L]`` (dynamic dims copied from ``v``)."""
    keep = [-2 - k if d is None else int(d) for k, d in enumerate(v.shape)]
    return node.reshape(v, [*keep[:2], 1, keep[2]])


def resolve_pads(node: Node, sizes: list[int | None], kernel: list[int], strides: list[int],
                 dilations: list[int]) -> list[int]:
    """``pads`` (begin..., end...) with ``auto_pad`` resolved: SAME_* pads so that the
    output has ``ceil(in / stride)`` positions (the odd pad at the end for SAME_UPPER);
    over a dynamic size only with stride 1, where they do not depend on it."""
    n = len(sizes)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = node.ints("pads", [0] * 2 * n) or [0] * 2 * n
        if len(pads) != 2 * n:
            node.fail(f"pads {pads}: expected {2 * n} values")
        return pads
    if auto == "VALID":
        return [0] * 2 * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        node.fail(f"auto_pad '{auto}'")
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        if size is None and s != 1:
            node.fail(f"auto_pad '{auto}' with stride {s} over a dynamic spatial size: the "
                      "pads depend on the size (rlx needs them at import time)")
        total = (k - 1) * d if size is None else max(
            (-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


@converter("Conv")
def convert_conv(node: Node) -> list[Value]:
    """``rlx_mir.conv`` (2-D; 1-D gains a unit height); asymmetric pads go through
    ``rlx_mir.pad``; the bias is added per channel."""
    x, w = node.tensor(0), node.tensor(1)
    n = len(x.shape) - 2
    if n not in (1, 2):
        node.fail(f"input {x.type}: rlx convolves 1-D and 2-D inputs")
    sizes = _spatial(x)
    kernel = node.ints("kernel_shape") or [int(k) for k in w.shape[2:]]  # type: ignore[misc]
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    pads = resolve_pads(node, sizes, kernel, strides, dilations)
    if n == 1:
        x = _unit_height(node, x)
        w = node.reshape(w, [w.shape[0], w.shape[1], 1, kernel[0]])
        kernel, strides, dilations = [1, *kernel], [1, *strides], [1, *dilations]
        pads = [0, pads[0], 0, pads[1]]
    begin, end = pads[:2], pads[2:]
    if begin != end:
        x = node.mir("pad", [x], low=[0, 0, *begin], high=[0, 0, *end], value=0.0)
        begin = [0, 0]
    y = node.mir("conv", [x, w], kernel_size=kernel, stride=strides, padding=begin,
                 dilation=dilations, groups=node.attr("group", 1))
    if node.has(2):
        bias = node.reshape(node.tensor(2), [y.shape[1], 1, 1])
        y = node.mir("binary", [y, bias], kind="add")
    if n == 1:
        y = node.reshape(y, [-2 - k if y.shape[k] is None else int(y.shape[k])  # type: ignore[arg-type]
                             for k in (0, 1, 3)])
    return [y]


@converter("MaxPool", "AveragePool", since=7)
def convert_pool(node: Node) -> list[Value]:
    x = node.tensor(0)
    n = len(x.shape) - 2
    sizes = _spatial(x)
    if len(node.proto.output) > 1 and node.proto.output[1]:
        node.fail("the Indices output of MaxPool is not supported")
    if node.op_type == "MaxPool" and node.attr("storage_order", 0):
        node.fail("storage_order = 1 (only with Indices)")
    kernel = node.ints("kernel_shape")
    if kernel is None or len(kernel) != n:
        node.fail(f"kernel_shape {kernel} for {n} spatial dims")
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    pads = resolve_pads(node, sizes, kernel, strides, dilations)
    kind = "max" if node.op_type == "MaxPool" else "avg"
    return [node.mir("pool", [x], kind=kind, kernel_size=kernel, stride=strides,
                     dilation=dilations, padding=pads,
                     ceil_mode=bool(node.attr("ceil_mode", 0)),
                     count_include_pad=bool(node.attr("count_include_pad", 0)))]


@converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(node: Node) -> list[Value]:
    x = node.tensor(0)
    kind = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return [reduce(node, x, kind, list(range(2, len(x.shape))), True)]


@converter("BatchNormalization", since=9)
def convert_batch_norm(node: Node) -> list[Value]:
    """Inference: ``(x - mean) / sqrt(var + eps) * scale + bias`` per channel (dim 1);
    with constant statistics, one multiply-add by ``scale / sqrt(var + eps)``."""
    if node.attr("training_mode", 0) or any(node.proto.output[1:]):
        node.fail("training mode (running statistics outputs) is not supported")
    x = node.tensor(0)
    rank = len(x.shape)
    shape = [x.shape[1] if x.shape[1] is not None else -1] + [1] * (rank - 2)
    eps = node.attr("epsilon", 1e-5)
    params = [node.maybe_const(i) for i in range(1, 5)]
    if all(p is not None for p in params):
        scale, bias, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
        a = scale / np.sqrt(var + eps)
        b = bias - mean * a
        dtype = np.asarray(node.scalar(0, x)).dtype
        y = node.mir("binary", [x, a.astype(dtype).reshape(shape)], kind="mul")
        return [node.mir("binary", [y, b.astype(dtype).reshape(shape)], kind="add")]
    scale, bias, mean, var = (node.reshape(node.tensor(i), shape) for i in range(1, 5))
    std = node.mir("activation", [node.mir("binary", [var, node.scalar(eps, x)], kind="add")],
                   kind="sqrt")
    y = node.mir("binary", [node.mir("binary", [x, mean], kind="sub"), std], kind="div")
    y = node.mir("binary", [y, scale], kind="mul")
    return [node.mir("binary", [y, bias], kind="add")]


# --------------------------------------------------------------------------------------
# ConvTranspose
# --------------------------------------------------------------------------------------


def _spread(node: Node, x: HirValue, dims: list[SymDim], axis: int, s: int) -> HirValue:
    """``x`` with ``s - 1`` zeros after each element along ``axis`` (length ``n s``): a
    gather of element ``i // s``, kept where ``i % s == 0``."""
    at = node.sizes.iota(normalize(dims[axis] * s), DType.I64, node.fail)
    stride = node.as_tensor(node.scalar(s, DType.I64))
    source = node.mir("binary", [at, stride], kind="div")
    rest = node.mir("binary", [at, node.mir("binary", [source, stride], kind="mul")],
                    kind="sub")
    keep = node.mir("compare", [rest, node.as_tensor(node.scalar(0, DType.I64))], kind="eq")
    keep = node.mir("reshape", [keep], new_shape=[-1 if a == axis else 1
                                                  for a in range(len(dims))])
    picked = node.mir("gather", [x, source], axis=axis, batch_dims=0)
    y = node.mir("where", [keep, picked, node.as_tensor(node.scalar(0, x))])
    return node.known(y, [normalize(d * s) if a == axis else d for a, d in enumerate(dims)])


def _edges(node: Node, x: HirValue, low: list[int], high: list[int]) -> HirValue:
    """Pad the spatial axes by ``low`` / ``high`` (negative: cut that many)."""
    rank = len(x.shape)
    if min(low + high) < 0:
        cut_low = [0, 0, *(max(-v, 0) for v in low)]
        cut_high = [0, 0, *(max(-v, 0) for v in high)]
        x = node.mir("slice", [x], starts=cut_low, sizes=[-1 - c for c in cut_high],
                     strides=[1] * rank)
    if max(low + high) > 0:
        x = node.mir("pad", [x], low=[0, 0, *(max(v, 0) for v in low)],
                     high=[0, 0, *(max(v, 0) for v in high)], value=0.0)
    return x


def _transposed_pads(node: Node, spatial: list[SymDim], kernel: list[int],
                     strides: list[int], dilations: list[int], extra: list[int]) -> list[int]:
    """ConvTranspose's ``pads`` (begin..., end...); with ``output_shape`` or ``auto_pad``
    SAME_*, computed from the output size as ONNX defines: ``total = s (in - 1) +
    output_padding + d (k - 1) + 1 - out`` (``out = in s`` for SAME without an
    output_shape), split ``total - total // 2`` before and ``total // 2`` after, the other
    way round for SAME_UPPER (negative: the output grows at that end)."""
    n = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        node.fail(f"auto_pad '{auto}'")
    wanted = node.ints("output_shape")
    if not wanted and auto not in ("SAME_UPPER", "SAME_LOWER"):
        return node.ints("pads", [0] * 2 * n) or [0] * 2 * n
    if not all(is_static(d) for d in spatial):
        node.fail(f"auto_pad {auto} / output_shape over the dynamic spatial sizes {spatial}: "
                  "rlx computes these pads at import; give pads")
    ins = [int(d) for d in spatial]  # type: ignore[arg-type]
    out = list(wanted[-n:]) if wanted else [i * s for i, s in zip(ins, strides, strict=True)]
    total = [s * (i - 1) + e + d * (k - 1) + 1 - o for s, i, e, d, k, o in
             zip(strides, ins, extra, dilations, kernel, out, strict=True)]
    if auto == "SAME_UPPER":
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    return [t - t // 2 for t in total] + [t // 2 for t in total]


@converter("ConvTranspose", const_inputs=(1,))
def convert_conv_transpose(node: Node) -> list[Value]:
    """A convolution of the input spread by the strides (zeros between elements, gathered
    so that dynamic sizes work), padded by ``d (k - 1) - pads`` (+ ``output_padding``),
    with the weights flipped and their in / out channels swapped per group (at import
    time: the weights must be constant)."""
    x = node.tensor(0)
    w = node.maybe_const(1)
    if w is None:
        node.fail("the weights are computed at run time; rlx flips them at import time")
    n = len(x.shape) - 2
    if n not in (1, 2) or w.ndim != n + 2:
        node.fail(f"input {x.type}: rlx convolves 1-D and 2-D inputs")
    kernel = [int(k) for k in w.shape[2:]]
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    extra = node.ints("output_padding", [0] * n) or [0] * n
    pads = _transposed_pads(node, node.dims_of(x)[2:], kernel, strides, dilations, extra)
    groups = node.attr("group", 1)
    if n == 1:
        x = _unit_height(node, x)
        w = w.reshape(w.shape[0], w.shape[1], 1, kernel[0])
        kernel, strides, dilations = [1, *kernel], [1, *strides], [1, *dilations]
        pads, extra = [0, pads[0], 0, pads[1]], [0, *extra]
    dims = node.dims_of(x)
    for i, s in enumerate(strides):
        if s > 1:
            x = _spread(node, x, dims, 2 + i, s)
            dims = node.dims_of(x)
    span = [d * (k - 1) for d, k in zip(dilations, kernel, strict=True)]
    x = _edges(node, x, [span[i] - pads[i] for i in range(2)],
               [span[i] - pads[2 + i] + extra[i] - (strides[i] - 1) for i in range(2)])
    cin, per_group = w.shape[0], w.shape[1]
    flipped = w.reshape(groups, cin // groups, per_group, *kernel).swapaxes(1, 2)
    flipped = np.ascontiguousarray(flipped.reshape(groups * per_group, cin // groups,
                                                   *kernel)[:, :, ::-1, ::-1])
    y = node.mir("conv", [x, node.importer.materialize(flipped, None, node)],
                 kernel_size=kernel, stride=[1, 1], padding=[0, 0], dilation=dilations,
                 groups=groups)
    if node.has(2):
        y = node.mir("binary", [y, node.reshape(node.tensor(2), [y.shape[1], 1, 1])],
                     kind="add")
    if n == 1:
        y = node.reshape(y, [-2 - k if y.shape[k] is None else int(y.shape[k])  # type: ignore[arg-type]
                             for k in (0, 1, 3)])
    return [y]
