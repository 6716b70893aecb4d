"""ATen upsampling: ``upsample_nearest{1,2}d``, ``upsample_bilinear2d`` / ``upsample_linear1d``
and ``upsample_bicubic2d`` (``F.interpolate``), over static or dynamic spatial sizes, one
axis at a time as gathers, with PyTorch's source-index rules (``area_pixel_compute_source_
index`` in ATen's UpSample.h):

- the scale is ``(n - 1) / (m - 1)`` with ``align_corners`` (0 when ``m == 1``), else
  ``1 / scale_factor`` when the call gave scale factors, else ``n / m``;
- nearest reads ``min(floor(i * scale), n - 1)``;
- linear reads ``c = scale (i + 0.5) - 0.5`` (``scale i`` with ``align_corners``), clamped
  at 0, and blends ``floor(c)`` and the next index (clamped to ``n - 1``);
- cubic reads the same ``c`` unclamped and weighs the four inputs ``floor(c) - 1 ..
  floor(c) + 2`` (indices clamped into the axis) by Keys' kernel with ``a = -0.75``.
"""

from __future__ import annotations

from typing import Any

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim
from rlx.importers.torch_export.convert import Op, Value, converter
from rlx.ir.types import DType

CUBIC_A = -0.75
"""PyTorch's bicubic coefficient (``get_cubic_upsample_coefficients``)."""


def _f32(op: Op, v: float) -> HirValue:
    return op.h.constant(op.scalar(v, DType.F32), DType.F32)


def _i64(op: Op, v: int) -> HirValue:
    return op.h.constant(op.scalar(v, DType.I64), DType.I64)


def _bin(op: Op, kind: str, a: HirValue, b: HirValue) -> HirValue:
    return op.h.mir("binary", [a, b], kind=kind)


def _source(op: Op, n: SymDim, m: SymDim, scale: float | None, align: bool, centre: bool
            ) -> HirValue:
    """The source coordinate (f32) of each of the ``m`` output positions."""
    i = op.sizes.iota(m, DType.F32, op.fail)
    n_f, m_f = (op.sizes.scalar(d, DType.F32, op.fail) for d in (n, m))
    one = _f32(op, 1.0)
    if align:
        ratio = _bin(op, "div", _bin(op, "sub", n_f, one), _bin(op, "sub", m_f, one))
        single = op.h.mir("compare", [m_f, one], kind="eq")
        return _bin(op, "mul", i, op.h.mir("where", [single, _f32(op, 0.0), ratio]))
    ratio = _f32(op, 1.0 / scale) if scale else _bin(op, "div", n_f, m_f)
    if not centre:
        return _bin(op, "mul", i, ratio)
    half = _f32(op, 0.5)
    return _bin(op, "sub", _bin(op, "mul", _bin(op, "add", i, half), ratio), half)


def _floor(op: Op, c: HirValue) -> HirValue:
    """``floor(c)`` as i64 (truncation corrected below zero)."""
    whole = op.h.mir("cast", [c], to="i64")
    below = op.h.mir("compare", [c, op.h.mir("cast", [whole], to="f32")], kind="lt")
    return op.h.mir("where", [below, _bin(op, "sub", whole, _i64(op, 1)), whole])


def _along(op: Op, w: HirValue, axis: int, rank: int, like: HirValue) -> HirValue:
    if like.dtype != DType.F32:
        w = op.h.mir("cast", [w], to=str(like.dtype))
    return op.h.mir("reshape", [w], new_shape=[-1 if a == axis else 1 for a in range(rank)])


def _keys(op: Op, d: HirValue, near: bool) -> HirValue:
    """Keys' cubic kernel at distance ``d`` (``|d| <= 1`` when ``near``, else in 1..2)."""
    a = CUBIC_A
    coeffs = (a + 2, -(a + 3), 0.0, 1.0) if near else (a, -5 * a, 8 * a, -4 * a)
    acc = _f32(op, coeffs[0])
    for k in coeffs[1:]:  # Horner
        acc = _bin(op, "add", _bin(op, "mul", acc, d), _f32(op, k))
    return acc


def _axis(op: Op, x: HirValue, axis: int, n: SymDim, m: SymDim, mode: str,
          scale: float | None, align: bool) -> HirValue:
    rank = len(x.shape)
    last = _bin(op, "sub", op.sizes.scalar(n, DType.I64, op.fail), _i64(op, 1))

    def read(idx: HirValue) -> HirValue:
        idx = _bin(op, "min", _bin(op, "max", idx, _i64(op, 0)), last)
        return op.h.mir("gather", [x, idx], axis=axis, batch_dims=0)

    if mode == "nearest":
        return read(_floor(op, _source(op, n, m, scale, False, False)))
    c = _source(op, n, m, scale, align, True)
    if mode == "linear":
        c = _bin(op, "max", c, _f32(op, 0.0))
    low = _floor(op, c)
    t = _bin(op, "sub", c, op.h.mir("cast", [low], to="f32"))
    if mode == "linear":
        a, b = read(low), read(_bin(op, "add", low, _i64(op, 1)))
        return _bin(op, "add", a, _bin(op, "mul", _bin(op, "sub", b, a),
                                       _along(op, t, axis, rank, x)))
    one, two = _f32(op, 1.0), _f32(op, 2.0)
    dists = [_bin(op, "add", t, one), t, _bin(op, "sub", one, t), _bin(op, "sub", two, t)]
    y: HirValue | None = None
    for k, d in enumerate(dists):
        term = _bin(op, "mul", read(_bin(op, "add", low, _i64(op, k - 1))),
                    _along(op, _keys(op, d, k in (1, 2)), axis, rank, x))
        y = term if y is None else _bin(op, "add", y, term)
    assert y is not None
    return y


def _upsample(op: Op, mode: str, align: bool, scales: Any) -> Value:
    x = op.tensor(0, "input")
    dims, out = op.dims(x), op.out_dims()
    spatial = len(dims) - 2
    factors = [None] * spatial if not scales else [float(s) for s in scales]
    if len(factors) != spatial:
        op.fail(f"scale factors {factors} for {spatial} spatial dims")
    y = x
    for k in range(spatial):
        axis = 2 + k
        y = op.importer.known(_axis(op, y, axis, dims[axis], out[axis], mode, factors[k],
                                    align), [*out[:axis + 1], *dims[axis + 1:]])
    return y


@converter("upsample_nearest1d", "upsample_nearest2d")
def convert_upsample_nearest(op: Op) -> Value:
    return _upsample(op, "nearest", False, op.arg(2, "scale_factors", None))


@converter("upsample_linear1d", "upsample_bilinear2d")
def convert_upsample_linear(op: Op) -> Value:
    return _upsample(op, "linear", bool(op.arg(2, "align_corners", False)),
                     op.arg(3, "scale_factors", None))


@converter("upsample_bicubic2d")
def convert_upsample_bicubic(op: Op) -> Value:
    return _upsample(op, "cubic", bool(op.arg(2, "align_corners", False)),
                     op.arg(3, "scale_factors", None))
