"""The ``activation_quant="q8"`` form of the decode GEMV kernels (:mod:`.gemv_kernels`,
``M = 1``): ``x`` quantized to int8 blocks of 32 and multiplied with integer dot products,
llama.cpp's numerics (``ggml_vec_dot_q8_0_q8_0``, ``..._q4_K_q8_K``), an opt-in mode of its
own (``LoweringOptions.activation_quant``; the exact f32 kernels are the default).

**Quantizing x.** Every workgroup quantizes ``x [K]`` (or the prologue's ``%x``) into stack
buffers first, as ggml's ``q8_0``: per block ``b`` of 32, ``d_b = amax_b / 127``, ``q_i =
round(x_i · (1 / d_b))`` (to nearest, ties to even; ``q = 0`` where ``d_b = 0``), an i8 in
``[-127, 127]`` since ``|x_i · (1 / d_b)| <= 127 (1 + 2^-23)``; plus, for Q4_K's mins, the
sums ``X_b = d_b · Σ q_i`` of the quantized block (ggml's ``bsums``; so the kernel computes
``W x̃`` for the quantized ``x̃``, mins included, up to f32 rounding). That is ``K``
loads and stores against the workgroup's ``rows · K`` weights (at least 64 rows at ``K <=
4096``): a few percent, and no dispatch of its own (a dispatch costs IREE a few microseconds,
as long as a 2048 x 2048 GEMV's 4%; every workgroup computes the same bytes).

**Error.** Per block ``|x_i - d_b q_i| <= d_b / 2 (1 + 2^-16)`` (the rounding of
``1 / d_b`` and of the product are relative ``2^-24`` each, at most 127 of them), so
``|y_q8 - y| <= Σ_b (amax_b / 254) (1 + 2^-16) Σ_{i in b} |w_i|`` plus f32 rounding: the
bound ``tests/numerics/test_quant.py`` checks, per output.

**Block dot products** (``LoweringOptions.int_dot``, from the target CPU's features:
:func:`rlx.compiler.int_dot_of`), per block of 32 weights and row, into 8 i32 lanes (lane
``j`` = products ``4j .. 4j + 3``, the same in every form, so all three give the same sums
and the same result, bit for bit):

- ``vnni``: ``vpdpbusd`` (AVX-512 VNNI's 256-bit form, or AVX-VNNI) through
  ``llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"``: unsigned bytes times signed bytes,
  four products summed into each i32 lane exactly;
- ``avx2``: ``vpmaddubsw`` (u8 x i8, pairs summed into saturating i16 lanes) then
  ``vpmaddwd`` with ones (pairs of i16 into i32), ``llvm.x86.avx2.pmadd.ub.sw`` and
  ``llvm.x86.avx2.pmadd.wd``;
- ``portable``: ``arith.extui`` / ``extsi`` / ``muli`` to 32 i32 products, and the four
  ``vector.shuffle`` ops of lanes ``4m + j`` added (any llvm-cpu target; a ``vector<8x4xi32>``
  ``multi_reduction`` fails IREE 3.13's translation to LLVM in a hand-written body:
  ``unrealized_conversion_cast`` of ``!llvm.array<8 x vector<4xi32>>``).

The unsigned operand: Q4_K's nibbles are ``0 .. 15`` as they are, Q6_K's 6-bit ``q`` ``0 ..
63`` (its ``- 32`` applied through the sums of ``x``, :func:`q6_k_body`); Q8_0's signed ``w`` goes
in as ``|w|`` (``vpabsb``: 128 for -128, read unsigned) with ``x``'s sign flipped where
``w < 0`` (``vpsignb(x, w)``, zero where ``w = 0``), so ``|w| · sign(w) x = w x`` for every
byte of the file, -128 included (llama.cpp flips ``w`` by ``x``'s sign instead, which wraps
for ``w = -128``).

**No overflow.** ``x``'s bytes are in ``[-127, 127]``. Q8_0: ``|w| <= 128``, so a
``vpmaddubsw`` lane is at most ``2 · 128 · 127 = 32512 < 2^15 - 1`` (never saturates), a
``vpmaddwd`` / ``vpdpbusd`` lane ``4 · 128 · 127 = 65024`` and a block's sum ``32 · 128 · 127
= 520192 < 2^24``: exact in i32 and in its f32 conversion (Q5_0 / Q4_0's ``|w| <= 32`` and
Q6_K's ``q <= 63``, a ``vpmaddubsw`` lane ``2 · 63 · 127 = 16002``, are further inside).
Q4_K: ``15 · 127 = 1905`` a product, a block ``60960``; Q5_K: ``31 · 127 = 3937``, a
``vpmaddubsw`` lane ``7874``, a block ``125984``. The portable form's products and sums
are i32, no closer.

**Scaling**: per block, ``y += (d_w · d_x) · dot`` in 8-lane f32 partial sums per row (Q8_0:
the tile's four f16 ``d_w`` of a block loaded and converted together); Q4_K: ``y = Σ_g
(A_g · d_x,g) · dot_g - Σ_g B_g · X_g`` with ``A = d · sc``, ``B = dmin · m`` per group,
formed in the kernel from the 6-bit ``sc`` / ``m`` bytes and the f16 ``d`` / ``dmin`` (exact
in f32: 11 x 6 significant bits), the mins through ``X`` one superblock (8 groups) at a
time. Q5_K as Q4_K, its ``q`` 5 bits (``0 .. 31``).

**Planes** (:mod:`.gemv_planes`; tile-interleaved,
:meth:`.gemv_kernels.Kernel.interleave_widths`): Q8_0 / Q5_0 / Q4_0 the exact kernel's
(i8 ``q``, f16 ``d`` per 32); Q6_K the file's ``ql``, ``qh`` and signed scale bytes as they
are and ``d`` per superblock (0.82 bytes a weight, the file's: :func:`q6_k_body` forms the
6-bit ``q`` in the kernel, four byte operations a block of 32, and its block dot's lanes 0-3
and 4-7 take one scale each); Q4_K the file's ``qs`` bytes as they are (byte ``32p +
l`` of a row holds weight ``64p + l`` in its low nibble and ``64p + 32 + l`` in its high
one: ggml's order, one 32-byte load feeds two groups), ``sc`` and ``m`` unpacked to a byte
per group, ``d`` and ``dmin`` per superblock: 0.58 bytes a weight (the file's 0.5625; the
exact kernel's f32 ``S`` / ``M`` planes make 0.81, and f32 ``A`` / ``B`` planes here 0.75):
forming ``A`` in the kernel costs 5 instructions per 256 weights of a tile (78 against 73 in
the AVX2 inner loop), well under what the integer dot leaves before memory binds, for 22%
fewer bytes read and held. Q5_K: Q4_K's planes (its ``qs`` at byte 48) and the file's ``qh``
bytes ``[N, K / 8]`` as they are (0.70 bytes a weight; the file's 0.6875): per pair a
32-byte ``qh`` load a row (the superblock's, from cache after the first pair), one shift by
``2 (p % 4)`` and two shift-mask-or steps (:func:`_q5_k_high`).

**Bounds** (shapes as :class:`.gemv_kernels.Kernel` checks them; ``tile < N / 4``, ``r_i <
N`` as there): the stack ``xq [K]`` i8, ``xd``, ``xs [K / 32]`` f32 (``K <= MAX_Q8_K``: with
the prologue's ``x [K]`` f32 at ``K <= 4096``, 21 KiB of IREE's 32) written at ``32 b + [0,
32)`` and ``b < K / 32``. Q8_0: block ``b < K / 32`` reads ``q [N / 4, 4 K]`` at ``128 b +
32 i + [0, 32) < 4 K``, ``d [N / 4, K / 8]`` at ``4 b + [0, 4) < K / 8``. Q4_K: pair ``p <
K / 64`` reads ``q [N / 4, 2 K]`` at ``128 p + 32 i + [0, 32) < 2 K``, ``sc [N / 4, K / 8]``
at ``8 p + [0, 8) < K / 8``, ``d [N / 4, K / 64]`` at ``4 (p / 4) + [0, 4) < K / 64``, ``xq``
at ``64 p + [0, 64) < K``, ``xd`` at ``2 p + [0, 2) < K / 32``; the mins, superblock ``g /
8`` (``g = 0, 8, .. < K / 32``), ``xs`` at ``g + [0, 8)``, ``mn [N / 4, K / 8]`` at ``4 g + 8
i + [0, 8) < K / 8`` and ``dmin [N / 4, K / 64]`` at ``g / 2 + i < K / 64``. Q5_K as Q4_K,
and ``qh [N / 4, K / 2]`` at ``128 (p / 4) + 32 i + [0, 32) < 128 (K / 256) = K / 2`` (``p /
4 < K / 256``).
Q6_K: half ``h < K / 128`` reads ``ql [N / 4, 2 K]`` at ``256 h + 64 i + [0, 64) < 2 K``,
``qh [N / 4, K]`` at ``128 h + 32 i + [0, 32) < K``, ``sc [N / 4, K / 4]`` at ``32 h + 8 i +
[0, 8) < K / 4``, ``d [N / 4, K / 64]`` at ``4 (h / 2) + i < K / 64``, ``xq`` at ``128 h +
[0, 128) < K``, ``xd`` at ``4 h + [0, 4) < K / 32`` and the stack ``xh [K / 16]`` at ``8 h +
[0, 8) < K / 16`` (written at ``2 b + [0, 2)``, ``b < K / 32``).
"""

from __future__ import annotations

from typing import Protocol

from rlx.lowering.mir_to_linalg.executable import Text, f32_literal, memref
from rlx.lowering.mir_to_linalg.quant.gemv_text import (
    ROWS_PER_TILE,
    V8,
    at,
    close_reduction,
    prefetch_ahead,
    q4_k_mins,
    q4_k_store,
    q6_k_scales,
    reduction,
    rows_loop,
    store_row,
)

MAX_Q8_K = 16384
"""The largest ``K`` of a ``q8`` kernel: its stack buffers (``1.25 K`` bytes, Q6_K's ``1.5
K`` with its ``xh``, and ``4 K`` more for a prologue's ``x``, which :mod:`.fuse` takes only
at ``K <= 4096``) stay within IREE's 32 KiB."""
V32B = "vector<32xi8>"
I8L = "vector<8xi32>"


class Shape(Protocol):
    """What the ``q8`` bodies read of a :class:`.gemv_kernels.Kernel`."""

    scheme: str
    k: int
    rows: int
    batch: int
    int_dot: str | None
    prefetch: int

    @property
    def bindings(self) -> dict[str, str]: ...


def quantize_x(t: Text, k: int, sums: bool, int_dot: str, rows: int = 1,
               halves: bool = False) -> None:
    """``%xq [M K]`` i8 and ``%xd [M K / 32]`` f32: ``%x`` (``[K]``; ``rows = M > 1``: ``[M,
    K]``, block ``c`` of the flattened rows being row ``c / (K / 32)``'s block ``c mod K /
    32``) in blocks of 32 as ggml's ``q8_0`` (module docstring); ``sums``: ``%xs [K / 32]``,
    the sums of the quantized ``x`` per block too (``d_b · Σ q``: the integer sum is exact in
    f32); ``halves``: ``%xh [M K / 16]``, ``-32 Σ q`` over each half block of 16 (Q6_K's
    offset: at most ``32 · 16 · 127``, exact in f32), written at ``2 c + [0, 2)``.
    ``int_dot``: the kernel's form (its rounding instruction)."""
    nb = k // 32
    x = memref([rows, k] if rows > 1 else [k], "f32")
    xq, xd = memref([rows * k], "i8"), memref([rows * nb], "f32")
    quantize_constants(t, nb)
    t(f"%q8_all = arith.constant {rows * nb} : index")
    t(f"%xq = memref.alloca() : {xq}")
    t(f"%xd = memref.alloca() : {xd}")
    if sums:
        t(f"%xs = memref.alloca() : {xd}")
    xh = memref([2 * rows * nb], "f32")         # two halves of every block c < M K / 32
    if halves:
        t(f"%xh = memref.alloca() : {xh}")
        t(f"%q8_m32 = arith.constant {f32_literal(-32.0)} : f32")
    t.block("scf.for %qb = %c0 to %q8_all step %c1")
    t("%qo = arith.muli %qb, %q8_c32 : index")
    if rows > 1:
        t("%qrow = arith.divui %qb, %q8_nb : index")
        t("%qblk = arith.remui %qb, %q8_nb : index")
        t("%qk = arith.muli %qblk, %q8_c32 : index")
        t(f"%qv = vector.load %x[%qrow, %qk] : {x}, vector<32xf32>")
    else:
        t(f"%qv = vector.load %x[%qo] : {x}, vector<32xf32>")
    quantize_block(t, int_dot)
    t(f"%qi = arith.fptosi %qn : vector<32xf32> to {V32B}")
    t(f"vector.store %qi, %xq[%qo] : {xq}, {V32B}")
    t(f"memref.store %qd, %xd[%qb] : {xd}")
    if sums:
        t("%qsq = vector.reduction <add>, %qn : vector<32xf32> into f32")
        t("%qsum = arith.mulf %qsq, %qd : f32")
        t(f"memref.store %qsum, %xs[%qb] : {xd}")
    if halves:
        for half in range(2):
            lanes = ", ".join(str(16 * half + j) for j in range(16))
            t(f"%qhv{half} = vector.shuffle %qn, %qn [{lanes}] : vector<32xf32>, "
              "vector<32xf32>")
            t(f"%qhs{half} = vector.reduction <add>, %qhv{half} : vector<16xf32> into f32")
            t(f"%qhm{half} = arith.mulf %qhs{half}, %q8_m32 : f32")
            t(f"%qhi{half} = affine.apply affine_map<()[s0] -> (s0 * 2 + {half})>()[%qb]")
            t(f"memref.store %qhm{half}, %xh[%qhi{half}] : {xh}")
    t.end()


def quantize_constants(t: Text, nb: int) -> None:
    """The constants :func:`quantize_block` reads, and ``%q8_c32``, ``%q8_nb`` (= ``nb``)."""
    t("%q8_c32 = arith.constant 32 : index")
    t(f"%q8_nb = arith.constant {nb} : index")
    t(f"%q8_127 = arith.constant {f32_literal(127.0)} : f32")
    t(f"%q8_one = arith.constant {f32_literal(1.0)} : f32")
    t("%q8_zero = arith.constant 0.0 : f32")
    t(f"%q8_abs = arith.constant dense<{0x7FFFFFFF}> : vector<32xi32>")


def quantize_block(t: Text, int_dot: str) -> None:
    """One block of 32 as ggml's ``q8_0``: from ``%qv`` (32 f32), its scale ``%qd`` =
    ``amax / 127`` and ``%qn`` = ``round-half-even(x · (1 / d))`` (32 f32 integers in
    ``[-127, 127]``; 0 where ``d = 0``). Every q8 kernel quantizes with these lines, so a
    decode and a prefill see the same bytes for the same ``x``."""
    # amax as the largest |x| bit pattern (an unsigned max of the bits without the sign
    # bit: ordered as the magnitudes), where a float max reduction costs NaN checks
    t("%qb32 = arith.bitcast %qv : vector<32xf32> to vector<32xi32>")
    t("%qab = arith.andi %qb32, %q8_abs : vector<32xi32>")
    t("%qmb = vector.reduction <maxui>, %qab : vector<32xi32> into i32")
    t("%qm = arith.bitcast %qmb : i32 to f32")
    t("%qd = arith.divf %qm, %q8_127 : f32")
    t("%qnz = arith.cmpf ogt, %qd, %q8_zero : f32")
    t("%qr = arith.divf %q8_one, %qd : f32")
    t("%qid = arith.select %qnz, %qr, %q8_zero : f32")
    t("%qidv = vector.broadcast %qid : f32 to vector<32xf32>")
    t("%qs = arith.mulf %qv, %qidv : vector<32xf32>")
    if int_dot == "portable":
        t("%qn = math.roundeven %qs : vector<32xf32>")
    else:
        # llvm.intr.roundeven where the CPU has SSE4.1's vroundps (every AVX2 / VNNI one):
        # IREE expands math.roundeven into ~200 integer instructions a block (the AVX2
        # assembly: the quantization loop 280 -> 60 instructions a block); elsewhere LLVM
        # would call roundevenf, which IREE's embedded executables cannot link
        t("%qn = llvm.intr.roundeven(%qs) : (vector<32xf32>) -> vector<32xf32>")


def dot_constants(t: Text, int_dot: str) -> None:
    """What :func:`block_dot` reads: ``vpmaddwd``'s ones, ``vpdpbusd``'s zero."""
    if int_dot == "avx2":
        t("%ones16 = arith.constant dense<1> : vector<16xi16>")
    else:
        t(f"%zero8i = arith.constant dense<0> : {I8L}")


def block_dot(t: Text, int_dot: str, u: str, s: str, tag: str) -> str:
    """``%dot{tag}`` (8 i32 lanes, lane ``j`` the products ``4j .. 4j + 3``) = ``u · s``
    for ``u`` 32 bytes read unsigned (``0 .. 255``) and ``s`` 32 signed bytes in ``[-127,
    127]``; returns its name. In range as the module docstring shows."""
    out = f"%dot{tag}"
    if int_dot == "vnni":
        t(f'{out} = llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"(%zero8i, {u}, {s}) : '
          f"({I8L}, {V32B}, {V32B}) -> {I8L}")
    elif int_dot == "avx2":
        t(f'%p16{tag} = llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"({u}, {s}) : '
          f"({V32B}, {V32B}) -> vector<16xi16>")
        t(f'{out} = llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%p16{tag}, %ones16) : '
          "(vector<16xi16>, vector<16xi16>) -> vector<8xi32>")
    else:
        t(f"%ue{tag} = arith.extui {u} : {V32B} to vector<32xi32>")
        t(f"%se{tag} = arith.extsi {s} : {V32B} to vector<32xi32>")
        t(f"%pr{tag} = arith.muli %ue{tag}, %se{tag} : vector<32xi32>")
        prev = ""
        for j in range(4):                      # lanes 4m + j of the products
            mask = ", ".join(str(4 * m + j) for m in range(8))
            t(f"%pj{tag}_{j} = vector.shuffle %pr{tag}, %pr{tag} [{mask}] : vector<32xi32>, "
              "vector<32xi32>")
            if prev:
                t(f"%ps{tag}_{j} = arith.addi {prev}, %pj{tag}_{j} : {I8L}")
            prev = f"%ps{tag}_{j}" if prev else f"%pj{tag}_{j}"
        t(f"{out} = arith.addi {prev}, %zero8i : {I8L}")
    return out


def signed_operands(t: Text, int_dot: str, w: str, x: str, tag: str) -> tuple[str, str]:
    """``|w|`` and ``x`` with ``w``'s sign (zero where ``w = 0``): ``|w| · sx = w · x``."""
    t(f"%aw{tag} = math.absi {w} : {V32B}")
    if int_dot == "portable":
        t(f"%zw{tag} = arith.constant dense<0> : {V32B}")
        t(f"%nx{tag} = arith.subi %zw{tag}, {x} : {V32B}")
        t(f"%lt{tag} = arith.cmpi slt, {w}, %zw{tag} : {V32B}")
        t(f"%eq{tag} = arith.cmpi eq, {w}, %zw{tag} : {V32B}")
        t(f"%sn{tag} = arith.select %lt{tag}, %nx{tag}, {x} : vector<32xi1>, {V32B}")
        t(f"%sx{tag} = arith.select %eq{tag}, %zw{tag}, %sn{tag} : vector<32xi1>, {V32B}")
    else:
        t(f'%sx{tag} = llvm.call_intrinsic "llvm.x86.avx2.psign.b"({x}, {w}) : '
          f"({V32B}, {V32B}) -> {V32B}")
    return f"%aw{tag}", f"%sx{tag}"


def _finish(t: Text, kern: Shape) -> None:
    """Close the reduction over the row tile (``%a{i}`` -> ``%n{i}``) and store its rows."""
    close_reduction(t, [f"%n{i}" for i in range(ROWS_PER_TILE)], V8)
    for i in range(ROWS_PER_TILE):
        t(f"%y{i} = vector.reduction <add>, %acc#{i} : {V8} into f32")
        store_row(t, kern.bindings, i, f"%y{i}")
    t.end()


def q8_0_body(t: Text, kern: Shape) -> None:
    """Q8_0 (Q5_0 / Q4_0 widened): per block ``y += (d_w · d_x) · Σ q_w q_x``."""
    assert kern.int_dot is not None
    k, q, d = kern.k, kern.bindings["q"], kern.bindings["d"]
    quantize_x(t, k, sums=False, int_dot=kern.int_dot)
    dot_constants(t, kern.int_dot)
    rows_loop(t, kern.rows)
    reduction(t, "acc", "b", "%q8_nb", "%c1", "a", V8)
    prefetch_ahead(t, kern, "q", "%b", 32 * ROWS_PER_TILE)
    t("%kb = arith.muli %b, %q8_c32 : index")
    t(f"%xv = vector.load %xq[%kb] : {memref([k], 'i8')}, {V32B}")
    t(f"%dxb = memref.load %xd[%b] : {memref([k // 32], 'f32')}")
    t(f"%dk = {at('%b', ROWS_PER_TILE, 0)}")     # d[tile, 4 b + i]: 4 at once
    t(f"%dh = vector.load %d[%tile, %dk] : {d}, vector<4xf16>")
    t("%dw = arith.extf %dh : vector<4xf16> to vector<4xf32>")
    t("%dxv = vector.broadcast %dxb : f32 to vector<4xf32>")
    t("%dwx = arith.mulf %dw, %dxv : vector<4xf32>")
    for i in range(ROWS_PER_TILE):
        t(f"%qk{i} = {at('%b', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%w{i} = vector.load %q[%tile, %qk{i}] : {q}, {V32B}")
        u, s = signed_operands(t, kern.int_dot, f"%w{i}", "%xv", str(i))
        dot = block_dot(t, kern.int_dot, u, s, str(i))
        t(f"%df{i} = arith.sitofp {dot} : {I8L} to {V8}")
        t(f"%sc{i} = vector.extract %dwx[{i}] : f32 from vector<4xf32>")
        t(f"%v{i} = vector.broadcast %sc{i} : f32 to {V8}")
        t(f"%n{i} = vector.fma %df{i}, %v{i}, %a{i} : {V8}")
    _finish(t, kern)


Q6_K_HIGH = {0: ("shli", 4), 1: ("shli", 2), 2: (None, 0), 3: ("shrui", 2)}
"""Per quarter ``p`` of a 128-weight half: the shift that moves its 2-bit high field (bits
``2p`` of the ``qh`` byte) to bits 4-5, before the mask with 48."""


def q6_k_quarter(t: Text, ql: str, qh: str, p: int, tag: str, vec: str,
                 signed: bool = True) -> str:
    """``%w{tag}``: quarter ``p``'s signed Q6_K bytes ``(lo | hi << 4) - 32`` (of type ``vec``)
    from ``ql`` (its low nibbles for ``p < 2``, else its high ones) and ``qh`` (bits ``2p``:
    :data:`Q6_K_HIGH`); needs ``%lo4``, ``%sh4``, ``%sh2``, ``%hi2`` and, where ``signed``,
    ``%b32``. ``signed=False``: ``%q{tag}``, the unsigned ``lo | hi << 4`` (``0 .. 63``)."""
    lo = f"arith.andi {ql}, %lo4" if p < 2 else f"arith.shrui {ql}, %sh4"
    t(f"%lo{tag} = {lo} : {vec}")
    op, sh = Q6_K_HIGH[p]
    hi = qh
    if op is not None:
        t(f"%hs{tag} = arith.{op} {hi}, %sh{sh} : {vec}")
        hi = f"%hs{tag}"
    t(f"%hi{tag} = arith.andi {hi}, %hi2 : {vec}")
    t(f"%q{tag} = arith.ori %lo{tag}, %hi{tag} : {vec}")
    if not signed:
        return f"%q{tag}"
    t(f"%w{tag} = arith.subi %q{tag}, %b32 : {vec}")
    return f"%w{tag}"


def q6_k_body(t: Text, kern: Shape) -> None:
    """Q6_K from the file's bytes: per half ``h`` of a superblock (128 weights; a 32-byte
    ``qh`` load and two 32-byte ``ql`` loads a row) and quarter ``p``, the signed bytes
    ``w = (lo | hi << 4) - 32`` of weights ``32p + [0, 32)`` (``lo``: the low nibble of
    ``ql[32 (p % 2) + l]`` for ``p < 2``, its high nibble for ``p >= 2``; ``hi``: bits
    ``2p`` of ``qh[l]``: ggml's order), and ``y += (d · sc_g · d_x) · dot`` with lanes 0-3
    of the block's dot (its first 16 weights) scaled by group ``2p``'s ``sc`` and lanes 4-7
    by group ``2p + 1``'s (``d · sc``: an f16 times a signed byte, exact in f32). The dot is
    of the unsigned ``q = w + 32`` (no sign operands: ``Σ w x = Σ q x - 32 Σ x``), and the
    ``- 32 Σ x`` of the half's 8 groups is one FMA a row (``%xh``, :func:`quantize_x`): 3
    byte operations fewer a block of 32 (llama.cpp's ``q6_K`` dot subtracts ``32 Σ x`` as
    well)."""
    assert kern.int_dot is not None
    k = kern.k
    xq, xd = memref([k], "i8"), memref([k // 32], "f32")
    quantize_x(t, k, sums=False, int_dot=kern.int_dot, halves=True)
    dot_constants(t, kern.int_dot)
    t(f"%nh = arith.constant {k // 128} : index")
    t(f"%lo4 = arith.constant dense<15> : {V32B}")
    t(f"%hi2 = arith.constant dense<48> : {V32B}")
    for v in (2, 4):
        t(f"%sh{v} = arith.constant dense<{v}> : {V32B}")
    rows_loop(t, kern.rows)
    reduction(t, "acc", "h", "%nh", "%c1", "a", V8)
    prefetch_ahead(t, kern, "ql", "%h", 64 * ROWS_PER_TILE)
    prefetch_ahead(t, kern, "qh", "%h", 32 * ROWS_PER_TILE)
    for p in range(4):                           # x's four blocks of the half
        t(f"%kx{p} = {at('%h', 128, 32 * p)}")
        t(f"%x{p} = vector.load %xq[%kx{p}] : {xq}, {V32B}")
    t(f"%kdx = {at('%h', 4, 0)}")
    t(f"%dx4 = vector.load %xd[%kdx] : {xd}, vector<4xf32>")
    t("%dx8 = vector.shuffle %dx4, %dx4 [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xf32>, "
      "vector<4xf32>")
    t(f"%kxh = {at('%h', 8, 0)}")     # the half's 8 groups: -32 Σ q_x of each
    t(f"%xh8 = vector.load %xh[%kxh] : {memref([k // 16], 'f32')}, {V8}")
    for i in range(ROWS_PER_TILE):
        _q6_k_row(t, kern, i)
    _finish(t, kern)


def q4_k_body(t: Text, kern: Shape) -> None:
    """Q4_K: per pair of groups (64 weights, one 32-byte load a row) ``y += (d · sc · d_x)
    · Σ q_w q_x`` for both, then ``y -= Σ_g dmin · m_g · X_g``: the scales from the byte
    planes ``sc``, ``mn`` and the f16 ``d``, ``dmin`` per 256 (``d · sc`` and ``dmin · m``
    are exact in f32). Q5_K the same with ``q`` 5 bits (``0 .. 31``, still an unsigned
    operand): the fifth bits from the file's ``qh`` bytes, pair ``p``'s two groups at bits
    ``2 (p % 4)`` and ``2 (p % 4) + 1`` of ``qh[l]`` (ggml's order), moved to bit 4 of the
    nibble's byte by a shift by ``2 (p % 4)`` and one more by a constant."""
    assert kern.int_dot is not None
    k, mem = kern.k, kern.bindings
    five = "qh" in mem
    quantize_x(t, k, sums=True, int_dot=kern.int_dot)
    dot_constants(t, kern.int_dot)
    t("%c8 = arith.constant 8 : index")
    t(f"%nb = arith.constant {k // 32} : index")
    t(f"%np = arith.constant {k // 64} : index")
    t(f"%lo4 = arith.constant dense<15> : {V32B}")
    t(f"%sh4 = arith.constant dense<4> : {V32B}")
    if five:
        t(f"%sh3 = arith.constant dense<3> : {V32B}")
        t(f"%bit4 = arith.constant dense<16> : {V32B}")
    rows_loop(t, kern.rows)
    reduction(t, "acc", "p", "%np", "%c1", "a", V8)
    prefetch_ahead(t, kern, "q", "%p", 32 * ROWS_PER_TILE)
    if five:                                     # qh: 128 bytes a tile every 4 pairs
        prefetch_ahead(t, kern, "qh", "%p", 8 * ROWS_PER_TILE)
        # the pair's fifth bits: 2 (p % 4) up
        t("%pq = affine.apply affine_map<()[s0] -> ((s0 mod 4) * 2)>()[%p]")
        t("%pqi = arith.index_cast %pq : index to i8")
        t(f"%pqv = vector.broadcast %pqi : i8 to {V32B}")
    _q4_k_pair_scales(t, k, mem)
    for i in range(ROWS_PER_TILE):
        t(f"%qk{i} = {at('%p', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%w{i} = vector.load %q[%tile, %qk{i}] : {mem['q']}, {V32B}")
        lo, hi = (f"%u{i}_0", f"%u{i}_1") if not five else (f"%l{i}_0", f"%l{i}_1")
        t(f"{lo} = arith.andi %w{i}, %lo4 : {V32B}")
        t(f"{hi} = arith.shrui %w{i}, %sh4 : {V32B}")
        if five:
            _q5_k_high(t, mem, i)
        prev = f"%a{i}"
        for h in range(2):
            tag = f"{i}_{h}"
            dot = block_dot(t, kern.int_dot, f"%u{tag}", f"%x{h}", tag)
            t(f"%df{tag} = arith.sitofp {dot} : {I8L} to {V8}")
            t(f"%sc{tag} = vector.extract %ax[{2 * i + h}] : f32 from {V8}")
            t(f"%v{tag} = vector.broadcast %sc{tag} : f32 to {V8}")
            t(f"%e{tag} = vector.fma %df{tag}, %v{tag}, {prev} : {V8}")
            prev = f"%e{tag}"
    close_reduction(t, [f"%e{i}_1" for i in range(ROWS_PER_TILE)], V8)
    _q4_k_mins(t, k, mem)
    q4_k_store(t, kern.bindings, V8)


def _q4_k_pair_scales(t: Text, k: int, mem: dict[str, str]) -> None:
    """Pair ``%p``'s quantized ``x`` blocks ``%x0``, ``%x1`` and ``%ax``: lane ``2 i + h`` =
    ``d · sc · d_x`` of row ``i``'s group ``2p + h`` (the ``sc`` bytes of the tile's four
    rows, their superblock's f16 ``d``, the two blocks' ``d_x``)."""
    xq, xd = memref([k], "i8"), memref([k // 32], "f32")
    t(f"%kp = {at('%p', 64, 0)}")
    t(f"%kp1 = {at('%p', 64, 32)}")
    t(f"%x0 = vector.load %xq[%kp] : {xq}, {V32B}")
    t(f"%x1 = vector.load %xq[%kp1] : {xq}, {V32B}")
    t(f"%g0 = {at('%p', 2, 0)}")
    t(f"%dx2 = vector.load %xd[%g0] : {xd}, vector<2xf32>")
    t("%dx8 = vector.shuffle %dx2, %dx2 [0, 1, 0, 1, 0, 1, 0, 1] : vector<2xf32>, "
      "vector<2xf32>")
    t(f"%ks = {at('%p', 2 * ROWS_PER_TILE, 0)}")           # sc[tile, 8 p + 2 i + h]
    t(f"%scb = vector.load %sc[%tile, %ks] : {mem['sc']}, vector<8xi8>")
    t("%sci = arith.extui %scb : vector<8xi8> to vector<8xi32>")
    t(f"%scf = arith.uitofp %sci : vector<8xi32> to {V8}")
    t("%kd = affine.apply affine_map<()[s0] -> ((s0 floordiv 4) * 4)>()[%p]")
    t(f"%dh = vector.load %d[%tile, %kd] : {mem['d']}, vector<4xf16>")   # d[tile, 4 s + i]
    t("%d4 = arith.extf %dh : vector<4xf16> to vector<4xf32>")
    t("%d8 = vector.shuffle %d4, %d4 [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xf32>, "
      "vector<4xf32>")
    t(f"%av = arith.mulf %scf, %d8 : {V8}")
    t(f"%ax = arith.mulf %av, %dx8 : {V8}")


def _q5_k_high(t: Text, mem: dict[str, str], i: int) -> None:
    """Row ``i``'s 5-bit ``%u{i}_0``, ``%u{i}_1`` of pair ``%p`` from its nibbles
    ``%l{i}_h``: ``qh[tile, 128 (p / 4) + 32 i + l]`` shifted down by ``2 (p % 4)``
    (``%pqv``), bit 0 (group ``2p``) moved to bit 4 and bit 1 (group ``2p + 1``) too."""
    t(f"%kh{i} = affine.apply affine_map<()[s0] -> ((s0 floordiv 4) * 128 + {32 * i})>()[%p]")
    t(f"%qh{i} = vector.load %qh[%tile, %kh{i}] : {mem['qh']}, {V32B}")
    t(f"%hp{i} = arith.shrui %qh{i}, %pqv : {V32B}")
    for h, shift in ((0, "%sh4"), (1, "%sh3")):
        t(f"%hs{i}_{h} = arith.shli %hp{i}, {shift} : {V32B}")
        t(f"%hb{i}_{h} = arith.andi %hs{i}_{h}, %bit4 : {V32B}")
        t(f"%u{i}_{h} = arith.ori %l{i}_{h}, %hb{i}_{h} : {V32B}")


def _q4_k_mins(t: Text, k: int, mem: dict[str, str]) -> None:
    """``%mins#i`` = ``Σ_g dmin · m[r_i, g] · X[g]`` (:func:`.gemv_text.q4_k_mins`), with
    row ``i``'s ``M`` made from the ``m`` bytes ``mn[tile, 4 g + 8 i + [0, 8)]`` times
    ``dmin[tile, g / 2 + i]``."""

    def load_m(t: Text, i: int) -> None:
        t(f"%mb{i} = vector.load %mn[%tile, %km{i}] : {mem['mn']}, vector<8xi8>")
        t(f"%mi{i} = arith.extui %mb{i} : vector<8xi8> to vector<8xi32>")
        t(f"%mf{i} = arith.uitofp %mi{i} : vector<8xi32> to {V8}")
        t(f"%kn{i} = affine.apply affine_map<()[s0] -> (s0 floordiv 2 + {i})>()[%g]")
        t(f"%dm{i} = memref.load %dmin[%tile, %kn{i}] : {mem['dmin']}")
        t(f"%dn{i} = arith.extf %dm{i} : f16 to f32")
        t(f"%db{i} = vector.broadcast %dn{i} : f32 to {V8}")
        t(f"%mv{i} = arith.mulf %mf{i}, %db{i} : {V8}")

    q4_k_mins(t, k, load_m)


def _q6_k_row(t: Text, kern: Shape, i: int) -> None:
    """Row ``%r{i}`` of the tile, half ``%h``: ``%n{i}`` = ``%a{i}`` plus its four blocks'
    scaled dot products (:func:`q6_k_body`)."""
    assert kern.int_dot is not None
    mem, tile = kern.bindings, ROWS_PER_TILE
    for half in range(2):
        t(f"%kl{i}_{half} = {at('%h', 64 * tile, 64 * i + 32 * half)}")
        t(f"%ql{i}_{half} = vector.load %ql[%tile, %kl{i}_{half}] : {mem['ql']}, {V32B}")
    t(f"%kh{i} = {at('%h', 32 * tile, 32 * i)}")
    t(f"%qh{i} = vector.load %qh[%tile, %kh{i}] : {mem['qh']}, {V32B}")
    scales = q6_k_scales(t, mem, "%h", i)
    t(f"%ax{i} = arith.mulf {scales}, %dx8 : {V8}")   # lane g: d · sc_g · d_x of its block
    # the offset: Σ_g (d · sc_g · d_x) · (-32 Σ_{l in g} q_x,l), one FMA of the eight lanes
    t(f"%off{i} = vector.fma %ax{i}, %xh8, %a{i} : {V8}")
    prev = f"%off{i}"
    for p in range(4):
        tag = f"{i}_{p}"
        q = q6_k_quarter(t, f"%ql{i}_{p % 2}", f"%qh{i}", p, tag, V32B, signed=False)
        dot = block_dot(t, kern.int_dot, q, f"%x{p}", tag)
        t(f"%df{tag} = arith.sitofp {dot} : {I8L} to {V8}")
        lanes = ", ".join([str(2 * p)] * 4 + [str(2 * p + 1)] * 4)
        t(f"%v{tag} = vector.shuffle %ax{i}, %ax{i} [{lanes}] : {V8}, {V8}")
        out = f"%n{i}" if p == 3 else f"%n{tag}"   # %n{i}: the row's new partials
        t(f"{out} = vector.fma %df{tag}, %v{tag}, {prev} : {V8}")
        prev = out


def q8_body(t: Text, kern: Shape) -> None:
    """The ``q8`` body of ``kern`` (Q4_K, Q5_K, Q6_K or an i8 plane of 32-weight blocks)."""
    body = {"gguf_q4_k": q4_k_body, "gguf_q5_k": q4_k_body,
            "gguf_q6_k": q6_k_body}.get(kern.scheme, q8_0_body)
    body(t, kern)


__all__ = ["I8L", "MAX_Q8_K", "V32B", "Shape", "block_dot", "dot_constants", "q8_body",
           "quantize_block", "quantize_constants", "quantize_x", "signed_operands"]
