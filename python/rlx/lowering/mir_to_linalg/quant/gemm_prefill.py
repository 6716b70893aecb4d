"""The prefill form of the GEMV kernels as an outer-product GEMM (``y [M, N] = x [M, K] W^T``,
``M`` known at run time), where the workgroup's rows are a multiple of 16 (:func:`outer_form`);
else :mod:`.gemv_batched`'s dot form. 16 lanes where the target has AVX-512, 8 (AVX2) else.
(Under ``activation_quant="q8"`` with VNNI the integer form of :mod:`.gemm_q8` takes its
place.)

The dot form multiplies 16 weights of a row with 16 of ``x`` and sums the lanes at the end:
each ``x`` load feeds as many FMAs as the pass has rows of ``W`` (8), and the partial sums
go through memory every 256 weights. Here, as IREE's mmt4d ukernel does, the lanes run along
``N``: per column block of ``B`` rows of ``W`` (``B / 4`` row tiles; ``B`` = 16, or
:data:`WIDE_COLUMNS` = 32 on 16 lanes where ``Kernel.columns`` says so) and chunk of ``C``
weights, taken in ``S`` spans of ``C / S`` (:func:`spans`: 1, or 2 for a superblock in
blocks of 32), each tile's span is dequantized into ``wt [4, C / S]`` by the dot form's own
chunk code (every scheme the prefill takes; a Q4_K / Q6_K half superblock where ``S = 2``),
and transposed, 4 x 16 at a time, into ``wtT [C / S, B]`` (``wtT[k, c]`` = weight ``(4 tq +
i, C ch + C s / S + k)`` with ``c = 4 tq + i``). Then every pass of ``P`` rows of ``x``
(:func:`pass_rows`) keeps its accumulators for the whole span: with 16 lanes and ``B = 16``,
``P`` = :data:`ROWS` = 16 accumulators (16 of AVX-512's 32 registers), per ``k`` one load of
``wtT[k]`` and 16 FMAs with ``x[v, k]`` broadcast (an embedded broadcast from L1: a pass
reads ``P x C`` floats of ``x``); with ``B = 32``, ``P`` = :data:`WIDE_ROWS` = 8 rows of two
vectors (16 accumulators), per ``k`` two loads of ``wtT[k]``, 8 broadcasts and 16 FMAs, 10
loads where the narrow tile had 17 (on the Intel Xeon, 9-19% less time for a GEMM of 128
rows: benchmarks/README.md, "A wider prefill tile on the Intel Xeon"); with 8 lanes ``P`` =
:data:`NARROW_ROWS` = 6 rows of two 8-lane halves (12 of AVX2's 16 registers), per ``k`` two
loads and 12 FMAs. The pass's partial sums start from ``y`` (from ``r``, the residual form,
or zero at the first span of the first chunk) and are stored back to ``y`` after each span:
no horizontal sums and no stack buffer of partial sums. The weights are dequantized once per
(column block, chunk, span) for all of ``M``.

Measured on AVX2 (Zen 3, 2 threads, ``benchmarks/quant.py --shapes 2048x2048``, ms per
GEMV, dot form -> 8-lane outer form): Q4_K at M = 128 9.6 -> 7.1, Q8_0 9.0 -> 6.7 (PyTorch's
f32 matmul 6.4); ``P`` = 4, 5 and 6 within the noise of each other (6.4-7.5 ms).

Semantics are the dequant_matmul's, summed in another order (per output, ``k`` in order
within a span, spans and chunks in order): within the f32 tolerance, as the other kernels.

**Bounds** (the shapes :class:`.gemv_kernels.Kernel` checks; here also ``rows % B = 0``,
so ``N % B = 0``; ``C = 32 cb`` as in :mod:`.gemv_batched`, 256 for Q4_K / Q6_K, and ``C B
<= 2`` :data:`WTT_FLOATS`, so ``S = C B / WTT_FLOATS`` or 1 divides ``C`` and ``C / S`` is a
multiple of 16 (``cb <= WTT_FLOATS / 32 B`` for the forms whose ``cb`` is free:
:func:`outer_chunk_blocks`; a superblock: 256 B <= 8192)):

- column block ``cbk < rows / B``: tiles ``tilef + tq = wg · rows / 4 + (B / 4) cbk + tq <
  N / 4`` (``tq < B / 4``, ``wg < N / rows``), columns ``r0 + [0, B)`` with ``r0 = 4
  tilef``, so ``r0 + B - 1 = 4 (wg · rows / 4 + (B / 4) cbk + B / 4 - 1) + 3 < N``;
- the chunk code reads the planes as in :mod:`.gemv_batched` (tile ``tilef + tq``; with
  ``S = 2`` the run or unit ``2 ch + s`` of a superblock, ``s < 2``, as the whole chunk
  reads runs ``2 ch + [0, 2)``) and writes ``wt [4, C / S]`` at ``[i, [0, C / S))``; the
  transpose reads ``wt[i, 16 g + [0, 16)]``, ``g < C / 16 S``, and writes ``wtT [C / S,
  B]`` at ``[16 g + kk, 4 tq + [0, 4))``, ``kk < 16``, ``4 tq + 3 < B``;
- rows of ``x``: a pass ``p < ceil(M / P)`` reads the partial sums of rows ``v = min(P p
  + j, M - 1) < M`` (``M >= 1``: a dispatch with ``M = 0`` runs no pass) and stores row
  ``j`` only where ``P p + j < M`` (``j = 0`` always: ``P p <= M - 1``); where ``P`` does
  not divide ``M`` the last pass's rows past ``M`` multiply the packed ``x``'s zero
  padding and are dropped (:func:`close_passes`; the q8 form's packing repeats row ``M -
  1`` there, whose values the stored row already has);
- ``x`` packed (:func:`pack_rows`) ``[T, K, P]`` at ``[p, C ch + ks + k, j]``, ``p <
  ceil(M / P) = T`` (``T`` the dispatch's, computed by the same formula from the same
  ``M`` and the same ``P``, :func:`pass_rows` of the one kernel), ``ks + k < C``, ``ch <
  K / C``, ``j < P``; ``y``, ``r [M, N]`` at ``[v, r0 + L q + [0, L))``, ``q < B / L``
  (``L`` lanes), so below ``r0 + B``; ``wtT`` at ``[k, L q + [0, L)]``, ``k < C / S``.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import V16, Text, memref
from rlx.lowering.mir_to_linalg.quant.gemv_batched import (
    DYNAMIC_M,
    Shape,
    aligned_alloca,
    chunk_blocks,
    chunk_constants,
    dequant_tile_chunk,
    hint_chunks,
)
from rlx.lowering.mir_to_linalg.quant.gemv_text import ROWS_PER_TILE, at

COLUMNS = 16
"""Rows of ``W`` a column block holds: the outputs of one 16-lane vector, or two of 8."""
ROWS = 16
"""Rows of ``x`` a pass multiplies with 16 lanes: 16 accumulators (IREE's mmt4d ukernel's 16 x
16 tile)."""
WIDE_COLUMNS = 32
"""Rows of ``W`` a column block holds in the wide form (``Kernel.columns``; 16 lanes only):
two vectors of outputs a row of ``x``, so that a pass's loads per FMA fall from 17 / 16 to
10 / 16 (on the Intel Xeon 9-19% less time for a GEMM of 128 rows)."""
WIDE_ROWS = 8
"""Rows of ``x`` a pass multiplies in the wide form: 8 x 2 accumulators, two ``wtT`` loads
and eight broadcasts to sixteen FMAs (6, 10, 12 and 14 rows measured slower or level on
the Intel Xeon: benchmarks/README.md, "A wider prefill tile on the Intel Xeon")."""
WTT_FLOATS = 4096
"""The most f32 ``wtT`` holds (16 KiB of the function's 32 KiB stack, beside ``wt``'s 4)."""
F32_CHUNK_BLOCKS = 8
"""Blocks of 32 weights a chunk of :func:`f32_body` holds at most (the largest divisor of ``K /
32`` up to it): a ``C x 32`` slice of 32 KiB, reread by every pass from L1 (48 KiB on the Intel
Xeon). With no stack buffer to fit, 4, 8 and 16 were measured: 8 was best or level on the
five shapes of benchmarks/README.md, "f32 prefill matmuls in column blocks of 32"."""
PREFILL_HINT_FORMS = ("half",)
"""The forms whose prefill (:func:`outer_body`) hints the next chunk of each tile into L2 while
it dequantizes this one (:func:`.gemv_batched.hint_chunks`), in the wide tile only (column blocks of
:data:`WIDE_COLUMNS`: Intel CPUs with AVX-512, where it was measured, and AMD Zen 5). F16
(the ``half`` form), A/B on the Intel Xeon (family 6 model 167), 5 interleaved rounds: M =
128, 11264 x 2048 30.7 -> 28.1 ms and 2048 x 5632 17.6 -> 15.1; M = 512 level (114.7 /
112.9, 56.4 / 57.3). Not kept for Q4_K (26.7 / 26.7, 15.4 / 16.0) nor Q8_0 (25.1 / 25.0,
16.0 / 15.0): level within this VM's noise. On Zen 5 the wide tile with these hints took
the 1B F16 prefill from 158 to 181 tok/s (128 tokens; :data:`.cpu_features.
WIDE_PREFILL_COLUMNS`)."""
F32_PREFETCH_LOCALITY = 2
"""Where :func:`f32_body` hints the next chunk's weights: ``prefetcht1`` (L2); L1 (locality 3)
was slower on the Intel Xeon in the same measurement."""
NARROW_ROWS = 6
"""Rows of ``x`` a pass multiplies with 8 lanes: 6 x 2 accumulators, two ``wtT`` loads and
six broadcasts to twelve FMAs (12 + 2 + 1 of AVX2's 16 registers: BLIS's Haswell 6 x 16
sgemm tile)."""


def pass_rows(kern: Shape) -> int:
    """Rows of ``x`` a pass of ``kern`` (the outer form) multiplies: :data:`WIDE_ROWS` in
    column blocks of :data:`WIDE_COLUMNS`, else :data:`ROWS` or :data:`NARROW_ROWS` by its
    lanes."""
    if kern.columns == WIDE_COLUMNS:
        return WIDE_ROWS
    return ROWS if kern.lanes == 16 else NARROW_ROWS


def outer_form(kern: Shape) -> bool:
    """Whether ``kern`` (a prefill kernel) runs this body: rows a multiple of its column
    block's (16, or :data:`WIDE_COLUMNS`)."""
    return kern.batch == DYNAMIC_M and kern.rows % kern.columns == 0


def outer_chunk_blocks(form: str, k: int, columns: int) -> int:
    """``cb`` of the outer form: :func:`.gemv_batched.chunk_blocks`, at most
    :data:`WTT_FLOATS` ``/ (32 · columns)`` for the forms whose chunk is free (Q8_0 / Q5_0 /
    Q4_0, F16 / BF16: 4 in column blocks of 32, so that ``wtT`` is all of a chunk); Q4_K
    and Q6_K chunks are a superblock (256) whatever the columns (:func:`spans`)."""
    return chunk_blocks(form, k, WTT_FLOATS // (32 * columns))


def spans(wc: int, columns: int) -> int:
    """The parts of a chunk of ``wc`` weights that are dequantized, transposed into ``wtT``
    and multiplied one at a time: 1, or 2 for a superblock in column blocks of 32 (``wtT
    [256, 32]`` would take all of IREE's 32 KiB of stack), each Q4_K / Q6_K's half of 128
    (:func:`.gemv_batched.dequant_tile_chunk`)."""
    return max(1, wc * columns // WTT_FLOATS)


def pack_rows(x: ir.Value, rows: int) -> tuple[ir.Value, emit.Size]:
    """``x [M, K]`` f32 as ``xp [T, K, rows]`` (``T = ceil(M / rows)``), ``xp[p, k, j] =
    x[rows p + j, k]``, zero past ``M`` (a ``linalg.pack``, which IREE vectorizes: the rows of
    a pass side by side at each ``k``, one base address for a pass's broadcasts, as IREE
    packs an mmt4d's LHS; the kernel stores no row past ``M``); and ``T``."""
    m, k = emit.dim(x, 0), emit.static_shape(x)[1]
    assert k is not None
    tiles = pass_count(m, rows)
    out = emit.empty([tiles, k, rows], emit.f32())
    zero = arith.constant(emit.f32(), 0.0)
    packed = linalg.PackOp(out.type, x, out, [0], [], [rows], padding_value=zero).result
    return packed, tiles


def pass_count(m: emit.Size, rows: int) -> emit.Size:
    """``T = ceil(M / rows)``: the passes of ``rows`` rows of ``x`` over ``M`` (the packed
    ``x``'s first dim, a kernel operand next to ``M``; the kernels run ``ceildivui(M, rows)``
    passes of it, the same formula)."""
    return emit.ceil_div_sizes(m, rows)


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
    t(f"%tilef = {at('%cbk', kern.columns // ROWS_PER_TILE, 0)}")
    t("%tilec = arith.addi %tile0, %tilef : index")
    t("%r0 = arith.muli %tilec, %c4 : index")


def open_passes(t: Text, kern: Shape, rows: int, lanes: int, first: str = "%first"
                ) -> tuple[list[str], list[str]]:
    """Open the loop over the passes ``%pv`` of ``rows`` rows of ``x`` (rows ``%v{j} = min(rows pv
    + j, M - 1)``); per row ``j`` and vector ``q`` of the column block's ``kern.columns``
    columns (``lanes`` each) its accumulator's start, ``y``'s value (``r``'s, or zero, where
    ``first`` holds: the first chunk, or span). Returns the ``iter_args`` (``%ma{j}_{q} =
    ...``) and the columns' first indices."""
    vl, y = f"vector<{lanes}xf32>", kern.bindings["y"]
    parts = kern.columns // lanes
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
            t(f"%a0_{j}_{q} = arith.select {first}, {start}, %old{j}_{q} : {vl}")
            accs.append(f"%ma{j}_{q} = %a0_{j}_{q}")
    return accs, col


def close_passes(t: Text, kern: Shape, rows: int, lanes: int, col: list[str]) -> None:
    """Store the pass's accumulators (``%mm``, in :func:`open_passes`' order) into ``y``, of
    the rows below ``M`` only (``%vu{j} < M``), and close the loop over the passes."""
    vl, y, parts = f"vector<{lanes}xf32>", kern.bindings["y"], kern.columns // lanes
    for j in range(rows):
        if j:                                    # a row past M: computed, not stored
            t(f"%in{j} = arith.cmpi ult, %vu{j}, %m_rows : index")
            t.block(f"scf.if %in{j}")
        for q in range(parts):
            t(f"vector.store %mm#{j * parts + q}, %y[%v{j}, {col[q]}] : {y}, {vl}")
        if j:
            t.end()
    t.end()


def outer_body(t: Text, kern: Shape, form: str) -> None:
    """The body for ``kern`` (:func:`outer_form`; ``form`` as :func:`.gemv_batched.batched_body`'s);
    see the module docstring."""
    columns = kern.columns
    cb = outer_chunk_blocks(form, kern.k, columns)
    wc = 32 * cb
    parts = spans(wc, columns)
    span = wc // parts
    wt = memref([ROWS_PER_TILE, span], "f32")
    wtt = memref([span, columns], "f32")
    x = kern.bindings["x"]
    for name, value in (("c2", 2), ("c4", 4), ("c16", 16), ("c32", 32), ("c_rows", pass_rows(kern)),
                        ("c_chunks", kern.k // wc), ("c_blocks", cb), ("c_wc", wc),
                        ("c_span", span), ("c_spans", parts), ("c_groups", span // 16),
                        ("c_cols", kern.rows // columns), ("c_tiles", columns // ROWS_PER_TILE)):
        t(f"%{name} = arith.constant {value} : index")
    for j in range(pass_rows(kern)):
        t(f"%jc{j} = arith.constant {j} : index")
    t("%zero4 = arith.constant dense<0.0> : vector<4x16xf32>")
    chunk_constants(t, kern, form)
    t(f"%wt = {aligned_alloca(wt)}")
    t(f"%wtt = {aligned_alloca(wtt)}")
    open_column_blocks(t, kern, chunk_offset=True)
    t.block("scf.for %hk = %c0 to %c_spans step %c1")
    t("%ks = arith.muli %hk, %c_span : index")
    t("%kcs = arith.addi %kc, %ks : index")
    t("%firsts = arith.cmpi eq, %kcs, %c0 : index")
    t.block("scf.for %tq = %c0 to %c_tiles step %c1")
    t("%tile = arith.addi %tilec, %tq : index")
    for i in range(ROWS_PER_TILE):
        t(f"%wr{i} = arith.constant {i} : index")
    if form in PREFILL_HINT_FORMS and columns == WIDE_COLUMNS:   # measured on Intel only
        hint_chunks(t, kern, form, wc, chunks=1)
    dequant_tile_chunk(t, kern, wt, form, half=parts > 1)
    _transpose(t, wt, wtt)
    t.end()
    _passes(t, kern, lambda q, _: f"vector.load %wtt[%k, {'%c0' if q == 0 else f'%cq{q}'}] : {wtt}",
            x)
    t.end()
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


def f32_body(t: Text, kern: Shape) -> None:
    """The body for an f32 weight (``Kernel.scheme`` ``"f32"``, :data:`WIDE_COLUMNS` only): as
    :func:`outer_body` with ``wtT`` read from the plane itself, no dequant and no transpose:
    the weight ``W [K, N]`` is held as its column blocks, ``w [N / B, K B]`` with ``w[c, B k +
    j] = W[k, B c + j]`` (:func:`.gemv_planes.f32_plane`, at load), so that a column block's
    ``wtT`` for chunk ``ch`` is ``w[c, B (C ch + k) + [0, B)]`` (``C`` weights a chunk:
    :data:`F32_CHUNK_BLOCKS`), a ``C x B`` slice that every pass rereads from L1. Each ``k``
    of a pass also hints into L2 the same lines of the column block's next chunk (``C B``
    further on): without the hints the first pass over a slice waited on DRAM, the hardware
    prefetcher not yet running at its start (on the Intel Xeon, M = 128: 2048 x 5632 10.0 ->
    9.1 ms, 1024 x 5632 6.6 -> 5.6 ms). Only the first pass over a chunk hints; the later
    ones run a copy of the loop without them (each pass had hinted the same lines again, 10
    of the loop's 39 instructions a ``k``; on the Intel Xeon family 6 model 167, M = 128:
    1024 x 5632 7.97 -> 6.88 ms, 2816 x 1024 4.37 -> 3.75, 2048 x 5632 13.03 -> 11.71, 5632 x
    2048 16.05 -> 14.12; benchmarks/README.md, "Hints in the first pass only").

    Bounds, beside :func:`outer_body`'s (same column blocks, chunks, passes and ``x``): the
    column block ``c = r0 / B`` (``r0 = 4 tilec = wg · rows + B cbk``, a multiple of ``B``
    since ``rows % B = 0``) is below ``N / B`` since ``r0 + B - 1 < N``; the load at ``B kx +
    L q + [0, L)`` with ``kx = C ch + k < K`` and ``L q + L <= B`` is below ``K B``. A hint
    reads and writes nothing and does not fault; its index into the plane's flat view is
    clamped to the last element all the same (past the last chunk it would point into the
    next column block, or past the plane)."""
    columns = kern.columns
    wc = 32 * max(d for d in range(1, F32_CHUNK_BLOCKS + 1) if (kern.k // 32) % d == 0)
    for name, value in (("c4", 4), ("c_rows", pass_rows(kern)), ("c_chunks", kern.k // wc),
                        ("c_wc", wc), ("c_span", wc), ("c_cols", kern.rows // columns),
                        ("c_width", columns)):
        t(f"%{name} = arith.constant {value} : index")
    for j in range(pass_rows(kern)):
        t(f"%jc{j} = arith.constant {j} : index")
    w = kern.bindings["w"]
    blocks, run = kern.n // columns, kern.k * columns
    flat = memref([blocks * run], "f32")
    t(f"%wflat = memref.collapse_shape %w [[0, 1]] : {w} into {flat}")
    t(f"%wlast = arith.constant {blocks * run - 1} : index")
    t(f"%c_run = arith.constant {run} : index")
    open_column_blocks(t, kern, chunk_offset=True)
    t("%cw = arith.divui %r0, %c_width : index")
    t("%cwrun = arith.muli %cw, %c_run : index")

    def load(q: int, hint: bool) -> str:         # q in order: %kw first
        if q:
            t(f"%kw{q} = arith.addi %kw, %cq{q} : index")
        else:
            t("%kw = arith.muli %kx, %c_width : index")
            for j in range(columns * 4 // 64 if hint else 0):  # the next chunk's lines of k
                t(f"%pf{j} = affine.apply affine_map<()[s0, s1] -> (s0 + s1 + "
                  f"{wc * columns + 16 * j})>()[%cwrun, %kw]")
                t(f"%pfc{j} = arith.minui %pf{j}, %wlast : index")
                t(f"memref.prefetch %wflat[%pfc{j}], read, locality<{F32_PREFETCH_LOCALITY}>,"
                  f" data : {flat}")
        return f"vector.load %w[%cw, {f'%kw{q}' if q else '%kw'}] : {w}"

    _passes(t, kern, load, kern.bindings["x"], "%kc", "%first", hints=True)
    t.end()
    t.end()


def _passes(t: Text, kern: Shape, load: Callable[[int, bool], str], x: str,
            kbase: str = "%kcs", first: str = "%firsts", hints: bool = False) -> None:
    """Every pass of :func:`pass_rows` rows of ``x``: ``y[v, r0 ..] (+)= Σ_k wtT[k] x[v, kbase +
    k]`` over the span (from ``r`` or zero where ``first``: the first chunk's first span), each
    row's ``columns`` outputs in ``columns / L`` vectors of ``L`` lanes. ``load(q, hint)``: the
    text of the load of vector ``q`` of ``wtT[k]`` (the stack buffer's, or the f32 plane's),
    and, where ``hint``, its prefetch hints. With ``hints`` the first pass over the span runs
    a loop that hints and every later pass one that does not (the first brings the lines
    into L2; a later pass's hints only repeated them: 10 of its 39 instructions a ``k``)."""
    rows, lanes, columns = pass_rows(kern), kern.lanes, kern.columns
    vl = f"vector<{lanes}xf32>"
    parts = columns // lanes
    accs, col = open_passes(t, kern, rows, lanes, first)
    count = rows * parts
    types = ", ".join([vl] * count)
    if not hints:
        _k_loop(t, kern, load, x, kbase, "%mm", accs, hint=False)
    else:
        t("%hinting = arith.cmpi eq, %pv, %c0 : index")
        t.block(f"%mm:{count} = scf.if %hinting -> ({types})")
        for hint in (True, False):
            _k_loop(t, kern, load, x, kbase, "%mk", accs, hint)
            t(f"scf.yield {', '.join(f'%mk#{i}' for i in range(count))} : {types}")
            if hint:
                t.otherwise()
        t.end()
    close_passes(t, kern, rows, lanes, col)


def _k_loop(t: Text, kern: Shape, load: Callable[[int, bool], str], x: str, kbase: str,
            result: str, accs: list[str], hint: bool) -> None:
    """One pass's loop over the span's ``k`` (:func:`_passes`), its accumulators ``result``."""
    rows, lanes, columns = pass_rows(kern), kern.lanes, kern.columns
    vl = f"vector<{lanes}xf32>"
    parts = columns // lanes
    count = rows * parts
    types = ", ".join([vl] * count)
    t.block(f"{result}:{count} = scf.for %k = %c0 to %c_span step %c1 "
            f"iter_args({', '.join(accs)}) -> ({types})")
    t(f"%kx = arith.addi {kbase}, %k : index")
    for q in range(parts):
        t(f"%wcol{q} = {load(q, hint)}, {vl}")
    new = []
    for j in range(rows):
        t(f"%xs{j} = memref.load %x[%pv, %kx, %jc{j}] : {x}")
        t(f"%xb{j} = vector.broadcast %xs{j} : f32 to {vl}")
        for q in range(parts):
            t(f"%mn{j}_{q} = vector.fma %wcol{q}, %xb{j}, %ma{j}_{q} : {vl}")
            new.append(f"%mn{j}_{q}")
    t(f"scf.yield {', '.join(new)} : {types}")
    t.end()


__all__ = ["COLUMNS", "F32_CHUNK_BLOCKS", "NARROW_ROWS", "ROWS", "close_passes", "f32_body",
           "open_column_blocks", "open_passes", "outer_body", "outer_form", "pack_rows",
           "pass_count", "pass_rows"]
