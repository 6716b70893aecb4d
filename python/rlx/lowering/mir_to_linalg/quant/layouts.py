"""GGUF block layouts: where each field of a block lives (ggml's ``block_*`` structs) and how
a weight is computed from them (ggml's ``dequantize_row_*`` element orders).

A layout splits a block's elements into loops (``group``, row-major in ggml's element order)
so that every field is a projection of them: the quantized values are byte **planes** (an
element's value is some bits of one byte), the scales are **fields** (one value per group
of elements, computed from a few bytes of the block). :mod:`.dequant` builds the generics;
the GEMV kernels' operands (:mod:`.gemv_planes`) reuse the same fields.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant.scalars import (
    Expr,
    Exprs,
    Scalars,
    bits,
    const,
    div,
    f32_of,
    i8,
    i32,
    int_type,
    mod,
    mulf,
    row_major,
    sf,
    u32,
    uf,
)


def _no_shift(_: Exprs) -> Expr:
    return const(0)


FieldBody = Callable[[list[ir.Value], Exprs, Callable[[Expr], ir.Value]], ir.Value]


@dataclass(frozen=True)
class Field:
    """A scale array of ``dtype`` over the group dims ``dims`` (none: one per block),
    computed by ``body`` from the block bytes at ``reads(idx)`` (``idx``: expressions of the
    indices of ``dims``, in that order); ``body`` gets the bytes, ``idx`` and a function
    evaluating an affine expression of them as an ``i8``."""

    dtype: str
    reads: Callable[[Exprs], list[Expr]]
    body: FieldBody
    dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plane:
    """Quantized values: the block's bytes ``[offset, offset + Π sizes)`` indexed row-major
    by the group loops ``dims`` (or the bytes a ``repack`` field computes over ``dims``); an
    element's value is ``width`` bits at bit ``shift(idx)`` of its byte (``idx``: all group
    loop indices)."""

    offset: int
    dims: tuple[int, ...]
    width: int
    shift: Callable[[Exprs], Expr] = _no_shift
    repack: Field | None = None


@dataclass(frozen=True)
class GgufLayout:
    group: tuple[int, ...]
    """The block's elements as loops, row-major in ggml's element order."""
    planes: dict[str, Plane]
    fields: dict[str, Field]
    weight: Callable[[Scalars], ir.Value]
    """The dequant body: the plane values (unsigned ints) and fields by name -> f32."""
    tables: dict[str, tuple[tuple[int, ...], Callable[[Exprs], Expr]]] = field(
        default_factory=dict)
    """Constant i8 tables over some group dims (name -> (dims, value of the indices))."""


def bytes_to(width: int, parts: list[ir.Value]) -> ir.Value:
    """Little-endian bytes -> one ``i<width>``."""
    t = int_type(width)
    out = arith.extui(t, parts[0])
    for i, p in enumerate(parts[1:], start=1):
        shifted = arith.shli(arith.extui(t, p), arith.constant(t, 8 * i))
        out = arith.ori(out, shifted)
    return out


def f16_at(offset: int) -> Field:
    return Field("f16", lambda _: [const(offset), const(offset + 1)],
                 lambda b, _i, _e: arith.bitcast(ir.F16Type.get(), bytes_to(16, b)))


def f32_at(offset: int) -> Field:
    return Field("f32", lambda _: [const(offset + i) for i in range(4)],
                 lambda b, _i, _e: arith.bitcast(emit.f32(), bytes_to(32, b)))


def bytes_at(offset: int, dims: tuple[int, ...], sizes: Sequence[int]) -> Field:
    """Raw bytes ``[offset, ...)`` of the block, row-major over the group loops ``dims``."""
    return Field("i8", lambda i: [const(offset) + row_major(i, sizes)], lambda b, _i, _e: b[0],
                 dims)


def k_scale(is_min: bool) -> Field:
    """Q4_K / Q5_K 6-bit scale (or min) of group ``s = 2p + h`` from ``scales[12]`` at byte
    4 (ggml get_scale_min_k4): s < 4: ``b[4+s] & 63`` (mins ``b[8+s]``); s >= 4: low 4 bits
    from ``b[12+s-4]`` (mins: its high nibble), high 2 bits from the top of ``b[4+s-4]``
    (mins ``b[8+s-4]``)."""

    def reads(i: Exprs) -> list[Expr]:
        r = mod(i[0] * 2 + i[1], 4)
        return [const(4) + r, const(8) + r, const(12) + r]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        a, m, c = b
        first = m if is_min else a
        low = bits(first, i8(0), 63)
        high = arith.ori(bits(c, i8(4 if is_min else 0), 15),
                         arith.shli(arith.shrui(first, i8(6)), i8(4)))
        upper = index(div(i[0], 2))               # p >= 2  <=>  s >= 4
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, upper, i8(0)), low, high)

    return Field("i8", reads, body, dims=(0, 1))


def _q3_scale(t: int) -> Field:
    """Q3_K signed 6-bit scale ``j = 8c + 2s + t`` (``scales[12]`` at byte 96) minus 32: low
    4 bits from byte ``96 + j % 8`` (nibble ``j / 8``), high 2 bits from byte ``104 + j % 4``
    (bits ``2 * (j / 4)``)."""

    def index_of(i: Exprs) -> Expr:
        return i[0] * 8 + i[1] * 2 + t

    def reads(i: Exprs) -> list[Expr]:
        return [const(96) + mod(index_of(i), 8), const(104) + mod(index_of(i), 4)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        low = bits(b[0], index(div(index_of(i), 8) * 4), 15)
        high = bits(b[1], index(div(index_of(i), 4) * 2), 3)
        return arith.subi(arith.ori(low, arith.shli(high, i8(4))), i8(32))

    return Field("i8", reads, body, dims=(0, 1))


def _q2_scale(t: int) -> Field:
    """Q2_K scale byte ``8c + 2s + t`` (low nibble: scale, high nibble: min)."""
    return Field("i8", lambda i: [i[0] * 8 + i[1] * 2 + t], lambda b, _i, _e: b[0], dims=(0, 1))


def _q5_high(offset: int) -> Field:
    """Q5_0 / Q5_1: the fifth bits of elements j and 16 + j (bits j and 16 + j of the
    little-endian u32 at ``offset``) as bits 0 and 1 of byte j. (Read in place, with loops
    (h, j1, j0) over ``(2, 2, 8)``, IREE 3.13's SPIR-V code doubles every Q5 weight.)"""

    def reads(i: Exprs) -> list[Expr]:
        return [const(offset) + div(i[0], 8), const(offset + 2) + div(i[0], 8)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        bit = index(mod(i[0], 8))
        return arith.ori(bits(b[0], bit, 1), arith.shli(bits(b[1], bit, 1), i8(1)))

    return Field("i8", reads, body, dims=(1,))


def _f(s: Scalars, name: str) -> ir.Value:
    return f32_of(s[name])


def _w_q4_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), arith.subf(uf(s["q"]), emit.scalar(8.0, emit.f32())))


def _w_affine(q: ir.Value, s: Scalars) -> ir.Value:
    """``d * q + m`` (Q4_1, Q5_1)."""
    return arith.addf(mulf(_f(s, "d"), uf(q)), _f(s, "m"))


def q5(s: Scalars) -> ir.Value:
    """Q5_0 / Q5_1: the 5-bit value ``q | h << 4`` (low nibble and fifth bit) as an i32."""
    return arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), i32(4)))


def _w_q5_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), sf(arith.subi(q5(s), i32(16))))


def _w_q8(s: Scalars) -> ir.Value:
    d = s["d"] if isinstance(s["d"].type, ir.F32Type) else _f(s, "d")
    return mulf(d, sf(s["q"]))


def _w_scale_min(q: ir.Value, s: Scalars) -> ir.Value:
    """``(d * sc) * q - dmin * m`` (Q4_K, Q5_K)."""
    a = mulf(_f(s, "d"), uf(s["sc"]))
    b = mulf(_f(s, "dmin"), uf(s["mn"]))
    return arith.subf(mulf(a, uf(q)), b)


def _sixteen(s: Scalars) -> ir.Value:
    """Q2_K / Q3_K: the scale of the 16 elements this one is in (``sc0`` for l < 16)."""
    first = arith.cmpi(arith.CmpIPredicate.eq, s["half"], i8(0))
    return arith.select(first, s["sc0"], s["sc1"])


def _w_q2_k(s: Scalars) -> ir.Value:
    """``(d * (sc & 15)) * q - dmin * (sc >> 4)``."""
    sc = _sixteen(s)
    a = mulf(_f(s, "d"), uf(arith.andi(sc, i8(15))))
    b = mulf(_f(s, "dmin"), uf(arith.shrui(sc, i8(4))))
    return arith.subf(mulf(a, uf(s["q"])), b)


def _w_q3_k(s: Scalars) -> ir.Value:
    """``(d * sc) * (q - 4 * (1 - hbit))``, ``sc`` signed."""
    q = arith.addi(arith.subi(u32(s["q"]), i32(4)), arith.shli(u32(s["h"]), i32(2)))
    return mulf(mulf(_f(s, "d"), sf(_sixteen(s))), sf(q))


def _w_q6_k(s: Scalars) -> ir.Value:
    """``(d * sc) * ((ql | qh << 4) - 32)``, ``sc`` signed."""
    q = arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), i32(4)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(arith.subi(q, i32(32))))


def _nibble(dim: int) -> Callable[[Exprs], Expr]:
    """Nibble ``idx[dim]`` (0: low, 1: high)."""
    return lambda i: i[dim] * 4


_K_FIELDS = {"sc": k_scale(False), "mn": k_scale(True), "d": f16_at(0), "dmin": f16_at(2)}
_Q2_GROUP = (2, 4, 32)
"""Q2_K / Q3_K: element ``128c + 32s + l``: bits ``2s`` of byte ``32c + l``, scale
``8c + 2s + l / 16`` (two per-(c, s) scale arrays and a table of ``l / 16`` pick it: with a
scale array over ``(c, s, l / 16)`` IREE 3.13's SPIR-V code doubles the M = 1 sums)."""
_HALF = {"half": ((2,), lambda i: div(i[2], 16))}
_Q6_GROUP = (2, 2, 2, 2, 16)
"""Q6_K: element ``128h + 64k1 + 32k0 + 16l1 + l0`` (``k = 2k1 + k0``): nibble ``k1`` of ql
byte ``64h + 32k0 + 16l1 + l0``, bits ``2k`` of qh byte ``32h + 16l1 + l0``, scale
``8h + 2k + l1``."""

LAYOUTS: dict[str, GgufLayout] = {
    # 32 elements: 16h + j is nibble h of qs[j]
    "gguf_q4_0": GgufLayout((2, 16), {"q": Plane(2, (1,), 4, _nibble(0))}, {"d": f16_at(0)},
                            _w_q4_0),
    "gguf_q4_1": GgufLayout((2, 16), {"q": Plane(4, (1,), 4, _nibble(0))},
                            {"d": f16_at(0), "m": f16_at(2)}, lambda s: _w_affine(s["q"], s)),
    # 32 elements: 16h + j is nibble h of qs[j]; its fifth bit, bit 16h + j of the u32 qh,
    # is repacked to bit h of byte j
    "gguf_q5_0": GgufLayout((2, 16), {"q": Plane(6, (1,), 4, _nibble(0)),
                                      "h": Plane(2, (1,), 1, lambda i: i[0], _q5_high(2))},
                            {"d": f16_at(0)}, _w_q5_0),
    "gguf_q5_1": GgufLayout((2, 16), {"q": Plane(8, (1,), 4, _nibble(0)),
                                      "h": Plane(4, (1,), 1, lambda i: i[0], _q5_high(4))},
                            {"d": f16_at(0), "m": f16_at(2)}, lambda s: _w_affine(q5(s), s)),
    "gguf_q8_0": GgufLayout((32,), {"q": Plane(2, (0,), 8)}, {"d": f16_at(0)}, _w_q8),
    "gguf_q2_k": GgufLayout(_Q2_GROUP, {"q": Plane(16, (0, 2), 2, lambda i: i[1] * 2)},
                            {"sc0": _q2_scale(0), "sc1": _q2_scale(1), "d": f16_at(80),
                             "dmin": f16_at(82)}, _w_q2_k, tables=_HALF),
    # Q3_K: the third bit of element 32i + l is bit i = 4c + s of hmask[l]
    "gguf_q3_k": GgufLayout(_Q2_GROUP, {"q": Plane(32, (0, 2), 2, lambda i: i[1] * 2),
                                        "h": Plane(0, (2,), 1, lambda i: i[0] * 4 + i[1])},
                            {"sc0": _q3_scale(0), "sc1": _q3_scale(1), "d": f16_at(108)},
                            _w_q3_k, tables=_HALF),
    # 256 elements: 64p + 32h + l is nibble h of qs[32p + l]; Q5_K's fifth bit is bit
    # 2p + h of qh[l]
    "gguf_q4_k": GgufLayout((4, 2, 32), {"q": Plane(16, (0, 2), 4, _nibble(1))}, _K_FIELDS,
                            lambda s: _w_scale_min(s["q"], s)),
    "gguf_q5_k": GgufLayout((4, 2, 32), {"q": Plane(48, (0, 2), 4, _nibble(1)),
                                         "h": Plane(16, (2,), 1, lambda i: i[0] * 2 + i[1])},
                            _K_FIELDS, lambda s: _w_scale_min(q5(s), s)),
    "gguf_q6_k": GgufLayout(_Q6_GROUP, {"q": Plane(0, (0, 2, 3, 4), 4, _nibble(1)),
                                        "h": Plane(128, (0, 3, 4), 2,
                                                   lambda i: i[1] * 4 + i[2] * 2)},
                            {"sc": bytes_at(192, (0, 1, 2, 3), (2, 2, 2, 2)),
                             "d": f16_at(208)}, _w_q6_k),
    "gguf_q8_k": GgufLayout((8, 32), {"q": Plane(4, (0, 1), 8)}, {"d": f32_at(0)}, _w_q8),
}
"""How each GGUF block type is repacked and dequantized (element orders: ggml's
``dequantize_row_*``; byte offsets: ggml's ``block_*`` structs). F16 / BF16 are below."""


def _k_products(is_min: bool) -> Field:
    """Q4_K / Q5_K ``d * sc`` (or ``dmin * m``) per group of 32, in f32: the product ggml
    and the gguf package form first (exact: 11 x 6 significant bits)."""
    scale = k_scale(is_min)
    at = 2 if is_min else 0

    def reads(i: Exprs) -> list[Expr]:
        return [const(at), const(at + 1), *scale.reads(i)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        d = f32_of(arith.bitcast(ir.F16Type.get(), bytes_to(16, b[:2])))
        return mulf(d, uf(scale.body(b[2:], i, index)))

    return Field("f32", reads, body, dims=(0, 1))


def _w_products(q: ir.Value, s: Scalars) -> ir.Value:
    return arith.subf(mulf(s["A"], uf(q)), s["B"])


K_PRODUCTS = {"A": _k_products(False), "B": _k_products(True)}
CPU_LAYOUTS: dict[str, GgufLayout] = {
    # (p, h, l1, l0): element 64p + 32h + 16l1 + l0, nibble h of qs[32p + 16l1 + l0]
    "gguf_q4_k": GgufLayout((4, 2, 2, 16), {"q": Plane(16, (0, 2, 3), 4, _nibble(1))},
                            K_PRODUCTS, lambda s: _w_products(s["q"], s)),
    "gguf_q5_k": GgufLayout((4, 2, 2, 16), {
        "q": Plane(48, (0, 2, 3), 4, _nibble(1)),
        "h": Plane(16, (2, 3), 1, lambda i: i[0] * 2 + i[1])},
        K_PRODUCTS, lambda s: _w_products(q5(s), s)),
}
"""llvm-cpu variants: the per-group products ``d * sc`` / ``dmin * m`` precomputed in f32
(hoisted), which saves their conversion in the matvec's inner loop (Q4_K decode streaming
4096 x 4096: 1.18 -> 0.98 ms). The 32 elements of a group are two loops (l1, l0) so that
the quantized bytes stay the only highest-rank input: IREE clones a producer into the
matvec only if its highest-rank inputs are narrower than its f32 result."""


__all__ = ["CPU_LAYOUTS", "K_PRODUCTS", "LAYOUTS", "Field", "GgufLayout", "Plane", "bytes_at",
           "bytes_to", "f16_at", "f32_at", "k_scale", "q5"]
