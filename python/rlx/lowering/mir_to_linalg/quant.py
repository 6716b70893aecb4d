"""mir-to-linalg for quantized weights: dequant_matmul, in the form IREE fuses into the matmul.

Three steps, each a ``linalg.generic``:

1. **Repack** (GGUF only). The operand is the GGML tensor's raw bytes ``[N, ROWBYTES]``
   (``[N, G, BLOCKBYTES]`` after an expand; ``G = K / block``). Each field the dequant
   needs gets its own array, in the iteration space of step 2: the quantized values as
   planes of packed 2-, 4- or 8-bit fields in the order of the block's elements (read as
   ``i2`` / ``i4`` / ``i8`` through ``flow.tensor.bitcast``), the scales as small per-block
   and per-group arrays (``f16`` ``d``, 6-bit scales unpacked to bytes, ...). These generics
   read only a parameter, and no plane is larger than the tensor it comes from, so IREE
   hoists them into initializers: they run once, when the weights are loaded.
2. **Dequant**: one all-parallel generic over ``[N, G, *group]`` whose highest-rank inputs
   are the narrow-int planes, with lower-rank scales broadcast through the maps and only
   ``arith`` in its body. That is IREE's "bit-extend" shape: it is cloned into the
   dispatch of the contraction that consumes it (for M = 1 on llvm-cpu at ``-O3``; for any
   M on CUDA and Vulkan), so the f32 weight never exists in memory.
3. **Contraction** over the same grouped space: ``x`` expanded to ``[M, G, *group]``,
   ``y[m, n] = Σ x[m, g, ...] W[n, g, ...]`` in f32, no reshape between 2 and 3.

Every product in a dequant body whose result is then added to is exact in f32 (an f16
scale times integers of at most 6 + 5 bits), so a backend contracting ``a * q - b`` into
an FMA rounds exactly as the separate operations of ggml / the ``gguf`` package: the
weights are bit-exact on every target. Legacy schemes (``[K, N]``) take step 2 and 3 with
``[G, block_size, N]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import affine, arith, flow, tensor

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

Expr = ir.AffineExpr
Scalars = dict[str, ir.Value]
RAW16_GROUP = 32
"""F16 / BF16 weights are contracted as ``[N, K / 32, 32]`` like the block formats: as a
plain ``[N, K]`` matvec, llvm-cpu materializes a ``16 x K`` f32 tile of the dequantized
weight on the stack (over its 32 KiB limit for K = 4096)."""


# --------------------------------------------------------------------------------------
# Small helpers: affine expressions and scalars
# --------------------------------------------------------------------------------------


def _c(v: int) -> Expr:
    return ir.AffineConstantExpr.get(v)


def div(e: Expr, v: int) -> Expr:
    return ir.AffineFloorDivExpr.get(e, _c(v))


def mod(e: Expr, v: int) -> Expr:
    return ir.AffineModExpr.get(e, _c(v))


def _int(width: int) -> ir.Type:
    return ir.IntegerType.get_signless(width)


def _i32(v: int) -> ir.Value:
    return arith.constant(_int(32), v)


def _apply(e: Expr, rank: int, width: int) -> ir.Value:
    """``e`` over the loop indices of the enclosing generic, as an ``i<width>``."""
    if isinstance(e, ir.AffineConstantExpr):
        return arith.constant(_int(width), ir.AffineConstantExpr(e).value)
    index = affine.apply(ir.AffineMap.get(rank, 0, [e]), [emit.loop_index(i)
                                                          for i in range(rank)])
    return arith.index_cast(_int(width), index)


def u32(v: ir.Value) -> ir.Value:
    """An unsigned narrow int widened to i32."""
    return arith.extui(_int(32), v)


def s32(v: ir.Value) -> ir.Value:
    """A signed narrow int widened to i32."""
    return arith.extsi(_int(32), v)


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

Locate = Callable[[Sequence[Expr]], tuple[Expr, Expr]]
"""In-block element index (one expression per group dim) -> (byte offset, bit shift)."""


@dataclass(frozen=True)
class Plane:
    """A field of ``width`` bits per element, repacked into ``bits``-wide slots."""

    bits: int
    locate: Locate
    width: int = 0

    @property
    def mask(self) -> int:
        return (1 << (self.width or self.bits)) - 1


FieldBody = Callable[[list[ir.Value], Callable[[Expr], ir.Value]], ir.Value]


@dataclass(frozen=True)
class Field:
    """A per-block (``dims`` = 0) or per-group (``dims`` = 1) scale array of ``dtype``,
    computed from the block bytes at ``reads`` (expressions of the group index)."""

    dtype: str
    reads: Callable[[Sequence[Expr]], list[Expr]]
    body: FieldBody
    dims: int = 0


@dataclass(frozen=True)
class GgufLayout:
    group: tuple[int, ...]
    planes: dict[str, Plane]
    fields: dict[str, Field]
    weight: Callable[[Scalars], ir.Value]
    raw16: bool = False
    """F16 / BF16: the bytes are bitcast to ``[N, K] i16``; no blocks, no repack."""


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


def byte_at(offset: Callable[[Expr], Expr]) -> Field:
    return Field("i8", lambda g: [offset(g[0])], lambda b, _: b[0], dims=1)


def _bits(v: ir.Value, shift: ir.Value, mask: int) -> ir.Value:
    width = ir.IntegerType(v.type).width
    return arith.andi(arith.shrui(v, shift), arith.constant(_int(width), mask))


def _i8(v: int) -> ir.Value:
    return arith.constant(_int(8), v)


def _k_scale(is_min: bool) -> Field:
    """Q4_K / Q5_K 6-bit scale (or min) of group s from ``scales[12]`` at byte 4: s < 4:
    ``b[4+s] & 63`` (mins ``b[8+s]``); s >= 4: low 4 bits from ``b[12+s-4]`` (mins: its
    high nibble), high 2 bits from the top of ``b[s-4+4]`` (mins ``b[s-4+8]``)."""

    def reads(g: Sequence[Expr]) -> list[Expr]:
        r = mod(g[0], 4)
        return [_c(4) + r, _c(8) + r, _c(12) + r]

    def body(b: list[ir.Value], index: Callable[[Expr], ir.Value]) -> ir.Value:
        a, m, c = b
        first = m if is_min else a
        low = _bits(first, _i8(0), 63)
        high_part = _bits(c, _i8(4 if is_min else 0), 15)
        top = arith.shli(arith.shrui(first, _i8(6)), _i8(4))
        high = arith.ori(high_part, top)
        upper = index(div(emit.d(2), 4))
        is_low = arith.cmpi(arith.CmpIPredicate.eq, upper, _i8(0))
        return arith.select(is_low, low, high)

    return Field("i8", reads, body, dims=1)


def _q3_scale() -> Field:
    """Q3_K signed 6-bit scale j (``scales[12]`` at byte 96), minus 32: low 4 bits from
    byte ``96 + j % 8`` (nibble ``j / 8``), high 2 bits from byte ``104 + j % 4`` (bits
    ``2 * (j / 4)``)."""

    def reads(g: Sequence[Expr]) -> list[Expr]:
        return [_c(96) + mod(g[0], 8), _c(104) + mod(g[0], 4)]

    def body(b: list[ir.Value], index: Callable[[Expr], ir.Value]) -> ir.Value:
        j = emit.d(2)
        low = _bits(b[0], index(div(j, 8) * 4), 15)
        high = _bits(b[1], index(div(j, 4) * 2), 3)
        value = arith.ori(low, arith.shli(high, _i8(4)))
        return arith.subi(value, _i8(32))

    return Field("i8", reads, body, dims=1)


def _nibble_row(offset: int, span: int) -> Locate:
    """Element l of a block whose first ``span`` elements are the low nibbles of bytes
    ``offset ..`` and the next ``span`` the high nibbles (Q4_0, Q4_1, Q5_0, Q5_1)."""
    return lambda i: (_c(offset) + mod(i[0], span), div(i[0], span) * 4)


def _q5_high(offset: int) -> Locate:
    """Bit l of the little-endian u32 at ``offset``."""
    return lambda i: (_c(offset) + div(i[0], 8), mod(i[0], 8))


def _k_nibbles(offset: int) -> Locate:
    """Q4_K / Q5_K: group s takes nibble ``s % 2`` of bytes ``offset + 32 * (s / 2) + l``."""
    return lambda i: (_c(offset) + div(i[0], 2) * 32 + i[1], mod(i[0], 2) * 4)


def _crumbs16(offset: int) -> Locate:
    """Q2_K / Q3_K / Q6_K high bits: group j of 16 takes bits ``2 * ((j % 8) / 2)`` of bytes
    ``offset + 32 * (j / 8) + 16 * (j % 2) + l``."""
    return lambda i: (_c(offset) + div(i[0], 8) * 32 + mod(i[0], 2) * 16 + i[1],
                      div(mod(i[0], 8), 2) * 2)


def _f(s: Scalars, name: str) -> ir.Value:
    return f32_of(s[name])


def _w_q4_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), arith.subf(uf(s["q"]), emit.scalar(8.0, emit.f32())))


def _w_affine(q: ir.Value, s: Scalars) -> ir.Value:
    return arith.addf(mulf(_f(s, "d"), uf(q)), _f(s, "m"))


def _q5(s: Scalars) -> ir.Value:
    return arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4)))


def _w_q5_0(s: Scalars) -> ir.Value:
    return mulf(_f(s, "d"), sf(arith.subi(_q5(s), _i32(16))))


def _w_q8(s: Scalars) -> ir.Value:
    d = s["d"] if isinstance(s["d"].type, ir.F32Type) else _f(s, "d")
    return mulf(d, sf(s["q"]))


def _w_scale_min(q: ir.Value, s: Scalars) -> ir.Value:
    """``(d * sc) * q - dmin * m`` (Q4_K, Q5_K); both products exact in f32."""
    a = mulf(_f(s, "d"), uf(s["sc"]))
    b = mulf(_f(s, "dmin"), uf(s["mn"]))
    return arith.subf(mulf(a, uf(q)), b)


def _w_q2_k(s: Scalars) -> ir.Value:
    sc = s["sc"]
    a = mulf(_f(s, "d"), uf(arith.andi(sc, _i8(15))))
    b = mulf(_f(s, "dmin"), uf(arith.shrui(sc, _i8(4))))
    return arith.subf(mulf(a, uf(s["q"])), b)


def _w_q3_k(s: Scalars) -> ir.Value:
    q = arith.addi(arith.subi(u32(s["q"]), _i32(4)), arith.shli(u32(s["h"]), _i32(2)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(q))


def _w_q6_k(s: Scalars) -> ir.Value:
    q = arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), _i32(4)))
    return mulf(mulf(_f(s, "d"), sf(s["sc"])), sf(arith.subi(q, _i32(32))))


def _w_f16(s: Scalars) -> ir.Value:
    return f32_of(arith.bitcast(ir.F16Type.get(), s["q"]))


def _w_bf16(s: Scalars) -> ir.Value:
    return arith.bitcast(emit.f32(), arith.shli(u32(s["q"]), _i32(16)))


_K_SCALES = {"sc": _k_scale(False), "mn": _k_scale(True), "d": f16_at(0), "dmin": f16_at(2)}

LAYOUTS: dict[str, GgufLayout] = {
    "gguf_f16": GgufLayout((), {}, {}, _w_f16, raw16=True),
    "gguf_bf16": GgufLayout((), {}, {}, _w_bf16, raw16=True),
    "gguf_q4_0": GgufLayout((32,), {"q": Plane(4, _nibble_row(2, 16))}, {"d": f16_at(0)},
                            _w_q4_0),
    "gguf_q4_1": GgufLayout((32,), {"q": Plane(4, _nibble_row(4, 16))},
                            {"d": f16_at(0), "m": f16_at(2)}, lambda s: _w_affine(s["q"], s)),
    "gguf_q5_0": GgufLayout((32,), {"q": Plane(4, _nibble_row(6, 16)),
                                    "h": Plane(2, _q5_high(2), width=1)},
                            {"d": f16_at(0)}, _w_q5_0),
    "gguf_q5_1": GgufLayout((32,), {"q": Plane(4, _nibble_row(8, 16)),
                                    "h": Plane(2, _q5_high(4), width=1)},
                            {"d": f16_at(0), "m": f16_at(2)}, lambda s: _w_affine(_q5(s), s)),
    "gguf_q8_0": GgufLayout((32,), {"q": Plane(8, lambda i: (_c(2) + i[0], _c(0)))},
                            {"d": f16_at(0)}, _w_q8),
    "gguf_q2_k": GgufLayout((16, 16), {"q": Plane(2, _crumbs16(16))},
                            {"sc": byte_at(lambda j: j), "d": f16_at(80), "dmin": f16_at(82)},
                            _w_q2_k),
    "gguf_q3_k": GgufLayout((16, 16), {
        "q": Plane(2, _crumbs16(32)),
        "h": Plane(2, lambda i: (mod(i[0], 2) * 16 + i[1], div(i[0], 2)), width=1)},
        {"sc": _q3_scale(), "d": f16_at(108)}, _w_q3_k),
    "gguf_q4_k": GgufLayout((8, 32), {"q": Plane(4, _k_nibbles(16))}, _K_SCALES,
                            lambda s: _w_scale_min(s["q"], s)),
    "gguf_q5_k": GgufLayout((8, 32), {"q": Plane(4, _k_nibbles(48)),
                                      "h": Plane(2, lambda i: (_c(16) + i[1], i[0]), width=1)},
                            _K_SCALES, lambda s: _w_scale_min(_q5(s), s)),
    "gguf_q6_k": GgufLayout((16, 16), {
        "q": Plane(4, lambda i: (div(i[0], 8) * 64 + mod(i[0], 4) * 16 + i[1],
                                 div(mod(i[0], 8), 4) * 4)),
        "h": Plane(2, _crumbs16(128))},
        {"sc": byte_at(lambda j: _c(192) + j), "d": f16_at(208)}, _w_q6_k),
    "gguf_q8_k": GgufLayout((256,), {"q": Plane(8, lambda i: (_c(4) + i[0], _c(0)))},
                            {"d": f32_at(0)}, _w_q8),
}
"""How each GGUF block type is repacked and dequantized (element orders: ggml's
``dequantize_row_*``; byte offsets: ggml's ``block_*`` structs)."""


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------


def bitcast(v: ir.Value, shape: Sequence[int], element: ir.Type) -> ir.Value:
    """``flow.tensor.bitcast`` (static shapes): the same bytes as another element type."""
    return flow.TensorBitCastOp(ir.RankedTensorType.get(list(shape), element), v, [], []).result


def _index(e: Expr, rank: int) -> ir.Value:
    """``e`` over the loop indices of the enclosing generic, as an ``index``."""
    return affine.apply(ir.AffineMap.get(rank, 0, [e]), [emit.loop_index(i) for i in range(rank)])


def _gather(raw3: ir.Value, byte: Expr, rank: int) -> ir.Value:
    """The byte at offset ``byte`` of block ``(n, g)`` (loops 0 and 1)."""
    return tensor.extract(raw3, [emit.loop_index(0), emit.loop_index(1), _index(byte, rank)])


def _repack(raw3: ir.Value, shape: Sequence[int], element: ir.Type,
            body: Callable[[], ir.Value]) -> ir.Value:
    """A generic over ``[N, G, *shape]`` whose body reads the block bytes it needs with
    ``tensor.extract`` (byte offsets are affine in the loop indices but not projections;
    as indexing maps IREE 3.13 mistakes some of them for convolutions and crashes)."""
    n, g, _ = emit.static_shape(raw3)
    rank = 2 + len(shape)
    init = emit.empty([n, g, *shape], element)
    return emit.generic([], [init], [emit.identity(rank)], [emit.PARALLEL] * rank,
                        lambda _: body())[0]


def repack_plane(raw3: ir.Value, plane: Plane, group: tuple[int, ...]) -> ir.Value:
    """``[N, G, *group]`` as ``i<bits>``: the plane's fields in element order, packed
    ``8 / bits`` to a byte (first element in the low bits), then bitcast."""
    n, g, _ = emit.static_shape(raw3)
    per_byte = 8 // plane.bits
    packed = [*group[:-1], group[-1] // per_byte]
    rank = 2 + len(group)
    outer = [emit.d(2 + i) for i in range(len(group) - 1)]

    def body() -> ir.Value:
        out = None
        for t in range(per_byte):
            byte, shift = plane.locate([*outer, emit.d(rank - 1) * per_byte + t])
            value = _bits(_gather(raw3, byte, rank), _apply(shift, rank, 8), plane.mask)
            if t:
                value = arith.shli(value, _i8(plane.bits * t))
            out = value if out is None else arith.ori(out, value)
        assert out is not None
        return out

    data = _repack(raw3, packed, _int(8), body)
    if plane.bits == 8:
        return data
    return bitcast(data, [n, g, *group], _int(plane.bits))


def repack_field(raw3: ir.Value, f: Field, group: tuple[int, ...]) -> ir.Value:
    """``[N, G]`` (per block) or ``[N, G, group[0]]`` (per group) of ``f.dtype``."""
    dims = list(group[:f.dims])
    rank = 2 + len(dims)

    def body() -> ir.Value:
        reads = f.reads([emit.d(2 + i) for i in range(len(dims))])
        return f.body([_gather(raw3, r, rank) for r in reads], lambda e: _apply(e, rank, 8))

    return _repack(raw3, dims, ir.Type.parse(f.dtype), body)


def dequantize(inputs: dict[str, ir.Value], space: Sequence[int], weight: Callable[[Scalars],
               ir.Value], maps: dict[str, ir.AffineMap]) -> ir.Value:
    """The all-parallel, arith-only generic over ``space`` giving f32 weights."""
    names = list(inputs)
    rank = len(space)
    init = emit.empty(list(space), emit.f32())

    def body(*args: ir.Value) -> ir.Value:
        return weight(dict(zip(names, args[:len(names)], strict=True)))

    return emit.generic([inputs[k] for k in names], [init],
                        [maps[k] for k in names] + [emit.identity(rank)],
                        [emit.PARALLEL] * rank, body)[0]


def contract(x2: ir.Value, w: ir.Value, x_map: list[int], w_map: list[int], rank: int
             ) -> ir.Value:
    """``y[m, n] = Σ x · w`` in f32 over loops ``(m, n, *reduction)``; maps index loops."""
    init = emit.filled([emit.dim(x2, 0), _n_of(w, w_map)], emit.f32(), 0.0)
    maps = [emit.amap(rank, x_map), emit.amap(rank, w_map), emit.amap(rank, [0, 1])]
    iters = [emit.PARALLEL, emit.PARALLEL] + [emit.REDUCTION] * (rank - 2)

    def body(a: ir.Value, b: ir.Value, acc: ir.Value) -> ir.Value:
        return arith.addf(acc, arith.mulf(emit.to_f32(a), b))

    return emit.generic([x2, w], [init], maps, iters, body)[0]


def _n_of(w: ir.Value, w_map: list[int]) -> int:
    n = emit.static_shape(w)[w_map.index(1)]
    assert n is not None
    return n


def gguf_weight(w: ir.Value, scheme: str) -> ir.Value:
    """Raw bytes ``[N, ROWBYTES]`` -> dequantized f32 ``[N, G, *group]`` (``[N, K]`` for
    F16 / BF16)."""
    layout = LAYOUTS[scheme]
    info = QUANT_SCHEMES[scheme]
    n, row = emit.static_shape(w)
    assert n is not None
    assert row is not None
    if layout.raw16:
        k = row // 2
        group = math.gcd(k, RAW16_GROUP)
        space = [n, k // group, group]
        element = ir.F16Type.get() if scheme == "gguf_f16" else ir.BF16Type.get()
        halves = bitcast(w, space, element)
        return dequantize({"q": halves}, space, lambda s: f32_of(s["q"]), {"q": emit.identity(3)})
    g = row // info.block_bytes
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    space = [n, g, *layout.group]
    rank = len(space)
    inputs: dict[str, ir.Value] = {}
    maps: dict[str, ir.AffineMap] = {}
    for name, plane in layout.planes.items():
        inputs[name] = repack_plane(raw3, plane, layout.group)
        maps[name] = emit.identity(rank)
    for name, f in layout.fields.items():
        inputs[name] = repack_field(raw3, f, layout.group)
        maps[name] = emit.amap(rank, list(range(2 + f.dims)))
    return dequantize(inputs, space, layout.weight, maps)


# --------------------------------------------------------------------------------------
# Legacy schemes: [K, N] weights
# --------------------------------------------------------------------------------------


def _w_int8(s: Scalars) -> ir.Value:
    return arith.mulf(arith.subf(sf(s["q"]), s["zp"]), s["scale"])


def e2m1(nibble: ir.Value) -> ir.Value:
    """FP4 E2M1 (i4 bits) -> f32: ``0 .5 1 1.5 2 3 4 6`` and their negatives. Twice the
    magnitude is ``m`` (exponent 0) or ``(2 + m) << (e - 1)``, an integer."""
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
    """FP8 E4M3FN (i8 bits) -> f32: normals are rebuilt as f32 bits (exponent + 120,
    mantissa << 20), subnormals are ``m · 2⁻⁹``; the NaN pattern ``S.1111.111`` gives 0
    (RLX's decoder)."""
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


def _w_nvfp4(s: Scalars) -> ir.Value:
    return arith.mulf(arith.mulf(e2m1(s["q"]), e4m3fn(s["scale"])), s["zp"])


def legacy_weight(op: Decoded, scheme: str, block_size: int) -> ir.Value:
    """``w_q`` and its scales -> dequantized f32 ``[G, block_size, N]``."""
    w = op["w"]
    k = emit.static_shape(w)[0]
    scale = op["scale"]
    n = emit.static_shape(scale)[1]
    assert k is not None
    assert n is not None
    g = k // block_size
    space = [g, block_size, n]
    if scheme == "nvfp4":
        q = bitcast(w, space, _int(4))
        zp = op["zp"]
        maps = {"q": emit.identity(3), "scale": emit.amap(3, [0, 2]), "zp": emit.amap(3, ["0"])}
        return dequantize({"q": q, "scale": scale, "zp": zp}, space, _w_nvfp4, maps)
    q = emit.expand(w, [[0, 1], [2]], space)
    maps = {"q": emit.identity(3), "scale": emit.amap(3, [0, 2]), "zp": emit.amap(3, [0, 2])}
    return dequantize({"q": q, "scale": scale, "zp": op["zp"]}, space, _w_int8, maps)


# --------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------


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
    k = emit.static_shape(x2)[1]
    assert k is not None
    if QUANT_SCHEMES[scheme].gguf:
        w = gguf_weight(op["w"], scheme)
        space = emit.static_shape(w)
        inner = [s for s in space[1:] if s is not None]
        xg = x2 if len(inner) == 1 else emit.expand(x2, [[0], list(range(1, 1 + len(inner)))],
                                                     [m, *inner])
        rank = 1 + len(space)
        y = contract(xg, w, [0, *range(2, rank)], list(range(1, rank)), rank)
    else:
        bs = op.attrs["block_size"]
        w = legacy_weight(op, scheme, bs)
        xg = emit.expand(x2, [[0], [1, 2]], [m, k // bs, bs])
        y = contract(xg, w, [0, 2, 3], [2, 3, 1], 4)
    lead = emit.sizes(x)[:-1]
    n = emit.static_shape(y)[1]
    if emit.rank(x) != 2:
        y = emit.expand(y, [list(range(len(lead))), [len(lead)]], [*lead, n])
    return [emit.convert_tensor(y, emit.elem(x))]
