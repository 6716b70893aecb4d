"""Pieces of MLIR text shared by the decode GEMV kernels (:mod:`.gemv_kernels`, one row of
``x``) and their batched form (:mod:`.gemv_batched`, ``M`` rows): the rows of a workgroup,
the loop over its row tiles and affine indices into the tile-interleaved planes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rlx.lowering.mir_to_linalg.executable import I16, V16, Text, memref

V8 = "vector<8xf32>"

ROWS_PER_TILE = 4
"""Rows a kernel loop iteration accumulates at once (four 16-lane partial sums); the weight
planes interleave each tile of this many rows (:func:`.gemv_planes.interleave_tiles`)."""


WEIGHTS_PER_WORKGROUP = 1 << 18
"""A workgroup takes at most this many weights (rows x K) when it can: IREE's per-workgroup
cost is about a microsecond, too much for 32 rows of K = 576 (a 135M model's layers and LM
head). 2^18 against 2^17 (``iree-profile`` of the 135M Q8_0 decode, 3 interleaved rounds):
the device's time per token 5.5-5.6 ms against 6.6-7.0 (the GEMVs 15-20% faster); the 1B
decode unchanged within noise."""
Q8_WEIGHTS_PER_WORKGROUP = 1 << 20
"""The same bound for a ``q8`` decode GEMV (``M = 1``, :mod:`.gemv_q8`): every workgroup
quantizes all of ``x [K]`` on its stack before its rows (and normalizes it first where the
RMSNorm prologue is fused), a cost of ``K`` a workgroup that fewer, larger workgroups
share. The kernels alone (``benchmarks/quant.py``'s ``prepare_rlx``) on the AMD EPYC Zen 5
(2 vCPUs, 5 interleaved rounds, best, 2^18 -> 2^20): Q4_K 2048 x 5632 35.3 -> 46.3 GB/s, 3072 x 8192
39.6 -> 45.1, 16384 x 3072 46.4 -> 52.3; Q8_0 +2-5%; the exact kernels (no quantization)
level within noise, so they keep :data:`WEIGHTS_PER_WORKGROUP` (benchmarks/README.md,
"Larger workgroups for the q8 GEMVs")."""
PREFILL_WEIGHTS = 1 << 21
"""The same bound for a prefill's outer-form GEMM (:mod:`.gemm_prefill`, ``M`` rows of ``x``
at run time): its loops take a chunk of ``x`` (``M x C``) once for every column block of
the workgroup, so a workgroup of few columns streams all of ``x`` again for each of them
(the down projection's ``K = 8192``: 32 columns a workgroup at 2^18, ``x`` 16 MiB at ``M =
512``). F16 on the AMD EPYC Zen 5 (2 vCPUs, 5 interleaved rounds, medians, 2^18 -> 2^21),
2048 x 8192 at M = 512 / 2048 222 -> 320 / 167 -> 311 GFLOP/s, 8192 x 3072 at 2048 300 ->
416, 3072 x 3072 at 2048 260 -> 398; Q8_0 and Q4_K alike; M = 128 level within noise
(benchmarks/README.md, "Wider workgroups for long prefills")."""
PREFILL_INT8_WEIGHTS = 1 << 20
"""The bound for the ``q8`` mode's integer GEMM prefill (:mod:`.gemm_q8`): 2^20 (Q4_K 2048 x
8192 at M = 512 572 -> 837 GFLOP/s, 2048 400 -> 629; Q8_0 level); 2^21 lost up to 15%
(8192 x 2048 at M = 2048)."""
MIN_WORKGROUPS = 4
"""...but at least this many workgroups where N allows (both threads busy)."""


def workgroup_rows(n: int, k: int, multiple: int = ROWS_PER_TILE, q8: bool = False,
                   prefill: str | None = None) -> int:
    """The rows a workgroup of a GEMV kernel (:mod:`.gemv_kernels`) takes: the largest
    multiple of ``multiple`` (4: a row tile) that divides ``n``, keeps a workgroup within
    :data:`WEIGHTS_PER_WORKGROUP` weights (``q8``, a ``q8`` decode GEMV's:
    :data:`Q8_WEIGHTS_PER_WORKGROUP`) and leaves an even count of at least
    :data:`MIN_WORKGROUPS` workgroups (two workers: an odd count leaves one workgroup
    running alone at the end); relaxed in that order. A prefill's outer-form GEMM (``prefill``
    ``"exact"``, or ``"int8"`` for the ``q8`` mode's integer GEMM) takes
    :data:`PREFILL_WEIGHTS` (:data:`PREFILL_INT8_WEIGHTS`) instead. Not only powers of two: the 135M
    model's GEMVs (qkv, o, gate_up, down, LM head) had 15 / 9 / 24 / 9 / 384 workgroups of
    power-of-two rows and now 4 / 4 / 8 / 4 / 128."""
    weights = (PREFILL_INT8_WEIGHTS if prefill == "int8" else PREFILL_WEIGHTS if prefill
               else Q8_WEIGHTS_PER_WORKGROUP if q8 else WEIGHTS_PER_WORKGROUP)
    fits = [r for r in range(n - n % multiple, 0, -multiple)
            if n % r == 0 and r * k <= weights]
    even = [r for r in fits if n // r >= MIN_WORKGROUPS and (n // r) % 2 == 0]
    busy = [r for r in fits if n // r >= MIN_WORKGROUPS]
    return (even or busy or fits or [multiple])[0]


def rows_loop(t: Text, rows: int) -> None:
    """Open the loop over the row tiles of a workgroup of ``rows`` rows; defines %tile (the
    row of the interleaved planes, ``wg · rows / 4 + tl`` with ``tl < rows / 4``) and its
    rows %r0..%r3."""
    t(f"%c_tiles = arith.constant {rows // ROWS_PER_TILE} : index")
    t(f"%c_tile = arith.constant {ROWS_PER_TILE} : index")
    t("%tile0 = arith.muli %wg, %c_tiles : index")
    t.block("scf.for %tl = %c0 to %c_tiles step %c1")
    t("%tile = arith.addi %tile0, %tl : index")
    t("%r0 = arith.muli %tile, %c_tile : index")
    for i in range(1, ROWS_PER_TILE):
        t(f"%r{i} = arith.addi %r{i - 1}, %c1 : index")


LINE_BYTES = 64
"""The cache line the prefetch hints of :func:`prefetch_ahead` count in."""
_ELEMENT_BYTES = {"i8": 1, "f16": 2, "i16": 2, "f32": 4, "i32": 4}


class _Prefetching(Protocol):
    """What :func:`prefetch_ahead` reads of a :class:`.gemv_kernels.Kernel`."""

    prefetch: int

    @property
    def bindings(self) -> dict[str, str]: ...


def plane_shape(mem: str) -> tuple[int, int, str]:
    """``(T, W, element)`` of a tile-interleaved plane's binding type ``memref<TxWxelement>``."""
    dims, element = mem.removeprefix("memref<").removesuffix(">").rsplit("x", 1)
    tiles, width = (int(d) for d in dims.split("x"))
    return tiles, width, element


def prefetch_ahead(t: Text, kern: _Prefetching, plane: str, iv: str, per_iter: int,
                   iterations: int | None = None) -> None:
    """Prefetch hints (``memref.prefetch`` at locality 2, LLVM's ``llvm.prefetch``:
    ``prefetcht1`` on x86, into L2) for the lines of ``plane`` that the loop over ``iv``
    reads ``kern.prefetch`` bytes after this iteration's, or ``iterations`` iterations after
    it (none where that is 0, or the plane is no larger). Iteration ``iv`` of
    row tile ``%tile`` reads about elements ``[iv · per_iter, (iv + 1) · per_iter)`` of row
    ``%tile`` of the tile-interleaved plane (``[T, W]``), and a workgroup's tiles are
    consecutive rows, so the hints run along the plane's flat view, on into the next tile.

    Why: on the Intel Xeon (family 6 model 207; 4 KiB pages, transparent huge pages only
    where madvised, which IREE's allocator does not do) the hardware prefetcher alone kept
    an ``M = 1`` kernel streaming its weights from DRAM at 13-18 GB/s; with hints 4 KiB
    ahead, F16 and Q8_0 ran at 26-28 GB/s and Q4_K at 20-22 (benchmarks/README.md,
    "Prefetch hints on the Intel Xeon"). Into L2 rather than L1 (``prefetcht0``, until
    2026-12-06): interleaved A/B on the same Xeon, the 3B F16 model's decode 4.09 / 4.13 ->
    4.42 / 4.49 tok/s and its GEMVs 27-32 -> 30-34 GB/s, the 1B Q8_0 and Q4_K_M decode
    within noise (benchmarks/README.md, "Prefetch into L2"). The batched bodies hint too; a
    prefill's F16 body hints a chunk ahead (:data:`.gemm_prefill.PREFILL_HINT_FORMS`).

    Bounds: a prefetch reads and writes nothing and does not fault, and its index is clamped
    to the view's last element (``T · W - 1``) all the same, so even its address stays
    inside the binding."""
    mem = kern.bindings[plane]
    tiles, width, element = plane_shape(mem)
    size = _ELEMENT_BYTES[element]
    ahead = kern.prefetch if iterations is None else iterations * per_iter * size
    if not ahead or tiles * width * size <= ahead:   # none, or the whole plane is nearer
        return
    flat = memref([tiles * width], element)
    t(f"%hint_{plane} = memref.collapse_shape %{plane} [[0, 1]] : {mem} into {flat}")
    t(f"%hint_{plane}_last = arith.constant {tiles * width - 1} : index")
    for j in range(-(-per_iter * size // LINE_BYTES)):
        off = (ahead + j * LINE_BYTES) // size
        t(f"%hint_{plane}{j} = affine.apply affine_map<()[s0, s1] -> (s0 * {width} + s1 * "
          f"{per_iter} + {off})>()[%tile, {iv}]")
        t(f"%hint_{plane}{j}c = arith.minui %hint_{plane}{j}, %hint_{plane}_last : index")
        t(f"memref.prefetch %hint_{plane}[%hint_{plane}{j}c], read, locality<2>, data : "
          f"{flat}")


def half_to_f32(t: Text, src: str, dst: str, half: str) -> None:
    """``dst`` (16 f32 lanes) = ``src``'s 16-bit values, exact: F16 (``half = "f16"``) by
    ``extf``; BF16 bits (``"i16"``) widened and shifted into an f32's top half (needs
    ``%sh16``, a vector of 16s)."""
    if half == "f16":
        t(f"{dst} = arith.extf {src} : vector<16xf16> to {V16}")
        return
    t(f"{dst}_u = arith.extui {src} : vector<16xi16> to vector<16xi32>")
    t(f"{dst}_s = arith.shli {dst}_u, %sh16 : vector<16xi32>")
    t(f"{dst} = arith.bitcast {dst}_s : vector<16xi32> to {V16}")


def at(name: str, stride: int, offset: int) -> str:
    """An index ``name * stride + offset`` (an affine.apply's right-hand side)."""
    return f"affine.apply affine_map<()[s0] -> (s0 * {stride} + {offset})>()[{name}]"


def q4_k_constants(t: Text) -> None:
    """The constants :func:`q4_k_nibble` reads: the nibble mask at bits 19..22, the f32 bits
    of 1.0 and the shift that moves nibble ``j`` of a lane there (``%sh{j}``)."""
    t(f"%mask = arith.constant dense<{0x00780000}> : {I16}")
    t(f"%one = arith.constant dense<{0x3F800000}> : {I16}")
    for j in range(8):
        if (sh := 19 - 4 * j) != 0:
            t(f"%sh{j} = arith.constant dense<{abs(sh)}> : {I16}")


def q4_k_nibble(t: Text, word: str, tag: str, j: int) -> str:
    """``%f{tag}_{j}`` = ``1 + q / 16`` for nibble ``j`` (bits ``4j``) of each lane of the
    i32 vector ``word``, built as f32 bits (``0x3F800000 | q << 19``: a shift, a mask, an
    or; no conversion); returns its name."""
    sh, shifted = 19 - 4 * j, word
    if sh:
        shifted = f"%t{tag}_{j}"
        op = "shli" if sh > 0 else "shrui"
        t(f"{shifted} = arith.{op} {word}, %sh{j} : {I16}")
    t(f"%u{tag}_{j} = arith.andi {shifted}, %mask : {I16}")
    t(f"%o{tag}_{j} = arith.ori %u{tag}_{j}, %one : {I16}")
    t(f"%f{tag}_{j} = arith.bitcast %o{tag}_{j} : {I16} to {V16}")
    return f"%f{tag}_{j}"


def q6_k_scales(t: Text, bindings: dict[str, str], iv: str, i: int) -> str:
    """``%ds{i}`` (8 f32 lanes): ``d · sc`` of the eight 16-weight groups of row ``%r{i}``'s
    128-weight unit ``iv`` in a Q6_K kernel (``sc [N / 4, K / 4]`` i8 at ``8 iv``, ``d [N /
    4, K / 64]`` f16 per superblock, tile-interleaved; an f16 times a signed byte: exact in
    f32); returns its name."""
    t(f"%ks{i} = {at(iv, 8 * ROWS_PER_TILE, 8 * i)}")
    t(f"%sb{i} = vector.load %sc[%tile, %ks{i}] : {bindings['sc']}, vector<8xi8>")
    t(f"%sf{i} = arith.sitofp %sb{i} : vector<8xi8> to {V8}")
    t(f"%kd{i} = affine.apply affine_map<()[s0] -> ((s0 floordiv 2) * {ROWS_PER_TILE} + "
      f"{i})>()[{iv}]")
    t(f"%dh{i} = memref.load %d[%tile, %kd{i}] : {bindings['d']}")
    t(f"%de{i} = arith.extf %dh{i} : f16 to f32")
    t(f"%dv{i} = vector.broadcast %de{i} : f32 to {V8}")
    t(f"%ds{i} = arith.mulf %sf{i}, %dv{i} : {V8}")
    return f"%ds{i}"


def reduction(t: Text, result: str, iv: str, upper: str, step: str, acc: str,
              acc_type: str, inits: list[str] | None = None) -> None:
    """Open ``%{result}:4 = scf.for %{iv} = 0 to upper step step`` carrying one ``acc_type``
    accumulator per row of the tile (``%{acc}0`` .. ``%{acc}3``), started at zero or at
    ``inits`` (an enclosing reduction's accumulators)."""
    if inits is None:
        t(f"%{result}_zero = arith.constant dense<0.0> : {acc_type}")
        inits = [f"%{result}_zero"] * ROWS_PER_TILE
    args = ", ".join(f"%{acc}{i} = {inits[i]}" for i in range(ROWS_PER_TILE))
    types = ", ".join([acc_type] * ROWS_PER_TILE)
    t.block(f"%{result}:{ROWS_PER_TILE} = scf.for %{iv} = %c0 to {upper} step {step} "
            f"iter_args({args}) -> ({types})")


def close_reduction(t: Text, values: list[str], acc_type: str) -> None:
    """Close a :func:`reduction` with the tile's new accumulators."""
    t(f"scf.yield {', '.join(values)} : {', '.join([acc_type] * len(values))}")
    t.end()


def q4_k_mins(t: Text, k: int, load_m: Callable[[Text, int], None]) -> None:
    """``%mins#i`` = ``Σ_g M[r_i, g] · X[g]``, eight groups (a superblock) at a time: ``%xs
    [K / 32]`` the group sums of ``x``; ``load_m(t, i)`` defines ``%mv{i}``, row ``i``'s 8
    values of ``M`` at group ``%g`` (``%km{i}`` = ``4 g + 8 i``: where a plane of a byte a
    group, tile-interleaved 8 a row, holds them); ``%nb`` = K / 32 and ``%c8`` defined."""
    xs = memref([k // 32], "f32")
    reduction(t, "mins", "g", "%nb", "%c8", "z", V8)
    t(f"%xv = vector.load %xs[%g] : {xs}, {V8}")
    for i in range(ROWS_PER_TILE):
        t(f"%km{i} = {at('%g', ROWS_PER_TILE, 8 * i)}")
        load_m(t, i)
        t(f"%mz{i} = vector.fma %mv{i}, %xv, %z{i} : {V8}")
    close_reduction(t, [f"%mz{i}" for i in range(ROWS_PER_TILE)], V8)


def q4_k_store(t: Text, bindings: dict[str, str], acc: str) -> None:
    """Each row's result, ``Σ %acc#i - Σ %mins#i`` (``%acc`` of vector type ``acc``),
    stored by :func:`store_row`; closes the rows loop."""
    for i in range(ROWS_PER_TILE):
        t(f"%sum{i} = vector.reduction <add>, %acc#{i} : {acc} into f32")
        t(f"%min{i} = vector.reduction <add>, %mins#{i} : {V8} into f32")
        t(f"%y{i} = arith.subf %sum{i}, %min{i} : f32")
        store_row(t, bindings, i, f"%y{i}")
    t.end()


def store_row(t: Text, bindings: dict[str, str], i: int, value: str) -> None:
    """Store row ``%r{i}``'s result ``value`` into ``%y`` (plus ``%r``'s, where the kernel's
    ``bindings`` have a residual ``r``)."""
    if "r" in bindings:
        t(f"%res{i} = memref.load %r[%r{i}] : {bindings['r']}")
        t(f"%out{i} = arith.addf {value}, %res{i} : f32")
        value = f"%out{i}"
    t(f"memref.store {value}, %y[%r{i}] : {bindings['y']}")


__all__ = ["LINE_BYTES", "MIN_WORKGROUPS", "Q8_WEIGHTS_PER_WORKGROUP", "ROWS_PER_TILE", "V8",
           "WEIGHTS_PER_WORKGROUP", "at",
           "close_reduction", "half_to_f32", "plane_shape", "prefetch_ahead", "q4_k_constants",
           "q4_k_mins", "q4_k_nibble", "q6_k_scales", "reduction", "rows_loop", "store_row",
           "workgroup_rows"]
