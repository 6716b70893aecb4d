"""Element types and tensor shapes, and their MLIR spelling.

A shape is a tuple of dims; a dim is an ``int`` (static) or ``None`` (dynamic, ``?`` in MLIR).
:class:`DType` itself lives in :mod:`rlx.ir.dtypes` (no MLIR needed: the runtime uses it);
this module re-exports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from iree.compiler import ir

from rlx.ir.dtypes import DType

Dim = int | None
Shape = tuple[Dim, ...]


def dims_compatible(a: Dim, b: Dim) -> bool:
    """Two dims may describe the same runtime size (dynamic matches anything)."""
    return a is None or b is None or a == b


def merge_dim(a: Dim, b: Dim) -> Dim:
    """The more precise of two compatible dims."""
    return a if a is not None else b


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


@dataclass(frozen=True)
class TensorInfo:
    """A ranked tensor type as rlx sees it: shape and element type."""

    shape: Shape
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def numel(self) -> int | None:
        """Element count, or None when some dim is dynamic."""
        if not self.is_static:
            return None
        return int(np.prod([d for d in self.shape if d is not None], dtype=np.int64))

    def dim(self, axis: int) -> Dim:
        return self.shape[axis]

    def with_shape(self, shape: Iterable[Dim]) -> TensorInfo:
        return TensorInfo(tuple(shape), self.dtype)

    def with_dtype(self, dtype: DType) -> TensorInfo:
        return TensorInfo(self.shape, dtype)

    def compatible(self, other: TensorInfo) -> bool:
        return (
            self.dtype == other.dtype
            and self.rank == other.rank
            and all(dims_compatible(a, b) for a, b in zip(self.shape, other.shape, strict=True))
        )

    def mlir(self) -> ir.RankedTensorType:
        """The MLIR tensor type; needs an active context."""
        dyn = ir.ShapedType.get_dynamic_size()
        return ir.RankedTensorType.get([dyn if d is None else d for d in self.shape],
                                       self.dtype.mlir(), loc=ir.Location.unknown())

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"

    @staticmethod
    def from_mlir(t: ir.Type) -> TensorInfo:
        """Read an MLIR ranked tensor type; raises ValueError for anything else."""
        if not isinstance(t, ir.RankedTensorType):
            raise ValueError(f"expected a ranked tensor type, found {t}")
        rt = ir.RankedTensorType(t)
        shape = tuple(None if rt.is_dynamic_dim(i) else rt.get_dim_size(i)
                      for i in range(rt.rank))
        return TensorInfo(shape, DType.parse(str(rt.element_type)))


def tensor(shape: Iterable[Dim], dtype: DType | str) -> TensorInfo:
    return TensorInfo(tuple(shape), DType.parse(dtype))
