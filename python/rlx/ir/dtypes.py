"""Element types (:class:`DType`), without MLIR: ``rlx.runtime`` and ``rlx.gguf`` use them in
an install that has the IREE runtime alone (no ``iree.compiler``). :mod:`rlx.ir.types` adds
tensor types and re-exports :class:`DType`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from iree.compiler import ir


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
    F8E4M3FN = "f8E4M3FN"
    F8E4M3FNUZ = "f8E4M3FNUZ"
    F8E5M2 = "f8E5M2"
    F8E5M2FNUZ = "f8E5M2FNUZ"
    F8E8M0FNU = "f8E8M0FNU"

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
    def is_float8(self) -> bool:
        """An 8-bit float: a storage type (cast to and from it; move it), not one ops
        compute in."""
        return self in FLOAT8S

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype with the same bytes (bf16 has none: it is carried as uint16;
        the 8-bit floats are ml_dtypes', which the IREE runtime depends on)."""
        if self in FLOAT8S:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, _NUMPY[self]))
        return np.dtype(_NUMPY[self])

    def mlir(self) -> ir.Type:
        """The MLIR type; needs an active context (and so the compiler: imported here, not
        at module level, so that the runtime alone can use DType)."""
        from iree.compiler import ir

        return ir.Type.parse(self.value)

    @staticmethod
    def parse(value: DType | str | np.dtype | type) -> DType:
        """Accept a DType, its name (``"f32"``, ``"bool"``) or a numpy dtype."""
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            name = {"bool": "i1", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
                    "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
                    "int64": "i64", **{n: d.value for d, n in _NUMPY.items() if d in FLOAT8S}
                    }.get(value, value)
            try:
                return DType(name)
            except ValueError:
                names = ", ".join(d.value for d in DType)
                raise ValueError(f"unknown dtype {value!r} (known: {names})") from None
        np_dtype = np.dtype(value)
        for dtype, name in _NUMPY.items():
            if dtype in FLOAT8S:
                if np_dtype.name == name:
                    return dtype
            elif np.dtype(name) == np_dtype and dtype is not DType.BF16:
                return dtype
        if np_dtype == np.uint8:
            return DType.I8
        raise ValueError(f"no rlx dtype for numpy dtype {np_dtype}")


FLOAT8S: frozenset[DType] = frozenset({DType.F8E4M3FN, DType.F8E4M3FNUZ, DType.F8E5M2,
                                       DType.F8E5M2FNUZ, DType.F8E8M0FNU})
"""The 8-bit floats (OCP's E4M3FN and E5M2, the FNUZ forms without negative zero, and
OCP MX's E8M0 scale type: a power of two, 2^(e - 127), 0xff NaN)."""
_FLOATS = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64, *FLOAT8S})
FLOATS: frozenset[DType] = _FLOATS
_BITS = {DType.F32: 32, DType.F16: 16, DType.BF16: 16, DType.F64: 64, DType.I1: 1,
         DType.I8: 8, DType.I16: 16, DType.I32: 32, DType.I64: 64,
         **dict.fromkeys(FLOAT8S, 8)}
_NUMPY = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "uint16",
          DType.F64: "float64", DType.I1: "bool", DType.I8: "int8", DType.I16: "int16",
          DType.I32: "int32", DType.I64: "int64", DType.F8E4M3FN: "float8_e4m3fn",
          DType.F8E4M3FNUZ: "float8_e4m3fnuz", DType.F8E5M2: "float8_e5m2",
          DType.F8E5M2FNUZ: "float8_e5m2fnuz", DType.F8E8M0FNU: "float8_e8m0fnu"}




@dataclass(frozen=True)
class Narrow:
    """An element type narrower than a byte (ONNX's int4 / uint4 / int2 / uint2 /
    float4_e2m1fn; ml_dtypes' numpy types, one element a byte), held in a module as its
    value in ``storage``: the integers sign- or zero-extended to i8, E2M1 in E4M3FN (which
    holds its 15 values and -0 exactly). Casts to it round into ``[lo, hi]`` (the importer's
    ``cast_to_narrow``); data movement needs nothing more; callers pass and get ml_dtypes'
    arrays (``rlx.narrow``: ``rlx.runtime`` converts at the boundary, exactly)."""

    name: str
    storage: DType
    lo: float
    hi: float

    @property
    def numpy(self) -> np.dtype:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, self.name))

    @property
    def is_float(self) -> bool:
        return self.storage.is_float


NARROW: dict[str, Narrow] = {n.name: n for n in (
    Narrow("int4", DType.I8, -8, 7), Narrow("uint4", DType.I8, 0, 15),
    Narrow("int2", DType.I8, -2, 1), Narrow("uint2", DType.I8, 0, 3),
    Narrow("float4_e2m1fn", DType.F8E4M3FN, -6.0, 6.0))}
"""The narrow types, by ml_dtypes' name."""



# -- the caller's arrays and the module's ----------------------------------------------


def unsigned_type(dtype: np.dtype | DType) -> np.dtype:
    """numpy's unsigned integer type of the same width (what a caller sees of a module's
    integers marked ``rlx.unsigned``)."""
    width = dtype.bits // 8 if isinstance(dtype, DType) else dtype.itemsize
    return np.dtype(f"u{width}")


def to_module_array(arr: np.ndarray, dtype: DType | None) -> np.ndarray:
    """A caller's array as the module holds it (``dtype``: the module's input type). bf16
    (rlx carries it as uint16 bits) as ml_dtypes' bfloat16, which the IREE runtime maps to
    its bf16 element type; unsigned integers (an input declared ``rlx.unsigned``) as the
    signless integers of their width, their bits; a narrow type's values (int4, ...: an
    input declared ``rlx.narrow``) in the type that holds them (exact)."""
    if arr.dtype.name in NARROW:
        return arr.astype(NARROW[arr.dtype.name].storage.numpy)
    if dtype != DType.BF16 and arr.dtype.kind == "u":
        return arr.view(np.dtype(f"i{arr.dtype.itemsize}"))
    if dtype != DType.BF16 or arr.dtype.name == "bfloat16":
        return arr
    import ml_dtypes

    return arr.view(ml_dtypes.bfloat16)


def to_host_array(arr: np.ndarray, host_type: np.dtype) -> np.ndarray:
    """A module's result as the caller sees it: an unsigned type's bits, or a narrow
    type's values (exact: the module holds values in its range)."""
    return arr.astype(host_type) if host_type.name in NARROW else arr.view(host_type)


__all__ = ["FLOAT8S", "FLOATS", "NARROW", "DType", "Narrow", "to_host_array",
           "to_module_array", "unsigned_type"]
