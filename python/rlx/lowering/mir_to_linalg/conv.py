"""mir-to-linalg for convolution and pooling: conv (NCHW, grouped) as one contraction
generic (a depthwise one as one parallel generic, its taps unrolled), pool as one reduction
generic over a padded input."""

from __future__ import annotations

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.dialects.mir.conv import pool_out_size
from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.contraction import accumulator
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("conv")
def lower_conv(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``y[n, g, o, i, j] = Σ x[n, g, c, i*sh + u*dh, j*sw + v*dw] * w[g, o, c, u, v]`` over
    the grouped views ``x [N, G, C/G, H, W]``, ``w [G, O/G, C/G, kh, kw]``."""
    a = op.attrs
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (a["kernel_size"], a["stride"], a["padding"],
                                              a["dilation"])
    groups = a["groups"]
    x, w = op["x"], op["w"]
    if not emit.is_float(emit.elem(x)) and ctx.options.target != "llvm-cpu":
        # IREE 3.13's SPIR-V path fused the producers of an unpadded i32 conv's operands
        # (ONNX ConvInteger's x - zero_point, a constant weight's w - zero_point) into it
        # and summed garbage on lavapipe; test_qlinear_ops_match_onnxruntime[vulkan] fails
        # without these barriers
        x, w = emit.barrier(x), emit.barrier(w)
    x = emit.pad(x, [0, 0, ph, pw], [0, 0, ph, pw], emit.scalar(0, emit.elem(x)))
    n, _, hp, wp = emit.sizes(x)
    cout = emit.static_shape(w)[0]
    cg, og = emit.static_shape(w)[1], cout // groups
    oh = _out(hp, kh, sh, dh)
    ow = _out(wp, kw, sw, dw)
    if cg == 1 and og == 1 and kh * kw <= MAX_UNROLLED_TAPS:
        return [_depthwise(x, w, (kh, kw), (sh, sw), (dh, dw), [n, cout, oh, ow])]
    x5 = emit.expand(x, [[0], [1, 2], [3], [4]], [n, groups, cg, hp, wp])
    w5 = emit.expand(w, [[0, 1], [2], [3], [4]], [groups, og, cg, kh, kw])
    t = emit.elem(x)
    acc_t = accumulator(t)
    init = emit.filled([n, groups, og, oh, ow], acc_t, 0)
    # loops: n, g, o, i, j | c, u, v
    d = emit.d
    maps = [emit.amap(8, [d(0), d(1), d(5), d(3) * sh + d(6) * dh, d(4) * sw + d(7) * dw]),
            emit.amap(8, [1, 2, 5, 6, 7]), emit.amap(8, [0, 1, 2, 3, 4])]
    iters = [emit.PARALLEL] * 5 + [emit.REDUCTION] * 3
    y5 = emit.generic([x5, w5], [init], maps, iters, lambda xv, wv, acc: emit.add(
        acc, emit.mul(emit.convert(xv, acc_t), emit.convert(wv, acc_t))))[0]
    y = emit.collapse(y5, [[0], [1, 2], [3], [4]])
    return [emit.convert_tensor(y, t)]


MAX_UNROLLED_TAPS = 32
"""A depthwise conv of at most this many taps is one parallel generic (:func:`_depthwise`)."""


def _depthwise(x: ir.Value, w: ir.Value, k: tuple[int, int], s: tuple[int, int],
               dl: tuple[int, int], out_sizes: emit.Sizes) -> ir.Value:
    """``y[n, c, i, j] = Σ_{u, v} x[n, c, i sh + u dh, j sw + v dw] · w[c, 0, u, v]`` for a
    depthwise conv (one input and one output channel a group), the taps unrolled in the
    body: every loop is parallel, so IREE sees an elementwise op (a contraction generic,
    at one output position (a decode step's causal conv), drops its unit dims into a
    batched matvec that it data-tiles: the 0.8B Qwen3.5 8-row step spent 1.3 ms a layer in
    the transposes, pack and matvec of a [8, 6144] x [6144, 4] conv). Taps are summed in
    the contraction's order (``u`` then ``v``), in the accumulator type."""
    t = emit.elem(x)
    acc_t = accumulator(t)
    taps = [(u, v) for u in range(k[0]) for v in range(k[1])]
    n, c, oh, ow = out_sizes
    # tap (u, v) reads x[:, :, u dh + sh i, v dw + sw j] for i < oh, j < ow: a strided
    # slice of the padded x, inside it since oh = (hp - dh (kh - 1) - 1) / sh + 1 (_out)
    xs = [emit.extract_slice(x, [0, 0, u * dl[0], v * dl[1]], [n, c, oh, ow],
                             [1, 1, s[0], s[1]]) for u, v in taps]
    maps = [emit.identity(4)] * len(taps)
    maps += [emit.amap(4, [1, "0", str(u), str(v)]) for u, v in taps]
    maps.append(emit.identity(4))
    init = emit.empty(out_sizes, acc_t)

    def body(*args: ir.Value) -> ir.Value:
        xs, ws = args[:len(taps)], args[len(taps):2 * len(taps)]
        acc = None
        for xv, wv in zip(xs, ws, strict=True):
            p = emit.mul(emit.convert(xv, acc_t), emit.convert(wv, acc_t))
            acc = p if acc is None else emit.add(acc, p)
        return acc

    y = emit.generic(xs + [w] * len(taps), [init], maps,
                     [emit.PARALLEL] * 4, body)[0]
    return emit.convert_tensor(y, t)


def _out(size: emit.Size, k: int, s: int, d: int) -> emit.Size:
    if isinstance(size, int):
        return (size - d * (k - 1) - 1) // s + 1
    span = emit.sub_sizes(size, d * (k - 1) + 1)
    return arith.addi(arith.divui(emit.as_value(span), emit.index(s)), emit.index(1))


def _window_counts(sizes: list[int], outs: list[int], a: dict) -> np.ndarray:
    """Per output position, the window elements inside the input (or, with
    ``count_include_pad``, inside the padded input): a product of per-axis counts."""
    n = len(sizes)
    counts = np.ones(outs, dtype=np.float64)
    for i in range(n):
        begin, end = a["padding"][i], a["padding"][n + i]
        lo, hi = (-begin, sizes[i] + end) if a["count_include_pad"] else (0, sizes[i])
        starts = np.arange(outs[i]) * a["stride"][i] - begin
        taps = starts[:, None] + np.arange(a["kernel_size"][i])[None, :] * a["dilation"][i]
        per_axis = ((taps >= lo) & (taps < hi)).sum(axis=1)
        shape = [1] * n
        shape[i] = outs[i]
        counts = counts * per_axis.reshape(shape)
    return counts


def _lowest(t: ir.Type, kind: str) -> float | int:
    """What padding holds: never more than an element (0 for ``avg``)."""
    if kind != "max":
        return 0.0 if kind == "avg" else 0  # umax: the least unsigned value
    if emit.is_float(t):
        return float("-inf")
    return -(2 ** (ir.IntegerType(t).width - 1))


@MIR_TO_LINALG.register("pool")
def lower_pool(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Pad with the kind's neutral value (up to the last ceil-mode window; cut to the
    extent the windows read), then one reduction generic over ``(n, c, out...,
    window...)``; ``avg`` divides the sums by a constant tensor of window counts. Dynamic
    spatial sizes: :func:`_lower_dynamic_pool`."""
    a = op.attrs
    x = op["x"]
    if None in emit.static_shape(x)[2:]:
        return [_lower_dynamic_pool(x, a)]
    kernel, stride, dilation, padding = (a["kernel_size"], a["stride"], a["dilation"],
                                         a["padding"])
    n = len(kernel)
    sizes = [int(s) for s in emit.static_shape(x)[2:]]
    outs = [int(s) for s in emit.static_shape(op.op.results[0])[2:]]
    # the padded extent the windows read, exactly (linalg infers loop bounds from it)
    needed = [(outs[i] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 for i in range(n)]
    high = [needed[i] - sizes[i] - padding[i] for i in range(n)]
    t = emit.elem(x)
    avg = a["kind"] == "avg"
    acc_t = accumulator(t) if avg else t
    neutral = _lowest(t, a["kind"])
    xp = emit.pad(x, [0, 0, *padding[:n]], [0, 0, *(max(hi, 0) for hi in high)],
                  emit.scalar(neutral, t))
    if min(high) < 0:
        xp = emit.extract_slice(xp, [0] * (n + 2), [*emit.sizes(x)[:2], *needed])
    y = _windows(xp, a, [*emit.sizes(x)[:2], *outs], acc_t, neutral)
    if not avg:
        return [y]
    count_t = emit.tensor_type(outs, acc_t)  # f32: avg pools float inputs only
    counts = _window_counts(sizes, outs, a).astype(np.float32)
    divisor = arith.ConstantOp(count_t, ir.DenseElementsAttr.get(counts, type=count_t)).result
    mean = emit.map_elementwise([y, divisor], acc_t, arith.divf, emit.sizes(y))
    return [emit.convert_tensor(mean, t)]


def _windows(xp: ir.Value, a: dict, out_sizes: emit.Sizes, acc_t: ir.Type,
             neutral: float | int) -> ir.Value:
    """One reduction generic over ``(n, c, out..., window...)`` of the padded ``xp``: the
    max or the sum (``acc_t``) of each window."""
    kernel, stride, dilation = a["kernel_size"], a["stride"], a["dilation"]
    n = len(kernel)
    d = emit.d
    loops = 2 + 2 * n
    taps = [d(2 + i) * stride[i] + d(2 + n + i) * dilation[i] for i in range(n)]
    maps = [emit.amap(loops, [0, 1, *taps]), emit.amap(loops, list(range(2 + n, loops))),
            emit.amap(loops, list(range(2 + n)))]
    iters = [emit.PARALLEL] * (2 + n) + [emit.REDUCTION] * n
    init = emit.filled(out_sizes, acc_t, neutral)
    window = emit.empty(list(kernel), emit.elem(xp))
    avg = a["kind"] == "avg"

    def body(v: ir.Value, _: ir.Value, acc: ir.Value) -> ir.Value:
        v = emit.convert(v, acc_t)
        if a["kind"] == "umax":
            return arith.maxui(acc, v)
        return emit.add(acc, v) if avg else emit.maximum(acc, v)

    return emit.generic([xp, window], [init], maps, iters, body)[0]


def _dynamic_out(size: emit.Size, k: int, s: int, d: int, begin: int, end: int,
                 ceil_mode: bool) -> emit.Size:
    """:func:`rlx.dialects.mir.conv.pool_out_size` over index values (the verifier's
    run-time check made ``size + begin + end`` at least the dilated kernel)."""
    span = emit.sub_sizes(arith.addi(emit.as_value(size), emit.index(begin + end)),
                          (k - 1) * d + 1)
    if not ceil_mode:
        return arith.addi(arith.divui(emit.as_value(span), emit.index(s)), emit.index(1))
    up = arith.addi(arith.divui(arith.addi(emit.as_value(span), emit.index(s - 1)),
                                emit.index(s)), emit.index(1))
    last_start = arith.muli(arith.subi(up, emit.index(1)), emit.index(s))
    past = arith.cmpi(arith.CmpIPredicate.uge, last_start,
                      arith.addi(emit.as_value(size), emit.index(begin)))
    return arith.select(past, arith.subi(up, emit.index(1)), up)


def _lower_dynamic_pool(x: ir.Value, a: dict) -> ir.Value:
    """Pooling over dynamic spatial sizes: the window counts and the padded extent the
    windows read computed at run time; ``x`` padded by the declared pads and (ceil mode)
    ``stride - 1`` more, then cut to that extent. ``avg`` divides by the same reduction
    over ones (padded with ones inside the declared pads for ``count_include_pad``)."""
    kernel, stride, dilation, padding = (a["kernel_size"], a["stride"], a["dilation"],
                                         a["padding"])
    n = len(kernel)
    ceil = a["ceil_mode"]
    spatial = emit.sizes(x)[2:]
    outs: emit.Sizes = []
    needed: emit.Sizes = []
    for i, size in enumerate(spatial):
        args = (kernel[i], stride[i], dilation[i], padding[i], padding[n + i], ceil)
        out = pool_out_size(size, *args) if isinstance(size, int) else _dynamic_out(size, *args)
        assert out is not None  # the verifier checked a static size fits
        outs.append(out)
        needed.append(emit.mul_sizes(emit.sub_sizes(out, 1), stride[i]) if isinstance(
            out, int) else arith.muli(arith.subi(out, emit.index(1)), emit.index(stride[i])))
        span = (kernel[i] - 1) * dilation[i] + 1
        needed[i] = needed[i] + span if isinstance(needed[i], int) else arith.addi(
            needed[i], emit.index(span))
    extra = [stride[i] - 1 if ceil else 0 for i in range(n)]
    t = emit.elem(x)
    avg = a["kind"] == "avg"
    acc_t = accumulator(t) if avg else t
    neutral = _lowest(t, a["kind"])

    def padded(v: ir.Value, value: float | int) -> ir.Value:
        v = emit.pad(v, [0, 0, *padding[:n]], [0, 0, *padding[n:]], emit.scalar(value, t))
        v = emit.pad(v, [0] * (n + 2), [0, 0, *extra], emit.scalar(neutral, t))
        return emit.extract_slice(v, [0] * (n + 2), [*emit.sizes(v)[:2], *needed])

    y = _windows(padded(x, neutral), a, [*emit.sizes(x)[:2], *outs], acc_t, neutral)
    if not avg:
        return y
    counts = _dynamic_counts(spatial, outs, a, acc_t)
    mean = emit.map_elementwise([y, counts], acc_t, arith.divf, emit.sizes(y))
    return emit.convert_tensor(mean, t)


def _dynamic_counts(spatial: emit.Sizes, outs: emit.Sizes, a: dict, acc_t: ir.Type
                    ) -> ir.Value:
    """``[1, 1, *outs]``: per output position, the window elements inside the input (or,
    with ``count_include_pad``, inside the padded input), counted from the position's
    indices: per axis ``#{t < k : lo <= o s - begin + t d < hi}``, multiplied. (Summing
    a window over a tensor of ones, the form before, came out as 1 for every window in
    IREE 3.13 where no padding applied: the average was the sum.)"""
    kernel, stride, dilation, padding = (a["kernel_size"], a["stride"], a["dilation"],
                                         a["padding"])
    n = len(kernel)
    i64 = ir.IntegerType.get_signless(64)
    bounds = []
    for i, size in enumerate(spatial):
        begin, end = padding[i], padding[n + i]
        hi = arith.index_cast(i64, emit.as_value(size))
        if a["count_include_pad"]:
            bounds.append((arith.constant(i64, -begin),
                           arith.addi(hi, arith.constant(i64, end))))
        else:
            bounds.append((arith.constant(i64, 0), hi))

    def body(_: ir.Value) -> ir.Value:
        total = None
        for i in range(n):
            o = arith.index_cast(i64, emit.loop_index(2 + i))
            start = arith.subi(arith.muli(o, arith.constant(i64, stride[i])),
                               arith.constant(i64, padding[i]))
            count = arith.constant(i64, 0)
            for tap in range(kernel[i]):
                at = arith.addi(start, arith.constant(i64, tap * dilation[i]))
                inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, at, bounds[i][0]),
                                    arith.cmpi(arith.CmpIPredicate.slt, at, bounds[i][1]))
                count = arith.addi(count, arith.extui(i64, inside))
            total = count if total is None else arith.muli(total, count)
        return emit.convert(total, acc_t)

    init = emit.empty([1, 1, *outs], acc_t)
    return emit.generic([], [init], [emit.identity(n + 2)], [emit.PARALLEL] * (n + 2),
                        body)[0]
