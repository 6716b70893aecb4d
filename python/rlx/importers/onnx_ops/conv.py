"""ONNX convolution-family ops: Conv and ConvTranspose (1-3 spatial dims; 3-D as 2-D
convolutions over the depths), MaxPool (with its Indices) / AveragePool (1-3 spatial
dims), GlobalAveragePool / GlobalMaxPool, BatchNormalization (inference and training
mode). Spatial sizes may be dynamic."""

from __future__ import annotations

import itertools

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.reduction import reduce
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.importers.onnx_ops.shape import reshape_to
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
    """:func:`conv_nd` of inputs 0, 1 and the bias 2."""
    x = node.tensor(0)
    # 1-D / 2-D: the weight initializer as its parameter; 3-D constant weights are cut into
    # their depth taps at import time (_conv3d), each a parameter of its own
    weights = node.maybe_const(1) if len(x.shape) == 5 else None
    w: HirValue | np.ndarray = node.tensor(1) if weights is None else weights
    return [conv_nd(node, x, w, node.tensor(2) if node.has(2) else None)]


def conv_nd(node: Node, x: HirValue, w: HirValue | np.ndarray, bias: HirValue | None
            ) -> HirValue:
    """ONNX Conv's attributes on ``x`` and ``w``: ``rlx_mir.conv`` (2-D; 1-D gains a unit
    height; 3-D: :func:`_conv3d`); asymmetric pads go through ``rlx_mir.pad``; the bias
    is added per channel."""
    n = len(x.shape) - 2
    if n not in (1, 2, 3):
        node.fail(f"input {x.type}: rlx convolves 1-D, 2-D and 3-D inputs")
    sizes = _spatial(x)
    kernel = node.ints("kernel_shape") or [int(k) for k in w.shape[2:]]  # type: ignore[misc]
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    pads = resolve_pads(node, sizes, kernel, strides, dilations)
    if n == 1:
        x = _unit_height(node, x)
        w = node.reshape(w, [w.shape[0], w.shape[1], 1, kernel[0]])  # type: ignore[arg-type]
        kernel, strides, dilations = [1, *kernel], [1, *strides], [1, *dilations]
        pads = [0, pads[0], 0, pads[1]]
    m = len(kernel)
    begin, end = pads[:m], pads[m:]
    if begin != end:
        x = node.mir("pad", [x], low=[0, 0, *begin], high=[0, 0, *end], value=0.0)
        begin = [0] * m
    y = convolve(node, x, w, kernel, strides, begin, dilations, node.attr("group", 1))
    if bias is not None:
        y = node.mir("binary", [y, node.reshape(bias, [y.shape[1], *[1] * m])], kind="add")
    if n == 1:
        y = node.reshape(y, [-2 - k if y.shape[k] is None else int(y.shape[k])  # type: ignore[arg-type]
                             for k in (0, 1, 3)])
    return y


def convolve(node: Node, x: HirValue, w: HirValue | np.ndarray, kernel: list[int],
             strides: list[int], padding: list[int], dilations: list[int], groups: int
             ) -> HirValue:
    """``rlx_mir.conv`` (symmetric ``padding``); 3-D as :func:`_conv3d`."""
    if len(kernel) == 3:
        return _conv3d(node, x, w, kernel, strides, padding, dilations, groups)
    if isinstance(w, np.ndarray):
        w = node.importer.materialize(np.ascontiguousarray(w), None, node)
    return node.mir("conv", [x, w], kernel_size=kernel, stride=strides, padding=padding,
                    dilation=dilations, groups=groups)


def _conv3d(node: Node, x: HirValue, w: HirValue | np.ndarray, kernel: list[int],
            strides: list[int], padding: list[int], dilations: list[int], groups: int
            ) -> HirValue:
    """A volumetric convolution as 2-D ones (rlx's conv op is 2-D): the depths of ``x [N,
    C, D, H, W]`` become images of one batch ``[N D, C, H, W]``; each depth tap ``a`` of
    the kernel convolves all of them, and output depth ``z`` sums tap ``a``'s result at
    depth ``z s + a d``. The same multiply-adds as a 3-D kernel; the depth padding is
    applied first."""
    kd, sd, dd = kernel[0], strides[0], dilations[0]
    if padding[0]:
        x = node.mir("pad", [x], low=[0, 0, padding[0], 0, 0],
                     high=[0, 0, padding[0], 0, 0], value=0.0)
    n, c, d, h, wd = node.dims_of(x)
    if not is_static(d) and sd != 1:
        node.fail(f"a 3-D convolution with depth stride {sd} over the dynamic depth {d}")
    out_d: SymDim = normalize(d - dd * (kd - 1)) if sd == 1 else \
        (int(d) - dd * (kd - 1) - 1) // sd + 1  # type: ignore[arg-type]
    if is_static(out_d) and int(out_d) < 1:  # type: ignore[arg-type]
        node.fail(f"depth {d}: smaller than the kernel ({kd}, dilation {dd})")
    images = node.known(node.mir("transpose", [x], perm=[0, 2, 1, 3, 4]), [n, d, c, h, wd])
    images = node.as_tensor(reshape_to(node, images, [normalize(n * d), c, h, wd]))
    total: HirValue | None = None
    for a in range(kd):
        if isinstance(w, np.ndarray):
            tap: HirValue | np.ndarray = w[:, :, a]
        else:
            cut = node.mir("slice", [w], starts=[0, 0, a, 0, 0],
                           sizes=[-1, -1, 1, -1, -1], strides=[1] * 5)
            tap = node.reshape(cut, [w.shape[0], w.shape[1], *kernel[1:]])
        y = convolve(node, images, tap, kernel[1:], strides[1:], padding[1:], dilations[1:],
                     groups)
        y_dims = node.dims_of(y)
        y = node.as_tensor(reshape_to(node, y, [n, d, *y_dims[1:]]))
        if sd == 1:
            tail = dd * (kd - 1 - a)
            y = node.mir("slice", [y], starts=[0, a * dd, 0, 0, 0],
                         sizes=[-1, -1 - tail, -1, -1, -1], strides=[1] * 5)
        else:
            y = node.mir("slice", [y], starts=[0, a * dd, 0, 0, 0],
                         sizes=[-1, int(out_d), -1, -1, -1], strides=[1, sd, 1, 1, 1])
        y = node.known(y, [n, out_d, *y_dims[1:]])
        total = y if total is None else node.mir("binary", [total, y], kind="add")
    assert total is not None
    return node.mir("transpose", [total], perm=[0, 2, 1, 3, 4])


@converter("MaxPool", "AveragePool", since=7)
def convert_pool(node: Node) -> list[Value]:
    x = node.tensor(0)
    n = len(x.shape) - 2
    sizes = _spatial(x)
    kernel = node.ints("kernel_shape")
    if kernel is None or len(kernel) != n:
        node.fail(f"kernel_shape {kernel} for {n} spatial dims")
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    pads = resolve_pads(node, sizes, kernel, strides, dilations)
    kind = "avg" if node.op_type == "AveragePool" else "umax" if node.unsigned(0) else "max"
    y = node.mir("pool", [x], kind=kind, kernel_size=kernel, stride=strides,
                 dilation=dilations, padding=pads, ceil_mode=bool(node.attr("ceil_mode", 0)),
                 count_include_pad=bool(node.attr("count_include_pad", 0)))
    if len(node.proto.output) < 2 or not node.proto.output[1]:
        return [y]
    return [y, _max_pool_indices(node, x, y, kernel, strides, dilations, pads)]


@converter("LpPool", since=11)
def convert_lp_pool(node: Node) -> list[Value]:
    """``(sum over the window of |x|^p)^(1/p)``, pads counting as zeros: an average pool
    of ``|x|^p`` over the padded input times the window size (every window lies inside
    the padded input without ``ceil_mode``, which is refused), then the ``1/p`` power."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; LpPool takes a float tensor")
    if node.attr("ceil_mode", 0):
        node.fail("ceil_mode = 1: rlx's LpPool sums whole windows (ceil_mode = 0)")
    n = len(x.shape) - 2
    kernel = node.ints("kernel_shape")
    if kernel is None or len(kernel) != n:
        node.fail(f"kernel_shape {kernel} for {n} spatial dims")
    strides = node.ints("strides", [1] * n) or [1] * n
    dilations = node.ints("dilations", [1] * n) or [1] * n
    pads = resolve_pads(node, _spatial(x), kernel, strides, dilations)
    p = float(node.attr("p", 2))
    magnitude = node.mir("activation", [x], kind="abs")
    powered = node.mir("binary", [x, x], kind="mul") if p == 2 else node.mir(
        "binary", [magnitude, node.scalar(p, x)], kind="pow")
    mean = node.mir("pool", [powered], kind="avg", kernel_size=kernel, stride=strides,
                    dilation=dilations, padding=pads, ceil_mode=False, count_include_pad=True)
    total = node.mir("binary", [mean, node.scalar(float(np.prod(kernel)), x)], kind="mul")
    if p == 2:
        return [node.mir("activation", [total], kind="sqrt")]
    return [node.mir("binary", [total, node.scalar(1.0 / p, x)], kind="pow")]


@converter("LRN")
def convert_lrn(node: Node) -> list[Value]:
    """Local response normalization across channels: ``x / (bias + alpha / size *
    sum(x^2 over channels c - floor((size-1)/2) .. c + ceil((size-1)/2)))^beta``; the
    sums an average pool (counting the zero padding) over the channel axis of ``x`` viewed
    with a unit channel in front."""
    x = node.tensor(0)
    rank = len(x.shape)
    if not x.dtype.is_float or rank not in (3, 4):
        node.fail(f"input {x.type}: rlx's LRN takes a float [N, C, D1 (, D2)]")
    size = int(node.attr("size"))
    alpha, beta = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75))
    bias = float(node.attr("bias", 1.0))
    dims = node.dims(0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = node.mir("binary", [x, x], kind="mul")
    view = node.as_tensor(reshape_to(node, square, [dims[0], 1, *dims[1:]]))
    spatial = rank - 1
    mean = node.mir("pool", [view], kind="avg", kernel_size=[size, *[1] * (spatial - 1)],
                    stride=[1] * spatial, dilation=[1] * spatial,
                    padding=[lo, *[0] * (spatial - 1), hi, *[0] * (spatial - 1)],
                    ceil_mode=False, count_include_pad=True)
    # alpha / size * the window's sum is alpha * its mean (every window holds size terms)
    means = node.as_tensor(reshape_to(node, node.known(mean, [dims[0], 1, *dims[1:]]), dims))
    base = node.mir("binary", [node.mir("binary", [means, node.scalar(alpha, x)], kind="mul"),
                               node.scalar(bias, x)], kind="add")
    return [node.mir("binary", [x, node.mir("binary", [base, node.scalar(beta, x)],
                                            kind="pow")], kind="div")]


def _max_pool_indices(node: Node, x: HirValue, y: HirValue, kernel: list[int],
                      strides: list[int], dilations: list[int], pads: list[int]
                      ) -> HirValue:
    """MaxPool's Indices: where each output's maximum sits, as a flat index over ``N x C x
    spatial`` (the spatial part column-major with ``storage_order = 1``), the first
    maximum of the window in row-major window order (ONNX's reference evaluator, ORT,
    torch). One compare per kernel offset between ``y`` and a strided slice of the
    zero-padded input; padded positions are masked out by a constant; each offset's
    spatial index is a constant. The offsets are laid down last to first, so the first
    match wins. Spatial sizes must be static (the constants are built at import)."""
    sizes, outs = _spatial(x), _spatial(y)
    if None in sizes or None in outs:
        node.fail(f"the Indices output of MaxPool over the dynamic spatial sizes "
                  f"{node.dims(0)[2:]}: "
                  "rlx builds the index constants at import")
    n = len(sizes)
    lo = pads[:n]
    # ceil_mode's last window may reach past the end pad: pad that far too
    hi = [max(h, (o - 1) * s + (k - 1) * d + 1 - i - low) for h, o, s, k, d, i, low in
          zip(pads[n:], outs, strides, kernel, dilations, sizes, lo, strict=True)]
    padded = node.mir("pad", [x], low=[0, 0, *lo], high=[0, 0, *hi], value=0.0)
    valid = np.zeros([i + a + b for i, a, b in zip(sizes, lo, hi, strict=True)], bool)
    valid[tuple(slice(a, a + i) for a, i in zip(lo, sizes, strict=True))] = True
    row = [int(np.prod(sizes[k + 1:])) for k in range(n)]
    place = row if not node.attr("storage_order", 0) else [int(np.prod(sizes[:k]))
                                                          for k in range(n)]
    starts = np.meshgrid(*(np.arange(o) * s - a for o, s, a in
                           zip(outs, strides, lo, strict=True)), indexing="ij")
    index: Value | None = None
    for offset in reversed(list(itertools.product(*(range(k) for k in kernel)))):
        at = [o * d for o, d in zip(offset, dilations, strict=True)]
        window = node.mir("slice", [padded], starts=[0, 0, *at], sizes=[-1, -1, *outs],
                          strides=[1, 1, *strides])
        hit = node.mir("compare", [window, y], kind="eq")
        inside = valid[np.ix_(*(a + np.arange(o) * s for a, o, s in
                                zip(at, outs, strides, strict=True)))]
        if not inside.all():
            hit = node.mir("where", [hit, inside.reshape(1, 1, *outs),
                                     node.scalar(False, hit)])
        here = sum((g + a) * p for g, a, p in zip(starts, at, place, strict=True))
        here = np.asarray(here, np.int64).reshape(1, 1, *outs)
        index = here if index is None else node.mir("where", [hit, here, index])
    assert index is not None
    return node.mir("binary", [node.as_tensor(index), _channel_base(node, int(np.prod(sizes)))],
                    kind="add")


def _channel_base(node: Node, plane: int) -> Value:
    """``(n C + c) * plane`` as ``[N, C, 1, ...]`` (a constant unless N is dynamic)."""
    dims = node.dims(0)
    if not is_static(dims[1]):
        node.fail(f"the Indices output of MaxPool over a dynamic channel count {dims[1]}")
    channels = int(dims[1])  # type: ignore[arg-type]
    ones = [1] * (len(dims) - 2)
    c_part = (np.arange(channels, dtype=np.int64) * plane).reshape(1, channels, *ones)
    if is_static(dims[0]):
        count = int(dims[0])  # type: ignore[arg-type]
        return (np.arange(count, dtype=np.int64) * channels * plane).reshape(
            count, 1, *ones) + c_part
    rows = node.sizes.iota(dims[0], DType.I64, node.fail)
    rows = node.mir("binary", [rows, node.scalar(channels * plane, DType.I64)], kind="mul")
    rows = node.mir("reshape", [rows], new_shape=[-1, 1, *ones])
    return node.mir("binary", [rows, node.as_tensor(c_part)], kind="add")


@converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(node: Node) -> list[Value]:
    x = node.tensor(0)
    kind = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return [reduce(node, x, kind, list(range(2, len(x.shape))), True)]


@converter("BatchNormalization", since=9)
def convert_batch_norm(node: Node) -> list[Value]:
    """Inference: ``(x - mean) / sqrt(var + eps) * scale + bias`` per channel (dim 1);
    with constant statistics, one multiply-add by ``scale / sqrt(var + eps)``. Training
    mode (opset 14's ``training_mode = 1``): see :func:`_batch_norm_training`."""
    training = node.version >= 14 and node.attr("training_mode", 0)
    if not training and any(node.proto.output[1:]):
        node.fail(f"the running statistics outputs of opset {node.version} (before "
                  "opset 14's training_mode) are not supported")
    x = node.tensor(0)
    rank = len(x.shape)
    shape = [x.shape[1] if x.shape[1] is not None else -1] + [1] * (rank - 2)
    eps = node.attr("epsilon", 1e-5)
    if training:
        return _batch_norm_training(node, x, shape, eps)
    params = [node.maybe_const(i) for i in range(1, 5)]
    if all(p is not None for p in params):
        scale, bias, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
        a = scale / np.sqrt(var + eps)
        b = bias - mean * a
        dtype = np.asarray(node.scalar(0, x)).dtype
        y = node.mir("binary", [x, a.astype(dtype).reshape(shape)], kind="mul")
        return [node.mir("binary", [y, b.astype(dtype).reshape(shape)], kind="add")]
    scale, bias, mean, var = (node.reshape(node.tensor(i), shape) for i in range(1, 5))
    return [_normalized(node, node.mir("binary", [x, mean], kind="sub"), var, scale, bias,
                        eps)]


def _normalized(node: Node, centered: HirValue, var: HirValue, scale: HirValue,
                bias: HirValue, eps: float) -> HirValue:
    """``centered / sqrt(var + eps) * scale + bias``."""
    std = node.mir("activation", [node.mir("binary", [var, node.scalar(eps, centered)],
                                           kind="add")], kind="sqrt")
    y = node.mir("binary", [centered, std], kind="div")
    y = node.mir("binary", [y, scale], kind="mul")
    return node.mir("binary", [y, bias], kind="add")


def _batch_norm_training(node: Node, x: HirValue, shape: list[int], eps: float
                         ) -> list[Value]:
    """ONNX's training mode: ``x`` is normalized by its own per-channel mean and
    population variance (over every axis but 1), and the running statistics outputs are
    ``input * momentum + current * (1 - momentum)``."""
    axes = [0, *range(2, len(x.shape))]
    mean = reduce(node, x, "mean", axes, True)
    centered = node.mir("binary", [x, mean], kind="sub")
    var = reduce(node, node.mir("binary", [centered, centered], kind="mul"), "mean", axes,
                 True)
    scale, bias = (node.reshape(node.tensor(i), shape) for i in (1, 2))
    outputs: list[Value] = [_normalized(node, centered, var, scale, bias, eps)]
    momentum = float(node.attr("momentum", 0.9))
    channels = [shape[0]]
    for i, current in ((3, mean), (4, var)):
        if len(node.proto.output) <= i - 2 or not node.proto.output[i - 2]:
            break
        kept = node.mir("binary", [node.tensor(i), node.scalar(momentum, x)], kind="mul")
        new = node.mir("binary", [node.reshape(current, channels),
                                  node.scalar(1.0 - momentum, x)], kind="mul")
        outputs.append(node.mir("binary", [kept, new], kind="add"))
    return outputs


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
    if n not in (1, 2, 3) or w.ndim != n + 2:
        node.fail(f"input {x.type}: rlx convolves 1-D, 2-D and 3-D inputs")
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
    m = len(kernel)
    span = [d * (k - 1) for d, k in zip(dilations, kernel, strict=True)]
    x = _edges(node, x, [span[i] - pads[i] for i in range(m)],
               [span[i] - pads[m + i] + extra[i] - (strides[i] - 1) for i in range(m)])
    cin, per_group = w.shape[0], w.shape[1]
    flipped = w.reshape(groups, cin // groups, per_group, *kernel).swapaxes(1, 2)
    flipped = flipped.reshape(groups * per_group, cin // groups, *kernel)
    flipped = np.ascontiguousarray(flipped[(slice(None), slice(None),
                                            *[slice(None, None, -1)] * m)])
    y = convolve(node, x, flipped, kernel, [1] * m, [0] * m, dilations, groups)
    if node.has(2):
        y = node.mir("binary", [y, node.reshape(node.tensor(2), [y.shape[1], *[1] * m])],
                     kind="add")
    if n == 1:
        y = node.reshape(y, [-2 - k if y.shape[k] is None else int(y.shape[k])  # type: ignore[arg-type]
                             for k in (0, 1, 3)])
    return [y]
