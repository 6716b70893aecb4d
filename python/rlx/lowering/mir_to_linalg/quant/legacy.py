"""The legacy schemes: ``int8`` (``w = (q - zp) * scale`` per block of K) and NVFP4 (E2M1
nibbles, E4M3FN block scales, a global scale), their weights stored ``[K, N]``."""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, tensor

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant.dequant import build, dequantize, padded_rows, shift_table
from rlx.lowering.mir_to_linalg.quant.scalars import (
    Expr,
    Loops,
    Scalars,
    bits,
    div,
    i8,
    i8_at,
    i32,
    index_at,
    int_type,
    mod,
    sf,
    uf,
)


def _w_int8(s: Scalars) -> ir.Value:
    return arith.mulf(arith.subf(sf(s["q"]), s["zp"]), s["scale"])


def e2m1(nibble: ir.Value) -> ir.Value:
    """FP4 E2M1 (the low 4 bits of an i8) -> f32: ``0 .5 1 1.5 2 3 4 6`` and negatives.
    Twice the magnitude is ``m`` (exponent 0) or ``(2 + m) << (e - 1)``, an integer."""
    v = arith.extui(int_type(32), nibble)
    e = arith.andi(arith.shrui(v, i32(1)), i32(3))
    m = arith.andi(v, i32(1))
    shift = arith.maxsi(arith.subi(e, i32(1)), i32(0))
    normal = arith.shli(arith.addi(i32(2), m), shift)
    is_sub = arith.cmpi(arith.CmpIPredicate.eq, e, i32(0))
    twice = arith.select(is_sub, m, normal)
    mag = arith.mulf(uf(twice), emit.scalar(0.5, emit.f32()))
    negative = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(v, i32(8)), i32(0))
    return arith.select(negative, arith.negf(mag), mag)


def e4m3fn(byte: ir.Value) -> ir.Value:
    """FP8 E4M3FN (i8 bits) -> f32: normals rebuilt as f32 bits (exponent + 120, mantissa
    << 20), subnormals ``m · 2⁻⁹``; the NaN pattern ``S.1111.111`` gives 0 (RLX's decoder)."""
    v = arith.extui(int_type(32), byte)
    e = arith.andi(arith.shrui(v, i32(3)), i32(15))
    m = arith.andi(v, i32(7))
    sign = arith.shli(arith.shrui(v, i32(7)), i32(31))
    bits = arith.ori(sign, arith.ori(arith.shli(arith.addi(e, i32(120)), i32(23)),
                                     arith.shli(m, i32(20))))
    normal = arith.bitcast(emit.f32(), bits)
    sub = arith.mulf(uf(m), emit.scalar(2.0 ** -9, emit.f32()))
    sub = arith.select(arith.cmpi(arith.CmpIPredicate.ne, sign, i32(0)), arith.negf(sub), sub)
    value = arith.select(arith.cmpi(arith.CmpIPredicate.eq, e, i32(0)), sub, normal)
    is_nan = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(v, i32(127)), i32(127))
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
        return lambda idx: tensor.extract(t, [index_at(row, idx), idx[0]])

    sc = build(n, g, rows, [], emit.elem(scale), column(scale, emit.d(1)))
    if scheme == "int8":
        q = build(n, g, rows, [block_size], int_type(8),
                   column(w, emit.d(1) * block_size + emit.d(2)))
        z = build(n, g, rows, [], emit.f32(), column(zp, emit.d(1)))
        maps = {"q": emit.identity(3), "scale": emit.amap(3, [0, 1]), "zp": emit.amap(3, [0, 1])}
        space = [rows, g, block_size]
        return dequantize({"q": q, "scale": sc, "zp": z}, maps, space, _w_int8), [0]

    def nibbles(idx: Loops) -> ir.Value:
        """Byte j of block (n, g): elements k = 16g + j (low nibble) and 16g + 8 + j (high),
        each the nibble ``n % 2`` of byte ``w_q[k, n / 2]``."""
        half = index_at(div(emit.d(0), 2), idx)
        shift = i8_at(mod(emit.d(0), 2) * 4, idx)
        parts = []
        for t in range(2):
            kk = index_at(emit.d(1) * 16 + emit.d(2) + 8 * t, idx)
            parts.append(bits(tensor.extract(w, [kk, half]), shift, 15))
        return arith.ori(parts[0], arith.shli(parts[1], i8(4)))

    q = build(n, g, rows, [8], int_type(8), nibbles)
    cpu = target == "llvm-cpu"                   # element 8t + j: loops (t, j) or (j, t),
    space = [rows, g, 2, 8] if cpu else [rows, g, 8, 2]      # see loop_order
    j, t = (3, 2) if cpu else (2, 3)
    maps = {"q": emit.amap(4, [0, 1, j]), "shift": emit.amap(4, [t]),
            "scale": emit.amap(4, [0, 1]), "zp": emit.amap(4, ["0"])}

    def weight(v: Scalars) -> ir.Value:
        fp4 = e2m1(bits(v["q"], v["shift"], 15))
        return arith.mulf(arith.mulf(fp4, e4m3fn(v["scale"])), v["zp"])

    inputs = {"q": q, "shift": shift_table(lambda i: i[0] * 4, [2, 8], [0]), "scale": sc,
              "zp": zp}
    return dequantize(inputs, maps, space, weight), [0, 1] if cpu else [1, 0]


__all__ = ["e2m1", "e4m3fn", "legacy_weight"]
