"""mir-to-linalg for quantized weights: dequant_matmul, in the form IREE fuses into the matmul.

Three steps, each a ``linalg.generic``:

1. **Repack**. A GGUF operand is the tensor's raw bytes ``[N, ROWBYTES]`` (``[N, G,
   BLOCKBYTES]`` after an expand; ``G = K / block``). Each field the dequant needs gets its
   own array, shaped for step 2: the bytes holding the quantized values (a copy of their
   range of the block, reshaped so that a byte is addressed by some of the dequant's
   loops), the scales as per-block / per-group arrays (``f16`` ``d``, 6-bit scales
   unpacked to bytes). Legacy ``[K, N]`` weights are transposed to rows here. These
   generics read only parameters and no array is larger than its parameter, so IREE
   hoists them into initializers: they run once, when the weights load.
2. **Dequant**: one all-parallel generic over ``[N, G, *group]`` (the block's elements
   split into loops so that every field is a projection of them). Its inputs are bytes; a
   value's bits are ``(byte >> shift) & mask`` with the shift read from a small constant
   table over the loops that pick bits within a byte; scales are broadcast through the
   maps; only ``arith`` in the body. That is IREE's "bit-extend" shape: it is cloned into
   the dispatch of the contraction that consumes it (for M = 1 on llvm-cpu at ``-O3``; for
   any M on CUDA and Vulkan), so the f32 weight never exists in memory.
3. **Contraction** over the same grouped space: ``x`` expanded to ``[M, G, *group]`` (read
   in the dequant's loop order), ``y[m, n] = Σ x[m, g, ...] W[n, g, ...]`` in f32, no
   reshape between 2 and 3. F16 / BF16 are plain mixed-precision matmuls instead. On
   llvm-cpu at M > 1 (data tiling) every GGUF scheme is dequantized K-major into the
   weight's data-tiling pack, and the contraction is f32 (:func:`fused_matmul`).

The loop order is per target (:func:`loop_order`), rows are padded for the SPIR-V
matvec (:func:`padded_rows`), and sub-byte tensor types (``i4`` / ``i2`` through
``flow.tensor.bitcast``) are not used: IREE 3.13's SPIR-V backend crashes or fails to
legalize their vector bitcasts in these dispatches (Q4_K / Q2_K at M = 1, 3, 64). Every such
choice is recorded where it is made, with what was measured.

Every product in a dequant body whose result is then added to is exact in f32 (an f16
scale times integers of at most 6 + 5 bits), so a backend contracting ``a * q - b`` into an
FMA rounds exactly as the separate operations of ggml and the ``gguf`` package: the weights
are bit-exact on every target.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import affine, arith, flow, tensor

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.dialects.mir import MIR
from rlx.dialects.schema import Decoded, decode
from rlx.ir.text import walk_ops
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import gemv_kernels
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

Expr = ir.AffineExpr
Exprs = Sequence[Expr]
Scalars = dict[str, ir.Value]
PAD_ROWS, PAD_MIN_ROWS = 32, 128


# --------------------------------------------------------------------------------------
# Affine expressions and scalars
# --------------------------------------------------------------------------------------


def _c(v: int) -> Expr:
    return ir.AffineConstantExpr.get(v)


def div(e: Expr, v: int) -> Expr:
    return ir.AffineFloorDivExpr.get(e, _c(v))


def mod(e: Expr, v: int) -> Expr:
    return ir.AffineModExpr.get(e, _c(v))


def row_major(idx: Exprs, sizes: Sequence[int]) -> Expr:
    """The flat index of ``idx`` in a row-major array of ``sizes``."""
    out: Expr = _c(0)
    stride = 1
    for e, s in zip(reversed(list(idx)), reversed(list(sizes)), strict=True):
        out = out + e * stride
        stride *= s
    return out


def _int(width: int) -> ir.Type:
    return ir.IntegerType.get_signless(width)


def _i8(v: int) -> ir.Value:
    return arith.constant(_int(8), v)


def _i32(v: int) -> ir.Value:
    return arith.constant(_int(32), v)


Loops = list[ir.Value]
"""The ``linalg.index`` values of the enclosing generic's loops."""


def _index(e: Expr, loops: Loops) -> ir.Value:
    """``e`` over the loop indices, as an ``index``."""
    if isinstance(e, ir.AffineConstantExpr):
        return emit.index(ir.AffineConstantExpr(e).value)
    return affine.apply(ir.AffineMap.get(len(loops), 0, [e]), loops)


def _apply(e: Expr, loops: Loops) -> ir.Value:
    """``e`` over the loop indices, as an ``i8``."""
    if isinstance(e, ir.AffineConstantExpr):
        return _i8(ir.AffineConstantExpr(e).value)
    return arith.index_cast(_int(8), _index(e, loops))


def _bits(v: ir.Value, shift: ir.Value, mask: int) -> ir.Value:
    width = ir.IntegerType(v.type).width
    return arith.andi(arith.shrui(v, shift), arith.constant(_int(width), mask))


def u32(v: ir.Value) -> ir.Value:
    """An unsigned narrow int widened to i32."""
    return arith.extui(_int(32), v)


def uf(v: ir.Value) -> ir.Value:
    """Unsigned int -> f32 (exact for the widths used here)."""
    return arith.uitofp(emit.f32(), v)


def sf(v: ir.Value) -> ir.Value:
    return arith.sitofp(emit.f32(), v)


def f32_of(v: ir.Value) -> ir.Value:
    return arith.extf(emit.f32(), v)


def mulf(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.mulf(a, b)


# --------------------------------------------------------------------------------------
# GGUF layouts
# --------------------------------------------------------------------------------------


def _no_shift(_: Exprs) -> Expr:
    return _c(0)


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


def _bytes_to(width: int, parts: list[ir.Value]) -> ir.Value:
    """Little-endian bytes -> one ``i<width>``."""
    out = arith.extui(_int(width), parts[0])
    for i, p in enumerate(parts[1:], start=1):
        shifted = arith.shli(arith.extui(_int(width), p), arith.constant(_int(width), 8 * i))
        out = arith.ori(out, shifted)
    return out


def f16_at(offset: int) -> Field:
    return Field("f16", lambda _: [_c(offset), _c(offset + 1)],
                 lambda b, _i, _e: arith.bitcast(ir.F16Type.get(), _bytes_to(16, b)))


def f32_at(offset: int) -> Field:
    return Field("f32", lambda _: [_c(offset + i) for i in range(4)],
                 lambda b, _i, _e: arith.bitcast(emit.f32(), _bytes_to(32, b)))


def bytes_at(offset: int, dims: tuple[int, ...], sizes: Sequence[int]) -> Field:
    """Raw bytes ``[offset, ...)`` of the block, row-major over the group loops ``dims``."""
    return Field("i8", lambda i: [_c(offset) + row_major(i, sizes)], lambda b, _i, _e: b[0],
                 dims)


def _k_scale(is_min: bool) -> Field:
    """Q4_K / Q5_K 6-bit scale (or min) of group ``s = 2p + h`` from ``scales[12]`` at byte
    4 (ggml get_scale_min_k4): s < 4: ``b[4+s] & 63`` (mins ``b[8+s]``); s >= 4: low 4 bits
    from ``b[12+s-4]`` (mins: its high nibble), high 2 bits from the top of ``b[4+s-4]``
    (mins ``b[8+s-4]``)."""

    def reads(i: Exprs) -> list[Expr]:
        r = mod(i[0] * 2 + i[1], 4)
        return [_c(4) + r, _c(8) + r, _c(12) + r]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        a, m, c = b
        first = m if is_min else a
        low = _bits(first, _i8(0), 63)
        high = arith.ori(_bits(c, _i8(4 if is_min else 0), 15),
                         arith.shli(arith.shrui(first, _i8(6)), _i8(4)))
        upper = index(div(i[0], 2))               # p >= 2  <=>  s >= 4
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, upper, _i8(0)), low, high)

    return Field("i8", reads, body, dims=(0, 1))


def _q3_scale(t: int) -> Field:
    """Q3_K signed 6-bit scale ``j = 8c + 2s + t`` (``scales[12]`` at byte 96) minus 32: low
    4 bits from byte ``96 + j % 8`` (nibble ``j / 8``), high 2 bits from byte ``104 + j % 4``
    (bits ``2 * (j / 4)``)."""

    def index_of(i: Exprs) -> Expr:
        return i[0] * 8 + i[1] * 2 + t

    def reads(i: Exprs) -> list[Expr]:
        return [_c(96) + mod(index_of(i), 8), _c(104) + mod(index_of(i), 4)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        low = _bits(b[0], index(div(index_of(i), 8) * 4), 15)
        high = _bits(b[1], index(div(index_of(i), 4) * 2), 3)
        return arith.subi(arith.ori(low, arith.shli(high, _i8(4))), _i8(32))

    return Field("i8", reads, body, dims=(0, 1))


def _q2_scale(t: int) -> Field:
    """Q2_K scale byte ``8c + 2s + t`` (low nibble: scale, high nibble: min)."""
    return Field("i8", lambda i: [i[0] * 8 + i[1] * 2 + t], lambda b, _i, _e: b[0], dims=(0, 1))


def _q5_high(offset: int) -> Field:
    """Q5_0 / Q5_1: the fifth bits of elements j and 16 + j (bits j and 16 + j of the
    little-endian u32 at ``offset``) as bits 0 and 1 of byte j. (Read in place, with loops
    (h, j1, j0) over ``(2, 2, 8)``, IREE 3.13's SPIR-V code doubles every Q5 weight.)"""

    def reads(i: Exprs) -> list[Expr]:
        return [_c(offset) + div(i[0], 8), _c(offset + 2) + div(i[0], 8)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        bit = index(mod(i[0], 8))
        return arith.ori(_bits(b[0], bit, 1), arith.shli(_bits(b[1], bit, 1), _i8(1)))

    return Field("i8", reads, body, dims=(1,))


def _f(s: Scalars, name: str) -> ir.Value:
    return f32_of(s[name])


def _w_q4_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), arith.subf(uf(s["q"]), emit.scalar(8.0, emit.f32())))


def _w_affine(q: ir.Value, s: Scalars) -> ir.Value:
    """``d * q + m`` (Q4_1, Q5_1)."""
    return arith.addf(mulf(_f(s, "d"), uf(q)), _f(s, "m"))


def _q5(s: Scalars) -> ir.Value:
    return arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4)))


def _w_q5_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), sf(arith.subi(_q5(s), _i32(16))))


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
    first = arith.cmpi(arith.CmpIPredicate.eq, s["half"], _i8(0))
    return arith.select(first, s["sc0"], s["sc1"])


def _w_q2_k(s: Scalars) -> ir.Value:
    """``(d * (sc & 15)) * q - dmin * (sc >> 4)``."""
    sc = _sixteen(s)
    a = mulf(_f(s, "d"), uf(arith.andi(sc, _i8(15))))
    b = mulf(_f(s, "dmin"), uf(arith.shrui(sc, _i8(4))))
    return arith.subf(mulf(a, uf(s["q"])), b)


def _w_q3_k(s: Scalars) -> ir.Value:
    """``(d * sc) * (q - 4 * (1 - hbit))``, ``sc`` signed."""
    q = arith.addi(arith.subi(u32(s["q"]), _i32(4)), arith.shli(u32(s["h"]), _i32(2)))
    return mulf(mulf(_f(s, "d"), sf(_sixteen(s))), sf(q))


def _w_q6_k(s: Scalars) -> ir.Value:
    """``(d * sc) * ((ql | qh << 4) - 32)``, ``sc`` signed."""
    q = arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(arith.subi(q, _i32(32))))


def _nibble(dim: int) -> Callable[[Exprs], Expr]:
    """Nibble ``idx[dim]`` (0: low, 1: high)."""
    return lambda i: i[dim] * 4


_K_FIELDS = {"sc": _k_scale(False), "mn": _k_scale(True), "d": f16_at(0), "dmin": f16_at(2)}
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
                            {"d": f16_at(0), "m": f16_at(2)}, lambda s: _w_affine(_q5(s), s)),
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
                            _K_FIELDS, lambda s: _w_scale_min(_q5(s), s)),
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
    scale = _k_scale(is_min)
    at = 2 if is_min else 0

    def reads(i: Exprs) -> list[Expr]:
        return [_c(at), _c(at + 1), *scale.reads(i)]

    def body(b: list[ir.Value], i: Exprs, index: Callable[[Expr], ir.Value]) -> ir.Value:
        d = f32_of(arith.bitcast(ir.F16Type.get(), _bytes_to(16, b[:2])))
        return mulf(d, uf(scale.body(b[2:], i, index)))

    return Field("f32", reads, body, dims=(0, 1))


def _w_products(q: ir.Value, s: Scalars) -> ir.Value:
    return arith.subf(mulf(s["A"], uf(q)), s["B"])


_K_PRODUCTS = {"A": _k_products(False), "B": _k_products(True)}
CPU_LAYOUTS: dict[str, GgufLayout] = {
    # (p, h, l1, l0): element 64p + 32h + 16l1 + l0, nibble h of qs[32p + 16l1 + l0]
    "gguf_q4_k": GgufLayout((4, 2, 2, 16), {"q": Plane(16, (0, 2, 3), 4, _nibble(1))},
                            _K_PRODUCTS, lambda s: _w_products(s["q"], s)),
    "gguf_q5_k": GgufLayout((4, 2, 2, 16), {
        "q": Plane(48, (0, 2, 3), 4, _nibble(1)),
        "h": Plane(16, (2, 3), 1, lambda i: i[0] * 2 + i[1])},
        _K_PRODUCTS, lambda s: _w_products(_q5(s), s)),
}
"""llvm-cpu variants: the per-group products ``d * sc`` / ``dmin * m`` precomputed in f32
(hoisted), which saves their conversion in the matvec's inner loop (Q4_K decode streaming
4096 x 4096: 1.18 -> 0.98 ms). The 32 elements of a group are two loops (l1, l0) so that
the quantized bytes stay the only highest-rank input: IREE clones a producer into the
matvec only if its highest-rank inputs are narrower than its f32 result."""


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------


def padded_rows(n: int) -> int:
    """Rows the block formats are computed with: ``N`` rounded up to a multiple of 32, at
    least 128. IREE 3.13's SPIR-V matvec pipeline crashes (or overflows lavapipe's 32 KiB
    of shared memory) for M = 1 on other row counts once the dequant has a loop that picks
    bits (measured: N = 16, 64, 120, 130, 136, 200 fail; multiples of 32 from 96 up pass);
    the extra rows are zeros, their results are sliced off."""
    return max(PAD_MIN_ROWS, -(-n // PAD_ROWS) * PAD_ROWS)


def _gather(raw3: ir.Value, byte: Expr, loops: Loops) -> ir.Value:
    """The byte at offset ``byte`` of block ``(n, g)`` (loops 0 and 1)."""
    return tensor.extract(raw3, [loops[0], loops[1], _index(byte, loops)])


def _build(n: int, g: int, rows: int, shape: Sequence[int], element: ir.Type,
           body: Callable[[Loops], ir.Value]) -> ir.Value:
    """A generic over ``[n, g, *shape]`` whose body reads the weight bytes it needs with
    ``tensor.extract`` (byte offsets are affine in the loop indices but not projections; as
    indexing maps IREE 3.13 mistakes some of them for convolutions and crashes), padded
    with zero rows to ``rows``."""
    rank = 2 + len(shape)
    init = emit.empty([n, g, *shape], element)
    out = emit.generic([], [init], [emit.identity(rank)], [emit.PARALLEL] * rank,
                       lambda _: body([emit.loop_index(i) for i in range(rank)]))[0]
    if rows == n:
        return out
    return emit.insert_slice(out, emit.filled([rows, g, *shape], element, 0), [0] * rank)


def _repack(raw3: ir.Value, rows: int, shape: Sequence[int], element: ir.Type,
            body: Callable[[Loops], ir.Value]) -> ir.Value:
    """:func:`_build` over the blocks of ``raw3 [N, G, BLOCKBYTES]``."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None
    return _build(n, g, rows, shape, element, body)


def repack_plane(raw3: ir.Value, rows: int, plane: Plane, group: Sequence[int]) -> ir.Value:
    """``[rows, G, *sizes]``: a copy of the plane's bytes."""
    sizes = [group[i] for i in plane.dims]
    loops = [emit.d(2 + i) for i in range(len(sizes))]
    return _repack(raw3, rows, sizes, _int(8), lambda idx: _gather(
        raw3, _c(plane.offset) + row_major(loops, sizes), idx))


def repack_field(raw3: ir.Value, rows: int, f: Field, group: Sequence[int],
                 pos: Sequence[int] | None = None) -> ir.Value:
    """``[rows, G, *sizes]`` of ``f.dtype`` over the field's group dims, stored in loop
    order (``pos[i]``: the dequant loop of group dim i; default K order) so that the
    dequant reads it through a monotonic map."""
    order = sorted(f.dims, key=lambda i: (pos or list(range(len(group))))[i])
    sizes = [group[i] for i in order]

    def body(idx: Loops) -> ir.Value:
        k_order = [emit.d(2 + order.index(i)) for i in f.dims]
        reads = f.reads(k_order)
        return f.body([_gather(raw3, r, idx) for r in reads], k_order,
                      lambda e: _apply(e, idx))

    return _repack(raw3, rows, sizes, ir.Type.parse(f.dtype), body)


def dequantize(inputs: dict[str, ir.Value], maps: dict[str, ir.AffineMap],
               space: Sequence[int], weight: Callable[[Scalars], ir.Value],
               k_major: bool = False, element: ir.Type | None = None) -> ir.Value:
    """The all-parallel, arith-only generic over ``space`` (rows first) giving f32 weights
    (or ``element`` values); ``weight`` gets the input scalars by name. ``k_major``: the
    result has the rows last (``[G, *group, N']``, see :func:`fused_matmul`)."""
    names = list(inputs)
    rank = len(space)
    perm = [*range(1, rank), 0] if k_major else list(range(rank))
    init = emit.empty([space[p] for p in perm], element or emit.f32())

    def body(*args: ir.Value) -> ir.Value:
        return weight(dict(zip(names, args[:len(names)], strict=True)))

    return emit.generic([inputs[k] for k in names], [init],
                        [maps[k] for k in names] + [emit.amap(rank, perm)],
                        [emit.PARALLEL] * rank, body)[0]


def shift_table(shift: Callable[[Exprs], Expr], group: Sequence[int], dims: Sequence[int]
                ) -> ir.Value:
    """``shift`` (a function of the group loops ``dims`` only) tabulated as a constant i8
    tensor over those loops. The dequant reads shifts from it rather than computing them
    from ``linalg.index``: with an index-dependent body, IREE 3.13's SPIR-V matvec pipeline
    crashes unrolling the contraction (M = 1)."""
    sizes = [group[i] for i in dims]
    values = []
    for flat in range(math.prod(sizes)):
        idx = [_c(0)] * len(group)
        rest = flat
        for i, size in zip(reversed(dims), reversed(sizes), strict=True):
            idx[i] = _c(rest % size)
            rest //= size
        values.append(ir.AffineConstantExpr(shift(idx)).value)
    t = ir.RankedTensorType.get(sizes, _int(8))
    attr = ir.DenseElementsAttr.get(np.array(values, np.int8).reshape(sizes), type=t)
    return arith.constant(t, attr)


def loop_order(layout: GgufLayout, target: str) -> list[int]:
    """The dequant's group loops. llvm-cpu: ggml's element order (the innermost loop walks
    contiguous bytes; that vectorizes). GPU targets: first the dims that address plane
    bytes, then those that only pick bits within a byte: IREE 3.13's SPIR-V reduction
    computes wrong sums at M = 1 when a byte plane is broadcast along a loop with
    byte-addressing loops inside it (measured on lavapipe: every packed scheme off by a
    factor), while on llvm-cpu that order makes the innermost loop 2 to 4 long (Q4_K 8x
    slower). CUDA takes the GPU form untested (no GPU here)."""
    if target == "llvm-cpu":
        return list(range(len(layout.group)))
    used = sorted({i for p in layout.planes.values() for i in p.dims})
    return used + [i for i in range(len(layout.group)) if i not in used]


def _with_shifts(layout: GgufLayout, pos: Sequence[int], inputs: dict[str, ir.Value],
                 maps: dict[str, ir.AffineMap], computed: bool = False,
                 value: Callable[[Scalars], ir.Value] | None = None
                 ) -> Callable[[Scalars], ir.Value]:
    """Add each sub-byte plane's shift table to ``inputs``; wrap the layout's weight (or
    ``value``) so that it sees plane values (``(byte >> shift) & mask``). ``pos[i]``: the
    loop of group dim i.
    ``computed``: the shifts and tables are computed from the loop indices instead (the
    llvm-cpu prefill, :func:`fused_matmul`): IREE fuses the weight's data-tiling pack into
    the dequant only if the dispatch holds no constant tensor (a 2-byte shift table kept
    Q4_K's pack a dispatch of its own: 5632 x 2048 dequant 13.7 ms + pack 14.1 ms, against
    3.0 ms fused), while an index-dependent body crashes IREE's SPIR-V matvec
    (:func:`shift_table`)."""
    rank = 2 + len(pos)
    planes = {}
    tables = {}
    for name, plane in layout.planes.items():
        if plane.width == 8:
            continue
        planes[name] = ((1 << plane.width) - 1, plane.shift)
        if computed:
            continue
        slots = sorted((i for i in range(len(layout.group)) if i not in plane.dims),
                       key=lambda i: pos[i])
        inputs[f"{name}.shift"] = shift_table(plane.shift, layout.group, slots)
        maps[f"{name}.shift"] = emit.amap(rank, [2 + pos[i] for i in slots])
    for name, (dims, table) in layout.tables.items():
        tables[name] = table
        if computed:
            continue
        slots = sorted(dims, key=lambda i: pos[i])
        inputs[name] = shift_table(table, layout.group, slots)
        maps[name] = emit.amap(rank, [2 + pos[i] for i in slots])
    group = [ir.AffineDimExpr.get(i) for i in range(len(pos))]

    def weight(s: Scalars) -> ir.Value:
        values = dict(s)
        loops = [emit.loop_index(2 + pos[i]) for i in range(len(pos))] if computed else []
        if computed:
            values.update({name: _apply(table(group), loops) for name, table in tables.items()})
        for name, (mask, shift) in planes.items():
            by = _apply(shift(group), loops) if computed else s[f"{name}.shift"]
            values[name] = _bits(s[name], by, mask)
        return (value or layout.weight)(values)

    return weight


def gguf_weight(w: ir.Value, scheme: str, target: str, k_major: bool = False
                ) -> tuple[ir.Value, list[int]]:
    """Raw bytes ``[N, ROWBYTES]`` -> dequantized f32 ``[N', G, *group in loop order]`` and
    the loop order of the group dims (see :func:`loop_order`); F16 / BF16: ``[N, K]``
    (f16 / bf16 bits). ``k_major``: f32 ``[G, *group, N']`` / ``[K, N]`` instead."""
    if scheme in ("gguf_f16", "gguf_bf16"):
        half = half_weight(w, scheme)
        if not k_major:
            return half, []
        n, k = emit.static_shape(half)
        assert n is not None
        assert k is not None
        return dequantize({"w": half}, {"w": emit.identity(2)}, [n, k],
                          lambda s: _to_f32(s["w"]), k_major=True), []
    layout = (CPU_LAYOUTS if target == "llvm-cpu" else {}).get(scheme) or LAYOUTS[scheme]
    info = QUANT_SCHEMES[scheme]
    n, row = emit.static_shape(w)
    assert n is not None
    assert row is not None
    g = row // info.block_bytes
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    order = loop_order(layout, target)
    pos = [order.index(i) for i in range(len(order))]
    inputs, maps, space = _layout_operands(raw3, padded_rows(n), layout, pos)
    weight = _with_shifts(layout, pos, inputs, maps, computed=k_major)
    return dequantize(inputs, maps, space, weight, k_major), order


def _layout_operands(raw3: ir.Value, rows: int, layout: GgufLayout, pos: Sequence[int],
                     fields: bool = True
                     ) -> tuple[dict[str, ir.Value], dict[str, ir.AffineMap], list[int]]:
    """The repacked planes (and ``fields``) of ``raw3 [N, G, BLOCKBYTES]`` as the inputs of a
    generic over ``[rows, G, *group in loop order]`` (``pos[i]``: the loop of group dim i),
    their maps, and that space."""
    _, g, _ = emit.static_shape(raw3)
    assert g is not None
    space = [rows, g, *(layout.group[i] for i in sorted(range(len(pos)), key=pos.__getitem__))]
    rank = len(space)
    inputs: dict[str, ir.Value] = {}
    maps: dict[str, ir.AffineMap] = {}

    def loops(dims: Sequence[int]) -> list[int]:
        """Plane / field dims -> their loops, in loop order (the arrays' dim order)."""
        return [0, 1, *sorted(2 + pos[i] for i in dims)]

    for name, plane in layout.planes.items():
        inputs[name] = (repack_plane(raw3, rows, plane, layout.group) if plane.repack is None
                        else repack_field(raw3, rows, plane.repack, layout.group, pos))
        maps[name] = emit.amap(rank, loops(plane.dims))
    for name, f in layout.fields.items() if fields else ():
        inputs[name] = repack_field(raw3, rows, f, layout.group, pos)
        maps[name] = emit.amap(rank, loops(f.dims))
    return inputs, maps, space


def half_weight(w: ir.Value, scheme: str) -> ir.Value:
    """F16 / BF16 bytes ``[N, 2K]`` viewed as ``[N, K]`` f16 / i16 (``flow.tensor.bitcast``,
    no copy): a plain mixed-precision matmul that converts in the contraction body (see
    :func:`bf16_to_f32`). As a separate dequant generic without data tiling, IREE collapses
    it with the matmul to 2-D and then does not tile the producer along K: a 16 x K f32 tile
    on llvm-cpu's stack, minutes of SPIR-V compilation at M > 1 (with data tiling the
    generic goes into the weight's pack instead: :func:`fused_matmul`)."""
    n, row = emit.static_shape(w)
    assert n is not None
    assert row is not None
    element = ir.F16Type.get() if scheme == "gguf_f16" else _int(16)
    return bitcast(w, [n, row // 2], element)


def bf16_to_f32(bits: ir.Value) -> ir.Value:
    """BF16 bits (i16) -> f32: the bits are the top half of the f32 (exact). Done in integer
    ops because IREE 3.13's SPIR-V backend cannot legalize bf16 vector bitcasts."""
    return arith.bitcast(emit.f32(), arith.shli(u32(bits), _i32(16)))


def _to_f32(v: ir.Value) -> ir.Value:
    return bf16_to_f32(v) if isinstance(v.type, ir.IntegerType) else emit.to_f32(v)


def bitcast(v: ir.Value, shape: Sequence[int], element: ir.Type) -> ir.Value:
    """``flow.tensor.bitcast`` (static shapes): the same bytes as another element type."""
    return flow.TensorBitCastOp(ir.RankedTensorType.get(list(shape), element), v, [], []).result


# --------------------------------------------------------------------------------------
# Legacy schemes: [K, N] weights
# --------------------------------------------------------------------------------------


def _w_int8(s: Scalars) -> ir.Value:
    return arith.mulf(arith.subf(sf(s["q"]), s["zp"]), s["scale"])


def e2m1(nibble: ir.Value) -> ir.Value:
    """FP4 E2M1 (the low 4 bits of an i8) -> f32: ``0 .5 1 1.5 2 3 4 6`` and negatives.
    Twice the magnitude is ``m`` (exponent 0) or ``(2 + m) << (e - 1)``, an integer."""
    v = arith.extui(_int(32), nibble)
    e = arith.andi(arith.shrui(v, _i32(1)), _i32(3))
    m = arith.andi(v, _i32(1))
    shift = arith.maxsi(arith.subi(e, _i32(1)), _i32(0))
    normal = arith.shli(arith.addi(_i32(2), m), shift)
    is_sub = arith.cmpi(arith.CmpIPredicate.eq, e, _i32(0))
    twice = arith.select(is_sub, m, normal)
    mag = arith.mulf(uf(twice), emit.scalar(0.5, emit.f32()))
    negative = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(v, _i32(8)), _i32(0))
    return arith.select(negative, arith.negf(mag), mag)


def e4m3fn(byte: ir.Value) -> ir.Value:
    """FP8 E4M3FN (i8 bits) -> f32: normals rebuilt as f32 bits (exponent + 120, mantissa
    << 20), subnormals ``m · 2⁻⁹``; the NaN pattern ``S.1111.111`` gives 0 (RLX's decoder)."""
    v = arith.extui(_int(32), byte)
    e = arith.andi(arith.shrui(v, _i32(3)), _i32(15))
    m = arith.andi(v, _i32(7))
    sign = arith.shli(arith.shrui(v, _i32(7)), _i32(31))
    bits = arith.ori(sign, arith.ori(arith.shli(arith.addi(e, _i32(120)), _i32(23)),
                                     arith.shli(m, _i32(20))))
    normal = arith.bitcast(emit.f32(), bits)
    sub = arith.mulf(uf(m), emit.scalar(2.0 ** -9, emit.f32()))
    sub = arith.select(arith.cmpi(arith.CmpIPredicate.ne, sign, _i32(0)), arith.negf(sub), sub)
    value = arith.select(arith.cmpi(arith.CmpIPredicate.eq, e, _i32(0)), sub, normal)
    is_nan = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(v, _i32(127)), _i32(127))
    return arith.select(is_nan, emit.scalar(0.0, emit.f32()), value)


def legacy_weight(op: Decoded, scheme: str, block_size: int, target: str
                  ) -> tuple[ir.Value, list[int]]:
    """``w_q [K, N]`` and its ``[K / bs, N]`` scales -> dequantized f32 ``[N', G, bs]``
    (int8) or NVFP4's element ``8t + j`` at loops ``(t, j)`` (llvm-cpu) / ``(j, t)``, ``N'`` the
    padded rows, and the loop order as :func:`gguf_weight` gives it. The weights are first
    transposed to rows (hoisted: same sizes), so that the contraction has GGUF's shape: as
    ``[K, N]`` matvecs, IREE 3.13's SPIR-V backend overflows shared memory or compiles for
    minutes (K = N = 4096)."""
    w, scale, zp = op["w"], op["scale"], op["zp"]
    n = emit.static_shape(scale)[1]
    k = emit.static_shape(w)[0]
    assert n is not None
    assert k is not None
    g = k // block_size
    rows = padded_rows(n)

    def column(t: ir.Value, row: Expr) -> Callable[[Loops], ir.Value]:
        """Element ``[row(loops), n]`` of a ``[K or G, N]`` tensor."""
        return lambda idx: tensor.extract(t, [_index(row, idx), idx[0]])

    sc = _build(n, g, rows, [], emit.elem(scale), column(scale, emit.d(1)))
    if scheme == "int8":
        q = _build(n, g, rows, [block_size], _int(8),
                   column(w, emit.d(1) * block_size + emit.d(2)))
        z = _build(n, g, rows, [], emit.f32(), column(zp, emit.d(1)))
        maps = {"q": emit.identity(3), "scale": emit.amap(3, [0, 1]), "zp": emit.amap(3, [0, 1])}
        space = [rows, g, block_size]
        return dequantize({"q": q, "scale": sc, "zp": z}, maps, space, _w_int8), [0]

    def nibbles(idx: Loops) -> ir.Value:
        """Byte j of block (n, g): elements k = 16g + j (low nibble) and 16g + 8 + j (high),
        each the nibble ``n % 2`` of byte ``w_q[k, n / 2]``."""
        half = _index(div(emit.d(0), 2), idx)
        shift = _apply(mod(emit.d(0), 2) * 4, idx)
        parts = []
        for t in range(2):
            kk = _index(emit.d(1) * 16 + emit.d(2) + 8 * t, idx)
            parts.append(_bits(tensor.extract(w, [kk, half]), shift, 15))
        return arith.ori(parts[0], arith.shli(parts[1], _i8(4)))

    q = _build(n, g, rows, [8], _int(8), nibbles)
    cpu = target == "llvm-cpu"                   # element 8t + j: loops (t, j) or (j, t),
    space = [rows, g, 2, 8] if cpu else [rows, g, 8, 2]      # see loop_order
    j, t = (3, 2) if cpu else (2, 3)
    maps = {"q": emit.amap(4, [0, 1, j]), "shift": emit.amap(4, [t]),
            "scale": emit.amap(4, [0, 1]), "zp": emit.amap(4, ["0"])}

    def weight(v: Scalars) -> ir.Value:
        fp4 = e2m1(_bits(v["q"], v["shift"], 15))
        return arith.mulf(arith.mulf(fp4, e4m3fn(v["scale"])), v["zp"])

    inputs = {"q": q, "shift": shift_table(lambda i: i[0] * 4, [2, 8], [0]), "scale": sc,
              "zp": zp}
    return dequantize(inputs, maps, space, weight), [0, 1] if cpu else [1, 0]


# --------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------


def contract(xg: ir.Value, w: ir.Value, x_map: list[int], w_map: list[int], outer: int
             ) -> ir.Value:
    """``y[m, o...] = Σ x · w`` in f32 over loops ``(m, o_1 .. o_outer, reductions...)``;
    ``x_map`` / ``w_map`` name the loop of each operand dim."""
    rank = max(*x_map, *w_map) + 1
    w_shape = emit.static_shape(w)
    out_sizes: emit.Sizes = [emit.dim(xg, 0)]
    for loop in range(1, 1 + outer):
        size = w_shape[w_map.index(loop)]
        assert size is not None
        out_sizes.append(size)
    init = emit.filled(out_sizes, emit.f32(), 0.0)
    maps = [emit.amap(rank, x_map), emit.amap(rank, w_map),
            emit.amap(rank, list(range(1 + outer)))]
    iters = [emit.PARALLEL] * (1 + outer) + [emit.REDUCTION] * (rank - 1 - outer)

    def body(a: ir.Value, b: ir.Value, acc: ir.Value) -> ir.Value:
        return arith.addf(acc, arith.mulf(emit.to_f32(a), _to_f32(b)))

    return emit.generic([xg, w], [init], maps, iters, body)[0]


def _rows(x: ir.Value) -> ir.Value:
    """``x [..., K]`` -> ``[M, K]``."""
    r = emit.rank(x)
    return x if r == 2 else emit.collapse(x, [list(range(r - 1)), [r - 1]])


def kernel_planes(kern: gemv_kernels.Kernel, w: ir.Value) -> list[ir.Value]:
    """The operands of a :mod:`.gemv_kernels` kernel, repacked from the raw bytes
    ``[N, ROWBYTES]`` (generics over the parameter only: hoisted into initializers)."""
    info = QUANT_SCHEMES[kern.scheme]
    n, g = kern.n, kern.k // info.block_elems
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    if kern.scheme in gemv_kernels.I8_PLANE:     # i8 quants and a scale per 32 (or 16)
        q = emit.collapse(byte_quants(raw3, n, kern.scheme), [[0], [1, 2]])
        scales = (repack_field(raw3, n, f16_at(0), [32]) if kern.scheme in
                  gemv_kernels.BYTE_PLANE else
                  emit.collapse(repack_field(raw3, n, _Q6_K_PRODUCTS, [16]), [[0], [1, 2]]))
        return interleave_tiles(kern, [q, scales])

    def nibbles(idx: Loops) -> ir.Value:
        """Lane ``l`` of half ``hc`` of superblock ``g``: nibble j of weight
        ``128hc + 16j + l`` at bits 4j; that weight is nibble ``(j % 4) / 2`` of qs byte
        ``32(2hc + j / 4) + 16(j % 2) + l`` (ggml: element 64p + 32h + l is nibble h of
        qs[32p + l])."""
        out = None
        for j in range(8):
            byte = emit.d(2) * 64 + emit.d(3) + (16 + 32 * (j // 4) + 16 * (j % 2))
            nib = _bits(_gather(raw3, byte, idx), _i8(4 * ((j % 4) // 2)), 15)
            part = arith.shli(u32(nib), _i32(4 * j)) if j else u32(nib)
            out = part if out is None else arith.ori(out, part)
        assert out is not None
        return out

    q = emit.collapse(_repack(raw3, n, [2, 16], _int(32), nibbles), [[0], [1, 2, 3]])
    a, b = (emit.collapse(repack_field(raw3, n, _K_PRODUCTS[f], [4, 2, 32]), [[0], [1, 2, 3]])
            for f in ("A", "B"))
    sixteen = emit.scalar(16.0, emit.f32())
    s = emit.map_elementwise([a], emit.f32(), lambda v: arith.mulf(v, sixteen), [n, 8 * g])
    mins = emit.map_elementwise([a, b], emit.f32(),
                                lambda v, u: arith.addf(arith.mulf(v, sixteen), u), [n, 8 * g])
    return interleave_tiles(kern, [q, s, mins])


BYTE_QUANTS: dict[str, Callable[[Scalars], ir.Value]] = {
    "gguf_q4_0": lambda s: arith.subi(s["q"], _i8(8)),
    "gguf_q5_0": lambda s: arith.trunci(_int(8), arith.subi(_q5(s), _i32(16))),
    "gguf_q6_k": lambda s: arith.trunci(_int(8), arith.subi(
        arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4))), _i32(32))),
}
"""The signed integer ``q`` of ``w = d · q`` (an i8) from the plane values of
:data:`LAYOUTS`, for the schemes the Q8_0 kernel (or its per-16 variant) runs widened."""


def _q6_k_product_body(b: list[ir.Value], i: Exprs, e: Callable[[Expr], ir.Value]
                       ) -> ir.Value:
    return mulf(f32_of(f16_at(208).body(b[:2], i, e)), sf(b[2]))


_Q6_K_PRODUCTS = Field("f32", lambda i: [_c(208), _c(209), _c(192) + i[0]], _q6_k_product_body,
                       dims=(0,))
"""Q6_K's ``d · sc`` per 16 weights in element order (sc: the signed byte ``192 + j`` of
the block, d: the f16 at 208), in f32: exact (11 x 8 significant bits)."""


def byte_quants(raw3: ir.Value, n: int, scheme: str) -> ir.Value:
    """``[N, G, E]`` i8 (``E`` weights a block): the integer ``q`` of ``w = d · q`` for a
    :data:`~.gemv_kernels.BYTE_PLANE` or ``SIXTEEN_PLANE`` scheme: Q8_0's bytes, or
    :data:`BYTE_QUANTS` over the scheme's :data:`LAYOUTS` planes in element order (a
    generic on the parameter only, hoisted; its shifts computed, llvm-cpu only)."""
    if scheme == "gguf_q8_0":
        return repack_plane(raw3, n, LAYOUTS["gguf_q8_0"].planes["q"], [32])
    layout = LAYOUTS[scheme]
    pos = list(range(len(layout.group)))
    inputs, maps, space = _layout_operands(raw3, n, layout, pos, fields=False)
    value = _with_shifts(layout, pos, inputs, maps, computed=True, value=BYTE_QUANTS[scheme])
    q = dequantize(inputs, maps, space, value, element=_int(8))
    return emit.collapse(q, [[0], [1], list(range(2, len(space)))])


def interleave_tiles(kern: gemv_kernels.Kernel, planes: list[ir.Value]) -> list[ir.Value]:
    """Row-major planes ``[N, C * w]`` stored as ``[N / 4, C * 4 * w]`` (rows of a tile
    interleaved every ``w`` elements: :meth:`~.gemv_kernels.Kernel.interleave_widths`)."""
    tile = gemv_kernels.ROWS_PER_TILE
    out = []
    for plane, w in zip(planes, kern.interleave_widths(), strict=True):
        n, cols = emit.static_shape(plane)
        assert n is not None
        assert cols is not None
        split = emit.reshape(plane, [n // tile, tile, cols // w, w])
        out.append(emit.reshape(emit.transpose(split, [0, 2, 1, 3]),
                                [n // tile, cols * tile]))
    return out


K_MAJOR_PREFILL = tuple(s for s, q in QUANT_SCHEMES.items() if q.gguf)
"""Schemes whose llvm-cpu prefill dequantizes K-major (:func:`fused_matmul`)."""


def fused_matmul(ctx: LoweringContext, op: Decoded, x2: ir.Value) -> ir.Value:
    """``y [M, N']`` (``N'``: the padded rows) = ``x2 [M, K]`` times the dequantized
    weight, the dequant a producer IREE fuses into the contraction."""
    scheme = op.attrs["scheme"]
    # llvm-cpu prefill: the weight dequantized K-major, rows last, in a generic that IREE
    # fuses into the data-tiling pack of the weight (a [N0 = 16, K0 = 1] tile is then 16
    # adjacent values, the transposition done on the quantized side), and the contraction
    # is IREE's f32 mmt4d. 1B prefill of 128 tokens: F16 2.35 -> 1.9 s (dequantized in the
    # contraction body, the mixed f32 x f16 mmt4d ran at ~95 GFLOP/s against ~200), the
    # dequant-and-pack of a 2048 x 5632 weight 19 -> 6 ms (row-major it was a strided pack);
    # Q8_0 2.17 -> 1.68 s. Every GGUF scheme since its sub-byte shifts are computed, not
    # read from a constant table, in this form (:func:`_with_shifts`): the dequant-and-pack
    # of a 5632 x 2048 Q4_K weight 27.8 -> 3.0 ms, its M = 128 matmul 57.5 -> 23.6 ms (Q8_0:
    # 22.8 ms), and 2.2-2.6x for Q4_0 ... Q6_K (a table kept the pack a dispatch of its own).
    k_major = (scheme in K_MAJOR_PREFILL and ctx.options.data_tiling
               and emit.static_shape(x2)[0] != 1)
    if QUANT_SCHEMES[scheme].gguf:
        w, order = gguf_weight(op["w"], scheme, ctx.options.target, k_major)
    else:
        w, order = legacy_weight(op, scheme, op.attrs["block_size"], ctx.options.target)
    rank = emit.rank(w)
    if rank == 2:                                # F16 / BF16: [N, K] or [K, N] (k_major)
        return contract(x2, w, [0, 2], [2, 1] if k_major else [1, 2], 1)
    shape = emit.static_shape(w)                 # [N', G, *group in loop order] (rows last
    if k_major:                                  # if k_major)
        shape = [shape[-1], *shape[:-1]]
    group = [shape[2 + order.index(i)] for i in range(len(order))]
    xg = emit.expand(x2, [[0], list(range(1, 2 + len(group)))], [emit.dim(x2, 0), shape[1],
                                                                  *group])
    x_map = [0, 2, *(3 + order.index(i) for i in range(len(order)))]
    w_map = [*range(2, rank + 1), 1] if k_major else list(range(1, rank + 1))
    return contract(xg, w, x_map, w_map, 1)


def _kernel(ctx: LoweringContext, op: ir.Operation) -> gemv_kernels.Kernel | None:
    """The GEMV kernel this dequant_matmul lowers to, if any (from static shapes only)."""
    x = emit.static_shape(op.operands[0])
    lead = x[:-1]
    m = math.prod(lead) if None not in lead else None     # type: ignore[arg-type]
    n, k = emit.static_shape(op.results[0])[-1], x[-1]
    assert n is not None
    assert k is not None
    return gemv_kernels.kernel_for(ir.StringAttr(op.attributes["scheme"]).value, m, n, k,
                                   ctx.options)


def _lower(ctx: LoweringContext, op: Decoded, kern: gemv_kernels.Kernel | None,
           residual: ir.Value | None = None, norm: ir.Operation | None = None,
           gu: ir.Value | None = None) -> ir.Value:
    """The dequant_matmul through GEMV kernel ``kern`` (:func:`_kernel`) or the fused form;
    plus ``residual``, or of ``x`` normalized by the rms_norm ``norm`` that computes it, or
    of ``x = silu(g) * u`` from ``gu = [g, u]`` (each only with a kernel)."""
    x = op["x"]
    x2 = _rows(x)
    n = emit.static_shape(op.op.results[0])[-1]
    assert n is not None
    if kern is not None:                         # llvm-cpu decode: rlx's kernel, y [N]
        gamma_beta: list[ir.Value] = []
        if norm is not None:                     # the kernel normalizes the norm's input
            kern = dataclasses.replace(kern, norm_eps=ir.FloatAttr(
                norm.attributes["eps"]).value)
            x2 = _rows(norm.operands[0])
            gamma_beta = [emit.reshape(v, [kern.k]) for v in norm.operands[1:3]]
        if gu is not None:                       # the kernel computes silu(g) * u
            kern = dataclasses.replace(kern, glu=True)
            x2 = _rows(gu)
        xk = emit.collapse(emit.convert_tensor(x2, emit.f32()), [[0, 1]])
        if residual is not None:                 # y = r + W x in the kernel
            kern = dataclasses.replace(kern, residual=True)
            residual = emit.reshape(residual, [n])
        y = gemv_kernels.dispatch(ctx, kern, xk, kernel_planes(kern, op["w"]), residual,
                                  gamma_beta)
        y = emit.expand(y, [[0, 1]], [1, n])
    else:
        assert residual is None
        assert norm is None
        assert gu is None
        y = fused_matmul(ctx, op, x2)
        if emit.static_shape(y)[1] != n:
            y = emit.extract_slice(y, [0, 0], [emit.dim(x2, 0), n])
    lead = emit.sizes(x)[:-1]
    if emit.rank(x) != 2:
        y = emit.expand(y, [list(range(len(lead))), [len(lead)]], [*lead, n])
    return emit.convert_tensor(y, emit.elem(x))


@MIR_TO_LINALG.register("dequant_matmul")
def lower_dequant_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [_lower(ctx, op, _kernel(ctx, op.op))]


def _residual_add(op: ir.Operation) -> tuple[ir.Operation, int] | None:
    """``(add, i)`` if the only use of ``op``'s f32 result is a ``binary add`` of it and
    ``r = add.operands[i]``, ``r`` of the same type and defined before ``op`` (so that a
    kernel dispatched in ``op``'s place can read it). Else None."""
    result = op.results[0]
    uses = list(result.uses)
    if len(uses) != 1 or emit.elem(result) != emit.f32():
        return None
    add = uses[0].owner
    if (add.name != "rlx_mir.binary" or ir.StringAttr(add.attributes["kind"]).value != "add"
            or add.operands[0] == add.operands[1]):
        return None
    i = 1 - uses[0].operand_number
    r = add.operands[i]
    if r.type != result.type:
        return None
    owner = r.owner
    if isinstance(owner, ir.Block):
        if owner != op.block:                    # an argument of another region's block
            return None
    elif (owner.operation.block != op.block
          or not owner.operation.is_before_in_block(op)):
        return None
    return add.operation, i


def _producer(v: ir.Value, name: str) -> ir.Operation | None:
    """The ``rlx_mir.<name>`` op that defines ``v``, if one does."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != f"rlx_mir.{name}":
        return None
    return owner.operation


def _rms_norm_input(op: ir.Operation, k: int) -> ir.Operation | None:
    """The ``rms_norm`` that computes ``op``'s ``x`` if its operands are f32 and ``K`` fits
    the prologue (:data:`.gemv_kernels.MAX_NORM_K`), so that the kernel can normalize ``x``
    itself."""
    norm = _producer(op.operands[0], "rms_norm")
    if k > gemv_kernels.MAX_NORM_K or norm is None:
        return None
    axis = ir.IntegerAttr(norm.attributes["axis"]).value
    if axis not in (-1, emit.rank(norm.operands[0]) - 1):
        return None
    if any(emit.elem(v) != emit.f32() for v in norm.operands):
        return None
    return norm


def _half(op: ir.Operation | None, k: int) -> tuple[ir.Value, int] | None:
    """``(src, i)`` if ``op`` is a unit-stride slice of ``src [1, 1, 2K]`` f32 taking
    half ``i`` of its last axis."""
    if op is None or emit.static_shape(op.operands[0]) != [1, 1, 2 * k]:
        return None
    starts = list(ir.DenseI64ArrayAttr(op.attributes["starts"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["sizes"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    if strides != [1, 1, 1] or starts[:2] != [0, 0] or starts[2] not in (0, k):
        return None
    if emit.static_shape(op.results[0]) != [1, 1, k] or sizes[2] != k:
        return None
    return op.operands[0], starts[2] // k


def _swiglu_input(op: ir.Operation, k: int) -> list[ir.Operation] | None:
    """``[mul, silu, gate slice, up slice]`` if ``op``'s ``x`` is
    ``silu(gu[..., :K]) * gu[..., K:]`` of one f32 ``gu [1, 1, 2K]`` (a SwiGLU FFN's packed
    gate / up projection) and ``K`` fits the prologue: the kernel computes ``x`` itself
    from ``gu`` (the slices' operand), and these ops can go once unused."""
    mul = _producer(op.operands[0], "binary")
    if (k > gemv_kernels.MAX_NORM_K or mul is None
            or ir.StringAttr(mul.attributes["kind"]).value != "mul"):
        return None
    act = _producer(mul.operands[0], "activation")
    if act is None or ir.StringAttr(act.attributes["kind"]).value != "silu":
        return None
    gate = _half(_producer(act.operands[0], "slice"), k)
    up = _half(_producer(mul.operands[1], "slice"), k)
    if gate is None or up is None or gate[0] != up[0] or (gate[1], up[1]) != (0, 1):
        return None
    if emit.elem(gate[0]) != emit.f32():
        return None
    return [mul, act, act.operands[0].owner.operation, mul.operands[1].owner.operation]


def fuse_gemv_neighbours(module: ir.Module, ctx: LoweringContext) -> None:
    """Before the table runs, lower each dequant_matmul that runs a GEMV kernel together
    with what IREE cannot fuse into rlx's hand-written dispatch (each would cost a dispatch
    of its own, twice per decoder layer and token):

    - the RMSNorm that computes its ``x`` (the kernel normalizes ``x`` itself; the norm is
      dropped once no other use is left);
    - the SwiGLU ``silu(g) * u`` that computes its ``x`` from a packed gate / up projection
      (the kernel reads ``[g, u]``; likewise dropped);
    - the residual add that is its only use (``h + W x``: the kernel adds ``h``).

    (Here, not in the rules: the greedy rewrite may visit the add before the GEMV.)"""
    schema = MIR.ops["dequant_matmul"]
    plans = []
    with module.context:
        for op in walk_ops(module.operation):
            kern = _kernel(ctx, op) if op.name == "rlx_mir.dequant_matmul" else None
            if kern is None:
                continue
            norm = _rms_norm_input(op, kern.k)
            glu = _swiglu_input(op, kern.k)
            add = _residual_add(op)
            if norm is not None or glu is not None or add is not None:
                plans.append((op, kern, norm, glu, add))
    dropped: list[ir.Operation] = []
    for op, kern, norm, glu, add in plans:
        # operands read now: one may be an earlier plan's result (a sum, the gate / up GEMV)
        residual = None if add is None else add[0].operands[add[1]]
        gu = None if glu is None else glu[2].operands[0]
        with ir.InsertionPoint(op), op.location:
            y = _lower(ctx, decode(schema, op, check=False), kern, residual, norm, gu)
        if add is None:
            op.results[0].replace_all_uses_with(y)
        else:
            add[0].results[0].replace_all_uses_with(y)
            add[0].erase()
        op.erase()
        for gone in ([norm] if norm is not None else []) + (glu or []):
            if gone not in dropped:
                dropped.append(gone)
    for gone in dropped:                  # users first: the mul before its silu and slices
        if not list(gone.results[0].uses):
            gone.erase()
