"""Index arithmetic shared by both importers: indices counted from the end of an axis, the
row-major flat position of coordinates (ONNX's GatherND, torch's ``gather`` and ``x[i,
j]``), and a view to several dynamic sizes that are not its input's dims (ONNX's
``Reshape`` of ``[B S, D]`` to ``[B, S, D]``; torch's ``view`` of a flattened product back
to ``[B, S, N]``), which one ``rlx_mir.reshape`` cannot say: it keeps the input's dynamic
dims and infers at most one other."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SizeSource, SymDim, is_static
from rlx.ir.types import DType


class Builder(Protocol):
    """What the importers' per-node helpers (ONNX ``Node``, torch ``Op``) both offer."""

    sizes: SizeSource
    fail: Callable[[str], NoReturn]

    def mir(self, op: str, inputs: Sequence[Any], **attrs: Any) -> HirValue: ...

    def cast(self, v: HirValue, dtype: DType) -> HirValue: ...


def from_end(b: Builder, idx: HirValue, size: SymDim) -> HirValue:
    """``idx`` with negative entries counted from the end of an axis of ``size`` (an index
    still outside the axis is clamped by the gather that reads it: nothing is read
    outside)."""
    n = b.sizes.scalar(size, idx.dtype, b.fail)
    negative = b.mir("compare", [idx, b.sizes.scalar(0, idx.dtype, b.fail)], kind="lt")
    return b.mir("where", [negative, b.mir("binary", [idx, n], kind="add"), idx])


def flat_position(b: Builder, parts: Sequence[HirValue], dims: Sequence[SymDim]
                  ) -> HirValue:
    """The row-major flat position ``((p0 d1 + p1) d2 + p2) ...`` of coordinates ``parts``
    (broadcasting against each other) over sizes ``dims``, in ``parts``' integer type."""
    flat = parts[0]
    for part, d in zip(parts[1:], dims[1:], strict=True):
        times = b.mir("binary", [flat, b.sizes.scalar(d, flat.dtype, b.fail)], kind="mul")
        flat = b.mir("binary", [times, part], kind="add")
    return flat


def gathered_reshape(b: Builder, x: HirValue, target: Sequence[SymDim], where: str
                     ) -> HirValue:
    """``x`` as rows of the target's static trailing size ``T``, the rows gathered by their
    row-major index over the target's leading sizes (counted at run time from tensors that
    have them), then reshaped to the target keeping those gathered dims. The row index is
    below the product of the leading sizes, which is ``x``'s row count when the view is
    valid; the gather clamps it into ``x`` either way, so nothing is read outside it."""
    k = len(target)
    while k > 0 and is_static(target[k - 1]):
        k -= 1
    lead, tail = list(target[:k]), [int(d) for d in target[k:]]
    if not lead or not all(b.sizes.can_build(d) for d in lead):
        b.fail(f"{where}: rlx cannot compute the sizes {[str(d) for d in lead]} at run "
               "time (a reshape keeps the input's dynamic dims and infers one other)")
    rows = b.mir("reshape", [x], new_shape=[-1, math.prod(tail)])
    iotas = [b.sizes.iota(d, DType.I64, b.fail) for d in lead]
    if len(lead) > 1:
        iotas = [b.mir("reshape", [v], new_shape=[-1 if a == i else 1
                                                  for a in range(len(lead))])
                 for i, v in enumerate(iotas)]
    index = flat_position(b, iotas, lead)
    table = rows if rows.dtype != DType.I1 else b.cast(rows, DType.I8)
    picked = b.mir("gather", [table, index], axis=0, batch_dims=0)
    if rows.dtype == DType.I1:
        picked = b.mir("compare", [picked, b.sizes.scalar(0, DType.I8, b.fail)], kind="ne")
    return b.mir("reshape", [picked], new_shape=[*(-2 - a for a in range(k)), *tail])
