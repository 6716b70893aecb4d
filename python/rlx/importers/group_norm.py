"""Group and instance normalization, shared by both importers (ONNX's GroupNormalization
and InstanceNormalization; torch's ``group_norm`` and ``instance_norm``).

The statistics of each (sample, group of ``C / G`` channels) are the mean and biased
variance over the view ``[N, G, C / G * D1 * ...]`` (one flattened axis, any spatial dim
dynamic), in f32, two passes; then per channel ``(x - mean) / sqrt(var + eps) * w + b``,
rounded back to the input's type. Over a dynamic spatial size the view and ``x - mean``
are read through ``rlx_mir.barrier {always}``: IREE 3.13 fails to compile the variance's
reduction fused with that broadcast subtraction (llvm-cpu: "all stack allocations need to
be hoisted to the entry block", a GroupNorm exported as a reshape to ``[N, G, ?]`` and
InstanceNormalization; Vulkan: "failed to legalize unresolved source materialization",
reduced over two dynamic axes).
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.ir.types import DType


def _f32(h: HirModule, v: HirValue) -> HirValue:
    return v if v.dtype == DType.F32 else h.mir("cast", [v], to="f32")


def group_norm(h: HirModule, x: HirValue, groups: int, eps: float,
               weight: HirValue | None = None, bias: HirValue | None = None) -> HirValue:
    """``x [N, C, D1, ...]`` (C static and a multiple of ``groups``) normalized per
    (sample, group), then scaled and shifted per channel (``weight`` / ``bias`` ``[C]``;
    absent: 1 and 0)."""
    n, c = x.shape[0], int(x.shape[1])  # type: ignore[arg-type]
    rank, width = len(x.shape), c // groups
    xs = _f32(h, x)
    view = h.mir("reshape", [xs], new_shape=[-2, groups, -1])  # N copied, the rest inferred
    dynamic = view.shape[2] is None
    if dynamic:
        view = h.mir("barrier", [view], always=True)
    mean = h.mir("reduce", [view], kind="mean", axes=[2], keep_dim=True)
    centered = h.mir("binary", [view, mean], kind="sub")
    if dynamic:
        centered = h.mir("barrier", [centered], always=True)
    var = h.mir("reduce", [h.mir("binary", [centered, centered], kind="mul")], kind="mean",
                axes=[2], keep_dim=True)
    spread = h.constant(np.zeros((1, groups, width), np.float32), DType.F32)
    stats = [-2 if n is None else n, c, *[1] * (rank - 2)]

    def per_channel(v: HirValue) -> HirValue:  # [N, G, 1] -> [N, C, 1, ...]
        return h.mir("reshape", [h.mir("binary", [v, spread], kind="add")], new_shape=stats)

    shifted = h.mir("binary", [per_channel(var), h.constant(np.asarray(eps, np.float32),
                                                            DType.F32)], kind="add")
    y = h.mir("binary", [h.mir("binary", [xs, per_channel(mean)], kind="sub"),
                         h.mir("activation", [shifted], kind="rsqrt")], kind="mul")
    for v, kind in ((weight, "mul"), (bias, "add")):
        if v is not None:
            y = h.mir("binary", [y, h.mir("reshape", [_f32(h, v)],
                                          new_shape=[c, *[1] * (rank - 2)])], kind=kind)
    return y if x.dtype == DType.F32 else h.mir("cast", [y], to=str(x.dtype))


__all__ = ["group_norm"]
