"""Element types and tensor shapes, and their MLIR spelling.

A shape is a tuple of dims; a dim is an ``int`` (static) or ``None`` (dynamic, ``?`` in MLIR).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from iree.compiler import ir

Dim = int | None
Shape = tuple[Dim, ...]


class DType(enum.Enum):
    """Element types rlx knows, named as in MLIR (``bool`` is ``i1``)."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    F64 = "f64"
    I1 = "i1"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"

    def __str__(self) -> str:
        return self.value

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        return not self.is_float

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype with the same bytes (bf16 has none: it is carried as uint16)."""
        return np.dtype(_NUMPY[self])

    def mlir(self) -> ir.Type:
        """The MLIR type; needs an active context."""
        return ir.Type.parse(self.value)

    @staticmethod
    def parse(value: DType | str | np.dtype | type) -> DType:
        """Accept a DType, its name (``"f32"``, ``"bool"``) or a numpy dtype."""
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            name = {"bool": "i1", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
                    "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
                    "int64": "i64"}.get(value, value)
            try:
                return DType(name)
            except ValueError:
                names = ", ".join(d.value for d in DType)
                raise ValueError(f"unknown dtype {value!r} (known: {names})") from None
        np_dtype = np.dtype(value)
        for dtype, name in _NUMPY.items():
            if np.dtype(name) == np_dtype and dtype is not DType.BF16:
                return dtype
        if np_dtype == np.uint8:
            return DType.I8
        raise ValueError(f"no rlx dtype for numpy dtype {np_dtype}")


_FLOATS = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64})
FLOATS: frozenset[DType] = _FLOATS
_BITS = {DType.F32: 32, DType.F16: 16, DType.BF16: 16, DType.F64: 64, DType.I1: 1,
         DType.I8: 8, DType.I16: 16, DType.I32: 32, DType.I64: 64}
_NUMPY = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "uint16",
          DType.F64: "float64", DType.I1: "bool", DType.I8: "int8", DType.I16: "int16",
          DType.I32: "int32", DType.I64: "int64"}


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
