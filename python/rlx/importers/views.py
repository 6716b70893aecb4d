"""A view to several dynamic sizes that are not its input's dims, shared by both importers
(ONNX's ``Reshape`` of ``[B S, D]`` to ``[B, S, D]``; torch's ``view`` of a flattened
product back to ``[B, S, N]``), which one ``rlx_mir.reshape`` cannot say: it keeps the
input's dynamic dims and infers at most one other."""

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
    index: HirValue | None = None
    for i, d in enumerate(lead):
        part = b.sizes.iota(d, DType.I64, b.fail)
        if len(lead) > 1:
            part = b.mir("reshape", [part], new_shape=[-1 if a == i else 1
                                                       for a in range(len(lead))])
        stride = math.prod(lead[i + 1:])
        if not is_static(stride) or int(stride) != 1:
            part = b.mir("binary", [part, b.sizes.scalar(stride, DType.I64, b.fail)],
                         kind="mul")
        index = part if index is None else b.mir("binary", [index, part], kind="add")
    table = rows if rows.dtype != DType.I1 else b.cast(rows, DType.I8)
    picked = b.mir("gather", [table, index], axis=0, batch_dims=0)
    if rows.dtype == DType.I1:
        picked = b.mir("compare", [picked, b.sizes.scalar(0, DType.I8, b.fail)], kind="ne")
    return b.mir("reshape", [picked], new_shape=[*(-2 - a for a in range(k)), *tail])
