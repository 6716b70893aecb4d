"""The dequant building blocks: the generics that repack a GGUF weight's raw bytes into
per-field arrays and the all-parallel generic that dequantizes them (see the package
docstring for the three steps), per target's loop order; F16 / BF16 as bit views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, flow, tensor

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant.layouts import (
    CPU_LAYOUTS,
    LAYOUTS,
    Field,
    GgufLayout,
    Plane,
)
from rlx.lowering.mir_to_linalg.quant.scalars import (
    Expr,
    Exprs,
    Loops,
    Scalars,
    bits,
    const,
    i8_at,
    i32,
    index_at,
    int_type,
    row_major,
    u32,
)

PAD_ROWS, PAD_MIN_ROWS = 32, 128


def padded_rows(n: int) -> int:
    """Rows the block formats are computed with: ``N`` rounded up to a multiple of 32, at
    least 128. IREE 3.13's SPIR-V matvec pipeline crashes (or overflows lavapipe's 32 KiB
    of shared memory) for M = 1 on other row counts once the dequant has a loop that picks
    bits (measured: N = 16, 64, 120, 130, 136, 200 fail; multiples of 32 from 96 up pass);
    the extra rows are zeros, their results are sliced off."""
    return max(PAD_MIN_ROWS, -(-n // PAD_ROWS) * PAD_ROWS)


def gather(raw3: ir.Value, byte: Expr, loops: Loops) -> ir.Value:
    """The byte at offset ``byte`` of block ``(n, g)`` (loops 0 and 1)."""
    return tensor.extract(raw3, [loops[0], loops[1], index_at(byte, loops)])


def build(n: emit.Size, g: int, rows: emit.Size, shape: Sequence[int], element: ir.Type,
          body: Callable[[Loops], ir.Value]) -> ir.Value:
    """A generic over ``[n, g, *shape]`` whose body reads the weight bytes it needs with
    ``tensor.extract`` (byte offsets are affine in the loop indices but not projections; as
    indexing maps IREE 3.13 mistakes some of them for convolutions and crashes), padded
    with zero rows to ``rows`` (static ``n`` only; a dynamic ``n`` is never padded)."""
    rank = 2 + len(shape)
    init = emit.empty([n, g, *shape], element)
    out = emit.generic([], [init], [emit.identity(rank)], [emit.PARALLEL] * rank,
                       lambda _: body([emit.loop_index(i) for i in range(rank)]))[0]
    if rows == n or not isinstance(n, int) or not isinstance(rows, int):
        return out
    return emit.insert_slice(out, emit.filled([rows, g, *shape], element, 0), [0] * rank)


def repack(raw3: ir.Value, rows: emit.Size, shape: Sequence[int], element: ir.Type,
           body: Callable[[Loops], ir.Value]) -> ir.Value:
    """:func:`build` over the blocks of ``raw3 [N, G, BLOCKBYTES]`` (``N`` may be dynamic)."""
    g = emit.static_shape(raw3)[1]
    assert g is not None
    return build(emit.dim(raw3, 0), g, rows, shape, element, body)


def repack_plane(raw3: ir.Value, rows: emit.Size, plane: Plane, group: Sequence[int]
                 ) -> ir.Value:
    """``[rows, G, *sizes]``: a copy of the plane's bytes."""
    sizes = [group[i] for i in plane.dims]
    loops = [emit.d(2 + i) for i in range(len(sizes))]
    return repack(raw3, rows, sizes, int_type(8), lambda idx: gather(
        raw3, const(plane.offset) + row_major(loops, sizes), idx))


def repack_field(raw3: ir.Value, rows: emit.Size, f: Field, group: Sequence[int],
                 pos: Sequence[int] | None = None) -> ir.Value:
    """``[rows, G, *sizes]`` of ``f.dtype`` over the field's group dims, stored in loop
    order (``pos[i]``: the dequant loop of group dim i; default K order) so that the
    dequant reads it through a monotonic map."""
    order = sorted(f.dims, key=lambda i: (pos or list(range(len(group))))[i])
    sizes = [group[i] for i in order]

    def body(idx: Loops) -> ir.Value:
        k_order = [emit.d(2 + order.index(i)) for i in f.dims]
        reads = f.reads(k_order)
        return f.body([gather(raw3, r, idx) for r in reads], k_order,
                      lambda e: i8_at(e, idx))

    return repack(raw3, rows, sizes, ir.Type.parse(f.dtype), body)


def dequantize(inputs: dict[str, ir.Value], maps: dict[str, ir.AffineMap],
               space: Sequence[emit.Size], weight: Callable[[Scalars], ir.Value],
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
        idx = [const(0)] * len(group)
        rest = flat
        for i, size in zip(reversed(dims), reversed(sizes), strict=True):
            idx[i] = const(rest % size)
            rest //= size
        values.append(ir.AffineConstantExpr(shift(idx)).value)
    t = ir.RankedTensorType.get(sizes, int_type(8))
    attr = ir.DenseElementsAttr.get(np.array(values, np.int8).reshape(sizes), type=t)
    return arith.constant(t, attr)


def loop_order(layout: GgufLayout, target: str) -> list[int]:
    """The dequant's group loops. llvm-cpu and CUDA: ggml's element order (the innermost
    loop walks contiguous bytes; that vectorizes, and on CUDA the reduction's threads read
    contiguous bytes). Vulkan and ROCm: first the dims that address plane bytes, then those
    that only pick bits within a byte: IREE 3.13's SPIR-V reduction computes wrong sums at
    M = 1 when a byte plane is broadcast along a loop with byte-addressing loops inside it
    (measured on lavapipe: every packed scheme off by a factor), while that order makes the
    innermost loop 2 to 4 long (llvm-cpu: Q4_K 8x slower; an H200, CUDA: an 11008 x 4096
    Q4_K GEMV 1.89 ms against 0.115 ms in ggml's order, Q4_K / Q5_K / Q6_K / Q4_0 all
    within tolerance in both orders, 2026-12-04). ROCm keeps the Vulkan form: not run on
    an AMD GPU yet."""
    if target in ("llvm-cpu", "cuda"):
        return list(range(len(layout.group)))
    used = sorted({i for p in layout.planes.values() for i in p.dims})
    return used + [i for i in range(len(layout.group)) if i not in used]


def with_shifts(layout: GgufLayout, pos: Sequence[int], inputs: dict[str, ir.Value],
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
            values.update({name: i8_at(table(group), loops) for name, table in tables.items()})
        for name, (mask, shift) in planes.items():
            by = i8_at(shift(group), loops) if computed else s[f"{name}.shift"]
            values[name] = bits(s[name], by, mask)
        return (value or layout.weight)(values)

    return weight


def gguf_weight(w: ir.Value, scheme: str, target: str, k_major: bool = False,
                pad: bool = True) -> tuple[ir.Value, list[int]]:
    """Raw bytes ``[N, ROWBYTES]`` -> dequantized f32 ``[N', G, *group in loop order]`` and
    the loop order of the group dims (see :func:`loop_order`); F16 / BF16: ``[N, K]``
    (f16 / bf16 bits). ``k_major``: f32 ``[G, *group, N']`` / ``[K, N]`` instead. ``N'``:
    :func:`padded_rows` where ``pad`` (a matmul's weight), else ``N``, which may then be
    dynamic (rows gathered from a weight, the ``dequant`` op)."""
    if scheme in ("gguf_f16", "gguf_bf16"):
        half = half_weight(w, scheme)
        if not k_major:
            return half, []
        n, k = emit.static_shape(half)
        assert n is not None
        assert k is not None
        return dequantize({"w": half}, {"w": emit.identity(2)}, [n, k],
                          lambda s: to_f32(s["w"]), k_major=True), []
    layout = (CPU_LAYOUTS if target == "llvm-cpu" else {}).get(scheme) or LAYOUTS[scheme]
    info = QUANT_SCHEMES[scheme]
    n, row = emit.dim(w, 0), emit.static_shape(w)[1]
    assert row is not None
    g = row // info.block_bytes
    raw3 = emit.expand(w, [[0], [1, 2]], [n, g, info.block_bytes])
    order = loop_order(layout, target)
    pos = [order.index(i) for i in range(len(order))]
    rows = padded_rows(n) if pad and isinstance(n, int) else n
    inputs, maps, space = layout_operands(raw3, rows, layout, pos)
    weight = with_shifts(layout, pos, inputs, maps, computed=k_major)
    return dequantize(inputs, maps, space, weight, k_major), order


def layout_operands(raw3: ir.Value, rows: emit.Size, layout: GgufLayout, pos: Sequence[int],
                    fields: bool = True
                    ) -> tuple[dict[str, ir.Value], dict[str, ir.AffineMap], list[emit.Size]]:
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
    row = emit.static_shape(w)[1]
    assert row is not None
    element = ir.F16Type.get() if scheme == "gguf_f16" else int_type(16)
    return bitcast(w, [emit.dim(w, 0), row // 2], element)


def bf16_to_f32(b: ir.Value) -> ir.Value:
    """BF16 bits (i16) -> f32: the bits are the top half of the f32 (exact). Done in integer
    ops because IREE 3.13's SPIR-V backend cannot legalize bf16 vector bitcasts."""
    return arith.bitcast(emit.f32(), arith.shli(u32(b), i32(16)))


def to_f32(v: ir.Value) -> ir.Value:
    """An f16 / bf16-bits (i16) / f32 scalar as f32."""
    return bf16_to_f32(v) if isinstance(v.type, ir.IntegerType) else emit.to_f32(v)


def bitcast(v: ir.Value, shape: Sequence[emit.Size], element: ir.Type) -> ir.Value:
    """``flow.tensor.bitcast``: the same bytes as another element type, ``v``'s dynamic dims
    the result's (the same dims, one of the last's size changed)."""
    dyn = [s for s in shape if not isinstance(s, int)]
    return flow.TensorBitCastOp(emit.tensor_type(shape, element), v, dyn, dyn).result


__all__ = ["PAD_MIN_ROWS", "PAD_ROWS", "bf16_to_f32", "bitcast", "build", "dequantize", "gather",
           "gguf_weight", "half_weight", "layout_operands", "loop_order", "padded_rows", "repack",
           "repack_field", "repack_plane", "shift_table", "to_f32", "with_shifts"]
