"""mir-to-linalg for quantized weights: dequant_matmul, in the form IREE fuses into the matmul.

Three steps, each a ``linalg.generic``:

1. **Repack** (GGUF). The operand is the GGML tensor's raw bytes ``[N, ROWBYTES]``
   (``[N, G, BLOCKBYTES]`` after an expand; ``G = K / block``). Each field the dequant needs
   gets its own array, shaped for step 2: the bytes holding the quantized values (a copy of
   their range of the block, reshaped so that a byte is addressed by some of the dequant's
   loops), the scales as per-block / per-group arrays (``f16`` ``d``, 6-bit scales unpacked
   to bytes). These generics read only a parameter and no array is larger than the
   parameter, so IREE hoists them into initializers: they run once, when weights load.
2. **Dequant**: one all-parallel generic over ``[N, G, *group]`` (the block's elements in
   ggml order, split into loops so that every field is a projection of them). Its inputs
   are bytes; a value's bits are ``(byte >> shift) & mask`` with the shift an affine
   function of the loop indices; scales are broadcast through the maps; only ``arith`` in
   the body. That is IREE's "bit-extend" shape: it is cloned into the dispatch of the
   contraction that consumes it (for M = 1 on llvm-cpu at ``-O3``; for any M on CUDA and
   Vulkan), so the f32 weight never exists in memory.
3. **Contraction** over the same grouped space: ``x`` expanded to ``[M, G, *group]``,
   ``y[m, n] = Σ x[m, g, ...] W[n, g, ...]`` in f32, no reshape between 2 and 3.

Sub-byte tensor types (``i4`` / ``i2`` through ``flow.tensor.bitcast``) are not used: IREE
3.13's SPIR-V backend crashes or fails to legalize their vector bitcasts in these dispatches
(measured for Q4_K / Q2_K at M = 1, 3 and 64), and shifts by loop index vectorize on every
target.

Every product in a dequant body whose result is then added to is exact in f32 (an f16
scale times integers of at most 6 + 5 bits), so a backend contracting ``a * q - b`` into an
FMA rounds exactly as the separate operations of ggml and the ``gguf`` package: the weights
are bit-exact on every target. Legacy schemes (``[K, N]``) take steps 2 and 3 with
``[G, block_size, N]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import affine, arith, flow, tensor

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG
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


def _index(e: Expr, rank: int) -> ir.Value:
    """``e`` over the loop indices of the enclosing generic, as an ``index``."""
    return affine.apply(ir.AffineMap.get(rank, 0, [e]),
                        [emit.loop_index(i) for i in range(rank)])


def _apply(e: Expr, rank: int) -> ir.Value:
    """``e`` over the loop indices of the enclosing generic, as an ``i8``."""
    if isinstance(e, ir.AffineConstantExpr):
        return _i8(ir.AffineConstantExpr(e).value)
    return arith.index_cast(_int(8), _index(e, rank))


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


FieldBody = Callable[[list[ir.Value], Callable[[Expr], ir.Value]], ir.Value]


@dataclass(frozen=True)
class Field:
    """A scale array of ``dtype`` over the group loops ``dims`` (none: one per block),
    computed by ``body`` from the block bytes at ``reads(idx)`` (``idx``: the indices of
    ``dims``); ``body`` gets the bytes and a function evaluating an affine expression of
    ``idx`` as an ``i8``."""

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
    signed: tuple[str, ...] = field(default=())
    """Planes whose bytes are signed values (Q8_0, Q8_K)."""


def _bytes_to(width: int, parts: list[ir.Value]) -> ir.Value:
    """Little-endian bytes -> one ``i<width>``."""
    out = arith.extui(_int(width), parts[0])
    for i, p in enumerate(parts[1:], start=1):
        shifted = arith.shli(arith.extui(_int(width), p), arith.constant(_int(width), 8 * i))
        out = arith.ori(out, shifted)
    return out


def f16_at(offset: int) -> Field:
    return Field("f16", lambda _: [_c(offset), _c(offset + 1)],
                 lambda b, _: arith.bitcast(ir.F16Type.get(), _bytes_to(16, b)))


def f32_at(offset: int) -> Field:
    return Field("f32", lambda _: [_c(offset + i) for i in range(4)],
                 lambda b, _: arith.bitcast(emit.f32(), _bytes_to(32, b)))


def bytes_at(offset: int, dims: tuple[int, ...], sizes: Sequence[int]) -> Field:
    """Raw bytes ``[offset, ...)`` of the block, row-major over the group loops ``dims``."""
    return Field("i8", lambda i: [_c(offset) + row_major(i, sizes)], lambda b, _: b[0], dims)


def _k_scale(is_min: bool) -> Field:
    """Q4_K / Q5_K 6-bit scale (or min) of group ``s = 2p + h`` from ``scales[12]`` at byte
    4 (ggml get_scale_min_k4): s < 4: ``b[4+s] & 63`` (mins ``b[8+s]``); s >= 4: low 4 bits
    from ``b[12+s-4]`` (mins: its high nibble), high 2 bits from the top of ``b[4+s-4]``
    (mins ``b[8+s-4]``)."""

    def reads(i: Exprs) -> list[Expr]:
        r = mod(i[0] * 2 + i[1], 4)
        return [_c(4) + r, _c(8) + r, _c(12) + r]

    def body(b: list[ir.Value], index: Callable[[Expr], ir.Value]) -> ir.Value:
        a, m, c = b
        first = m if is_min else a
        low = _bits(first, _i8(0), 63)
        high = arith.ori(_bits(c, _i8(4 if is_min else 0), 15),
                         arith.shli(arith.shrui(first, _i8(6)), _i8(4)))
        upper = index(div(emit.d(2), 2))          # p >= 2  <=>  s >= 4
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, upper, _i8(0)), low, high)

    return Field("i8", reads, body, dims=(0, 1))


def _q3_scale() -> Field:
    """Q3_K signed 6-bit scale ``j = 8c + 2s + l1`` (``scales[12]`` at byte 96) minus 32: low
    4 bits from byte ``96 + j % 8`` (nibble ``j / 8``), high 2 bits from byte ``104 + j % 4``
    (bits ``2 * (j / 4)``)."""

    def reads(i: Exprs) -> list[Expr]:
        j = row_major(i, (2, 4, 2))
        return [_c(96) + mod(j, 8), _c(104) + mod(j, 4)]

    def body(b: list[ir.Value], index: Callable[[Expr], ir.Value]) -> ir.Value:
        j = row_major([emit.d(2), emit.d(3), emit.d(4)], (2, 4, 2))
        low = _bits(b[0], index(div(j, 8) * 4), 15)
        high = _bits(b[1], index(div(j, 4) * 2), 3)
        return arith.subi(arith.ori(low, arith.shli(high, _i8(4))), _i8(32))

    return Field("i8", reads, body, dims=(0, 1, 2))


def _q5_high(offset: int) -> Field:
    """Q5_0 / Q5_1: the fifth bits of elements j and 16 + j (bits j and 16 + j of the
    little-endian u32 at ``offset``) as bits 0 and 1 of byte j. (Read in place, with loops
    (h, j1, j0) over ``(2, 2, 8)``, IREE 3.13's SPIR-V code doubles every Q5 weight.)"""

    def reads(i: Exprs) -> list[Expr]:
        return [_c(offset) + div(i[0], 8), _c(offset + 2) + div(i[0], 8)]

    def body(b: list[ir.Value], index: Callable[[Expr], ir.Value]) -> ir.Value:
        bit = index(mod(emit.d(2), 8))
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


def _w_q2_k(s: Scalars) -> ir.Value:
    """``(d * (sc & 15)) * q - dmin * (sc >> 4)``."""
    sc = s["sc"]
    a = mulf(_f(s, "d"), uf(arith.andi(sc, _i8(15))))
    b = mulf(_f(s, "dmin"), uf(arith.shrui(sc, _i8(4))))
    return arith.subf(mulf(a, uf(s["q"])), b)


def _w_q3_k(s: Scalars) -> ir.Value:
    """``(d * sc) * (q - 4 * (1 - hbit))``, ``sc`` signed."""
    q = arith.addi(arith.subi(u32(s["q"]), _i32(4)), arith.shli(u32(s["h"]), _i32(2)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(q))


def _w_q6_k(s: Scalars) -> ir.Value:
    """``(d * sc) * ((ql | qh << 4) - 32)``, ``sc`` signed."""
    q = arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(arith.subi(q, _i32(32))))


def _nibble(dim: int) -> Callable[[Exprs], Expr]:
    """Nibble ``idx[dim]`` (0: low, 1: high)."""
    return lambda i: i[dim] * 4


_K_FIELDS = {"sc": _k_scale(False), "mn": _k_scale(True), "d": f16_at(0), "dmin": f16_at(2)}
_Q2_GROUP = (2, 4, 2, 16)
"""Q2_K / Q3_K: element ``128c + 32s + 16l1 + l0``: bits ``2s`` of byte ``32c + 16l1 + l0``,
scale ``8c + 2s + l1``."""
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
    "gguf_q8_0": GgufLayout((32,), {"q": Plane(2, (0,), 8)}, {"d": f16_at(0)}, _w_q8,
                            signed=("q",)),
    "gguf_q2_k": GgufLayout(_Q2_GROUP, {"q": Plane(16, (0, 2, 3), 2, lambda i: i[1] * 2)},
                            {"sc": bytes_at(0, (0, 1, 2), (2, 4, 2)), "d": f16_at(80),
                             "dmin": f16_at(82)}, _w_q2_k),
    # Q3_K: the third bit of element 32i + l is bit i = 4c + s of hmask[l]
    "gguf_q3_k": GgufLayout(_Q2_GROUP, {"q": Plane(32, (0, 2, 3), 2, lambda i: i[1] * 2),
                                        "h": Plane(0, (2, 3), 1, lambda i: i[0] * 4 + i[1])},
                            {"sc": _q3_scale(), "d": f16_at(108)}, _w_q3_k),
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
    "gguf_q8_k": GgufLayout((8, 32), {"q": Plane(4, (0, 1), 8)}, {"d": f32_at(0)}, _w_q8,
                            signed=("q",)),
}
"""How each GGUF block type is repacked and dequantized (element orders: ggml's
``dequantize_row_*``; byte offsets: ggml's ``block_*`` structs). F16 / BF16 are below."""


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


def _gather(raw3: ir.Value, byte: Expr, rank: int) -> ir.Value:
    """The byte at offset ``byte`` of block ``(n, g)`` (loops 0 and 1)."""
    return tensor.extract(raw3, [emit.loop_index(0), emit.loop_index(1), _index(byte, rank)])


def _repack(raw3: ir.Value, rows: int, shape: Sequence[int], element: ir.Type,
            body: Callable[[int], ir.Value]) -> ir.Value:
    """A generic over ``[N, G, *shape]`` whose body reads the block bytes it needs with
    ``tensor.extract`` (byte offsets are affine in the loop indices but not projections; as
    indexing maps IREE 3.13 mistakes some of them for convolutions and crashes), padded
    with zero rows to ``rows``."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None
    rank = 2 + len(shape)
    init = emit.empty([n, g, *shape], element)
    out = emit.generic([], [init], [emit.identity(rank)], [emit.PARALLEL] * rank,
                       lambda _: body(rank))[0]
    if rows == n:
        return out
    return emit.insert_slice(out, emit.filled([rows, g, *shape], element, 0), [0] * rank)


def repack_plane(raw3: ir.Value, rows: int, plane: Plane, group: Sequence[int]) -> ir.Value:
    """``[rows, G, *sizes]``: a copy of the plane's bytes."""
    sizes = [group[i] for i in plane.dims]
    loops = [emit.d(2 + i) for i in range(len(sizes))]
    return _repack(raw3, rows, sizes, _int(8), lambda rank: _gather(
        raw3, _c(plane.offset) + row_major(loops, sizes), rank))


def repack_field(raw3: ir.Value, rows: int, f: Field, group: Sequence[int]) -> ir.Value:
    """``[rows, G, *sizes]`` of ``f.dtype`` (sizes of the field's group loops)."""
    sizes = [group[i] for i in f.dims]

    def body(rank: int) -> ir.Value:
        reads = f.reads([emit.d(2 + i) for i in range(len(sizes))])
        return f.body([_gather(raw3, r, rank) for r in reads], lambda e: _apply(e, rank))

    return _repack(raw3, rows, sizes, ir.Type.parse(f.dtype), body)


def dequantize(inputs: dict[str, ir.Value], maps: dict[str, ir.AffineMap],
               space: Sequence[int], weight: Callable[[Scalars], ir.Value]) -> ir.Value:
    """The all-parallel, arith-only generic over ``space`` giving f32 weights;
    ``weight`` gets the input scalars by name."""
    names = list(inputs)
    rank = len(space)
    init = emit.empty(list(space), emit.f32())

    def body(*args: ir.Value) -> ir.Value:
        return weight(dict(zip(names, args[:len(names)], strict=True)))

    return emit.generic([inputs[k] for k in names], [init],
                        [maps[k] for k in names] + [emit.identity(rank)],
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


def _with_shifts(layout: GgufLayout, rank: int, inputs: dict[str, ir.Value],
                 maps: dict[str, ir.AffineMap]) -> Callable[[Scalars], ir.Value]:
    """Add each sub-byte plane's shift table to ``inputs``; wrap the layout's weight so that
    it sees plane values (``(byte >> shift) & mask``)."""
    planes = {}
    for name, plane in layout.planes.items():
        if plane.width == 8:
            continue
        slots = [i for i in range(len(layout.group)) if i not in plane.dims]
        inputs[f"{name}.shift"] = shift_table(plane.shift, layout.group, slots)
        maps[f"{name}.shift"] = emit.amap(rank, [2 + i for i in slots])
        planes[name] = (1 << plane.width) - 1

    def weight(s: Scalars) -> ir.Value:
        values = dict(s)
        for name, mask in planes.items():
            values[name] = _bits(s[name], s[f"{name}.shift"], mask)
        return layout.weight(values)

    return weight


def gguf_weight(w: ir.Value, scheme: str) -> ir.Value:
    """Raw bytes ``[N, ROWBYTES]`` -> dequantized f32 ``[N, G, *group]``."""
    if scheme in ("gguf_f16", "gguf_bf16"):
        return half_weight(w, scheme)
    layout = LAYOUTS[scheme]
    info = QUANT_SCHEMES[scheme]
    n, row = emit.static_shape(w)
    assert n is not None
    assert row is not None
    g = row // info.block_bytes
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    rows = padded_rows(n)
    space = [rows, g, *layout.group]
    rank = len(space)
    inputs: dict[str, ir.Value] = {}
    maps: dict[str, ir.AffineMap] = {}
    for name, plane in layout.planes.items():
        inputs[name] = (repack_plane(raw3, rows, plane, layout.group) if plane.repack is None
                        else repack_field(raw3, rows, plane.repack, layout.group))
        maps[name] = emit.amap(rank, [0, 1, *(2 + i for i in plane.dims)])
    for name, f in layout.fields.items():
        inputs[name] = repack_field(raw3, rows, f, layout.group)
        maps[name] = emit.amap(rank, [0, 1, *(2 + i for i in f.dims)])
    weight = _with_shifts(layout, rank, inputs, maps)
    return dequantize(inputs, maps, space, weight)


def half_weight(w: ir.Value, scheme: str) -> ir.Value:
    """F16 / BF16 bytes ``[N, 2K]`` viewed as ``[N, K]`` f16 / i16 (``flow.tensor.bitcast``,
    no copy): a plain mixed-precision matmul that converts in the contraction body (see
    :func:`bf16_to_f32`). As a separate dequant generic, IREE collapses it with the matmul to
    2-D and then does not tile the producer along K: a 16 x K f32 tile on llvm-cpu's stack,
    minutes of SPIR-V compilation at M > 1."""
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


def legacy_weight(op: Decoded, scheme: str, block_size: int) -> ir.Value:
    """``w_q`` and its scales -> dequantized f32 ``[G, block_size, N]`` (int8) or
    ``[G, 16, N / 2, 2]`` (NVFP4: loop ``t`` picks the nibble of byte ``n / 2``)."""
    w, scale, zp = op["w"], op["scale"], op["zp"]
    k = emit.static_shape(w)[0]
    n = emit.static_shape(scale)[1]
    assert k is not None
    assert n is not None
    g = k // block_size
    if scheme == "int8":
        space = [g, block_size, n]
        q = emit.expand(w, [[0, 1], [2]], space)
        maps = {"q": emit.identity(3), "scale": emit.amap(3, [0, 2]), "zp": emit.amap(3, [0, 2])}
        return dequantize({"q": q, "scale": scale, "zp": zp}, maps, space, _w_int8)
    space = [g, block_size, n // 2, 2]
    q = emit.expand(w, [[0, 1], [2]], space[:3])
    s = emit.expand(scale, [[0], [1, 2]], [g, n // 2, 2])
    nibble = shift_table(lambda i: i[3] * 4, space, [3])
    maps = {"q": emit.amap(4, [0, 1, 2]), "shift": emit.amap(4, [3]),
            "scale": emit.amap(4, [0, 2, 3]), "zp": emit.amap(4, ["0"])}

    def weight(v: Scalars) -> ir.Value:
        fp4 = e2m1(_bits(v["q"], v["shift"], 15))
        return arith.mulf(arith.mulf(fp4, e4m3fn(v["scale"])), v["zp"])

    inputs = {"q": q, "shift": nibble, "scale": s, "zp": zp}
    return dequantize(inputs, maps, space, weight)


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


@MIR_TO_LINALG.register("dequant_matmul")
def lower_dequant_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    x = op["x"]
    scheme = op.attrs["scheme"]
    x2 = _rows(x)
    m = emit.dim(x2, 0)
    if QUANT_SCHEMES[scheme].gguf:
        w = gguf_weight(op["w"], scheme)
        inner = [s for s in emit.static_shape(w)[1:] if s is not None]
        xg = emit.expand(x2, [[0], list(range(1, 1 + len(inner)))], [m, *inner])
        rank = 2 + len(inner)
        y = contract(xg, w, [0, *range(2, rank)], list(range(1, rank)), 1)
    else:
        bs = op.attrs["block_size"]
        w = legacy_weight(op, scheme, bs)
        k = emit.static_shape(x2)[1]
        assert k is not None
        xg = emit.expand(x2, [[0], [1, 2]], [m, k // bs, bs])
        if scheme == "int8":
            y = contract(xg, w, [0, 2, 3], [2, 3, 1], 1)
        else:
            y = contract(xg, w, [0, 3, 4], [3, 4, 1, 2], 2)
            y = emit.collapse(y, [[0], [1, 2]])
    n = emit.static_shape(op.op.results[0])[-1]
    assert n is not None
    if emit.static_shape(y)[1] != n:
        y = emit.extract_slice(y, [0, 0], [m, n])
    lead = emit.sizes(x)[:-1]
    if emit.rank(x) != 2:
        y = emit.expand(y, [list(range(len(lead))), [len(lead)]], [*lead, n])
    return [emit.convert_tensor(y, emit.elem(x))]
