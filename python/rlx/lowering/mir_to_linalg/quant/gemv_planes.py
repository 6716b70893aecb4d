"""The operands of the decode GEMV kernels (:mod:`.gemv_kernels`): a GGUF weight's raw bytes
repacked into the planes a kernel reads, in its tile-interleaved order.

Each plane is computed by generics that read only the parameter (IREE hoists them into
initializers: they run once, when the weights load) from the same layout fields the
dequant uses (:mod:`.layouts`):

- **i8 planes** (:data:`~.gemv_kernels.I8_PLANE`): the signed integer ``q`` of ``w = d · q``
  per weight (Q8_0's bytes as they are; Q5_0 / Q4_0 / Q6_K widened to bytes,
  :data:`BYTE_QUANTS`) and its scale: Q8_0's f16 ``d`` per 32 weights, or Q6_K's f32
  ``d · sc`` per 16; Q5_1 / Q4_1's unsigned ``q`` of ``w = d · q + m``, widened, and their
  f16 ``d`` and ``m`` per 32.
- **Q4_K / Q5_K**: the nibbles of 128 weights as 16 i32 lanes (nibble ``j`` of weight
  ``128c + 16j + l`` at bits ``4j`` of lane ``l``; under ``q8`` the file's ``qs`` bytes as
  they are), the 6-bit ``sc`` and ``m`` as a byte a group of 32 and ``d``, ``dmin`` per
  superblock (0.58 bytes a weight in all, the file's 0.5625; Q5_K's high bits one more byte
  per 8 weights).

Then every plane ``[N, C * w]`` is stored ``[N / 4, C * 4 * w]`` (:func:`interleave_tiles`).

**One copy per weight** (:func:`shared_planes`): the planes of a parameter (or of the rows of
parameters concatenated: a model's packed projections) are computed in a
``util.initializer`` of their own and held in ``util.global``\\ s that every function's
kernels load. Left inline, IREE hoisted them once per function that computed them (a 135M
F16 model's prefill and decode declared 513 MiB of planes for 257 MiB of weights; the
runtime shared them, but each was compiled twice). A concatenation is made there too, not on
the host: IREE holds every parameter buffer for the module's lifetime, so a host-side
concatenation stayed resident beside the planes made from it."""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, util

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant import gemv_kernels
from rlx.lowering.mir_to_linalg.quant.dequant import (
    dequantize,
    gather,
    half_weight,
    layout_operands,
    repack,
    repack_field,
    repack_plane,
    with_shifts,
)
from rlx.lowering.mir_to_linalg.quant.layouts import (
    LAYOUTS,
    Field,
    f16_at,
    k_scale,
    q5,
)
from rlx.lowering.mir_to_linalg.quant.scalars import (
    Expr,
    Exprs,
    Loops,
    Scalars,
    bits,
    const,
    f32_of,
    i8,
    i8_at,
    i32,
    int_type,
    mulf,
    sf,
    u32,
)
from rlx.lowering.mir_to_linalg.table import load_param
from rlx.lowering.registry import LoweringContext

PLANES_KEY = "kernel_plane_globals"
"""``LoweringContext.state`` key: (the weights read, their rows concatenated;
:attr:`~.gemv_kernels.Kernel.planes_key`) -> the planes' globals (symbol, type)."""


def shared_planes(ctx: LoweringContext, kern: gemv_kernels.Kernel, w: ir.Value
                  ) -> list[ir.Value]:
    """:func:`kernel_planes` of ``w``, loaded from globals that one initializer computes per
    parameter and plane layout (so that every function reading them shares one copy); ``w``
    not a parameter (a weight passed in): computed here."""
    sources = parameter_names(ctx, w, _rows_axis(kern))
    if sources is None:
        return kernel_planes(kern, w)
    table = ctx.state.setdefault(PLANES_KEY, {})
    key = (sources, kern.planes_key)
    if key not in table:
        table[key] = _plane_globals(ctx, kern, sources, len(table))
    return [util.GlobalLoadOp(t, name).result for name, t in table[key]]


def _rows_axis(kern: gemv_kernels.Kernel) -> int:
    """The axis of the weight along which its rows (``N``) run, and packed weights are
    concatenated: 0 for a GGUF weight's ``[N, ROWBYTES]``, 1 for an f32 ``[K, N]``."""
    return 1 if kern.scheme == gemv_kernels.F32 else 0


def parameter_names(ctx: LoweringContext, w: ir.Value, axis: int = 0
                     ) -> tuple[str, ...] | None:
    """The weights ``w`` reads: one (an ``rlx_mir.param`` being lowered, whose global
    :func:`.table.declare_params` declared), or the rows of several
    concatenated (``rlx_mir.concat`` along axis 0 of such params: a model's packed
    projections, which the file holds apart); else None."""
    owner = w.owner
    if not isinstance(owner, ir.OpView):
        return None
    name = owner.operation.name
    if name == "rlx_mir.param":
        weight = ir.StringAttr(owner.attributes["name"]).value
        return (weight,) if weight in ctx.state.get("params", {}) else None
    if name == "rlx_mir.concat" and ir.IntegerAttr(owner.attributes["axis"]).value == axis:
        parts = [parameter_names(ctx, v, axis) for v in owner.operands]
        if all(p is not None and len(p) == 1 for p in parts):
            return tuple(p[0] for p in parts if p is not None)
    return None


def _plane_globals(ctx: LoweringContext, kern: gemv_kernels.Kernel,
                   sources: tuple[str, ...], index: int) -> list[tuple[str, ir.Type]]:
    """Globals ``@planes.<weight>.<index>.<i>`` and, at the end of the module, the
    initializer that computes them (once, at load) from the weights ``sources``
    (:func:`.table.load_param`), their rows concatenated where there are several."""
    body = ctx.module.body
    with ir.InsertionPoint(body):
        init = util.InitializerOp(ir.TypeAttr.get(ir.FunctionType.get([], [])))
        block = init.body.blocks.append()
    with ir.InsertionPoint(block):
        loads = [load_param(ctx, source) for source in sources]
        planes = kernel_planes(kern, loads[0] if len(loads) == 1 else
                               emit.concat(loads, _rows_axis(kern)))
        weight = sources[0]
        weight += f".cat{len(sources)}" if len(sources) > 1 else ""
        names = [f"planes.{weight}.{index}.{i}" for i in range(len(planes))]
        for plane, name in zip(planes, names, strict=True):
            util.GlobalStoreOp(plane, name)
        util.ReturnOp([])
    with ir.InsertionPoint(init):
        for plane, name in zip(planes, names, strict=True):
            util.GlobalOp(name, plane.type, sym_visibility="private")
    return [(name, plane.type) for plane, name in zip(planes, names, strict=True)]


def kernel_planes(kern: gemv_kernels.Kernel, w: ir.Value) -> list[ir.Value]:
    """The operands of a :mod:`.gemv_kernels` kernel, repacked from the raw bytes
    ``[N, ROWBYTES]`` (generics over the parameter only: hoisted into initializers)."""
    if kern.scheme in gemv_kernels.HALF_PLANE:         # the file's 16-bit values
        return interleave_tiles(kern, [half_weight(w, kern.scheme)])
    if kern.scheme == gemv_kernels.F32:
        return [f32_plane(w, kern.columns)]
    info = QUANT_SCHEMES[kern.scheme]
    n, g = kern.n, kern.k // info.block_elems
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    if kern.q6_k_packed:
        return _q6_k_planes(kern, raw3)
    if kern.q6_k_q8:
        return _q6_k_q8_planes(kern, raw3)
    if kern.scheme not in gemv_kernels.I8_PLANE and kern.int_dot is not None:
        return _q4_k_q8_planes(kern, raw3)
    if kern.scheme not in gemv_kernels.I8_PLANE:
        return _q4_k_planes(kern, raw3)
    q = emit.collapse(byte_quants(raw3, n, kern.scheme), [[0], [1, 2]])
    if kern.scheme in gemv_kernels.MIN_PLANE:          # d, m: the block's f16s at 0, 2
        return interleave_tiles(kern, [q, *(repack_field(raw3, n, f16_at(at), [32])
                                            for at in (0, 2))])
    scales = (repack_field(raw3, n, f16_at(0), [32]) if kern.scheme in
              gemv_kernels.BYTE_PLANE else
              emit.collapse(repack_field(raw3, n, _Q6_K_PRODUCTS, [16]), [[0], [1, 2]]))
    return interleave_tiles(kern, [q, scales])


def lane_fields(raw3: ir.Value, width: int, bits_out: int,
                field: Callable[[int], tuple[int, int, int]]) -> Callable[[Loops], ir.Value]:
    """A :func:`.dequant.repack` body over ``[N, G, 2, 16]`` (loops ``hc``, ``l``): an
    unsigned ``bits_out``-bit lane holding the ``width``-bit fields of the eight weights
    ``128hc + 16j + l`` of block ``(n, g)``, field ``j`` at bits ``width · j``. ``field(j)``
    = (the byte's offset past ``stride · hc + l``, ``stride``, the field's shift within the
    byte): where the block stores weight ``j``'s bits (Q4_K's nibbles, Q6_K's low nibbles
    and 2-bit highs)."""
    def body(idx: Loops) -> ir.Value:
        out = None
        for j in range(8):
            offset, stride, shift = field(j)
            byte = emit.d(2) * stride + emit.d(3) + offset
            v = arith.extui(int_type(bits_out),
                            bits(gather(raw3, byte, idx), i8(shift), (1 << width) - 1))
            part = arith.shli(v, arith.constant(v.type, width * j)) if j else v
            out = part if out is None else arith.ori(out, part)
        assert out is not None
        return out
    return body


def _q4_k_planes(kern: gemv_kernels.Kernel, raw3: ir.Value) -> list[ir.Value]:
    """Q4_K's nibble lanes and scale bytes (:func:`_k_scale_planes`) of ``raw3 [N, G,
    144]`` for the exact kernels; Q5_K's (``[N, G, 176]``: ``qs`` at byte 48, ``qh`` at 16;
    the same ``d``, ``dmin`` and scales) with its high-bit bytes between."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None
    five = kern.scheme == gemv_kernels.Q5_K
    qs = 48 if five else 16

    def nibble(j: int) -> tuple[int, int, int]:
        """Weight ``128hc + 16j + l`` is nibble ``(j % 4) / 2`` of qs byte ``32(2hc + j / 4)
        + 16(j % 2) + l`` (ggml: element 64p + 32h + l is nibble h of qs[32p + l])."""
        return qs + 32 * (j // 4) + 16 * (j % 2), 64, 4 * ((j % 4) // 2)

    q = emit.collapse(repack(raw3, n, [2, 16], int_type(32), lane_fields(raw3, 4, 32, nibble)),
                      [[0], [1, 2, 3]])
    scales = _k_scale_planes(raw3, n)
    if not five:
        return interleave_tiles(kern, [q, *scales])
    h = emit.collapse(repack(raw3, n, [2, 16], int_type(8), _q5_k_high_bits(raw3)),
                      [[0], [1, 2, 3]])
    return interleave_tiles(kern, [q, h, *scales])


def _k_scale_planes(raw3: ir.Value, n: int) -> list[ir.Value]:
    """Q4_K / Q5_K's scales as both modes' kernels read them: the 6-bit ``sc`` and ``m`` of
    each group of 32 as a byte ``[N, K / 32]`` and the f16 ``d``, ``dmin`` per superblock
    ``[N, K / 256]`` (0.078 bytes a weight; f32 ``S`` and ``M`` planes were 0.25)."""
    sc, mn = (emit.collapse(repack_field(raw3, n, k_scale(is_min), [4, 2, 32]),
                            [[0], [1, 2, 3]]) for is_min in (False, True))
    d, dmin = (repack_field(raw3, n, f16_at(at), [4, 2, 32]) for at in (0, 2))
    return [sc, mn, d, dmin]


def _q5_k_high_bits(raw3: ir.Value) -> Callable[[Loops], ir.Value]:
    """A :func:`.dequant.repack` body over ``[N, G, 2, 16]`` (loops ``hc``, ``l``): the byte
    whose bit ``j`` is the fifth bit of weight ``128hc + 16j + l`` (ggml: element ``64p + 32h
    + l`` has it at bit ``2p + h`` of ``qh[l]``, ``qh`` at byte 16 of the block; here ``p =
    2hc + j / 4``, ``h = (j % 4) / 2``, ``l`` of the 32 = ``16(j % 2) + l``)."""
    def body(idx: Loops) -> ir.Value:
        out = None
        for j in range(8):
            byte = gather(raw3, emit.d(3) + 16 + 16 * (j % 2), idx)
            shift = i8_at(emit.d(2) * 4 + (2 * (j // 4) + (j % 4) // 2), idx)
            bit = bits(byte, shift, 1)
            part = arith.shli(bit, i8(j)) if j else bit
            out = part if out is None else arith.ori(out, part)
        assert out is not None
        return out
    return body


def _q6_k_planes(kern: gemv_kernels.Kernel, raw3: ir.Value) -> list[ir.Value]:
    """Q6_K for the packed kernel (``Kernel.q6_k_packed``) from ``raw3 [N, G, 210]``, 210
    bytes a superblock as in the file: per chunk ``hc`` of 128 weights and lane ``l``, an
    i32 of the eight low nibbles of weights ``128hc + 16j + l`` (nibble ``j`` at bits ``4j``)
    and an i16 of their 2-bit highs (field ``j`` at bits ``2j``); the 16 signed scale bytes
    in group order; ``d`` (f16)."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None

    def low(j: int) -> tuple[int, int, int]:
        """ggml: element ``32p + l32`` of a 128-half is low nibble ``p / 2`` of
        ql[32(p % 2) + l32] and high pair ``p`` of qh[l32]."""
        p = j // 2                              # the 32-weight quarter of the half
        return 16 * (j % 2) + 32 * (p % 2), 64, 4 * (p // 2)

    def high(j: int) -> tuple[int, int, int]:
        return 128 + 16 * (j % 2), 32, 2 * (j // 2)

    ql = emit.collapse(repack(raw3, n, [2, 16], int_type(32), lane_fields(raw3, 4, 32, low)),
                       [[0], [1, 2, 3]])
    qh = emit.collapse(repack(raw3, n, [2, 16], int_type(16), lane_fields(raw3, 2, 16, high)),
                       [[0], [1, 2, 3]])
    sc = emit.collapse(repack(raw3, n, [16], int_type(8),
                              lambda idx: gather(raw3, emit.d(2) + 192, idx)), [[0], [1, 2]])
    d = repack_field(raw3, n, f16_at(208), [256])
    return interleave_tiles(kern, [ql, qh, sc, d])


def _q6_k_q8_planes(kern: gemv_kernels.Kernel, raw3: ir.Value) -> list[ir.Value]:
    """Q6_K for the ``q8`` kernel (:func:`.gemv_q8.q6_k_body`) from ``raw3 [N, G, 210]``:
    the file's ``ql`` ``[N, K / 2]``, ``qh`` ``[N, K / 4]`` and signed scale bytes ``[N, K /
    16]`` as they are, and ``d`` (f16) per superblock: 0.82 bytes a weight, the file's."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None
    ql, qh, sc = (emit.collapse(emit.extract_slice(raw3, [0, 0, at], [n, g, size]),
                                [[0], [1, 2]]) for at, size in ((0, 128), (128, 64), (192, 16)))
    d = repack_field(raw3, n, f16_at(208), [256])
    return interleave_tiles(kern, [ql, qh, sc, d])


def _q4_k_q8_planes(kern: gemv_kernels.Kernel, raw3: ir.Value) -> list[ir.Value]:
    """Q4_K for the ``q8`` kernel (:mod:`.gemv_q8`) from ``raw3 [N, G, 144]``: the ``qs``
    bytes as in the file ``[N, K / 2]``, the 6-bit ``sc`` and ``m`` as bytes per group
    ``[N, K / 32]``, the f16 ``d`` and ``dmin`` per 256 ``[N, K / 256]`` (0.58 bytes a
    weight; the file's 0.5625). Q5_K (``[N, G, 176]``, the same header, ``qh`` at byte 16,
    ``qs`` at 48): its ``qh`` bytes as in the file ``[N, K / 8]`` after ``qs`` (0.70 bytes
    a weight; the file's 0.6875)."""
    n, g, _ = emit.static_shape(raw3)
    assert n is not None
    assert g is not None
    five = kern.scheme == gemv_kernels.Q5_K
    qs, *qh = (emit.collapse(emit.extract_slice(raw3, [0, 0, at], [n, g, size]), [[0], [1, 2]])
               for at, size in (((48, 128), (16, 32)) if five else ((16, 128),)))
    return interleave_tiles(kern, [qs, *qh, *_k_scale_planes(raw3, n)])


BYTE_QUANTS: dict[str, Callable[[Scalars], ir.Value]] = {
    "gguf_q4_0": lambda s: arith.subi(s["q"], i8(8)),
    "gguf_q5_0": lambda s: arith.trunci(int_type(8), arith.subi(q5(s), i32(16))),
    "gguf_q4_1": lambda s: s["q"],
    "gguf_q5_1": lambda s: arith.trunci(int_type(8), q5(s)),
    "gguf_q6_k": lambda s: arith.trunci(int_type(8), arith.subi(
        arith.ori(u32(s["q"]), arith.shli(u32(s["h"]), i32(4))), i32(32))),
}
"""The integer ``q`` of ``w = d · q`` (an i8) from the plane values of
:data:`~.layouts.LAYOUTS`, for the schemes the Q8_0 kernel (or its per-16 variant) runs
widened; of ``w = d · q + m`` for Q5_1 / Q4_1 (unsigned, ``0..31``: read by ``uitofp``)."""


def _q6_k_product_body(b: list[ir.Value], i: Exprs, e: Callable[[Expr], ir.Value]
                       ) -> ir.Value:
    return mulf(f32_of(f16_at(208).body(b[:2], i, e)), sf(b[2]))


_Q6_K_PRODUCTS = Field("f32", lambda i: [const(208), const(209), const(192) + i[0]],
                       _q6_k_product_body, dims=(0,))
"""Q6_K's ``d · sc`` per 16 weights in element order (sc: the signed byte ``192 + j`` of
the block, d: the f16 at 208), in f32: exact (11 x 8 significant bits)."""


def byte_quants(raw3: ir.Value, n: int, scheme: str) -> ir.Value:
    """``[N, G, E]`` i8 (``E`` weights a block): the integer ``q`` of ``w = d · q`` for a
    :data:`~.gemv_kernels.BYTE_PLANE` or ``SIXTEEN_PLANE`` scheme: Q8_0's bytes, or
    :data:`BYTE_QUANTS` over the scheme's :data:`~.layouts.LAYOUTS` planes in element order
    (a generic on the parameter only, hoisted; its shifts computed, llvm-cpu only)."""
    if scheme == "gguf_q8_0":
        return repack_plane(raw3, n, LAYOUTS["gguf_q8_0"].planes["q"], [32])
    layout = LAYOUTS[scheme]
    pos = list(range(len(layout.group)))
    inputs, maps, space = layout_operands(raw3, n, layout, pos, fields=False)
    value = with_shifts(layout, pos, inputs, maps, computed=True, value=BYTE_QUANTS[scheme])
    q = dequantize(inputs, maps, space, value, element=int_type(8))
    return emit.collapse(q, [[0], [1], list(range(2, len(space)))])


def f32_plane(w: ir.Value, columns: int) -> ir.Value:
    """An f32 weight ``W [K, N]`` as its column blocks of ``B = columns``: ``[N / B, K B]``
    with ``[c, B k + j] = W[k, B c + j]`` (:func:`.gemm_prefill.f32_body` reads a block's
    ``B`` outputs at each ``k`` as one run)."""
    k, n = emit.static_shape(w)
    assert k is not None
    assert n is not None
    split = emit.reshape(w, [k, n // columns, columns])
    return emit.reshape(emit.transpose(split, [1, 0, 2]), [n // columns, k * columns])


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


__all__ = ["BYTE_QUANTS", "PLANES_KEY", "byte_quants", "f32_plane", "interleave_tiles",
           "kernel_planes", "parameter_names", "shared_planes"]
