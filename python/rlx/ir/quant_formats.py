"""Weight formats: the GGML tensor types a ``.gguf`` file may hold, and the ``dequant_matmul``
schemes rlx computes with.

Both are plain data (no MLIR, no numpy): :mod:`rlx.gguf` reads GGUF files with them in an
install that has the IREE runtime alone, and :mod:`rlx.dialects.enums` re-exports the schemes
for the op schemas. The GGML table is the file format's (llama.cpp's ``ggml_type`` ids with
each type's block of elements and its size in bytes); ``tests/test_gguf.py`` checks it against
the ``gguf`` package.
"""

from __future__ import annotations

from dataclasses import dataclass

GGUF_MAGIC = 0x46554747
"""The first four bytes of a GGUF file, ``b"GGUF"`` read as a little-endian u32."""
GGUF_DEFAULT_ALIGNMENT = 32
"""Tensor data alignment when the metadata has no ``general.alignment``."""
ALIGNMENT_KEY = "general.alignment"


@dataclass(frozen=True)
class GgmlType:
    """A GGML tensor type: ``block_elems`` values stored in ``block_bytes`` bytes."""

    id: int
    name: str
    block_elems: int
    block_bytes: int


GGML_TYPES: dict[int, GgmlType] = {
    t.id: t
    for t in (
        GgmlType(0, "F32", 1, 4), GgmlType(1, "F16", 1, 2), GgmlType(2, "Q4_0", 32, 18),
        GgmlType(3, "Q4_1", 32, 20), GgmlType(6, "Q5_0", 32, 22), GgmlType(7, "Q5_1", 32, 24),
        GgmlType(8, "Q8_0", 32, 34), GgmlType(9, "Q8_1", 32, 40),
        GgmlType(10, "Q2_K", 256, 84), GgmlType(11, "Q3_K", 256, 110),
        GgmlType(12, "Q4_K", 256, 144), GgmlType(13, "Q5_K", 256, 176),
        GgmlType(14, "Q6_K", 256, 210), GgmlType(15, "Q8_K", 256, 292),
        GgmlType(16, "IQ2_XXS", 256, 66), GgmlType(17, "IQ2_XS", 256, 74),
        GgmlType(18, "IQ3_XXS", 256, 98), GgmlType(19, "IQ1_S", 256, 50),
        GgmlType(20, "IQ4_NL", 32, 18), GgmlType(21, "IQ3_S", 256, 110),
        GgmlType(22, "IQ2_S", 256, 82), GgmlType(23, "IQ4_XS", 256, 136),
        GgmlType(24, "I8", 1, 1), GgmlType(25, "I16", 1, 2), GgmlType(26, "I32", 1, 4),
        GgmlType(27, "I64", 1, 8), GgmlType(28, "F64", 1, 8), GgmlType(29, "IQ1_M", 256, 56),
        GgmlType(30, "BF16", 1, 2), GgmlType(34, "TQ1_0", 256, 54),
        GgmlType(35, "TQ2_0", 256, 66), GgmlType(39, "MXFP4", 32, 17),
        GgmlType(40, "NVFP4", 64, 36), GgmlType(41, "Q1_0", 128, 18),
    )
}
"""GGML type id -> type (ids 4, 5, 31-33, 36-38 are retired or unused)."""


@dataclass(frozen=True)
class QuantScheme:
    """A ``dequant_matmul`` weight format.

    GGUF schemes take ``[x, w]`` with ``w`` the raw bytes of a GGML tensor, one row per
    output feature (``tensor<N x ROWBYTES x i8>``, ``y = x Wᵀ``). Legacy schemes take
    ``[x, w_q, scale, zp]`` with ``w_q`` laid out ``[K, N]`` (``y = x W``).
    """

    name: str
    gguf: bool
    block_elems: int
    block_bytes: int
    ggml_type: int | None = None

    def row_bytes(self, k: int) -> int:
        return k // self.block_elems * self.block_bytes


def _gguf_scheme(ggml_id: int) -> QuantScheme:
    t = GGML_TYPES[ggml_id]
    return QuantScheme(f"gguf_{t.name.lower()}", True, t.block_elems, t.block_bytes, t.id)


QUANT_SCHEMES: dict[str, QuantScheme] = {
    s.name: s
    for s in (
        *(_gguf_scheme(i) for i in (1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 15, 30)),
        # Legacy schemes: block_elems is the default block size along K.
        QuantScheme("int8", False, 32, 32),
        QuantScheme("nvfp4", False, 16, 8),
    )
}
"""Every scheme by name: ``gguf_`` + the lowercase GGML type for the GGML types rlx
dequantizes, then the legacy ``int8`` / ``nvfp4``."""


__all__ = ["ALIGNMENT_KEY", "GGML_TYPES", "GGUF_DEFAULT_ALIGNMENT", "GGUF_MAGIC", "QUANT_SCHEMES",
           "GgmlType", "QuantScheme"]
