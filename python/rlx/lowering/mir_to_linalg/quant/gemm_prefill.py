"""The prefill form of the GEMV kernels as an outer-product GEMM (``y [M, N] = x [M, K] W^T``,
``M`` known at run time), where the workgroup's rows are a multiple of 16 (:func:`outer_form`);
else :mod:`.gemv_batched`'s dot form. 16 lanes where the target has AVX-512, 8 (AVX2) else.
(Under ``activation_quant="q8"`` with VNNI the integer form of :mod:`.gemm_q8` takes its
place.)

The dot form multiplies 16 weights of a row with 16 of ``x`` and sums the lanes at the end:
each ``x`` load feeds as many FMAs as the pass has rows of ``W`` (8), and the partial sums
go through memory every 256 weights. Here, as IREE's mmt4d ukernel does, the lanes run
along ``N``: per column block of 16 rows of ``W`` (4 row tiles) and chunk of ``C`` weights,
each tile's chunk is dequantized into ``wt [4, C]`` by the dot form's own chunk code (every
scheme the prefill takes), and transposed, 4 x 16 at a time, into ``wtT [C, 16]`` (``wtT[k,
c]`` = weight ``(4 tq + i, C ch + k)`` with ``c = 4 tq + i``). Then every pass of
``P`` rows of ``x`` (:func:`pass_rows`) keeps its accumulators for the whole chunk: with 16
lanes ``P`` = :data:`ROWS` = 16 accumulators (16 of AVX-512's 32 registers), per ``k`` one
load of ``wtT[k]`` and 16 FMAs with ``x[v, k]`` broadcast (an embedded broadcast from L1: a
pass reads ``P x C`` floats of ``x``); with 8 lanes ``P`` = :data:`NARROW_ROWS` = 6 rows of
two 8-lane halves (12 of AVX2's 16 registers), per ``k`` two loads and 12 FMAs. The pass's
partial sums start from ``y`` (from ``r``, the residual form, or zero at the first chunk)
and are stored back to ``y`` after each chunk: no horizontal sums and no stack buffer of
partial sums. The weights are dequantized once per (column block, chunk)
for all of ``M``.

Measured on AVX2 (Zen 3, 2 threads, ``benchmarks/quant.py --shapes 2048x2048``, ms per
GEMV, dot form -> 8-lane outer form): Q4_K at M = 128 9.6 -> 7.1, Q8_0 9.0 -> 6.7 (PyTorch's
f32 matmul 6.4); ``P`` = 4, 5 and 6 within the noise of each other (6.4-7.5 ms).

Semantics are the dequant_matmul's, summed in another order (per output, ``k`` in order
within a chunk, chunks in order): within the f32 tolerance, as the other kernels.

**Bounds** (the shapes :class:`.gemv_kernels.Kernel` checks; here also ``rows % 16 = 0``,
so ``N % 16 = 0``; ``C = 32 cb`` as in :mod:`.gemv_batched`, 256 for Q4_K / Q6_K):

- column block ``cbk < rows / 16``: tiles ``tilef + tq = wg · rows / 4 + 4 cbk + tq < N / 4``
  (``tq < 4``, ``wg < N / rows``), columns ``r0 + [0, 16)`` with ``r0 = 4 tilef``, so ``r0
  + 15 = 4 (wg · rows / 4 + 4 cbk + 3) + 3 < N``;
- the chunk code reads the planes as in :mod:`.gemv_batched` (tile ``tilef + tq``) and
  writes ``wt [4, C]`` at ``[i, [0, C))``; the transpose reads ``wt[i, 16 g + [0, 16)]``,
  ``g < C / 16``, and writes ``wtT [C, 16]`` at ``[16 g + kk, 4 tq + [0, 4))``, ``kk < 16``;
- rows of ``x``: a pass ``p < ceil(M / P)`` takes rows ``min(P p + j, M - 1) < M``
  (``M >= 1``: a dispatch with ``M = 0`` runs no pass); where ``P`` does not divide
  ``M`` the last pass computes row ``M - 1`` more than once, each from the same loaded
  partial sums, and stores the same values;
- ``x`` packed (:func:`pack_rows`) ``[T, K, P]`` at ``[p, C ch + k, j]``, ``p <
  ceil(M / P) = T`` (``T`` the dispatch's, computed by the same formula from the same
  ``M`` and the same ``P``, :func:`pass_rows` of the one kernel), ``k < C``, ``ch < K /
  C``, ``j < P``; ``y``, ``r [M, N]`` at ``[v, r0 + [0, 16)]`` (16 lanes) or ``[v, r0 + 8 q
  + [0, 8)]``, ``q < 2`` (8 lanes); ``wtT`` at ``[k, 8 q + [0, 8)]``, ``k < C``.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, tensor

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import V16, Text, memref
from rlx.lowering.mir_to_linalg.quant.gemv_batched import (
    DYNAMIC_M,
    Shape,
    aligned_alloca,
    chunk_blocks,
    chunk_constants,
    dequant_tile_chunk,
)
from rlx.lowering.mir_to_linalg.quant.gemv_text import ROWS_PER_TILE, at

COLUMNS = 16
"""Rows of ``W`` a column block holds: the outputs of one 16-lane vector, or two of 8."""
ROWS = 16
"""Rows of ``x`` a pass multiplies with 16 lanes: 16 accumulators (IREE's mmt4d ukernel's 16 x
16 tile)."""
NARROW_ROWS = 6
"""Rows of ``x`` a pass multiplies with 8 lanes: 6 x 2 accumulators, two ``wtT`` loads and
six broadcasts to twelve FMAs (12 + 2 + 1 of AVX2's 16 registers: BLIS's Haswell 6 x 16
sgemm tile)."""


def pass_rows(kern: Shape) -> int:
    """Rows of ``x`` a pass of ``kern`` (the outer form) multiplies: :data:`ROWS` or
    :data:`NARROW_ROWS` by its lanes."""
    return ROWS if kern.lanes == 16 else NARROW_ROWS


def outer_form(kern: Shape) -> bool:
    """Whether ``kern`` (a prefill kernel) runs this body: rows a multiple of 16."""
    return kern.batch == DYNAMIC_M and kern.rows % COLUMNS == 0


def pack_rows(x: ir.Value, rows: int) -> tuple[ir.Value, emit.Size]:
    """``x [M, K]`` f32 as ``xp [T, K, rows]`` (``T = ceil(M / rows)``), ``xp[p, k, j] =
    x[min(rows p + j, M - 1), k]``: the rows of a pass side by side at each ``k`` (one base
    address for a pass's broadcasts, as IREE packs an mmt4d's LHS), the last pass's missing
    rows copies of row ``M - 1`` (the kernel computes and stores them as that row's value);
    and ``T``."""
    m, k = emit.dim(x, 0), emit.static_shape(x)[1]
    assert k is not None
    tiles = pass_count(m, rows)
    last = emit.index(m - 1) if isinstance(m, int) else arith.subi(m, emit.index(1))
    out = emit.empty([tiles, k, rows], emit.f32())

    def body(_: ir.Value) -> ir.Value:
        row = arith.addi(arith.muli(emit.loop_index(0), emit.index(rows)), emit.loop_index(2))
        return tensor.extract(x, [arith.minui(row, last), emit.loop_index(1)])

    packed = emit.generic([], [out], [emit.identity(3)], [emit.PARALLEL] * 3, body)[0]
    return packed, tiles


def pass_count(m: emit.Size, rows: int) -> emit.Size:
    """``T = ceil(M / rows)``: the passes of ``rows`` rows of ``x`` over ``M`` (the packed
    ``x``'s first dim, a kernel operand next to ``M``; the kernels run ``ceildivui(M, rows)``
    passes of it, the same formula)."""
    return -(-m // rows) if isinstance(m, int) else arith.ceildivui(m, emit.index(rows))


def open_column_blocks(t: Text, kern: Shape, chunk_offset: bool) -> None:
    """``%c_last``, ``%c_passes`` (``%c_rows`` a pass), then open the loops over the chunks
    ``%ch`` (``%first``; ``%kc``, its first weight, where ``chunk_offset``) and, inside, the
    workgroup's column blocks ``%cbk`` (tiles from ``%tilec``, columns from ``%r0``): chunks
    outside the column blocks, so that a chunk of ``x`` stays in L2 while every column
    block of the workgroup multiplies it."""
    t("%c_last = arith.subi %m_rows, %c1 : index")
    t("%c_passes = arith.ceildivui %m_rows, %c_rows : index")
    t(f"%tile0 = {at('%wg', kern.rows // ROWS_PER_TILE, 0)}")
    t.block("scf.for %ch = %c0 to %c_chunks step %c1")
    t("%first = arith.cmpi eq, %ch, %c0 : index")
    if chunk_offset:
        t("%kc = arith.muli %ch, %c_wc : index")
    t.block("scf.for %cbk = %c0 to %c_cols step %c1")
    t(f"%tilef = {at('%cbk', 4, 0)}")
    t("%tilec = arith.addi %tile0, %tilef : index")
    t("%r0 = arith.muli %tilec, %c4 : index")


def open_passes(t: Text, kern: Shape, rows: int, lanes: int) -> tuple[list[str], list[str]]:
    """Open the loop over the passes ``%pv`` of ``rows`` rows of ``x`` (rows ``%v{j} =
    min(rows pv + j, M - 1)``); per row ``j`` and vector ``q`` of the column block's 16
    columns (``lanes`` each) its accumulator's start, ``y``'s value (``r``'s, or zero, at the
    first chunk). Returns the ``iter_args`` (``%ma{j}_{q} = ...``) and the columns' first
    indices."""
    vl, y = f"vector<{lanes}xf32>", kern.bindings["y"]
    parts = COLUMNS // lanes
    t(f"%zl = arith.constant dense<0.0> : {vl}")
    for q in range(1, parts):
        t(f"%cq{q} = arith.constant {lanes * q} : index")
    t.block("scf.for %pv = %c0 to %c_passes step %c1")
    for q in range(1, parts):
        t(f"%rq{q} = arith.addi %r0, %cq{q} : index")
    col = ["%r0"] + [f"%rq{q}" for q in range(1, parts)]
    accs = []
    for j in range(rows):
        t(f"%vu{j} = {at('%pv', rows, j)}")
        t(f"%v{j} = arith.minui %vu{j}, %c_last : index")
        for q in range(parts):
            t(f"%old{j}_{q} = vector.load %y[%v{j}, {col[q]}] : {y}, {vl}")
            start = "%zl"
            if kern.residual:
                t(f"%res{j}_{q} = vector.load %r[%v{j}, {col[q]}] : "
                  f"{kern.bindings['r']}, {vl}")
                start = f"%res{j}_{q}"
            t(f"%a0_{j}_{q} = arith.select %first, {start}, %old{j}_{q} : {vl}")
            accs.append(f"%ma{j}_{q} = %a0_{j}_{q}")
    return accs, col


def close_passes(t: Text, kern: Shape, rows: int, lanes: int, col: list[str]) -> None:
    """Store the pass's accumulators (``%mm``, in :func:`open_passes`' order) into ``y``
    and close the loop over the passes."""
    vl, y, parts = f"vector<{lanes}xf32>", kern.bindings["y"], COLUMNS // lanes
    for j in range(rows):
        for q in range(parts):
            t(f"vector.store %mm#{j * parts + q}, %y[%v{j}, {col[q]}] : {y}, {vl}")
    t.end()


def outer_body(t: Text, kern: Shape, form: str) -> None:
    """The body for ``kern`` (:func:`outer_form`; ``form`` as :func:`.gemv_batched.batched_body`'s);
    see the module docstring."""
    cb = chunk_blocks(form, kern.k)
    wc = 32 * cb
    wt = memref([ROWS_PER_TILE, wc], "f32")
    wtt = memref([wc, COLUMNS], "f32")
    x = kern.bindings["x"]
    for name, value in (("c2", 2), ("c4", 4), ("c16", 16), ("c32", 32), ("c_rows", pass_rows(kern)),
                        ("c_chunks", kern.k // wc), ("c_blocks", cb), ("c_wc", wc),
                        ("c_groups", wc // 16), ("c_cols", kern.rows // COLUMNS)):
        t(f"%{name} = arith.constant {value} : index")
    for j in range(pass_rows(kern)):
        t(f"%jc{j} = arith.constant {j} : index")
    t("%zero4 = arith.constant dense<0.0> : vector<4x16xf32>")
    chunk_constants(t, kern, form)
    t(f"%wt = {aligned_alloca(wt)}")
    t(f"%wtt = {aligned_alloca(wtt)}")
    open_column_blocks(t, kern, chunk_offset=True)
    t.block("scf.for %tq = %c0 to %c4 step %c1")
    t("%tile = arith.addi %tilec, %tq : index")
    for i in range(ROWS_PER_TILE):
        t(f"%wr{i} = arith.constant {i} : index")
    dequant_tile_chunk(t, kern, wt, form)
    _transpose(t, wt, wtt)
    t.end()
    _passes(t, kern, wtt, x)
    t.end()
    t.end()


def _transpose(t: Text, wt: str, wtt: str) -> None:
    """``wtT[16 g + kk, 4 tq + i] = wt[i, 16 g + kk]``: a 4 x 16 transpose a group."""
    t("%col = arith.muli %tq, %c4 : index")
    t.block("scf.for %g = %c0 to %c_groups step %c1")
    t("%kg = arith.muli %g, %c16 : index")
    mat = "%zero4"
    for i in range(ROWS_PER_TILE):
        t(f"%tr{i} = vector.load %wt[%wr{i}, %kg] : {wt}, {V16}")
        t(f"%tm{i} = vector.insert %tr{i}, {mat} [{i}] : {V16} into vector<4x16xf32>")
        mat = f"%tm{i}"
    t(f"%tt = vector.transpose {mat}, [1, 0] : vector<4x16xf32> to vector<16x4xf32>")
    for kk in range(16):
        t(f"%te{kk} = vector.extract %tt[{kk}] : vector<4xf32> from vector<16x4xf32>")
        t(f"%tk{kk} = affine.apply affine_map<()[s0] -> (s0 + {kk})>()[%kg]")
        t(f"vector.store %te{kk}, %wtt[%tk{kk}, %col] : {wtt}, vector<4xf32>")
    t.end()


def _passes(t: Text, kern: Shape, wtt: str, x: str) -> None:
    """Every pass of :func:`pass_rows` rows of ``x``: ``y[v, r0 ..] (+)= Σ_k wtT[k] x[v, kc +
    k]`` (from ``r`` or zero at the first chunk), each row's 16 columns in ``16 / L`` vectors
    of ``L`` lanes."""
    rows, lanes = pass_rows(kern), kern.lanes
    vl = f"vector<{lanes}xf32>"
    parts = COLUMNS // lanes
    accs, col = open_passes(t, kern, rows, lanes)
    count = rows * parts
    types = ", ".join([vl] * count)
    t.block(f"%mm:{count} = scf.for %k = %c0 to %c_wc step %c1 "
            f"iter_args({', '.join(accs)}) -> ({types})")
    for q in range(parts):
        t(f"%wcol{q} = vector.load %wtt[%k, {'%c0' if q == 0 else f'%cq{q}'}] : {wtt}, {vl}")
    t("%kx = arith.addi %kc, %k : index")
    new = []
    for j in range(rows):
        t(f"%xs{j} = memref.load %x[%pv, %kx, %jc{j}] : {x}")
        t(f"%xb{j} = vector.broadcast %xs{j} : f32 to {vl}")
        for q in range(parts):
            t(f"%mn{j}_{q} = vector.fma %wcol{q}, %xb{j}, %ma{j}_{q} : {vl}")
            new.append(f"%mn{j}_{q}")
    t(f"scf.yield {', '.join(new)} : {types}")
    t.end()
    close_passes(t, kern, rows, lanes, col)


__all__ = ["COLUMNS", "NARROW_ROWS", "ROWS", "close_passes", "open_column_blocks", "open_passes",
           "outer_body", "outer_form", "pack_rows", "pass_count", "pass_rows"]
