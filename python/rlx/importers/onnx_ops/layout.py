"""ONNX ops that move elements to new places: Pad (every mode), DepthToSpace, SpaceToDepth.

``Pad`` with a constant is ``rlx_mir.pad`` (negative pads crop, ``rlx_mir.slice``); the
``edge``, ``reflect`` and ``wrap`` modes gather each padded axis through the index vector
of :mod:`rlx.importers.padding` (clamped by ``rlx_mir.gather``: no pad reads outside the
tensor; a width the mode cannot fill is an error when the axis' size is known).
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np
import sympy

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.importers.padding import pad_index

PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _pads(node: Node, rank: int) -> tuple[list[SymDim], list[SymDim], float]:
    """(low, high, constant value) per axis, from the attributes (Pad-2) or inputs; a pad
    may be a size the model computes (Longformer's ``(w - s % w) % w``)."""
    if node.version < 11:
        pads, value = node.ints("pads") or [], float(node.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = [normalize(p) for p in node.const(1, "the pads").reshape(-1)]
        value_arr = node.static(2, "the pad value") if node.has(2) else np.zeros(1)
        value = float(np.asarray(value_arr).reshape(-1)[0]) if value_arr.size else 0.0
        axes = normalize_axes(node, [int(a) for a in node.static(3, "the axes")], rank) if (
            node.has(3)) else list(range(rank))
    if len(pads) != 2 * len(axes):
        node.fail(f"pads {pads}: expected {2 * len(axes)} values")
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = pads[i], pads[len(axes) + i]
    return low, high, value


@converter("Pad", const_inputs=(1, 2, 3), since=2)
def convert_pad(node: Node) -> list[Value]:
    x = node.tensor(0)
    rank = len(x.shape)
    mode = node.attr("mode", "constant")
    if mode not in PAD_MODES:
        node.fail(f"mode {mode!r}: expected one of {', '.join(PAD_MODES)}")
    low, high, value = _pads(node, rank)
    # the sizes it makes, in the model's terms (a size padded at a dynamic dim stays that
    # dim + pads: ConvBERT's unfold pads [b, 16, s, 1] and reshapes over b and s after it)
    out_dims = [normalize(d + lo + hi) for d, lo, hi in zip(node.dims_of(x), low, high,
                                                              strict=True)]
    if not all(is_static(p) for p in low + high):
        if mode != "constant":
            node.fail(f"mode {mode!r} with pads computed from sizes ({low + high}): rlx pads "
                      "by sizes the model computes in constant mode")
        return [node.known(_pad_by_sizes(node, x, low, high, value), out_dims)]
    low, high = [int(p) for p in low], [int(p) for p in high]
    y = x
    if any(p < 0 for p in low + high):  # crops first (the modes read the cropped tensor)
        shape = y.shape
        if any(shape[a] is None for a in range(rank) if low[a] < 0 or high[a] < 0):
            node.fail("negative pads on a dynamic dim")
        starts = [-min(p, 0) for p in low]
        sizes = [-1 if low[a] >= 0 and high[a] >= 0 else shape[a] + min(low[a], 0) + min(
            high[a], 0) for a in range(rank)]  # type: ignore[operator]
        y = node.mir("slice", [y], starts=starts, sizes=sizes, strides=[1] * rank)
    low, high = [max(p, 0) for p in low], [max(p, 0) for p in high]
    if not any(low + high):
        return [y]
    if mode == "constant":
        return [node.known(node.mir("pad", [y], low=low, high=high, value=value), out_dims)]
    for a in range(rank):
        if low[a] or high[a]:
            y = _pad_axis(node, y, a, low[a], high[a], mode)
    return [y]


def _pad_by_sizes(node: Node, x: HirValue, low: list[SymDim], high: list[SymDim],
                  value: float) -> HirValue:
    """A constant pad whose amounts are sizes the model computes: the static ones by
    ``rlx_mir.pad``, then each computed side a block of ``value`` of its run-time size,
    concatenated along its axis."""
    if any(sympy.sympify(p).is_negative for p in low + high):
        node.fail(f"pads {low + high}: a negative pad beside pads computed from sizes")
    computed = [[p if not is_static(p) else None for p in side] for side in (low, high)]
    static = [[int(p) if is_static(p) else 0 for p in side] for side in (low, high)]
    y = x
    if any(static[0] + static[1]):
        y = node.known(node.mir("pad", [x], low=static[0], high=static[1], value=value),
                       [normalize(d + lo + hi) for d, lo, hi in zip(
                           node.dims_of(x), *static, strict=True)])
    fill = np.asarray(value, y.dtype.numpy)
    for axis, (lo, hi) in enumerate(zip(*computed, strict=True)):
        if lo is None and hi is None:
            continue
        dims = node.dims_of(y)
        blocks = [None if p is None else node.sizes.full(
            fill, [p if a == axis else d for a, d in enumerate(dims)], node.fail)
            for p in (lo, hi)]
        pieces = [v for v in (blocks[0], y, blocks[1]) if v is not None]
        grown = normalize(dims[axis] + sum(p for p in (lo, hi) if p is not None))
        y = node.known(node.mir("concat", pieces, axis=axis),
                       [grown if a == axis else d for a, d in enumerate(dims)])
    return y


def _pad_axis(node: Node, x: HirValue, axis: int, lo: int, hi: int, mode: str) -> HirValue:
    dims = node.dims_of(x)

    def fail(message: str) -> NoReturn:
        node.fail(f"axis {axis}: {message}")

    index = pad_index(node.h, node.sizes, dims[axis], lo, hi, mode, fail)
    y = node.mir("gather", [x, index], axis=axis)
    return node.known(y, [d + lo + hi if k == axis else d for k, d in enumerate(dims)])


def _blocks(node: Node) -> tuple[HirValue, int, list[SymDim]]:
    x = node.tensor(0)
    b = int(node.attr("blocksize", 0))
    if len(x.shape) != 4:
        node.fail(f"input {x.type}: expected [N, C, H, W]")
    if b <= 0:
        node.fail(f"blocksize {b}: expected a positive size")
    return x, b, node.dims_of(x)


@converter("DepthToSpace", since=1)
def convert_depth_to_space(node: Node) -> list[Value]:
    """``[N, C, H, W]`` to ``[N, C / b^2, H b, W b]``: the channel read as ``(b, b, C /
    b^2)`` (mode DCR, the default) or ``(C / b^2, b, b)`` (CRD)."""
    x, b, (n, c, h, w) = _blocks(node)
    mode = node.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        node.fail(f"mode {mode!r}: expected 'DCR' or 'CRD'")
    if not is_static(c) or int(c) % (b * b):
        node.fail(f"{c} channels: expected a static multiple of blocksize^2 = {b * b}")
    depth = int(c) // (b * b)
    if mode == "DCR":
        split, perm = [n, b, b, depth, h, w], [0, 3, 4, 1, 5, 2]
    else:
        split, perm = [n, depth, b, b, h, w], [0, 1, 4, 2, 5, 3]
    t = node.mir("transpose", [node.as_tensor(reshape_to(node, x, split))], perm=perm)
    return [reshape_to(node, t, [n, depth, h * b, w * b])]


@converter("SpaceToDepth", since=1)
def convert_space_to_depth(node: Node) -> list[Value]:
    """``[N, C, H, W]`` to ``[N, C b^2, H / b, W / b]``, each ``b x b`` block's elements
    becoming channels, ordered ``(b, b, C)`` (mode DCR, the default: DepthToSpace's DCR
    inverse) or ``(C, b, b)`` (CRD, SpaceToDepth-28)."""
    x, b, (n, c, h, w) = _blocks(node)
    mode = node.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        node.fail(f"mode {mode!r}: expected 'DCR' or 'CRD'")
    for d in (h, w):
        if is_static(d) and int(d) % b:
            node.fail(f"spatial size {d} is not a multiple of blocksize {b}")
    split = [n, c, h // b, b, w // b, b]
    t = node.mir("transpose", [node.as_tensor(reshape_to(node, x, split))],
                 perm=[0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return [reshape_to(node, t, [n, c * b * b, h // b, w // b])]
