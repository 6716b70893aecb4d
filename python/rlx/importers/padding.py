"""The index vector of a non-constant pad, shared by both importers.

Padding an axis of size ``n`` by ``lo`` / ``hi`` in the ``edge`` (replicate), ``reflect``
or ``wrap`` (circular) mode gathers the axis at ``[lo part, 0 .. n - 1, hi part]``:

- edge: ``0`` (``lo`` times), ``n - 1`` (``hi`` times);
- reflect: ``lo .. 1``, then ``n - 2, n - 3, ...`` (``hi`` of them);
- wrap: ``n - lo .. n - 1``, then ``0 .. hi - 1``.

``n`` is read at run time when dynamic. ``rlx_mir.gather`` clamps the indices into the
axis, so a width the mode cannot fill (reflect: more than ``n - 1``; wrap: more than
``n``) never reads outside the tensor; callers refuse it when ``n`` is known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import numpy as np

from rlx.dialects.builder import HirModule, HirValue
from rlx.importers.dims import SizeSource, SymDim, is_static
from rlx.ir.types import DType

PAD_MODES = ("edge", "reflect", "wrap")


def widest(mode: str, n: int) -> int:
    """The widest pad ``mode`` can fill on an axis of ``n``."""
    return n - 1 if mode == "reflect" else n if mode == "wrap" else 1 << 62


def pad_index(h: HirModule, sizes: SizeSource, n: SymDim, lo: int, hi: int, mode: str,
              fail: Callable[[str], NoReturn]) -> HirValue:
    """The ``[n + lo + hi]`` i64 index vector of ``mode`` (one of :data:`PAD_MODES`)."""
    if is_static(n) and max(lo, hi) > widest(mode, int(n)):
        fail(f"{mode} pads ({lo}, {hi}) of an axis of {n}: at most {widest(mode, int(n))}")
    size = sizes.scalar(n, DType.I64, fail)

    def const(v: np.ndarray) -> HirValue:
        return h.constant(v.astype(np.int64), DType.I64)

    def minus(k: int, vec: np.ndarray) -> HirValue:  # n - k - vec
        start = h.mir("binary", [size, const(np.asarray(k))], kind="sub")
        return h.mir("binary", [start, const(vec)], kind="sub")

    down = np.arange(lo, 0, -1)
    parts: list[HirValue | None]
    if mode == "edge":
        parts = [const(np.zeros(lo)) if lo else None,
                 minus(1, np.zeros(hi)) if hi else None]
    elif mode == "reflect":
        parts = [const(down) if lo else None, minus(2, np.arange(hi)) if hi else None]
    else:
        parts = [minus(0, down) if lo else None, const(np.arange(hi)) if hi else None]
    pieces = [p for p in (parts[0], sizes.iota(n, DType.I64, fail), parts[1])
              if p is not None]
    return h.mir("concat", pieces, axis=0) if len(pieces) > 1 else pieces[0]


__all__ = ["PAD_MODES", "pad_index", "widest"]
