"""The batched form of the decode GEMV kernels (:mod:`.gemv_kernels`): ``y [M, N] = x [M, K]
W^T`` for ``M = 2 .. MAX_BATCH`` rows of ``x`` (the sequences of a batched decode step) or a
dynamic ``M`` (a prefill), on the same tile-interleaved weight planes (:mod:`.gemv_planes`).

Where ``M = 1`` streams the weights at the read bandwidth, ``M`` rows make the kernel compute
bound, and what it computes per weight decides its speed: a row tile's weights are
dequantized **once**, a chunk of ``C`` weights at a time, into an f32 stack buffer
``wt [4, C]`` (Q8_0: ``d · q``; Q6_K: ``s · q``; Q4_K: ``S · f - M``, exact or one
rounding per weight), and then every row of ``x`` is multiplied with the chunk by 8-lane
FMAs, two rows of ``x`` at a time (8 accumulators: eight of AVX2's sixteen registers), the
per-(row of ``x``, row of ``W``) partial sums kept in a second stack buffer ``acc [M, 32]``
between chunks. The multiply's inner loop is then 6 loads and 8 ``vfmadd231ps`` (AVX2),
bound by FMA throughput: the f32 work is ``M`` FMA lanes a weight, and what is left to save
is the dequantization's share. Where the target CPU has AVX-512F
(``LoweringOptions.vector_bits`` = 512; ``Kernel.lanes`` = 16) the multiply runs on
16-lane vectors, up to four rows of ``x`` a pass (16 accumulators of 32 registers:
:func:`rows_per_pass`), ``acc [M, 64]``: measured on Zen 5 (2 idle vCPUs, 2026-12-03, ms per
GEMV, 8 lanes -> 16): Q8_0 1536 x 576 at M = 8 0.141 -> 0.110, Q8_0 2048 x 2048 0.551 ->
0.454 (M = 2: 0.340 -> 0.224), Q6_K 2048 x 2048 0.593 -> 0.432, Q4_K 0.499 -> 0.467.

Measured (benchmarks/README.md, "Batched decode GEMVs", 2 loaded AVX2 cores, ms per GEMV):
1536 x 576 Q8_0 at M = 8 0.34-0.35 against 0.36-0.41 for a first version (the ``M = 1``
body with the weights converted once per pass of two rows of ``x`` and the block scale
applied per row of ``x``: more FP work per weight and row) and 1.14-1.29 for the prefill
form that ``M > 1`` ran before (M = 1: 0.10-0.12); Q4_K 2048 x 2048 1.69 against 6.78.

**The prefill form** (``Kernel.batch`` = :data:`DYNAMIC_M`: ``M`` rows known at run time, a
prompt's; F16 / BF16 (``half``: ``wt`` = the 16-bit values converted, exact), Q8_0 / Q5_0 /
Q4_0, Q4_K and Q6_K (``q6_k``: ``wt = (d · sc) · (q - 32)`` from the exact decode's packed
planes, :func:`.gemv_exact.q6_k_body`'s; ``q4_k_q8``: Q4_K under ``activation_quant="q8"``,
``A · q - B`` from that mode's planes, the file's ``qs`` bytes; ``q6_k_q8``: Q6_K under it,
``(d · sc) · (q - 32)`` from the file's ``ql``, ``qh`` and scale bytes), the schemes whose decode
kernel reads these same planes, so that no second copy of a weight is held) runs this body
with ``M`` taken a block of ``B = 64`` rows at a time (``acc [B, ...]`` on the stack), each
block through every chunk, where the workgroup's rows are not a multiple of 16; else the
outer-product form of :mod:`.gemm_prefill`, on this module's chunk code. The stack
buffers are 64-byte aligned (:func:`aligned_alloca`): LLVM had put ``wt``'s rows off a cache
line, and every 64-byte load of them spanned two. Measured (Zen 5, 2 threads, best of 15,
one 5632 x 2048 F16 dequant_matmul alone, GFLOP/s; IREE's data-tiled f32 matmul after the
weight's dequant-and-pack, which it redoes each call, in brackets): this body at M = 16 190
(64), M = 128 289 (218), M = 512 318 (330); tried and left: 8 rows of ``W`` by 3 or 2 of
``x`` a pass (243, 261 before the alignment), chunks of 512 with ``B = 16`` (267), the
block loop outside the tile loop (no gain). The outer-product form: 168, 328, 386.

**Bounds.** The shapes are those :class:`.gemv_kernels.Kernel` checks (``K`` whole blocks,
``rows`` a multiple of 4 dividing ``N``, ``1 <= M <= MAX_BATCH`` or dynamic), static but
``M``; with ``C = 32 cb`` (``cb`` blocks of 32 dividing ``K / 32``; 256 for Q6_K and Q4_K,
``K % 256 = 0``) and the chunk ``ch < K / C``:

- the tiles: ``tl < rows / 4``; tile ``tile = wg · rows / 4 + tl < N / 4`` (``wg < N /
  rows``) and ``r_i = 4 tile + i < N``, ``i < 4``;
- rows of ``x``: the block ``[mb0, mb0 + B')`` with ``B' = min(B, M - mb0) >= 1`` (``mb0 <
  M`` by the loop; static ``M``: one block, ``B' = M``), so ``mb0 + v < M`` for ``v < B'``
  (the loops over the block; a pass of ``P`` rows takes rows ``min(P p + j, B' - 1)``, ``p
  < ceil(B' / P)``, ``j < P``, so that where ``P`` does not divide ``B'`` the last pass
  computes row ``B' - 1`` more than once from the same partial sums and stores the same
  value each time);
- with ``L`` lanes (8 or 16; ``L`` divides ``C = 32 cb``): ``acc [B, 4 L]`` at ``[v, L i +
  [0, L)]``, ``v < B' <= B``, ``i < 4``; ``wt [4, C]`` stored at ``[i, 32 u + 16 h + [0, 16)] <
  C`` (``i < 4``, ``u < cb``, ``h < 2``; Q4_K: ``[i, 128 cc + 16 j + [0, 16)] < 256``, ``cc <
  2``, ``j < 8``) and read at ``[i, L s + [0, L)]``, ``s < C / L``;
- ``x [M, K]`` at ``[mb0 + v, C ch + L s + [0, L)] <= C (K / C - 1) + C - 1 = K - 1``;
- half planes: as the i8 ``q`` below (``w [N / 4, 4 K]``);
- i8 planes: block ``b = cb ch + u < K / 32`` reads ``q [N / 4, 4 K]`` at ``128 b + 32 i +
  16 h + [0, 16) < 4 K``, Q8_0's ``d [N / 4, K / 8]`` at ``4 b + i < K / 8``, Q6_K's
  ``d [N / 4, K / 4]`` at ``8 b + 2 i + h < K / 4``;
- packed Q6_K: unit ``c = 2 ch + cc < K / 128`` reads ``ql [N / 4, K / 2]`` (i32) and ``qh
  [N / 4, K / 2]`` (i16) at ``64 c + 16 i + [0, 16) < K / 2``, ``sc [N / 4, K / 4]`` at ``32 c
  + 8 i + [0, 8) < K / 4`` and ``d [N / 4, K / 64]`` at ``4 (c / 2) + i < K / 64``, as
  :mod:`.gemv_kernels`' M = 1 body; ``wt`` at ``[i, 128 cc + 16 j + [0, 16)] < 256``;
- q8-mode Q6_K (the file's bytes): half ``hu = 2 ch + hq < K / 128`` reads ``ql [N / 4,
  2 K]`` at ``256 hu + 64 i + 16 r + [0, 16) < 2 K`` (``r < 4``), ``qh [N / 4, K]`` at ``128 hu
  + 32 i + 16 r + [0, 16) < K`` (``r < 2``), ``sc`` and ``d`` as the packed planes' unit
  ``c = hu``; ``wt`` at ``[i, 128 hq + 32 p + 16 g + [0, 16)] < 256``;
- Q4_K: ``c = 2 ch + cc < K / 128`` reads ``q [N / 4, K / 2]`` at ``64 c + 16 i + [0, 16) <
  K / 2`` and ``sc``, ``mn [N / 4, K / 8]`` at ``16 c + 4 i + g < K / 8`` (``g < 4``);
  ``d``, ``dmin [N / 4, K / 64]`` at ``4 ch + i < K / 64``;
- ``y``, ``r [M, N]`` at ``[mb0 + v, r_i]``.
"""

from __future__ import annotations

from typing import Protocol

from rlx.lowering.mir_to_linalg.executable import I16, V16, Text, memref
from rlx.lowering.mir_to_linalg.quant.gemv_exact import q6_k_constants, q6_k_unit
from rlx.lowering.mir_to_linalg.quant.gemv_q8 import q6_k_quarter
from rlx.lowering.mir_to_linalg.quant.gemv_text import (
    ROWS_PER_TILE,
    at,
    half_to_f32,
    plane_shape,
    prefetch_ahead,
    q4_k_constants,
    q4_k_nibble,
    q6_k_scales,
)

V8 = "vector<8xf32>"
CHUNK_BLOCKS = 8
"""Blocks of 32 weights a chunk holds at most: ``wt`` is ``4 x 256`` f32 (4 KiB)."""
VECTORS_PER_PASS = 2
"""Rows of ``x`` the inner loop multiplies at once: 4 x 2 8-lane accumulators, one ``wt``
load per two FMAs."""
WIDE_VECTORS_PER_PASS = 4
"""With 16 lanes (AVX-512): 4 x 4 accumulators of 32 registers, one ``wt`` load per four
FMAs."""


DYNAMIC_M = 0
"""``Kernel.batch`` of the prefill form: ``M`` rows of ``x`` known only at run time."""
PREFILL_BLOCK = 64
"""Rows of ``x`` the prefill form multiplies with a chunk of weights before the next chunk:
``acc [64, 4 L]`` f32 (16 KiB at 16 lanes, with ``wt``'s 4 KiB within IREE's 32 KiB stack)."""


class Shape(Protocol):
    """What the batched body reads of a :class:`.gemv_kernels.Kernel`."""

    k: int
    rows: int
    batch: int
    residual: bool
    lanes: int
    prefetch: int
    columns: int

    @property
    def bindings(self) -> dict[str, str]: ...


def chunk_blocks(form: str, k: int, most: int = CHUNK_BLOCKS) -> int:
    """``cb``: blocks of 32 a chunk holds (a divisor of ``K / 32`` up to ``most``, at most
    :data:`CHUNK_BLOCKS`; 8 for Q6_K / Q4_K, whatever ``most``)."""
    nb = k // 32
    if form not in ("byte", "half"):
        return CHUNK_BLOCKS
    return max(d for d in range(1, min(most, CHUNK_BLOCKS) + 1) if nb % d == 0)


def rows_per_pass(lanes: int, batch: int) -> int:
    """Rows of ``x`` a pass multiplies: 2 with 8 lanes (8 accumulators of AVX2's 16
    registers); with 16 lanes (AVX-512's 32 registers) up to 4, the count of the fewest
    passes that computes the fewest duplicate rows (``M = 6``: 2 passes of 3, not 4 + 4)."""
    if lanes == 8:
        return VECTORS_PER_PASS
    most = min(WIDE_VECTORS_PER_PASS, batch)
    return min(range(most, 0, -1), key=lambda p: (-(-batch // p) * p, -(-batch // p)))


def aligned_alloca(mem: str) -> str:
    """A stack buffer on a cache line: a 64-byte vector load of an unaligned one spans two
    lines (the prefill form's ``wt`` loads, at a row offset LLVM chose, did)."""
    return ('"memref.alloca"() <{alignment = 64 : i64, operandSegmentSizes = '
            f'array<i32: 0, 0>}}> : () -> {mem}')


def batched_body(t: Text, kern: Shape, form: str) -> None:
    """The body for ``kern`` (``form``: ``byte`` for Q8_0 / Q5_0 / Q4_0, ``sixteen`` for
    Q6_K, ``q4_k``, ``half`` for F16 / BF16); see the module docstring. ``kern.batch`` =
    :data:`DYNAMIC_M`: ``M`` is the kernel's ``%m_rows`` (the prefill form), its rows taken
    :data:`PREFILL_BLOCK` at a time."""
    cb = chunk_blocks(form, kern.k)
    wc = 32 * cb
    lanes = kern.lanes
    vl = f"vector<{lanes}xf32>"
    wt = memref([ROWS_PER_TILE, wc], "f32")
    block = kern.batch if kern.batch != DYNAMIC_M else PREFILL_BLOCK
    acc = memref([block, lanes * ROWS_PER_TILE], "f32")
    per = rows_per_pass(lanes, block)
    for name, value in (("c2", 2), ("c4", 4), ("c8", 8), ("c16", 16), ("c32", 32),
                        ("c_block", block), ("c_per", per), ("c_chunks", kern.k // wc),
                        ("c_blocks", cb), ("c_wc", wc), ("c_lanes", lanes),
                        ("c_slices", wc // lanes), ("c_steps", kern.rows // ROWS_PER_TILE)):
        t(f"%{name} = arith.constant {value} : index")
    for i in range(ROWS_PER_TILE):
        t(f"%wr{i} = arith.constant {i} : index")
        t(f"%ca{i} = arith.constant {lanes * i} : index")
    t(f"%zerol = arith.constant dense<0.0> : {vl}")
    chunk_constants(t, kern, form)
    t(f"%wt = {aligned_alloca(wt)}")
    t(f"%accb = {aligned_alloca(acc)}")
    # tile wg · rows / 4 + tl of the workgroup's rows / 4, rows r0 .. r3
    t(f"%tile0 = {at('%wg', kern.rows // ROWS_PER_TILE, 0)}")
    t.block("scf.for %tl = %c0 to %c_steps step %c1")
    t("%tile = arith.addi %tile0, %tl : index")
    t("%r0 = arith.muli %tile, %c4 : index")
    for i in range(1, ROWS_PER_TILE):
        t(f"%r{i} = arith.addi %r{i - 1}, %c1 : index")
    if kern.batch == DYNAMIC_M:                  # rows mb0 .. mb0 + c_batch - 1 of x
        t.block("scf.for %mb0 = %c0 to %m_rows step %c_block")
        t("%left = arith.subi %m_rows, %mb0 : index")
        t("%c_batch = arith.minui %left, %c_block : index")
    else:
        t(f"%c_batch = arith.constant {kern.batch} : index")
    t("%c_last = arith.subi %c_batch, %c1 : index")
    t("%c_passes = arith.ceildivui %c_batch, %c_per : index")
    t.block("scf.for %vz = %c0 to %c_batch step %c1")
    for i in range(ROWS_PER_TILE):
        t(f"vector.store %zerol, %accb[%vz, %ca{i}] : {acc}, {vl}")
    t.end()
    t.block("scf.for %ch = %c0 to %c_chunks step %c1")
    hint_chunks(t, kern, form, wc)
    dequant_tile_chunk(t, kern, wt, form)
    _multiply(t, kern, wt, acc, per)
    t.end()
    _store(t, kern, acc)
    if kern.batch == DYNAMIC_M:
        t.end()
    t.end()


def _store(t: Text, kern: Shape, acc: str) -> None:
    """``y[mb0 + v, r_i]`` = the lanes of ``acc[v, L i ..]`` summed (plus ``r``'s) for the
    block's rows ``v`` and the tile's rows of ``W``."""
    vl = f"vector<{kern.lanes}xf32>"
    t.block("scf.for %vy = %c0 to %c_batch step %c1")
    my = "%my" if kern.batch == DYNAMIC_M else "%vy"
    if kern.batch == DYNAMIC_M:
        t("%my = arith.addi %mb0, %vy : index")
    for i in range(ROWS_PER_TILE):
        t(f"%sum{i} = vector.load %accb[%vy, %ca{i}] : {acc}, {vl}")
        t(f"%y{i} = vector.reduction <add>, %sum{i} : {vl} into f32")
        value = f"%y{i}"
        if kern.residual:
            t(f"%res{i} = memref.load %r[{my}, %r{i}] : {kern.bindings['r']}")
            t(f"%out{i} = arith.addf %y{i}, %res{i} : f32")
            value = f"%out{i}"
        t(f"memref.store {value}, %y[{my}, %r{i}] : {kern.bindings['y']}")
    t.end()


def chunk_constants(t: Text, kern: Shape, form: str) -> None:
    """The constants :func:`dequant_tile_chunk` reads for ``form`` (with ``%c2``, ``%c16``,
    ``%c32`` and ``%c_blocks``)."""
    if form == "q4_k":
        _q4_k_constants(t)
    if form == "q6_k":
        q6_k_constants(t)
    if form in ("q4_k_q8", "q6_k_q8"):
        t("%lo4 = arith.constant dense<15> : vector<16xi8>")
        t("%sh4 = arith.constant dense<4> : vector<16xi8>")
    if form == "q6_k_q8":
        t("%sh2 = arith.constant dense<2> : vector<16xi8>")
        t("%hi2 = arith.constant dense<48> : vector<16xi8>")
        t("%b32 = arith.constant dense<32> : vector<16xi8>")
    if form == "half" and kern.bindings["w"].endswith("xi16>"):
        t("%sh16 = arith.constant dense<16> : vector<16xi32>")


STREAMS = {"half": ("w",), "q6_k": ("ql", "qh"), "q6_k_q8": ("ql", "qh")}
"""The planes a form's chunks stream (the rest: ``q``), hinted ahead where
``Kernel.prefetch`` asks (:func:`.gemv_text.prefetch_ahead`)."""


def hint_chunks(t: Text, kern: Shape, form: str, wc: int, chunks: int | None = None) -> None:
    """Prefetch hints (:func:`.gemv_text.prefetch_ahead`) for the planes ``form`` streams, in a
    loop over the chunks ``%ch`` of ``wc`` weights of row tile ``%tile``: ``Kernel.prefetch``
    bytes ahead, or ``chunks`` whole chunks ahead."""
    for plane in STREAMS.get(form, ("q",)):        # a chunk is wc / K of a tile's row
        prefetch_ahead(t, kern, plane, "%ch", plane_shape(kern.bindings[plane])[1] * wc // kern.k,
                       chunks)


def dequant_tile_chunk(t: Text, kern: Shape, wt: str, form: str, half: bool = False) -> None:
    """``wt`` rows ``%wr0 .. %wr3`` = chunk ``%ch`` of tile ``%tile``'s weights as f32; with
    ``half`` (Q4_K, Q6_K), its 128-weight half ``%hk`` only, at ``wt [4, 128]``."""
    if half and form not in ("q4_k", "q6_k"):
        raise AssertionError(f"half a chunk of the {form} form")
    if form == "q4_k":
        _q4_k_chunk(t, kern, wt, half)
    elif form == "q4_k_q8":
        _q4_k_q8_chunk(t, kern, wt)
    elif form == "q6_k_q8":
        _q6_k_q8_chunk(t, kern, wt)
    elif form == "q6_k":
        _q6_k_chunk(t, kern, wt, half)
    elif form == "half":
        _half_chunk(t, kern, wt)
    else:
        _byte_chunk(t, kern, wt, form == "sixteen")


def _half_chunk(t: Text, kern: Shape, wt: str) -> None:
    """``wt`` = chunk ``%ch`` of the tile's 16-bit weights as f32 (F16: ``extf``; BF16: the
    bits widened and shifted into an f32's top half; exact)."""
    w = kern.bindings["w"]
    half = "i16" if w.endswith("xi16>") else "f16"
    _blocks_of_chunk(t)
    for i in range(ROWS_PER_TILE):
        for h in range(2):
            t(f"%wk{i}_{h} = {at('%b', 32 * ROWS_PER_TILE, 32 * i + 16 * h)}")
            t(f"%h{i}_{h} = vector.load %w[%tile, %wk{i}_{h}] : {w}, vector<16x{half}>")
            half_to_f32(t, f"%h{i}_{h}", f"%w{i}_{h}", half)
            t(f"vector.store %w{i}_{h}, %wt[%wr{i}, %ku{h}] : {wt}, {V16}")
    t.end()


def _blocks_of_chunk(t: Text) -> None:
    """Open the loop over the blocks of 32 of chunk ``%ch``: block ``%b``, its two halves at
    ``wt`` columns ``%ku0``, ``%ku1``."""
    t("%bch = arith.muli %ch, %c_blocks : index")
    t.block("scf.for %u = %c0 to %c_blocks step %c1")
    t("%b = arith.addi %bch, %u : index")
    t("%ku0 = arith.muli %u, %c32 : index")
    t("%ku1 = arith.addi %ku0, %c16 : index")


def _byte_chunk(t: Text, kern: Shape, wt: str, sixteen: bool) -> None:
    """``wt`` = chunk ``%ch`` of the tile's i8 weights times their scales."""
    q, d = kern.bindings["q"], kern.bindings["d"]
    _blocks_of_chunk(t)
    for i in range(ROWS_PER_TILE):
        if not sixteen:
            t(f"%dk{i} = {at('%b', ROWS_PER_TILE, i)}")
            t(f"%h{i} = memref.load %d[%tile, %dk{i}] : {d}")
            t(f"%e{i} = arith.extf %h{i} : f16 to f32")
            t(f"%sv{i} = vector.broadcast %e{i} : f32 to {V16}")
        for h in range(2):
            t(f"%qk{i}_{h} = {at('%b', 32 * ROWS_PER_TILE, 32 * i + 16 * h)}")
            t(f"%q{i}_{h} = vector.load %q[%tile, %qk{i}_{h}] : {q}, vector<16xi8>")
            t(f"%f{i}_{h} = arith.sitofp %q{i}_{h} : vector<16xi8> to {V16}")
            scale = f"%sv{i}"
            if sixteen:
                t(f"%dk{i}_{h} = {at('%b', 2 * ROWS_PER_TILE, 2 * i + h)}")
                t(f"%e{i}_{h} = memref.load %d[%tile, %dk{i}_{h}] : {d}")
                scale = f"%sv{i}_{h}"
                t(f"{scale} = vector.broadcast %e{i}_{h} : f32 to {V16}")
            t(f"%w{i}_{h} = arith.mulf %f{i}_{h}, {scale} : {V16}")
            t(f"vector.store %w{i}_{h}, %wt[%wr{i}, %ku{h}] : {wt}, {V16}")
    t.end()


def _q4_k_constants(t: Text) -> None:
    q4_k_constants(t)
    t("%k16 = arith.constant 1.600000e+01 : f32")
    for n in range(0, 256, 16):
        t(f"%wo{n} = arith.constant {n} : index")


def _q4_k_chunk(t: Text, kern: Shape, wt: str, half: bool = False) -> None:
    """``wt`` = chunk ``%ch`` (two 128-weight runs ``c``; with ``half``, run ``%hk`` only) of
    the tile's Q4_K weights, ``S · f - M`` per weight (``f = 1 + q / 16`` from the nibble's
    bits, as in :mod:`.gemv_kernels`; ``S = 16 · d · sc`` and ``M = S + dmin · m`` from the
    scale bytes, per group)."""
    mem = kern.bindings
    for i in range(ROWS_PER_TILE):               # d, dmin [tile, 4 ch + i] as f32
        t(f"%kd{i} = {at('%ch', ROWS_PER_TILE, i)}")
        for f in ("d", "dmin"):
            t(f"%{f}h{i} = memref.load %{f}[%tile, %kd{i}] : {mem[f]}")
            t(f"%{f}f{i} = arith.extf %{f}h{i} : f16 to f32")
    for cc in range(1 if half else 2):
        t(f"%cq{cc} = {at('%ch', 2, cc)}")
        if half:                                 # the run of this span: 2 ch + hk
            t(f"%cq{cc}h = arith.addi %cq{cc}, %hk : index")
        run = f"%cq{cc}h" if half else f"%cq{cc}"
        for i in range(ROWS_PER_TILE):
            n = f"{cc}_{i}"
            t(f"%kq{n} = {at(run, 16 * ROWS_PER_TILE, 16 * i)}")
            t(f"%wq{n} = vector.load %q[%tile, %kq{n}] : {mem['q']}, {I16}")
            for g in range(4):                   # S = 16 d sc, M = S + dmin m: exact
                ng = f"{n}_{g}"                  # products, one rounding in M
                t(f"%ks{ng} = {at(run, 4 * ROWS_PER_TILE, 4 * i + g)}")
                for b in ("sc", "mn"):
                    t(f"%{b}b{ng} = memref.load %{b}[%tile, %ks{ng}] : {mem[b]}")
                    t(f"%{b}i{ng} = arith.extui %{b}b{ng} : i8 to i32")
                    t(f"%{b}f{ng} = arith.uitofp %{b}i{ng} : i32 to f32")
                t(f"%A{ng} = arith.mulf %scf{ng}, %df{i} : f32")
                t(f"%S{ng} = arith.mulf %A{ng}, %k16 : f32")
                t(f"%B{ng} = arith.mulf %mnf{ng}, %dminf{i} : f32")
                t(f"%M{ng} = arith.addf %S{ng}, %B{ng} : f32")
                t(f"%Sv{ng} = vector.broadcast %S{ng} : f32 to {V16}")
                t(f"%nM{ng} = arith.negf %M{ng} : f32")
                t(f"%Mv{ng} = vector.broadcast %nM{ng} : f32 to {V16}")
            for j in range(8):
                f = q4_k_nibble(t, f"%wq{n}", str(n), j)
                g = j // 2
                t(f"%w{n}_{j} = vector.fma {f}, %Sv{n}_{g}, %Mv{n}_{g} : {V16}")
                t(f"vector.store %w{n}_{j}, %wt[%wr{i}, %wo{128 * cc + 16 * j}] : {wt}, {V16}")


def _q4_k_q8_chunk(t: Text, kern: Shape, wt: str) -> None:
    """``wt`` = chunk ``%ch`` (one superblock) of the tile's Q4_K weights from the q8 mode's
    planes (the file's ``qs`` bytes, :mod:`.gemv_q8`'s): ``A · q - B`` per weight (one
    rounding), ``A = d · sc`` and ``B = dmin · m`` of its group of 32 (exact in f32); the
    low nibble of byte ``l`` of a 64-weight pair is weight ``l``, the high one ``32 + l``."""
    mem = kern.bindings
    for i in range(ROWS_PER_TILE):
        t(f"%kd{i} = {at('%ch', ROWS_PER_TILE, i)}")        # d, dmin [tile, 4 s + i]
        for f in ("d", "dmin"):
            t(f"%{f}h{i} = memref.load %{f}[%tile, %kd{i}] : {mem[f]}")
            t(f"%{f}f{i} = arith.extf %{f}h{i} : f16 to f32")
    t.block("scf.for %pq = %c0 to %c4 step %c1")     # a region each: the pair's names
    t(f"%pp = {at('%ch', 4, 0)}")
    t("%pg = arith.addi %pp, %pq : index")           # pair 4 s + p of the row
    for i in range(ROWS_PER_TILE):
        for h in range(2):                           # group 2 p + h: sc, m and its A, -B
            g = f"{i}_{h}"
            t(f"%ks{g} = {at('%pg', 2 * ROWS_PER_TILE, 2 * i + h)}")
            t(f"%sb{g} = memref.load %sc[%tile, %ks{g}] : {mem['sc']}")
            t(f"%km{g} = affine.apply affine_map<()[s0, s1] -> (s0 * 32 + s1 * 2 + "
              f"{8 * i + h})>()[%ch, %pq]")
            t(f"%mb{g} = memref.load %mn[%tile, %km{g}] : {mem['mn']}")
            for b, f in ((f"%sb{g}", "d"), (f"%mb{g}", "dmin")):
                t(f"%{f}i{g} = arith.extui {b} : i8 to i32")
                t(f"%{f}c{g} = arith.uitofp %{f}i{g} : i32 to f32")
                t(f"%{f}s{g} = arith.mulf %{f}c{g}, %{f}f{i} : f32")
            t(f"%nb{g} = arith.negf %dmins{g} : f32")
            t(f"%av{g} = vector.broadcast %ds{g} : f32 to {V16}")
            t(f"%bv{g} = vector.broadcast %nb{g} : f32 to {V16}")
        for half in range(2):                        # bytes l = 16 half + [0, 16)
            n = f"{i}_{half}"
            t(f"%kq{n} = {at('%pg', 32 * ROWS_PER_TILE, 32 * i + 16 * half)}")
            t(f"%qb{n} = vector.load %q[%tile, %kq{n}] : {mem['q']}, vector<16xi8>")
            nibbles = {0: f"arith.andi %qb{n}, %lo4", 1: f"arith.shrui %qb{n}, %sh4"}
            for h, op in nibbles.items():
                g, v = f"{i}_{h}", f"{n}_{h}"
                t(f"%nq{v} = {op} : vector<16xi8>")
                t(f"%ni{v} = arith.extui %nq{v} : vector<16xi8> to {I16}")
                t(f"%nf{v} = arith.uitofp %ni{v} : {I16} to {V16}")
                t(f"%nw{v} = vector.fma %nf{v}, %av{g}, %bv{g} : {V16}")
                t(f"%ko{v} = {at('%pq', 64, 32 * h + 16 * half)}")
                t(f"vector.store %nw{v}, %wt[%wr{i}, %ko{v}] : {wt}, {V16}")
    t.end()


def _q6_k_chunk(t: Text, kern: Shape, wt: str, half: bool = False) -> None:
    """``wt`` = chunk ``%ch`` (two 128-weight units ``c``; with ``half``, unit ``%hk`` only, at
    ``wt`` column 0) of the tile's Q6_K weights from the packed planes
    (:func:`.gemv_exact.q6_k_body`'s): ``(d · sc) · (q - 32)`` per weight, ``q = lo | hi <<
    4`` from lane ``l`` of the unit's nibble word and 2-bit word."""
    mem = kern.bindings
    if half:                                          # one iteration, cc = hk
        t("%hk1 = arith.addi %hk, %c1 : index")
    t.block("scf.for %cc = %hk to %hk1 step %c1" if half else
            "scf.for %cc = %c0 to %c2 step %c1")     # a region each: q6_k_scales' names
    t("%c2ch = arith.muli %ch, %c2 : index")
    t("%cu = arith.addi %c2ch, %cc : index")
    for i in range(ROWS_PER_TILE):
        scales = q6_k_scales(t, mem, "%cu", i)
        quants = q6_k_unit(t, mem, "%cu", i)
        for j in range(8):
            t(f"%e{i}_{j} = vector.extract {scales}[{j}] : f32 from vector<8xf32>")
            t(f"%v{i}_{j} = vector.broadcast %e{i}_{j} : f32 to {V16}")
            t(f"%x{i}_{j} = arith.mulf {quants[j]}, %v{i}_{j} : {V16}")
            t(f"%o{i}_{j} = " + (f"arith.constant {16 * j} : index" if half
                                 else at('%cc', 128, 16 * j)))
            t(f"vector.store %x{i}_{j}, %wt[%wr{i}, %o{i}_{j}] : {wt}, {V16}")
    t.end()


def _q6_k_q8_chunk(t: Text, kern: Shape, wt: str) -> None:
    """``wt`` = chunk ``%ch`` (one superblock: halves ``hu = 2 ch + hq``) of the tile's Q6_K
    weights from the q8 mode's planes (the file's ``ql``, ``qh``, scale bytes and ``d``,
    :func:`.gemv_q8.q6_k_body`'s): ``(d · sc) · (q - 32)`` per weight, the value the exact
    planes' chunk gives. Weight ``32 p + 16 g + l`` of a half (quarter ``p``, group ``2 p +
    g``): ``lo`` the low (``p < 2``) or high nibble of ``ql[32 (p % 2) + 16 g + l]``, ``hi``
    bits ``2 p`` of ``qh[16 g + l]`` (ggml's order)."""
    mem, v16b = kern.bindings, "vector<16xi8>"
    t.block("scf.for %hq = %c0 to %c2 step %c1")     # a region each: q6_k_scales' names
    t(f"%h2 = {at('%ch', 2, 0)}")
    t("%hu = arith.addi %h2, %hq : index")
    for i in range(ROWS_PER_TILE):
        for r in range(4):                           # the row's 64 ql bytes, 16 a load
            t(f"%kl{i}_{r} = {at('%hu', 64 * ROWS_PER_TILE, 64 * i + 16 * r)}")
            t(f"%ql{i}_{r} = vector.load %ql[%tile, %kl{i}_{r}] : {mem['ql']}, {v16b}")
        for r in range(2):                           # its 32 qh bytes
            t(f"%kh{i}_{r} = {at('%hu', 32 * ROWS_PER_TILE, 32 * i + 16 * r)}")
            t(f"%qh{i}_{r} = vector.load %qh[%tile, %kh{i}_{r}] : {mem['qh']}, {v16b}")
        scales = q6_k_scales(t, mem, "%hu", i)
        for p in range(4):
            for g in range(2):
                tag = f"{i}_{p}_{g}"
                w = q6_k_quarter(t, f"%ql{i}_{2 * (p % 2) + g}", f"%qh{i}_{g}", p, tag, v16b)
                t(f"%f{tag} = arith.sitofp {w} : {v16b} to {V16}")
                t(f"%e{tag} = vector.extract {scales}[{2 * p + g}] : f32 from vector<8xf32>")
                t(f"%v{tag} = vector.broadcast %e{tag} : f32 to {V16}")
                t(f"%x{tag} = arith.mulf %f{tag}, %v{tag} : {V16}")
                t(f"%o{tag} = {at('%hq', 128, 32 * p + 16 * g)}")
                t(f"vector.store %x{tag}, %wt[%wr{i}, %o{tag}] : {wt}, {V16}")
    t.end()


def _multiply(t: Text, kern: Shape, wt: str, acc: str, per: int) -> None:
    """``acc[v, L i + l] += Σ_s wt[i, L s + l] · x[mb0 + v, C ch + L s + l]`` (``L`` lanes)
    for every row ``v`` of the block, ``per`` at a time."""
    x, lanes = kern.bindings["x"], kern.lanes
    vl = f"vector<{lanes}xf32>"
    t("%kc = arith.muli %ch, %c_wc : index")
    t.block("scf.for %pv = %c0 to %c_passes step %c1")
    accs = []
    for j in range(per):
        t(f"%vu{j} = {at('%pv', per, j)}")
        t(f"%v{j} = arith.minui %vu{j}, %c_last : index")
        if kern.batch == DYNAMIC_M:              # the block's row in x
            t(f"%xv{j} = arith.addi %mb0, %v{j} : index")
        for i in range(ROWS_PER_TILE):
            t(f"%ai{j}_{i} = vector.load %accb[%v{j}, %ca{i}] : {acc}, {vl}")
            accs.append(f"%ma{j}_{i} = %ai{j}_{i}")
    types = ", ".join([vl] * len(accs))
    t.block(f"%mm:{len(accs)} = scf.for %sl = %c0 to %c_slices step %c1 "
            f"iter_args({', '.join(accs)}) -> ({types})")
    t("%ks = arith.muli %sl, %c_lanes : index")
    t("%kx = arith.addi %kc, %ks : index")
    for i in range(ROWS_PER_TILE):
        t(f"%wv{i} = vector.load %wt[%wr{i}, %ks] : {wt}, {vl}")
    new = []
    for j in range(per):
        row = f"%xv{j}" if kern.batch == DYNAMIC_M else f"%v{j}"
        t(f"%xs{j} = vector.load %x[{row}, %kx] : {x}, {vl}")
        for i in range(ROWS_PER_TILE):
            t(f"%mn{j}_{i} = vector.fma %wv{i}, %xs{j}, %ma{j}_{i} : {vl}")
            new.append(f"%mn{j}_{i}")
    t(f"scf.yield {', '.join(new)} : {types}")
    t.end()
    for j in range(per):
        for i in range(ROWS_PER_TILE):
            t(f"vector.store %mm#{ROWS_PER_TILE * j + i}, %accb[%v{j}, %ca{i}] : {acc}, {vl}")
    t.end()


__all__ = [
    "CHUNK_BLOCKS",
    "DYNAMIC_M",
    "PREFILL_BLOCK",
    "VECTORS_PER_PASS",
    "WIDE_VECTORS_PER_PASS",
    "Shape",
    "aligned_alloca",
    "batched_body",
    "chunk_blocks",
    "chunk_constants",
    "dequant_tile_chunk",
    "hint_chunks",
    "rows_per_pass",
]
