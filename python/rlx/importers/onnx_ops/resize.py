"""ONNX Resize (opset 11+; Upsample's successor): ``nearest`` and ``linear`` (bilinear,
trilinear, ...) over any axes, static or dynamic, one axis at a time as gathers.

Per resized axis of input size ``n`` and output size ``m``: the output positions ``i``
(``iota(m)``, counted at run time when dynamic) map to input coordinates by the
``coordinate_transformation_mode`` (``half_pixel``, ``pytorch_half_pixel``,
``asymmetric``, ``align_corners``), clamped to ``[0, n - 1]``; ``nearest`` rounds them by
``nearest_mode`` and gathers, ``linear`` gathers the two neighbours and blends them.
"""

from __future__ import annotations

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.ir.types import DType

MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _check_attrs(node: Node) -> None:
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        node.fail(f"mode '{mode}': rlx resizes with 'nearest' and 'linear'")
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in MODES:
        node.fail(f"coordinate_transformation_mode '{transform}': rlx supports "
                  f"{', '.join(MODES)}")
    if node.attr("nearest_mode", "round_prefer_floor") not in NEAREST:
        node.fail(f"nearest_mode '{node.attr('nearest_mode')}'")
    if node.attr("antialias", 0):
        node.fail("antialias = 1 is not supported")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        node.fail("keep_aspect_ratio_policy other than 'stretch' is not supported")


def _targets(node: Node, dims: list[SymDim]) -> list[tuple[SymDim, float | None]]:
    """Per axis: (output size, the scale when given; else None, ``out / in``)."""
    rank = len(dims)
    axes = normalize_axes(node, node.ints("axes") or list(range(rank)), rank)
    sizes = node.const(3, "the sizes") if node.has(3) else None
    scales = node.static(2, "the scales") if node.has(2) and node.version >= 11 else (
        node.static(1, "the scales") if node.version < 11 else None)
    if scales is not None and scales.size == 0:
        scales = None
    out: list[tuple[SymDim, float | None]] = [(d, 1.0) for d in dims]
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


@converter("Resize", const_inputs=(1, 2, 3), since=10)
def convert_resize(node: Node) -> list[Value]:
    _check_attrs(node)
    x = node.tensor(0)
    dims = node.dims(0)
    if node.version >= 11 and node.attr("coordinate_transformation_mode", "") == \
            "tf_crop_and_resize":
        node.fail("tf_crop_and_resize is not supported")
    y = x
    y_dims = list(dims)
    for axis, (m, scale) in enumerate(_targets(node, dims)):
        n = dims[axis]
        if scale == 1.0 or (scale is None and is_static(m) and is_static(n) and int(m) ==
                            int(n)):
            continue
        y = _resize_axis(node, y, y_dims, axis, n, m, scale)
        y_dims[axis] = m
        node.known(y, y_dims)
    return [y]


def _f32(node: Node, v: float) -> HirValue:
    return node.as_tensor(node.scalar(v, DType.F32))


def _coords(node: Node, n: SymDim, m: SymDim, scale: float | None) -> HirValue:
    """The input coordinate of each of the ``m`` output positions (f32), clamped to
    ``[0, n - 1]``."""
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    i = node.sizes.iota(m, DType.F32, node.fail)
    n_f = node.sizes.scalar(n, DType.F32, node.fail)
    m_f = node.sizes.scalar(m, DType.F32, node.fail)
    # the scale ONNX uses: the given one, else out / in
    s = _f32(node, scale) if scale is not None else node.mir("binary", [m_f, n_f], kind="div")
    if transform == "align_corners":
        span = node.mir("binary", [node.mir("binary", [n_f, _f32(node, 1.0)], kind="sub"),
                                   node.mir("binary", [m_f, _f32(node, 1.0)], kind="sub")],
                        kind="div")
        one = node.mir("compare", [m_f, _f32(node, 1.0)], kind="eq")
        span = node.mir("where", [one, _f32(node, 0.0), span])
        x = node.mir("binary", [i, span], kind="mul")
    elif transform == "asymmetric":
        x = node.mir("binary", [i, s], kind="div")
    else:
        half = _f32(node, 0.5)
        x = node.mir("binary", [node.mir("binary", [node.mir("binary", [i, half], kind="add"),
                                                    s], kind="div"), half], kind="sub")
        if transform == "pytorch_half_pixel":
            one = node.mir("compare", [m_f, _f32(node, 1.0)], kind="eq")
            x = node.mir("where", [one, _f32(node, 0.0), x])
    top = node.mir("binary", [n_f, _f32(node, 1.0)], kind="sub")
    x = node.mir("binary", [x, _f32(node, 0.0)], kind="max")
    return node.mir("binary", [x, top], kind="min")


def _floor(node: Node, x: HirValue) -> HirValue:
    """``floor`` of a non-negative f32 as i64 (truncation)."""
    return node.mir("cast", [x], to="i64")


def _nearest(node: Node, x: HirValue) -> HirValue:
    mode = node.attr("nearest_mode", "round_prefer_floor")
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


def _resize_axis(node: Node, x: HirValue, dims: list[SymDim], axis: int, n: SymDim,
                 m: SymDim, scale: float | None) -> HirValue:
    coords = _coords(node, n, m, scale)
    if node.attr("mode", "nearest") == "nearest":
        return node.mir("gather", [x, _nearest(node, coords)], axis=axis, batch_dims=0)
    low = _floor(node, coords)
    last = node.mir("binary", [node.sizes.scalar(n, DType.I64, node.fail),
                               node.as_tensor(node.scalar(1, DType.I64))], kind="sub")
    high = node.mir("binary", [node.mir("binary", [low, node.as_tensor(node.scalar(
        1, DType.I64))], kind="add"), last], kind="min")
    w = node.mir("binary", [coords, node.mir("cast", [low], to="f32")], kind="sub")
    if x.dtype != DType.F32:
        w = node.mir("cast", [w], to=str(x.dtype))
    shape = [-1 if a == axis else 1 for a in range(len(dims))]
    w = node.mir("reshape", [w], new_shape=shape)
    a = node.mir("gather", [x, low], axis=axis, batch_dims=0)
    b = node.mir("gather", [x, high], axis=axis, batch_dims=0)
    return node.mir("binary", [a, node.mir("binary", [node.mir("binary", [b, a], kind="sub"),
                                                      w], kind="mul")], kind="add")
