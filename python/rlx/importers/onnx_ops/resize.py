"""ONNX Resize (and Upsample, its predecessor): ``nearest``, ``linear`` and ``cubic`` over
any axes, static or dynamic, one axis at a time as gathers.

Per resized axis of input size ``n`` and output size ``m``: the output positions ``i``
(``iota(m)``, counted at run time when dynamic) map to input coordinates by the
``coordinate_transformation_mode`` (every mode ONNX defines; ``asymmetric`` for Upsample
and Resize-10). ``nearest`` rounds them by ``nearest_mode`` and gathers; ``linear`` gathers
the two neighbours and blends them; ``cubic``, and ``linear`` with ``antialias``, sum the
taps of their kernel's support, weighted.
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.ir.types import DType

MODES = ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric", "asymmetric",
         "align_corners", "tf_crop_and_resize")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _transform(node: Node) -> str:
    """The coordinate transformation: the attribute (opset 11+), else ``asymmetric``:
    Upsample and Resize-10 map output ``i`` to input ``i / scale``."""
    if node.op_type == "Upsample" or node.version < 11:
        return "asymmetric"
    return str(node.attr("coordinate_transformation_mode", "half_pixel"))


def _nearest_mode(node: Node, scale: float | None = None) -> str:
    """``nearest_mode`` (opset 11+). Upsample and Resize-10 take the input at
    ``floor(i / scale)`` upsampling (np.repeat for integer scales, ONNX's Upsample
    reference) and at ``ceil(i / scale)`` downsampling (ONNX Runtime's rule for them)."""
    if node.op_type == "Upsample" or node.version < 11:
        return "ceil" if scale is not None and scale < 1 else "floor"
    return str(node.attr("nearest_mode", "round_prefer_floor"))


def _check_attrs(node: Node) -> None:
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        node.fail(f"mode '{mode}': ONNX defines nearest, linear and cubic")
    transform = _transform(node)
    if transform not in MODES:
        node.fail(f"coordinate_transformation_mode '{transform}': rlx supports "
                  f"{', '.join(MODES)}")
    if _nearest_mode(node) not in NEAREST:
        node.fail(f"nearest_mode '{node.attr('nearest_mode')}'")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        node.fail(f"keep_aspect_ratio_policy '{policy}': ONNX defines stretch, not_larger "
                  "and not_smaller")


def _targets(node: Node, dims: list[SymDim]) -> list[tuple[SymDim, float | None]]:
    """Per axis: (output size, the scale when given; else None, ``out / in``)."""
    rank = len(dims)
    axes = normalize_axes(node, node.ints("axes") or list(range(rank)), rank)
    sizes = node.const(3, "the sizes") if node.has(3) else None
    if node.op_type == "Upsample" and node.version < 9:
        scales = np.asarray(node.attr("scales"), np.float32)
    elif node.op_type == "Upsample" or node.version < 11:
        scales = node.static(1, "the scales")
    else:
        scales = node.static(2, "the scales") if node.has(2) else None
    if scales is not None and scales.size == 0:
        scales = None
    out: list[tuple[SymDim, float | None]] = [(d, 1.0) for d in dims]
    if sizes is not None and sizes.size and \
            node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return _kept_aspect(node, dims, axes, sizes.reshape(-1), out)
    for k, axis in enumerate(axes):
        if sizes is not None and sizes.size:
            out[axis] = (normalize(sizes.reshape(-1)[k]), None)
            continue
        if scales is None:
            node.fail("neither scales nor sizes given")
        scale = float(scales.reshape(-1)[k])
        d = dims[axis]
        if is_static(d):
            out[axis] = (int(int(d) * scale), scale)  # floor, as ONNX
        elif scale.is_integer() and scale >= 1:
            out[axis] = (normalize(d * int(scale)), scale)
        else:
            node.fail(f"scale {scale} of the dynamic size {d}: the output size "
                      "floor(size * scale) is not one rlx builds (integer scales are)")
    return out


def _kept_aspect(node: Node, dims: list[SymDim], axes: list[int], sizes: object,
                 out: list[tuple[SymDim, float | None]]) -> list[tuple[SymDim, float | None]]:
    """``keep_aspect_ratio_policy`` not_larger / not_smaller: one scale for every resized
    axis, the smallest / largest of ``size / dim``, and output sizes ``round_half_up(scale
    dim)`` (ONNX's definition). The sizes are the import-time values of static dims."""
    if not all(is_static(dims[a]) for a in axes):
        node.fail(f"keep_aspect_ratio_policy over the dynamic sizes "
                  f"{[dims[a] for a in axes]}: rlx computes the common scale at import")
    ratios = [float(sizes[k]) / int(dims[a]) for k, a in enumerate(axes)]  # type: ignore[index]
    pick = min if node.attr("keep_aspect_ratio_policy") == "not_larger" else max
    scale = pick(ratios)
    for a in axes:
        out[a] = (int(scale * int(dims[a]) + 0.5), scale)
    return out


@converter("Resize", const_inputs=(1, 2, 3), since=10)
def convert_resize(node: Node) -> list[Value]:
    _check_attrs(node)
    x = node.tensor(0)
    dims = node.dims(0)
    rois = _rois(node, len(dims))
    y = x
    y_dims = list(dims)
    for axis, (m, scale) in enumerate(_targets(node, dims)):
        n = dims[axis]
        roi = None if rois is None else rois[axis]
        if roi in (None, (0.0, 1.0)) and (scale == 1.0 or (
                scale is None and is_static(m) and is_static(n) and int(m) == int(n))):
            continue
        y = _resize_axis(node, y, y_dims, axis, n, m, scale, roi)
        y_dims[axis] = m
        node.known(y, y_dims)
    return [y]


@converter("Upsample", const_inputs=(1,), since=7)
def convert_upsample(node: Node) -> list[Value]:
    """Upsample (deprecated since opset 10): Resize-10 with its ``scales``."""
    return convert_resize(node)


def _rois(node: Node, rank: int) -> list[tuple[float, float]] | None:
    """tf_crop_and_resize's region per axis, ``(start, end)`` as fractions of ``n - 1``,
    from the constant ``roi`` input (``[starts..., ends...]`` over ``axes`` or every axis);
    None for the other modes."""
    if _transform(node) != "tf_crop_and_resize":
        return None
    if node.version < 11 or not node.has(1):
        node.fail("tf_crop_and_resize without a roi input")
    roi = node.static(1, "the roi").reshape(-1).astype(float)
    axes = normalize_axes(node, node.ints("axes") or list(range(rank)), rank)
    if roi.size != 2 * len(axes):
        node.fail(f"roi of {roi.size} values for {len(axes)} axes: expected "
                  f"{2 * len(axes)} (starts, then ends)")
    out = [(0.0, 1.0)] * rank
    for k, a in enumerate(axes):
        out[a] = (float(roi[k]), float(roi[len(axes) + k]))
    return out


def _f32(node: Node, v: float) -> HirValue:
    return node.as_tensor(node.scalar(v, DType.F32))


def _coords(node: Node, n: SymDim, m: SymDim, scale: float | None, clamp: bool = True,
            roi: tuple[float, float] | None = None) -> HirValue:
    """The input coordinate of each of the ``m`` output positions (f32), clamped to
    ``[0, n - 1]`` (for nearest and linear, where that equals ONNX's edge padding; cubic's
    weights depend on the unclamped position)."""
    transform = _transform(node)
    i = node.sizes.iota(m, DType.F32, node.fail)
    n_f = node.sizes.scalar(n, DType.F32, node.fail)
    m_f = node.sizes.scalar(m, DType.F32, node.fail)
    # the scale ONNX uses: the given one, else out / in. ``length_resized`` of ONNX's
    # align_corners / pytorch_half_pixel / tf_crop_and_resize rules is the output length m,
    # as the spec's text, ONNX Runtime and PyTorch read it (ONNX's reference evaluator
    # divides by the unfloored n * scale instead: one node test,
    # test_resize_downsample_scales_linear_align_corners, expects that and fails here)
    if scale is not None:
        s = _f32(node, scale)
    else:
        s = node.mir("binary", [m_f, n_f], kind="div")
    one = node.mir("compare", [m_f, _f32(node, 1.0)], kind="eq")
    if transform == "tf_crop_and_resize":
        assert roi is not None
        top = node.mir("binary", [n_f, _f32(node, 1.0)], kind="sub")
        width = _f32(node, roi[1] - roi[0])
        span = node.mir("binary", [node.mir("binary", [width, top], kind="mul"),
                                   node.mir("binary", [m_f, _f32(node, 1.0)], kind="sub")],
                        kind="div")
        centre = node.mir("binary", [node.mir("binary", [width, top], kind="mul"),
                                     _f32(node, 0.5)], kind="mul")
        x = node.mir("where", [one, centre, node.mir("binary", [i, span], kind="mul")])
        x = node.mir("binary", [x, node.mir("binary", [_f32(node, roi[0]), top], kind="mul")],
                     kind="add")
    elif transform == "align_corners":
        span = node.mir("binary", [node.mir("binary", [n_f, _f32(node, 1.0)], kind="sub"),
                                   node.mir("binary", [m_f, _f32(node, 1.0)], kind="sub")],
                        kind="div")
        span = node.mir("where", [one, _f32(node, 0.0), span])
        x = node.mir("binary", [i, span], kind="mul")
    elif transform == "asymmetric":
        x = node.mir("binary", [i, s], kind="div")
    else:
        half = _f32(node, 0.5)
        x = node.mir("binary", [node.mir("binary", [node.mir("binary", [i, half], kind="add"),
                                                    s], kind="div"), half], kind="sub")
        if transform == "pytorch_half_pixel":
            x = node.mir("where", [one, _f32(node, 0.0), x])
        elif transform == "half_pixel_symmetric":
            # centre the output canvas on the input's: offset = n/2 (1 - m / (n scale)),
            # n scale unfloored (the spec's output_width)
            w_f = node.mir("binary", [n_f, s], kind="mul")
            adjust = node.mir("binary", [_f32(node, 1.0), node.mir(
                "binary", [m_f, w_f], kind="div")], kind="sub")
            offset = node.mir("binary", [node.mir("binary", [n_f, half], kind="mul"), adjust],
                              kind="mul")
            x = node.mir("binary", [x, offset], kind="add")
    if not clamp:
        return x
    top = node.mir("binary", [n_f, _f32(node, 1.0)], kind="sub")
    x = node.mir("binary", [x, _f32(node, 0.0)], kind="max")
    return node.mir("binary", [x, top], kind="min")


def _floor(node: Node, x: HirValue, signed: bool = False) -> HirValue:
    """``floor`` of an f32 as i64: truncation, corrected below zero when ``x`` may be
    negative (``signed``: cubic's unclamped coordinates)."""
    whole = node.mir("cast", [x], to="i64")
    if not signed:
        return whole
    below = node.mir("compare", [x, node.mir("cast", [whole], to="f32")], kind="lt")
    one = node.as_tensor(node.scalar(1, DType.I64))
    return node.mir("where", [below, node.mir("binary", [whole, one], kind="sub"), whole])


def _nearest(node: Node, x: HirValue, scale: float | None) -> HirValue:
    mode = _nearest_mode(node, scale)
    low = _floor(node, x)
    if mode == "floor":
        return low
    frac = node.mir("binary", [x, node.mir("cast", [low], to="f32")], kind="sub")
    one = node.as_tensor(node.scalar(1, DType.I64))
    if mode == "ceil":
        up = node.mir("compare", [frac, _f32(node, 0.0)], kind="gt")
    elif mode == "round_prefer_ceil":
        up = node.mir("compare", [frac, _f32(node, 0.5)], kind="ge")
    else:
        up = node.mir("compare", [frac, _f32(node, 0.5)], kind="gt")
    return node.mir("where", [up, node.mir("binary", [low, one], kind="add"), low])


def _along(node: Node, v: HirValue, axis: int, rank: int, dtype: DType) -> HirValue:
    """An ``[m]`` f32 vector of per-position weights, shaped to broadcast along ``axis``
    of a rank-``rank`` tensor of ``dtype``."""
    if dtype != DType.F32:
        v = node.mir("cast", [v], to=str(dtype))
    return node.mir("reshape", [v], new_shape=[-1 if a == axis else 1 for a in range(rank)])


def _kernel(node: Node, d: HirValue, a: float | None) -> HirValue:
    """The interpolation kernel at ``d >= 0`` taps away: the triangle ``max(1 - d, 0)``
    (linear), or Keys' cubic with coefficient ``a``: ``(a+2) d^3 - (a+3) d^2 + 1`` up to 1,
    ``a d^3 - 5a d^2 + 8a d - 4a`` up to 2, then 0 (ONNX's ``cubic_coeff_a``)."""
    zero, one = _f32(node, 0.0), _f32(node, 1.0)
    if a is None:
        return node.mir("binary", [node.mir("binary", [one, d], kind="sub"), zero], kind="max")

    def poly(coeffs: tuple[float, ...]) -> HirValue:
        acc = _f32(node, coeffs[0])
        for k in coeffs[1:]:  # Horner
            acc = node.mir("binary", [node.mir("binary", [acc, d], kind="mul"),
                                      _f32(node, k)], kind="add")
        return acc

    near, far = poly((a + 2, -(a + 3), 0.0, 1.0)), poly((a, -5 * a, 8 * a, -4 * a))
    inner = node.mir("compare", [d, one], kind="le")
    outer = node.mir("compare", [d, _f32(node, 2.0)], kind="lt")
    return node.mir("where", [inner, near, node.mir("where", [outer, far, zero])])


def _filtered(node: Node, x: HirValue, dims: list[SymDim], axis: int, n: SymDim, m: SymDim,
              scale: float | None, roi: tuple[float, float] | None) -> HirValue:
    """Linear with ``antialias`` and cubic (Keys; ``cubic_coeff_a``, -0.75 by default, as
    PyTorch's bicubic) as a sum of weighted gathers, ONNX's reference definition: the taps
    are ``floor(c) + o`` for the offsets ``o`` of the kernel's support (-1 .. 2 for cubic;
    widened by ``1 / scale`` when ``antialias`` downsamples), their indices clamped to the
    axis (ONNX pads by the edge values), each weighted by the kernel at ``|o - t| s``
    (``t = c - floor(c)``, ``s = min(scale, 1)`` with antialias, else 1); antialias
    normalizes the weights to sum 1, and ``exclude_outside`` zeroes the weights of taps off
    the axis and renormalizes."""
    a = float(node.attr("cubic_coeff_a", -0.75)) if node.attr("mode") == "cubic" else None
    reach = 1 if a is None else 2
    shrink = 1.0
    if node.attr("antialias", 0):
        if scale is None:
            if not (is_static(m) and is_static(n)):
                node.fail(f"antialias resize from the dynamic size {n} to {m}: its "
                          "footprint (1 / scale taps) is fixed at import")
            scale = int(m) / int(n)
        shrink = min(scale, 1.0)
    start = int(np.floor(-reach / shrink)) + 1
    offsets = range(start, 1 - start + (1 if a is None else reach - 1))
    c = _coords(node, n, m, scale, clamp=False, roi=roi)
    low = _floor(node, c, signed=True)
    one_i = node.as_tensor(node.scalar(1, DType.I64))
    t = node.mir("binary", [c, node.mir("cast", [low], to="f32")], kind="sub")
    weights = []
    for o in offsets:
        d = node.mir("activation", [node.mir("binary", [_f32(node, float(o)), t], kind="sub")],
                     kind="abs")
        if shrink != 1.0:
            d = node.mir("binary", [d, _f32(node, shrink)], kind="mul")
        weights.append(_kernel(node, d, a))
    last = node.mir("binary", [node.sizes.scalar(n, DType.I64, node.fail), one_i], kind="sub")
    taps = [node.mir("binary", [low, node.as_tensor(node.scalar(o, DType.I64))], kind="add")
            for o in offsets]
    zero_i, zero_f = node.as_tensor(node.scalar(0, DType.I64)), _f32(node, 0.0)
    if node.attr("exclude_outside", 0):
        weights = [node.mir("where", [node.mir("compare", [tap, zero_i], kind="ge"),
                                      node.mir("where", [node.mir("compare", [tap, last],
                                                                  kind="le"), w, zero_f]),
                                      zero_f])
                   for tap, w in zip(taps, weights, strict=True)]
    if node.attr("exclude_outside", 0) or shrink != 1.0:
        total = weights[0]
        for w in weights[1:]:
            total = node.mir("binary", [total, w], kind="add")
        weights = [node.mir("binary", [w, total], kind="div") for w in weights]
    y: HirValue | None = None
    for tap, w in zip(taps, weights, strict=True):
        idx = node.mir("binary", [node.mir("binary", [tap, zero_i], kind="max"), last],
                       kind="min")
        term = node.mir("binary", [node.mir("gather", [x, idx], axis=axis, batch_dims=0),
                                   _along(node, w, axis, len(dims), x.dtype)], kind="mul")
        y = term if y is None else node.mir("binary", [y, term], kind="add")
    assert y is not None
    return y


def _resize_axis(node: Node, x: HirValue, dims: list[SymDim], axis: int, n: SymDim,
                 m: SymDim, scale: float | None, roi: tuple[float, float] | None
                 ) -> HirValue:
    """One axis resized; with a roi (tf_crop_and_resize), positions whose coordinate falls
    off ``[0, n - 1]`` take ``extrapolation_value``."""
    y = _interpolated(node, x, dims, axis, n, m, scale, roi)
    if roi is None:
        return y
    c = _coords(node, n, m, scale, clamp=False, roi=roi)
    top = node.mir("binary", [node.sizes.scalar(n, DType.F32, node.fail), _f32(node, 1.0)],
                   kind="sub")
    below = node.mir("compare", [c, _f32(node, 0.0)], kind="lt")
    off = node.mir("where", [below, node.scalar(True, below),
                             node.mir("compare", [c, top], kind="gt")])
    off = node.mir("reshape", [off], new_shape=[-1 if a == axis else 1
                                                for a in range(len(dims))])
    fill = node.as_tensor(node.scalar(float(node.attr("extrapolation_value", 0.0)), x.dtype))
    return node.mir("where", [off, fill, y])


def _interpolated(node: Node, x: HirValue, dims: list[SymDim], axis: int, n: SymDim,
                  m: SymDim, scale: float | None, roi: tuple[float, float] | None
                  ) -> HirValue:
    mode = node.attr("mode", "nearest")
    if mode == "cubic" or (mode == "linear" and node.attr("antialias", 0)):
        return _filtered(node, x, dims, axis, n, m, scale, roi)
    coords = _coords(node, n, m, scale, roi=roi)
    if node.attr("mode", "nearest") == "nearest":
        return node.mir("gather", [x, _nearest(node, coords, scale)], axis=axis, batch_dims=0)
    low = _floor(node, coords)
    last = node.mir("binary", [node.sizes.scalar(n, DType.I64, node.fail),
                               node.as_tensor(node.scalar(1, DType.I64))], kind="sub")
    high = node.mir("binary", [node.mir("binary", [low, node.as_tensor(node.scalar(
        1, DType.I64))], kind="add"), last], kind="min")
    w = _along(node, node.mir("binary", [coords, node.mir("cast", [low], to="f32")],
                              kind="sub"), axis, len(dims), x.dtype)
    a = node.mir("gather", [x, low], axis=axis, batch_dims=0)
    b = node.mir("gather", [x, high], axis=axis, batch_dims=0)
    return node.mir("binary", [a, node.mir("binary", [node.mir("binary", [b, a], kind="sub"),
                                                      w], kind="mul")], kind="add")
