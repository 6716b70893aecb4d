"""ONNX ops that move elements to new places: Pad (every mode), DepthToSpace, SpaceToDepth.

``Pad`` with a constant is ``rlx_mir.pad`` (negative pads crop, ``rlx_mir.slice``); the
``edge``, ``reflect`` and ``wrap`` modes gather each padded axis through an index vector
``[lo part, 0 .. n - 1, hi part]`` built from the axis' size (at run time when it is
dynamic). ``rlx_mir.gather`` clamps its indices to the axis, so no pad width reads outside
the tensor: a width the mode cannot fill (reflect: more than ``n - 1``; wrap: more than
``n``) is an error when ``n`` is known at import time, and over a dynamic ``n`` that turns
out too small the indices clamp to the axis' ends.
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import DType

PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _pads(node: Node, rank: int) -> tuple[list[int], list[int], float]:
    """(low, high, constant value) per axis, from the attributes (Pad-2) or inputs."""
    if node.version < 11:
        pads, value = node.ints("pads") or [], float(node.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in node.static(1, "the pads")]
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
        return [node.mir("pad", [y], low=low, high=high, value=value)]
    for a in range(rank):
        if low[a] or high[a]:
            y = _pad_axis(node, y, a, low[a], high[a], mode)
    return [y]


def _pad_axis(node: Node, x: HirValue, axis: int, lo: int, hi: int, mode: str) -> HirValue:
    dims = node.dims_of(x)
    d: SymDim = dims[axis]
    if is_static(d):
        most = int(d) - 1 if mode == "reflect" else int(d)
        if (mode != "edge" and max(lo, hi) > most) or int(d) == 0:
            node.fail(f"{mode} pads ({lo}, {hi}) of axis {axis} (size {d}): at most {most}")

    def fail(message: str) -> None:
        node.fail(f"{mode} padding of axis {axis}: {message}")

    n = node.sizes.scalar(d, DType.I64, fail)  # type: ignore[arg-type]
    i64 = np.int64

    def minus(k: int, vec: np.ndarray) -> HirValue:  # n - k - vec, a [len(vec)] vector
        start = node.mir("binary", [n, np.asarray(k, i64)], kind="sub")
        return node.mir("binary", [start, vec.astype(i64)], kind="sub")

    lo_part: Value | None = None
    hi_part: Value | None = None
    if mode == "edge":
        lo_part = np.zeros(lo, i64) if lo else None
        hi_part = minus(1, np.zeros(hi, i64)) if hi else None
    elif mode == "reflect":
        lo_part = np.arange(lo, 0, -1, dtype=i64) if lo else None
        hi_part = minus(2, np.arange(hi, dtype=i64)) if hi else None
    else:  # wrap
        lo_part = minus(0, np.arange(lo, 0, -1, dtype=i64)) if lo else None
        hi_part = np.arange(hi, dtype=i64) if hi else None
    parts = [p for p in (lo_part, node.sizes.iota(d, DType.I64, fail), hi_part)  # type: ignore[arg-type]
             if p is not None]
    index = node.mir("concat", parts, axis=0)
    y = node.mir("gather", [x, index], axis=axis)
    return node.known(y, [dd + lo + hi if k == axis else dd for k, dd in enumerate(dims)])


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
