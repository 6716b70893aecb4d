"""The exact-mode ``M = 1`` bodies of :mod:`.gemv_kernels` (the Q8_0 / widened i8 plane, F16
/ BF16, Q4_K and Q5_K, Q6_K from planes of the file's size): the ``vector`` / ``scf`` /
``memref`` text inside one kernel's workgroup, after its prologue. What each computes and
the bounds it rests on: the :mod:`.gemv_kernels` module docstring; the planes:
:mod:`.gemv_planes`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from rlx.lowering.mir_to_linalg.executable import I16, V16, Text, memref
from rlx.lowering.mir_to_linalg.quant.gemv_text import (
    ROWS_PER_TILE,
    V8,
    at,
    close_reduction,
    half_to_f32,
    prefetch_ahead,
    q4_k_constants,
    q4_k_nibble,
    q6_k_scales,
    reduction,
    rows_loop,
    store_row,
)

Q5_K = "gguf_q5_k"
"""Run by :func:`q4_k_body` with a fifth bit (:func:`_q4_k_row`)."""


class ExactKernel(Protocol):
    """What these bodies read of a :class:`.gemv_kernels.Kernel`."""

    scheme: str
    k: int
    rows: int
    prefetch: int

    @property
    def bindings(self) -> dict[str, str]: ...


def _store_rows(t: Text, kern: ExactKernel, total: list[str]) -> None:
    for i, v in enumerate(total):
        t(f"%y{i} = vector.reduction <add>, {v} : {V16} into f32")
        store_row(t, kern.bindings, i, f"%y{i}")


def _blocks_of_32(t: Text, kern: ExactKernel, row: Callable[[int], str],
                  block: Callable[[], None] | None = None) -> None:
    """The loop the byte and half-precision bodies share: rows in tiles, blocks ``%b`` of 32
    weights (``%k0``, ``%k1``: its two halves, ``%x0``, ``%x1``: their ``x``) with 16-lane
    partials ``%a{i}`` a row; ``block()`` emits what the tile's rows share of a block,
    ``row(i)`` row ``i``'s block and names its new partials. Each row's sum is reduced and
    stored once."""
    x = memref([kern.k], "f32")
    t("%c16 = arith.constant 16 : index")
    t("%c32 = arith.constant 32 : index")
    t(f"%nb = arith.constant {kern.k // 32} : index")
    rows_loop(t, kern.rows)
    reduction(t, "acc", "b", "%nb", "%c1", "a", V16)
    t("%k0 = arith.muli %b, %c32 : index")
    t("%k1 = arith.addi %k0, %c16 : index")
    t(f"%x0 = vector.load %x[%k0] : {x}, {V16}")
    t(f"%x1 = vector.load %x[%k1] : {x}, {V16}")
    if block is not None:
        block()
    close_reduction(t, [row(i) for i in range(ROWS_PER_TILE)], V16)
    _store_rows(t, kern, [f"%acc#{i}" for i in range(ROWS_PER_TILE)])
    t.end()


def byte_body(t: Text, kern: ExactKernel) -> None:
    """The i8-plane kernel (Q8_0; Q5_0 / Q4_0 widened): an f16 scale per 32 weights; per
    32 weights of a row a multiply and an FMA with ``x``, one FMA applying the scale. Q5_1 /
    Q4_1 (an ``m`` plane; ``q`` unsigned, ``0..31``): one more FMA, ``m`` times the block's
    ``x0 + x1``. (Q6_K's widened plane is read by the batched body only: at ``M = 1`` it is
    :func:`q6_k_body`.) Bounds: ``m [N / 4, K / 8]`` is read where ``d`` is."""
    q, d = kern.bindings["q"], kern.bindings["d"]
    mins = kern.bindings.get("m")               # Q5_1 / Q4_1: w = d q + m, q unsigned
    tofp = "arith.uitofp" if mins else "arith.sitofp"
    tile = ROWS_PER_TILE

    def scale(plane: str, mem: str, i: int) -> str:
        """Row ``i``'s f16 ``plane`` value of block ``%b``, broadcast to 16 f32 lanes."""
        t(f"%{plane}k{i} = {at('%b', tile, i)}")
        t(f"%{plane}h{i} = memref.load %{plane}[%tile, %{plane}k{i}] : {mem}")
        t(f"%{plane}e{i} = arith.extf %{plane}h{i} : f16 to f32")
        t(f"%{plane}v{i} = vector.broadcast %{plane}e{i} : f32 to {V16}")
        return f"%{plane}v{i}"

    def row(i: int) -> str:
        for h in range(2):
            t(f"%qk{i}_{h} = {at('%b', 32 * tile, 32 * i + 16 * h)}")
            t(f"%q{i}_{h} = vector.load %q[%tile, %qk{i}_{h}] : {q}, vector<16xi8>")
            t(f"%f{i}_{h} = {tofp} %q{i}_{h} : vector<16xi8> to {V16}")
        t(f"%p{i} = arith.mulf %f{i}_0, %x0 : {V16}")
        t(f"%s{i} = vector.fma %f{i}_1, %x1, %p{i} : {V16}")
        t(f"%n{i} = vector.fma %s{i}, {scale('d', d, i)}, %a{i} : {V16}")
        if not mins:
            return f"%n{i}"
        t(f"%o{i} = vector.fma %xs, {scale('m', mins, i)}, %n{i} : {V16}")
        return f"%o{i}"

    def block() -> None:
        prefetch_ahead(t, kern, "q", "%b", 32 * tile)
        if mins:                                # the block's x, summed in its lanes
            t(f"%xs = arith.addf %x0, %x1 : {V16}")

    _blocks_of_32(t, kern, row, block)


def half_body(t: Text, kern: ExactKernel) -> None:
    """The half-precision kernel (``gguf_f16``, ``gguf_bf16``): per 32 weights of a row two
    16-lane loads, two conversions to f32 (F16: ``extf``; BF16: its bits widened and shifted
    into the top half of an f32, exact) and two FMAs with ``x`` into the row's partials.
    Bounds: as :func:`byte_body`'s (the plane ``[N / 4, 4 K]``; ``b < K / 32``, a load at
    ``32 · 4 b + 32 i + 16 h + 15 < 4 K``)."""
    w = kern.bindings["w"]
    half = "f16" if kern.scheme == "gguf_f16" else "i16"
    tile = ROWS_PER_TILE
    if half == "i16":
        t("%sh16 = arith.constant dense<16> : vector<16xi32>")

    def row(i: int) -> str:
        for h in range(2):
            t(f"%wk{i}_{h} = {at('%b', 32 * tile, 32 * i + 16 * h)}")
            t(f"%w{i}_{h} = vector.load %w[%tile, %wk{i}_{h}] : {w}, vector<16x{half}>")
            half_to_f32(t, f"%w{i}_{h}", f"%f{i}_{h}", half)
        t(f"%p{i} = vector.fma %f{i}_0, %x0, %a{i} : {V16}")
        t(f"%n{i} = vector.fma %f{i}_1, %x1, %p{i} : {V16}")
        return f"%n{i}"

    _blocks_of_32(t, kern, row, lambda: prefetch_ahead(t, kern, "w", "%b", 32 * tile))


MAX_SCALES_K = 32768
"""The largest ``K`` of the exact Q4_K / Q5_K kernel at ``M = 1``: its stack holds the tile's
``S`` (``K / 8`` f32) and the group sums of ``x`` (``K / 32``), 20 KiB at this ``K``, with
the RMSNorm prologue's ``x`` (``K <= 4096``) well within IREE's 32 KiB."""


def q4_k_body(t: Text, kern: ExactKernel) -> None:
    """The Q4_K kernel (and Q5_K's): per row ``Σ_g S · F - Σ_g M · X`` (see the module
    docstring), ``S`` and ``M`` formed from the scale bytes once per row tile
    (:func:`_tile_scales`)."""
    k, nb = kern.k, kern.k // 32
    for c in (4, 8, 16, 32, 128):
        t(f"%c{c} = arith.constant {c} : index")
    t(f"%nb = arith.constant {nb} : index")
    t(f"%nc = arith.constant {k // 128} : index")
    _group_sums(t, kern)
    t(f"%sbuf = memref.alloca() : {memref([k // 8], 'f32')}")
    q4_k_constants(t)
    factor = "3.200000e+01" if kern.scheme == Q5_K else "1.600000e+01"
    t(f"%kf16 = arith.constant dense<{factor}> : {V16}")
    if kern.scheme == Q5_K:
        _q5_k_constants(t)
    rows_loop(t, kern.rows)
    _tile_scales(t, kern)
    reduction(t, "acc", "c", "%nc", "%c1", "a", V16)
    prefetch_ahead(t, kern, "q", "%c", 16 * ROWS_PER_TILE)
    if kern.scheme == Q5_K:
        prefetch_ahead(t, kern, "h", "%c", 16 * ROWS_PER_TILE)
    t("%k0 = arith.muli %c, %c128 : index")
    for j in range(8):
        t(f"%kx{j} = affine.apply affine_map<()[s0] -> (s0 + {16 * j})>()[%k0]")
        t(f"%x{j} = vector.load %x[%kx{j}] : {memref([k], 'f32')}, {V16}")
    for i in range(ROWS_PER_TILE):
        _q4_k_row(t, kern, i)
    close_reduction(t, [f"%A{i}_3" for i in range(ROWS_PER_TILE)], V16)
    for i in range(ROWS_PER_TILE):               # y = Σ S F - Σ M X (M X: lanes 4i..4i+3)
        t(f"%sum{i} = vector.reduction <add>, %acc#{i} : {V16} into f32")
        lanes = ", ".join(str(4 * i + g) for g in range(4))
        t(f"%mz{i} = vector.shuffle %zm, %zm [{lanes}] : {V16}, {V16}")
        t(f"%min{i} = vector.reduction <add>, %mz{i} : vector<4xf32> into f32")
        t(f"%y{i} = arith.subf %sum{i}, %min{i} : f32")
        store_row(t, kern.bindings, i, f"%y{i}")
    t.end()


def _tile_scales(t: Text, kern: ExactKernel) -> None:
    """Before a row tile's reduction, per chunk ``c`` of 128 weights: ``%sbuf[16 c + 4 i + g]``
    = ``S = kf · d · sc`` of row ``i``'s group ``4c + g`` (the tile's 16 ``sc`` bytes
    ``sc[tile, 16 c + [0, 16)]``, the superblock's four f16 ``d`` at ``d[tile, 4 (c / 2) +
    [0, 4)]``), and ``%zm`` (16 lanes) = ``Σ_c M · X`` with ``M = S + dmin · m`` (the ``mn``
    bytes and ``dmin`` at the same places) and ``X`` the group sums ``%xs[4c + g]``: row
    ``i``'s mins in lanes ``4i .. 4i + 3``. ``d · sc`` and ``dmin · m`` are exact in f32 (11
    x 6 significant bits), the factor a power of two: ``S`` and ``M`` are the values the
    f32 planes this replaces held (2026-12-04), bit for bit. Kept in a stack buffer, ``S``
    reaches the reduction by a broadcast load, as from the plane before (forming it per
    chunk in the reduction cost an extract and a broadcast a group: 16% on an AVX2 CPU)."""
    mem = kern.bindings
    t(f"%zz = arith.constant dense<0.0> : {V16}")
    t.block(f"%zm = scf.for %pc = %c0 to %nc step %c1 iter_args(%z = %zz) -> ({V16})")
    t("%pk = arith.muli %pc, %c16 : index")
    for b in ("sc", "mn"):
        t(f"%p{b}b = vector.load %{b}[%tile, %pk] : {mem[b]}, vector<16xi8>")
        t(f"%p{b}i = arith.extui %p{b}b : vector<16xi8> to {I16}")
        t(f"%p{b}f = arith.uitofp %p{b}i : {I16} to {V16}")
    t("%pkd = affine.apply affine_map<()[s0] -> ((s0 floordiv 2) * 4)>()[%pc]")
    lanes = ", ".join(str(i) for i in range(ROWS_PER_TILE) for _ in range(4))
    for f in ("d", "dmin"):
        t(f"%p{f}h = vector.load %{f}[%tile, %pkd] : {mem[f]}, vector<4xf16>")
        t(f"%p{f}4 = arith.extf %p{f}h : vector<4xf16> to vector<4xf32>")
        t(f"%p{f}16 = vector.shuffle %p{f}4, %p{f}4 [{lanes}] : vector<4xf32>, "
          "vector<4xf32>")
    t(f"%pa = arith.mulf %pscf, %pd16 : {V16}")
    t(f"%pS = arith.mulf %pa, %kf16 : {V16}")
    t(f"vector.store %pS, %sbuf[%pk] : {memref([kern.k // 8], 'f32')}, {V16}")
    t(f"%pb = arith.mulf %pmnf, %pdmin16 : {V16}")
    t(f"%pM = arith.addf %pS, %pb : {V16}")
    t("%pkx = arith.muli %pc, %c4 : index")
    t(f"%px4 = vector.load %xs[%pkx] : {memref([kern.k // 32], 'f32')}, vector<4xf32>")
    groups = ", ".join(str(g) for _ in range(ROWS_PER_TILE) for g in range(4))
    t(f"%pX = vector.shuffle %px4, %px4 [{groups}] : vector<4xf32>, vector<4xf32>")
    t(f"%pz = vector.fma %pM, %pX, %z : {V16}")
    t(f"scf.yield %pz : {V16}")
    t.end()


def _group_sums(t: Text, kern: ExactKernel) -> None:
    """``%xs`` = X[g]: the sum of x over each group of 32, once per workgroup."""
    nb = kern.k // 32
    xs = memref([nb], "f32")
    t(f"%xs = memref.alloca() : {xs}")
    t.block("scf.for %g = %c0 to %nb step %c1")
    t("%kg = arith.muli %g, %c32 : index")
    t(f"%xg = vector.load %x[%kg] : {memref([kern.k], 'f32')}, vector<32xf32>")
    t("%sg = vector.reduction <add>, %xg : vector<32xf32> into f32")
    t(f"memref.store %sg, %xs[%g] : {xs}")
    t.end()


def _q4_k_row(t: Text, kern: ExactKernel, i: int) -> None:
    """Row ``%r{i}`` of the tile, chunk ``%c`` (128 weights): ``%A{i}_3`` = ``%a{i}`` plus
    ``Σ_g S · F`` over its four groups."""
    q = kern.bindings["q"]
    tile = ROWS_PER_TILE
    t(f"%kq{i} = {at('%c', 16 * tile, 16 * i)}")
    t(f"%w{i} = vector.load %q[%tile, %kq{i}] : {q}, {I16}")
    if kern.scheme == Q5_K:                      # the chunk's high bits: a byte a lane
        t(f"%hb{i} = vector.load %h[%tile, %kq{i}] : {kern.bindings['h']}, vector<16xi8>")
        t(f"%he{i} = arith.extui %hb{i} : vector<16xi8> to {I16}")
    for j in range(8):
        if kern.scheme == Q5_K:
            _q5_k_value(t, f"%w{i}", f"%he{i}", str(i), j)
        else:
            q4_k_nibble(t, f"%w{i}", str(i), j)
    prev = f"%a{i}"
    for g in range(4):
        t(f"%p{i}_{g} = arith.mulf %f{i}_{2 * g}, %x{2 * g} : {V16}")
        t(f"%F{i}_{g} = vector.fma %f{i}_{2 * g + 1}, %x{2 * g + 1}, %p{i}_{g} : {V16}")
        t(f"%ks{i}_{g} = {at('%c', 4 * tile, 4 * i + g)}")
        t(f"%S{i}_{g} = memref.load %sbuf[%ks{i}_{g}] : {memref([kern.k // 8], 'f32')}")
        t(f"%B{i}_{g} = vector.broadcast %S{i}_{g} : f32 to {V16}")
        t(f"%A{i}_{g} = vector.fma %F{i}_{g}, %B{i}_{g}, {prev} : {V16}")
        prev = f"%A{i}_{g}"


def _q5_k_constants(t: Text) -> None:
    """What :func:`_q5_k_value` reads besides :func:`.gemv_text.q4_k_constants`' ``%one``:
    the masks of bits 18..21 and of bit 22, and the shifts that move nibble ``j`` (bits
    ``4j``) to bit 18 and high bit ``j`` (bit ``j``) to bit 22."""
    t(f"%mask5 = arith.constant dense<{0x003C0000}> : {I16}")
    t(f"%hbit = arith.constant dense<{0x00400000}> : {I16}")
    for v in sorted({abs(18 - 4 * j) for j in range(8)} | {22 - j for j in range(8)}):
        t(f"%q5s{v} = arith.constant dense<{v}> : {I16}")


def _q5_k_value(t: Text, word: str, high: str, tag: str, j: int) -> None:
    """``%f{tag}_{j}`` = ``1 + q / 32`` for the 5-bit ``q`` of each lane: nibble ``j`` of
    ``word`` (bits ``4j``) and bit ``j`` of ``high``, built as the f32 bits ``0x3F800000 | q
    << 18`` (shifts, masks and ors; no conversion)."""
    sh = 18 - 4 * j
    op = "shli" if sh > 0 else "shrui"
    t(f"%t{tag}_{j} = arith.{op} {word}, %q5s{abs(sh)} : {I16}")
    t(f"%u{tag}_{j} = arith.andi %t{tag}_{j}, %mask5 : {I16}")
    t(f"%g{tag}_{j} = arith.shli {high}, %q5s{22 - j} : {I16}")
    t(f"%v{tag}_{j} = arith.andi %g{tag}_{j}, %hbit : {I16}")
    t(f"%e{tag}_{j} = arith.ori %u{tag}_{j}, %v{tag}_{j} : {I16}")
    t(f"%o{tag}_{j} = arith.ori %e{tag}_{j}, %one : {I16}")
    t(f"%f{tag}_{j} = arith.bitcast %o{tag}_{j} : {I16} to {V16}")


Q6_K_HIGH_SHIFTS = {j: 2 * j - 4 for j in range(8)}
"""Per 16-weight group ``j`` of a 128-weight chunk: the right shift (negative: left) that
moves its 2-bit high field (bits ``2j`` of the ``qh`` lanes) to bits 4-5 of the quant."""


def q6_k_constants(t: Text) -> None:
    """The masks and shifts :func:`q6_k_unit` reads."""
    t(f"%m15 = arith.constant dense<15> : {I16}")
    t(f"%m48 = arith.constant dense<48> : {I16}")
    t(f"%b32 = arith.constant dense<32> : {I16}")
    shifts = {abs(v) for v in Q6_K_HIGH_SHIFTS.values()} | {4 * j for j in range(8)}
    for v in sorted(shifts - {0}):
        t(f"%s{v} = arith.constant dense<{v}> : {I16}")


def q6_k_unit(t: Text, mem: dict[str, str], unit: str, i: int) -> list[str]:
    """Row ``%r{i}``'s 128-weight unit ``unit`` of the packed Q6_K planes (tile ``%tile``):
    per group ``j`` of 16, its quants ``q - 32`` as f32, ``q = lo | hi << 4`` taken from
    lane ``l`` of the unit's nibble word (nibble ``j`` at bits ``4j``) and 2-bit word (field
    ``j`` at bits ``2j``). Their scales ``d · sc``: :func:`.gemv_text.q6_k_scales`."""
    t(f"%kq{i} = {at(unit, 16 * ROWS_PER_TILE, 16 * i)}")
    t(f"%w{i} = vector.load %ql[%tile, %kq{i}] : {mem['ql']}, {I16}")
    t(f"%hh{i} = vector.load %qh[%tile, %kq{i}] : {mem['qh']}, vector<16xi16>")
    t(f"%h{i} = arith.extui %hh{i} : vector<16xi16> to {I16}")
    quants = []
    for j in range(8):
        lo = f"%w{i}"
        if j:
            lo = f"%ls{i}_{j}"
            t(f"{lo} = arith.shrui %w{i}, %s{4 * j} : {I16}")
        t(f"%lo{i}_{j} = arith.andi {lo}, %m15 : {I16}")
        hi, sh = f"%h{i}", Q6_K_HIGH_SHIFTS[j]
        if sh:
            hi = f"%hs{i}_{j}"
            t(f"{hi} = arith.{'shrui' if sh > 0 else 'shli'} %h{i}, %s{abs(sh)} : {I16}")
        t(f"%hi{i}_{j} = arith.andi {hi}, %m48 : {I16}")
        t(f"%q{i}_{j} = arith.ori %lo{i}_{j}, %hi{i}_{j} : {I16}")
        t(f"%qc{i}_{j} = arith.subi %q{i}_{j}, %b32 : {I16}")
        t(f"%f{i}_{j} = arith.sitofp %qc{i}_{j} : {I16} to {V16}")
        quants.append(f"%f{i}_{j}")
    return quants


Q6_K_SCALE_CHUNKS = 16
"""The exact Q6_K kernel forms the scales ``d · sc`` of this many 128-weight chunks (or of
the largest count dividing ``K / 128`` below it) into a stack buffer before it reduces them
(``32 · 16`` f32, 2 KiB, at any ``K``)."""


def q6_k_body(t: Text, kern: ExactKernel) -> None:
    """Q6_K at ``M = 1`` from planes of the file's size: per row and chunk ``c`` of 128
    weights, ``Σ_j (d · sc[8c + j]) · Σ_l (q - 32) · x`` over its eight groups of 16
    (:func:`q6_k_unit`). The reduction runs over blocks of ``B`` chunks
    (:data:`Q6_K_SCALE_CHUNKS`, ``B`` dividing ``K / 128``): first the tile's ``d · sc`` of
    the block's chunks into ``%sbuf [32 B]`` (an f16 times a signed byte: exact in f32;
    row ``i``'s group ``j`` of chunk ``u`` at ``32 u + 8 i + j < 32 B``), then the chunks,
    each group's scale a broadcast load from there. Extracting it from the chunk's 8-lane
    vector instead (as up to 2026-12-04) cost a shuffle and a broadcast per 16 weights and
    row, a quarter of the loop's instructions on AVX-512 (Zen 4); a store in the same loop
    is forwarded by LLVM into exactly that extract, hence a loop of its own."""
    k, mem = kern.k, kern.bindings
    nc = k // 128
    blk = math.gcd(nc, Q6_K_SCALE_CHUNKS)
    tile = ROWS_PER_TILE
    sb = memref([8 * tile * blk], "f32")
    t(f"%nblk = arith.constant {nc // blk} : index")
    t(f"%cblk = arith.constant {blk} : index")
    t(f"%sbuf = memref.alloca() : {sb}")
    q6_k_constants(t)
    rows_loop(t, kern.rows)
    reduction(t, "acc", "ob", "%nblk", "%c1", "a", V16)
    t("%cb = arith.muli %ob, %cblk : index")
    t.block("scf.for %u = %c0 to %cblk step %c1")
    t("%cs = arith.addi %cb, %u : index")
    for i in range(tile):
        ds = q6_k_scales(t, mem, "%cs", i)
        t(f"%so{i} = {at('%u', 8 * tile, 8 * i)}")
        t(f"vector.store {ds}, %sbuf[%so{i}] : {sb}, {V8}")
    t.end()
    reduction(t, "in", "v", "%cblk", "%c1", "ib", V16, inits=[f"%a{i}" for i in range(tile)])
    t("%c = arith.addi %cb, %v : index")
    for plane in ("ql", "qh"):
        prefetch_ahead(t, kern, plane, "%c", 16 * tile)
    t(f"%k0 = {at('%c', 128, 0)}")
    for j in range(8):
        t(f"%kx{j} = affine.apply affine_map<()[s0] -> (s0 + {16 * j})>()[%k0]")
        t(f"%x{j} = vector.load %x[%kx{j}] : {memref([k], 'f32')}, {V16}")
    for i in range(tile):
        quants = q6_k_unit(t, mem, "%c", i)
        prev = f"%ib{i}"
        for j in range(8):
            t(f"%p{i}_{j} = arith.mulf {quants[j]}, %x{j} : {V16}")
            t(f"%sk{i}_{j} = {at('%v', 8 * tile, 8 * i + j)}")
            t(f"%se{i}_{j} = memref.load %sbuf[%sk{i}_{j}] : {sb}")
            t(f"%sv{i}_{j} = vector.broadcast %se{i}_{j} : f32 to {V16}")
            t(f"%A{i}_{j} = vector.fma %p{i}_{j}, %sv{i}_{j}, {prev} : {V16}")
            prev = f"%A{i}_{j}"
    close_reduction(t, [f"%A{i}_7" for i in range(tile)], V16)
    close_reduction(t, [f"%in#{i}" for i in range(tile)], V16)
    _store_rows(t, kern, [f"%acc#{i}" for i in range(tile)])
    t.end()


__all__ = ["Q6_K_HIGH_SHIFTS", "ExactKernel", "byte_body", "half_body", "q4_k_body", "q6_k_body",
           "q6_k_constants", "q6_k_unit"]
