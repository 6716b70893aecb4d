"""Hand-written decode GEMV kernels (``M = 1``; batched, ``M <= 8``) for llvm-cpu: Q8_0 (also
running Q5_0 and Q4_0, their quants widened to bytes at load: :data:`BYTE_PLANE`; and, with
a min per block, Q5_1 and Q4_1, ``M = 1``: :data:`MIN_PLANE`), its
per-16-scale variant (Q6_K widened, batched: :data:`SIXTEEN_PLANE`), Q6_K from planes of
the file's size (``M = 1``), Q4_K, Q5_K (``M = 1``) and F16 / BF16 (``M = 1``:
:data:`HALF_PLANE`).

IREE 3.13 compiles rlx's fused dequant + matvec (:func:`.rule.fused_matmul`) into code that
reduces each 32-weight block horizontally into a scalar accumulator, which caps Q8_0 at ~50%
and Q4_K at ~25% of this machine's read bandwidth (benchmarks/README.md). These kernels keep
16-lane f32 partial sums per row across the whole reduction, and reduce once per row. They are
``stream.executable``\\ s on the skeleton of :mod:`..executable` (a body in the ``vector``
/ ``scf`` / ``memref`` dialects), called with ``flow.dispatch``. The operands are the
weight's fields repacked by ``linalg.generic``\\ s that read only the parameter, which
IREE hoists into initializers (once, at load): :mod:`.gemv_planes`.

Semantics are the dequant_matmul's, summed in another order (within the f32 tolerance of
the dequantize-then-multiply form, never bit-identical to it):

- **Q8_0** ``y[n] = Σ_b d[n, b] · Σ_i q[n, 32b + i] · x[32b + i]``: the i8 ``q`` and f16
  ``d`` planes (1.0625 bytes per weight, as in the file); per 32 weights of a row two
  sign extensions, two conversions, two multiplies and two FMAs into the row's partials.
  **Q5_1 / Q4_1** ``y[n] = Σ_b (d[n, b] · Σ_i q x + m[n, b] · Σ_i x[32b + i])``: the same
  with the unsigned ``q`` and one more FMA a block, ``m`` times the block's ``x0 + x1``
  (formed once a tile; its 16 lanes sum to ``Σ_i x`` when the row is reduced).
- **Q6_K** ``y[n] = Σ_j s[n, j] · Σ_i q[n, 16j + i] · x[16j + i]`` with ``q = (ql | qh <<
  4) - 32`` and ``s = d · sc`` per 16 weights. At ``M = 1`` (exact mode) from planes of the
  file's size (0.82 bytes a weight: :func:`.gemv_exact.q6_k_body`): the low nibbles of
  128 weights as 16 i32 lanes (as Q4_K's), their 2-bit highs as 16 i16 lanes, the signed
  scale bytes and ``d``; per 16 weights two shifts, two masks, an or, a subtract, a
  conversion, a multiply and an FMA by ``d · sc`` (formed for 16 chunks at a time into a
  stack buffer, broadcast-loaded from there). Batched and
  ``q8``: an i8 ``q`` widened at load and f32 ``s`` (1.25 bytes per weight held, within
  ``hoist_growth``); per 32 weights two conversions, two multiplies and two FMAs.
- **Q5_K** as Q4_K with ``q`` 5 bits: ``f = 1 + q / 32 = 0x3F800000 | q << 18`` (the nibble
  from Q4_K's lanes, the fifth bit from a byte a lane: bit ``j`` of lane ``l`` is weight
  ``128c + 16j + l``'s), ``S = 32 · d · sc``, ``M = S + dmin · m``; ``M = 1``. Its
  ``q8`` form is Q4_K's with the file's ``qh`` bytes (:mod:`.gemv_q8`).
- **F16 / BF16** ``y[n] = Σ_i w[n, i] · x[i]``: the file's 16-bit values, tile-interleaved
  (2 bytes a weight, as in the file: hoisted at any size), per 32 weights of a row two
  conversions to f32 and two FMAs (:func:`.gemv_exact.half_body`; ``M = 1``: a batched step keeps
  IREE's matmul). Exact products; only the summation order differs.
- **Q4_K** ``y[n] = Σ_g S[n, g] · F[n, g] - Σ_g M[n, g] · X[g]``, with ``X[g]`` the sum of
  ``x`` over group ``g`` (computed once per workgroup) and, per weight ``q`` (4 bits),
  ``f = 1 + q / 16`` built as f32 bits (``0x3F800000 | q << 19``: an integer shift, mask and
  or, no conversion) so that ``F[n, g] = Σ f · x``; ``S = 16 · d · sc`` and
  ``M = S + dmin · m`` per group of 32. Since ``(d·sc)·q - dmin·m = S·f - M``, that is the
  Q4_K weight. The nibbles are repacked so that the 16 lanes of one i32 vector hold nibble
  ``j`` of 16 consecutive weights ``128c + 16j + l`` at bits ``4j``: one 64-byte load feeds
  128 weights with no shuffles. ``S`` and ``M`` are formed in the kernel, once per row tile
  into a stack buffer (:func:`.gemv_exact.q4_k_body`), from the 6-bit ``sc`` and ``m`` held
  as a byte a group and ``d``, ``dmin`` per superblock (exact products: 0.58 bytes a weight
  read and held, the file's 0.5625).

Every plane is **tile-interleaved**: a loop iteration reads four rows, and row-major planes
would make that four short streams (a Q8_0 row of K = 576 is 10 cache lines), which the
hardware prefetcher never gets going on; stored ``[N / 4, C, 4, w]`` (``w``: one row's run,
:meth:`Kernel.interleave_widths`) a workgroup reads one sequential stream (Q4_K 13 -> 17-18
GB/s, Q8_0 at K = 576 14 -> 30-37 GB/s).

Optional forms take in what IREE would have fused into its own matvec but cannot fuse
into a hand-written dispatch (chosen by the ``fuse-gemv-neighbours`` pass, :mod:`.fuse`):
the **residual** form adds ``r [N]`` before the store (a GEMV whose only use is
``h + W x``), the **RMSNorm** form receives the norm's input, gamma and beta and normalizes
``x`` into a stack buffer first (a GEMV of an RMSNorm's result), the **SwiGLU** form
receives ``[g, u]`` and computes ``x = silu(g) · u`` there (a SwiGLU FFN's down projection:
30 dispatches fewer a 135M token).

**Batched** (``M = 2 .. MAX_BATCH`` rows of ``x``, the sequences of a batched decode step:
``x [M, K]``, ``y [M, N]``): the same planes and workgroups, another body, which dequantizes
each row tile once into an f32 stack buffer and multiplies it with every row of ``x``
(:mod:`.gemv_batched`, with its own bounds argument). The residual form holds for it
(``r [M, N]``); the RMSNorm and SwiGLU prologues are ``M = 1`` only (:mod:`.fuse`: their
stack buffer would be ``M x K``). **Prefill** (``M`` dynamic or above ``MAX_BATCH``; F16 /
BF16, Q8_0 / Q5_0 / Q4_0, Q4_K, Q6_K: :data:`PREFILL_SCHEMES`; ``LoweringOptions.prefill_kernels``):
the outer-product form of :mod:`.gemm_prefill` where a workgroup's rows are a multiple of 16,
else the batched body with ``M`` taken a block at a time, ``M`` an index operand (the one
run-time value that reaches an index: the bounds are argued in those two modules), instead
of IREE's data-tiled matmul, which dequantizes and packs the whole weight on every call.
Under ``activation_quant="q8"``, on a CPU with VNNI on 512-bit vectors (or in the portable
form), the outer form is an integer GEMM instead (:mod:`.gemm_q8`); a batched step of Q8_0 /
Q5_0 / Q4_0 runs the ``q8`` GEMV with its rows inside (:mod:`.gemv_q8_batched`, every CPU;
:func:`q8_batch`), Q4_K the integer GEMM (:func:`batched_int8`).

**Bounds** (``M = 1``; ``M > 1``: :mod:`.gemv_batched`, :mod:`.gemm_prefill`). Every shape
is static and the
workload is the constant ``N``: nothing the host passes at run time reaches an index. Every
load stays inside its binding because of what :class:`Kernel` checks when it is built (``K``
a multiple of 32, of 256 for Q4_K and Q6_K; ``rows`` a multiple of 4 that divides ``N``;
``1 <= M <= MAX_BATCH``):

- workgroups: the export launches ``ceildiv(N, rows) = N / rows``; the body runs only for
  ``wg < N / rows`` (:func:`..executable.executable_text`'s guard: a workgroup IREE ever
  launched past those touches nothing);
- rows: ``tile = wg · rows / 4 + tl`` with ``tl < rows / 4``, so ``tile < N / 4`` (the
  planes' first dim) and ``r_i = 4 · tile + i < N`` (``y``, ``r``);
- i8 planes ``q [N / 4, 4 K]``: block ``b < K / 32`` reads ``q[tile, 128 b + 32 i + 16 h +
  [0, 16)]``, at most ``128 (K / 32) - 1 = 4 K - 1``; ``x[32 b + [0, 32)] < K``; Q8_0's
  ``d [N / 4, K / 8]`` at ``4 b + i < K / 8``; Q6_K's ``d [N / 4, K / 4]`` at
  ``8 b + 2 i + h < K / 4``;
- packed Q6_K: chunk ``c < K / 128`` reads ``ql [N / 4, K / 2]`` (i32) and ``qh [N / 4,
  K / 2]`` (i16) at ``64 c + 16 i + [0, 16) < K / 2``, ``x[128 c + 16 j + [0, 16)] < K``,
  ``sc [N / 4, K / 4]`` at ``32 c + 8 i + [0, 8) < K / 4`` and ``d [N / 4, K / 64]`` at
  ``4 (c / 2) + i < K / 64`` (``K / 128`` even since ``K % 256 = 0``);
- Q4_K: chunk ``c < K / 128`` reads ``q [N / 4, K / 2]`` at ``64 c + 16 i + [0, 16) < K / 2``
  and ``x[128 c + 16 j + [0, 16)] < K``; the tile's scales, ``c < K / 128`` again: ``sc``,
  ``mn [N / 4, K / 8]`` at ``16 c + [0, 16) < K / 8``, ``d``, ``dmin [N / 4, K / 64]`` at
  ``4 (c / 2) + [0, 4) < K / 64`` (``K / 128`` even), the group sums ``xs [K / 32]`` at
  ``4 c + [0, 4)``, the stack ``S`` buffer ``[K / 8]`` written at ``16 c + [0, 16)`` and
  read at ``16 c + 4 i + g``, ``g < 4`` (``K <= MAX_SCALES_K`` keeps it and ``xs`` at 20
  KiB of the stack);
- prologues: ``xin``, ``gamma``, ``beta`` ``[K]`` and the stack ``x [K]`` in steps of 16
  (``K % 32 = 0``); ``gu [2 K]`` at ``i`` and ``K + i``, ``i < K``.

Measured: ``python benchmarks/quant.py`` (benchmarks/README.md, with the variants tried). The
kernels are plain vector code for any llvm-cpu target (AVX-512 splits to AVX2 or NEON widths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import flow

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.ir.diagnostics import LoweringError
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import (
    Binding,
    Scalar,
    Text,
    executable_text,
    f32_bits,
    memref,
    record,
)
from rlx.lowering.mir_to_linalg.quant import gemm_q8, gemv_exact
from rlx.lowering.mir_to_linalg.quant.gemm_prefill import (
    COLUMNS,
    WIDE_COLUMNS,
    f32_body,
    outer_body,
    outer_form,
    pack_rows,
    pass_rows,
)
from rlx.lowering.mir_to_linalg.quant.gemv_batched import DYNAMIC_M, batched_body
from rlx.lowering.mir_to_linalg.quant.gemv_prologues import glu_prologue, norm_prologue
from rlx.lowering.mir_to_linalg.quant.gemv_q8 import MAX_Q8_K, q8_body
from rlx.lowering.mir_to_linalg.quant.gemv_q8_batched import GROUP, q8_0_batched_body
from rlx.lowering.mir_to_linalg.quant.gemv_text import ROWS_PER_TILE, workgroup_rows
from rlx.lowering.registry import LoweringContext, LoweringOptions

BYTE_PLANE = ("gguf_q8_0", "gguf_q5_0", "gguf_q4_0")
"""Schemes run by the Q8_0 kernel: ``w = d · q`` with an f16 ``d`` per 32 weights and an
integer ``q`` that fits an i8 (Q5_0's ``q5 - 16``, Q4_0's ``q4 - 8``, widened to bytes when
the weight is repacked at load: 1.0625 bytes per weight held and read, against Q5_0's 0.6875
and Q4_0's 0.5625, for a kernel that streams 3x faster than IREE's fused form)."""
MIN_PLANE = ("gguf_q5_1", "gguf_q4_1")
"""Schemes run by the Q8_0 kernel with a min (:func:`.gemv_exact.byte_body`, ``M = 1``):
``w = d · q + m`` with f16 ``d`` and ``m`` per 32 weights and the unsigned ``q`` (Q5_1's
``0..31``, Q4_1's ``0..15``) widened to bytes at load (1.125 bytes a weight held and read,
against Q5_1's 0.75 and Q4_1's 0.625, within ``hoist_growth``); per block the row adds
``m · Σ x``, with ``Σ x`` of the block formed once for the four rows of a tile. The
135M model's Q5_K_M file is mostly Q5_1 (its 576-wide rows are not whole superblocks)."""
SIXTEEN_PLANE = ("gguf_q6_k",)
"""Schemes run by the per-16 variant of the Q8_0 kernel: ``w = s · q`` with an f32 ``s`` per
16 weights and an i8 ``q`` (Q6_K's ``(ql | qh << 4) - 32`` and ``s = d · sc``, exact in f32:
11 x 8 significant bits), widened at load like Q5_0: 1.25 bytes a weight held and read,
against Q6_K's 0.82, for a kernel that streams ~3x faster than the fused form."""
I8_PLANE = (*BYTE_PLANE, *MIN_PLANE, *SIXTEEN_PLANE)
"""Schemes whose kernel reads an i8 plane of quants (:func:`.gemv_exact.byte_body`); but for
Q8_0's own, repacking them at load grows the weight (``LoweringOptions.hoist_growth``)."""
HALF_PLANE = ("gguf_f16", "gguf_bf16")
"""Schemes run by the half-precision kernel (:func:`.gemv_exact.half_body`, ``M = 1``): the
weight's 16-bit values as in the file (2 bytes a weight, tile-interleaved at load: no growth, any
size), converted to f32 in registers (F16 by ``extf``, BF16 bits by a 16-bit shift)."""
Q5_K = gemv_exact.Q5_K
"""Run by the Q4_K kernel with a fifth bit (module docstring; ``M = 1``)."""
K_QUANTS = ("gguf_q4_k", Q5_K)
"""Read by :func:`.gemv_exact.q4_k_body` at ``M = 1`` in the exact mode."""
M1_ONLY = (*HALF_PLANE, *MIN_PLANE, Q5_K)
"""Schemes with no batched body: a batched step (``M > 1``) keeps IREE's matmul."""
F32 = "f32"
"""An f32 ``matmul`` of a parameter ``[K, N]``: a prefill in 32 columns (:mod:`.f32_matmul`)."""
SCHEMES = (*I8_PLANE, "gguf_q4_k", Q5_K, *HALF_PLANE, F32)
PREFILL_SCHEMES = (*BYTE_PLANE, "gguf_q4_k", "gguf_q6_k", *HALF_PLANE)
"""Schemes with a prefill form (``M`` dynamic or above :data:`MAX_BATCH`: :mod:`.gemv_batched`'s
body, ``x``'s rows a block at a time), on the decode kernel's planes (no second copy held):
Q6_K's the exact decode's packed planes (``Kernel.q6_k_packed``); under ``activation_quant=
"q8"`` Q4_K's and Q6_K's q8 planes (``int_dot`` set on the prefill kernel; ``x`` stays f32)."""
Q8_SCHEMES = (*BYTE_PLANE, *SIXTEEN_PLANE, "gguf_q4_k", Q5_K)
"""Schemes with an ``activation_quant="q8"`` kernel (:mod:`.gemv_q8`, ``M = 1``); the rest
(F16 / BF16, Q5_1 / Q4_1) run their exact kernel in the ``q8`` mode."""
Q8_PREFILL = ("gguf_q4_k", "gguf_q6_k")
"""Schemes whose ``q8`` planes (the decode's) are not the exact kernel's: their prefill
form reads those (``int_dot`` set; ``x`` stays f32, the f32 product), but where it is the
integer GEMM (:attr:`Kernel.int8_gemm`, :mod:`.gemm_q8`: ``x`` quantized too, Q8_0 / Q5_0
/ Q4_0 as well)."""
INT8_GEMM_SCHEMES = (*BYTE_PLANE, "gguf_q4_k", "gguf_q6_k")
"""Schemes whose ``q8`` prefill can be the integer GEMM (:mod:`.gemm_q8`: byte planes, and
Q4_K's and Q6_K's q8 planes)."""
INT8_BATCH_SCHEMES = (*BYTE_PLANE, "gguf_q4_k")
"""Schemes whose batched steps take the integer GEMM under the ``q8`` mode where
:func:`batched_int8` says so (Q6_K's was slower than its f32 body: benchmarks/README.md,
"Batched steps in the q8 mode")."""
MAX_BATCH = 8
"""The most rows ``M`` of ``x`` a kernel takes (the sequences of a batched decode step,
:mod:`rlx.models.llama_batch`; a speculative step's tokens): ``x [M, K]``, ``y [M, N]``.
Beyond it the dequant_matmul keeps the fused form (prefill)."""


@dataclass(frozen=True)
class Kernel:
    scheme: str
    n: int
    k: int
    rows: int
    """Rows per workgroup (:func:`workgroup_rows`)."""
    residual: bool = False
    """The kernel adds a residual ``r [N]`` to its result (the epilogue of a GEMV whose only
    use is a residual add: one dispatch, where IREE could not fuse the add into ours)."""
    norm_eps: float | None = None
    """The kernel's ``x`` is RMSNorm's input and the kernel normalizes it first (operands
    ``gamma``, ``beta``; this epsilon): the prologue of a GEMV of an RMSNorm's result."""
    glu: bool = False
    """The kernel's ``x`` is ``silu(g) * u`` of ``gu = [g, u]`` (``[2 K]``), computed by the
    kernel: the prologue of a SwiGLU FFN's down projection."""
    batch: int = 1
    """``M``, the rows of ``x`` (``1 .. MAX_BATCH``): ``x [M, K]`` and ``y [M, N]`` (``r [M, N]``)
    where ``M > 1``, ``x [K]`` and ``y [N]`` where ``M = 1``."""
    int_dot: str | None = None
    """``activation_quant="q8"``: ``x`` quantized to int8 blocks and integer dot products in
    this form (``LoweringOptions.int_dot``; :mod:`.gemv_q8`); None: the exact f32 kernel."""
    prefetch: int = 0
    """Decode (``M <= 8``): :func:`.gemv_text.prefetch_ahead`'s distance (bytes; 0: none)."""
    columns: int = COLUMNS
    """Rows of ``W`` an outer-form prefill's column block holds (:mod:`.gemm_prefill`): 16,
    or :data:`.gemm_prefill.WIDE_COLUMNS` (16 lanes, exact f32 only;
    ``LoweringOptions.prefill_columns``)."""
    lanes: int = 8
    """f32 lanes of the batched body's multiply (:mod:`.gemv_batched`): 16 where the target
    has 512-bit vectors (``LoweringOptions.vector_bits``), else 8."""

    def __post_init__(self) -> None:
        """The shapes the bounds argument (module docstring) rests on."""
        if self.scheme not in SCHEMES:
            raise LoweringError(f"error: GEMV kernel: expected a scheme of {', '.join(SCHEMES)},"
                                f" found {self.scheme!r}")
        block = 32 if self.scheme in (*BYTE_PLANE, *MIN_PLANE, *HALF_PLANE, F32) else 256
        if self.k <= 0 or self.k % block:
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected K a positive "
                                f"multiple of {block}, found {self.k}")
        if self.rows <= 0 or self.rows % ROWS_PER_TILE or self.n % self.rows:
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected rows per "
                                f"workgroup a multiple of {ROWS_PER_TILE} dividing N = "
                                f"{self.n}, found {self.rows}")
        if self.columns != COLUMNS and not (
                self.columns == WIDE_COLUMNS and self.lanes == 16 and self.batch == DYNAMIC_M
                and self.int_dot is None and self.rows % self.columns == 0):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected column blocks of "
                                f"{COLUMNS}, or {WIDE_COLUMNS} for an exact prefill on 16 "
                                f"lanes dividing the workgroup's rows, found {self.columns}")
        if not (1 <= self.batch <= MAX_BATCH or self.batch == DYNAMIC_M):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected 1 to {MAX_BATCH}"
                                f" rows of x (or {DYNAMIC_M}: dynamic), found {self.batch}")
        if self.scheme == F32 and self.columns != WIDE_COLUMNS:  # so a prefill (just above)
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected column blocks of "
                                f"{WIDE_COLUMNS} for f32 weights, found {self.columns}")
        if self.batch == DYNAMIC_M and self.scheme not in (*PREFILL_SCHEMES, F32):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected one of "
                                f"{', '.join(PREFILL_SCHEMES)} for a dynamic M, found "
                                f"{self.scheme}")
        if self.batch > 1 and self.scheme in M1_ONLY:
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected M = 1 for "
                                f"{self.scheme} (no batched body), found M = {self.batch}")
        if (self.scheme in K_QUANTS and self.batch == 1 and self.int_dot is None
                and self.k > gemv_exact.MAX_SCALES_K):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected K <= "
                                f"{gemv_exact.MAX_SCALES_K} (its S on the stack), found "
                                f"K = {self.k}")
        if self.batch != 1 and (self.norm_eps is not None or self.glu):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected no RMSNorm or "
                                f"SwiGLU prologue with {self.batch} rows of x (M = 1 only)")
        prefill_q8 = self.batch == DYNAMIC_M and (self.scheme in Q8_PREFILL
                                                  or self.int8_gemm)
        if self.int_dot is not None and ((self.batch != 1 and not prefill_q8
                                          and not q8_batch(self.scheme, self.batch, self.k))
                                         or self.scheme not in Q8_SCHEMES
                                         or self.k > MAX_Q8_K):
            raise LoweringError(f"error: GEMV kernel {self.symbol}: expected M = 1 (a prefill"
                                f" of {', '.join(Q8_PREFILL)}; a batch of {', '.join(BYTE_PLANE)}"
                                f" with M K <= {MAX_Q8_K}), one of {', '.join(Q8_SCHEMES)} and "
                                f"K <= {MAX_Q8_K} for 8-bit activations, found M = "
                                f"{self.batch}, {self.scheme}, K = {self.k}")

    @property
    def symbol(self) -> str:
        norm = "" if self.norm_eps is None else f"_rms{f32_bits(self.norm_eps):08x}"
        glu = "_glu" if self.glu else ""
        add = "_add" if self.residual else ""
        batch = (f"_m{self.batch}" if self.batch > 1 else
                 "_mdyn" if self.batch == DYNAMIC_M else "")
        batch += "w" if self.lanes == 16 else ""
        batch += f"c{self.columns}" if self.columns != 16 else ""
        q8 = "" if self.int_dot is None else f"_q8{self.int_dot}"
        q8 += "_i8mm" if self.int8_gemm else ""
        return (f"rlx_gemv_{self.scheme.removeprefix('gguf_')}_{self.n}x{self.k}{batch}{q8}"
                f"{norm}{glu}{add}")

    @property
    def q8_batched(self) -> bool:                # checked in __post_init__: q8_batch
        return 1 < self.batch <= MAX_BATCH and self.int_dot is not None

    @property
    def int8_gemm(self) -> bool:
        """A prefill in the ``q8`` mode as an integer GEMM (:mod:`.gemm_q8`): ``x`` quantized
        by a dispatch of its own, the decode's planes repacked a chunk at a time."""
        return (self.batch == DYNAMIC_M and gemm_q8.has_dot(self.int_dot, self.lanes)
                and self.scheme in INT8_GEMM_SCHEMES and outer_form(self))

    @property
    def q6_k_packed(self) -> bool:
        """Q6_K at ``M = 1`` in the exact mode reads planes of the file's own size (its
        nibbles, 2-bit highs, byte scales and f16 ``d``: :func:`.gemv_exact.q6_k_body`), so that it
        needs no growth to be hoisted and runs at any size; so does the ``q8`` body (the
        file's bytes, :func:`.gemv_q8.q6_k_body`); the batched body reads the widened i8
        plane (``SIXTEEN_PLANE``, within ``hoist_growth``)."""
        return (self.scheme == "gguf_q6_k" and self.batch in (1, DYNAMIC_M)
                and self.int_dot is None)

    @property
    def planes_key(self) -> tuple[object, ...]:
        """What :func:`.gemv_planes.kernel_planes` reads of the kernel: kernels with the same
        key over one weight read the same planes (held once). The ``q8`` form reads planes of
        its own only for Q4_K / Q5_K (and Q6_K: ``q6_k_q8``); an i8-plane scheme's q8 decode
        and exact prefill share theirs."""
        q8_planes = self.int_dot is not None and self.scheme not in I8_PLANE
        return (self.scheme, self.n, self.k, self.q6_k_packed, self.q6_k_q8, q8_planes,
                self.columns if self.scheme == F32 else None)

    @property
    def q6_k_q8(self) -> bool:
        """Q6_K's ``q8`` body (:func:`.gemv_q8.q6_k_body`), on the file's own bytes."""
        return self.scheme == "gguf_q6_k" and self.int_dot is not None

    @property
    def bindings(self) -> dict[str, str]:
        """The kernel's operands in dispatch order (``x``, the weight planes of
        :func:`.gemv_planes.kernel_planes`, the result ``y``): name -> memref type. The planes
        are tile-interleaved (:func:`interleave_widths`): row ``r`` is in row ``r / 4``."""
        n, k = self.n // ROWS_PER_TILE, self.k * ROWS_PER_TILE
        if self.scheme in BYTE_PLANE:
            planes = {"q": memref([n, k], "i8"), "d": memref([n, k // 32], "f16")}
        elif self.scheme in MIN_PLANE:           # unsigned q as bytes, d and m
            planes = {"q": memref([n, k], "i8"), "d": memref([n, k // 32], "f16"),
                      "m": memref([n, k // 32], "f16")}
        elif self.scheme == F32:                 # column blocks (gemm_prefill.f32_body)
            planes = {"w": memref([self.n // self.columns, self.k * self.columns], "f32")}
        elif self.scheme in HALF_PLANE:          # F16 values; BF16 bits as i16
            planes = {"w": memref([n, k], "f16" if self.scheme == "gguf_f16" else "i16")}
        elif self.q6_k_q8:                       # the file's bytes
            planes = {"ql": memref([n, k // 2], "i8"), "qh": memref([n, k // 4], "i8"),
                      "sc": memref([n, k // 16], "i8"), "d": memref([n, k // 256], "f16")}
        elif self.q6_k_packed:                   # Q6_K's low nibbles, high pairs, sc, d
            planes = {"ql": memref([n, k // 8], "i32"), "qh": memref([n, k // 8], "i16"),
                      "sc": memref([n, k // 16], "i8"), "d": memref([n, k // 256], "f16")}
        elif self.scheme in SIXTEEN_PLANE:
            planes = {"q": memref([n, k], "i8"), "d": memref([n, k // 16], "f32")}
        elif self.scheme == Q5_K and self.int_dot is not None:   # Q4_K's q8 planes + qh
            planes = {"q": memref([n, k // 2], "i8"), "qh": memref([n, k // 8], "i8"),
                      "sc": memref([n, k // 32], "i8"), "mn": memref([n, k // 32], "i8"),
                      "d": memref([n, k // 256], "f16"), "dmin": memref([n, k // 256], "f16")}
        else:           # Q4_K's qs bytes (q8), or Q4_K / Q5_K's nibble lanes (and Q5_K's
            planes = ({"q": memref([n, k // 2], "i8")}    # high bits, a byte a lane); then
                      if self.int_dot is not None else    # the scale bytes, d, dmin
                      {"q": memref([n, k // 8], "i32")} |
                      ({"h": memref([n, k // 8], "i8")} if self.scheme == Q5_K else {}))
            planes |= {"sc": memref([n, k // 32], "i8"), "mn": memref([n, k // 32], "i8"),
                       "d": memref([n, k // 256], "f16"), "dmin": memref([n, k // 256], "f16")}
        lead: list[int | str] = (["?"] if self.batch == DYNAMIC_M else
                                 [self.batch] if self.batch > 1 else [])
        vec = memref([self.k], "f32")
        norm = {} if self.norm_eps is None else {"gamma": vec, "beta": vec}
        y = memref([*lead, self.n], "f32")
        residual = {"r": y} if self.residual else {}
        x = memref([2 * self.k], "f32") if self.glu else memref([*lead, self.k], "f32")
        xs = {"x": x}
        if self.int8_gemm:                       # x quantized (gemm_q8)
            xs = gemm_q8.x_bindings(self.k, pass_rows(self), self.scheme == "gguf_q4_k")
        elif outer_form(self):                   # x packed [T, K, rows] (gemm_prefill)
            xs = {"x": memref(["?", self.k, pass_rows(self)], "f32")}
        return {**xs, **norm, **planes, **residual, "y": y}

    def interleave_widths(self) -> list[int]:
        """Per weight plane, the run of one row's elements that the tile interleave keeps
        together: a row-major plane ``[N, C * w]`` is stored as ``[N / 4, C, 4, w]``, so
        that a tile of four rows (what one loop iteration reads) is one sequential stream
        rather than four short ones. Q8_0: a block of 32 bytes, its f16 scale; Q4_K: the
        16 lanes of a 128-weight chunk, its 4 group scales S, and the M of 8 groups."""
        if self.scheme in BYTE_PLANE:
            return [32, 1]
        if self.scheme in MIN_PLANE:
            return [32, 1, 1]
        if self.scheme in HALF_PLANE:
            return [32]
        if self.scheme == Q5_K:                  # q8: gemv_q8, qh 32 bytes a superblock
            return [16, 16, 4, 4, 1, 1] if self.int_dot is None else [32, 32, 2, 8, 1, 1]
        if self.q6_k_packed:
            return [16, 16, 8, 1]
        if self.q6_k_q8:                         # see gemv_q8
            return [64, 32, 8, 1]
        if self.scheme in SIXTEEN_PLANE:
            return [32, 2]
        return [16, 4, 4, 1, 1] if self.int_dot is None else [32, 2, 8, 1, 1]   # q8: gemv_q8

    def text(self) -> str:
        return kernel_text(self)


def kernel_for(scheme: str, m: int | None, n: int, k: int, options: LoweringOptions
               ) -> Kernel | None:
    """The kernel for a dequant_matmul of ``m`` rows of ``x`` (None: dynamic), or None (not
    llvm-cpu, disabled, not a decode GEMV of a covered scheme (``1 <= m <= MAX_BATCH``), a
    row count that is not a multiple of 4, or a Q5_0 / Q4_0 / Q5_1 / Q4_1 weight (Q6_K at
    ``M > 1``) too large for its widened repacking to be hoisted). With
    ``options.activation_quant == "q8"`` and ``K <= MAX_Q8_K``: at ``M = 1`` the ``q8`` form
    (:mod:`.gemv_q8`); a batched ``M``, :func:`batched_int8` or :func:`q8_batch`'s."""
    if not options.gemv_kernels or scheme not in SCHEMES:
        return None
    if (m is not None and m < 1) or n % ROWS_PER_TILE:
        return None
    if m is not None and (prefill := batched_int8(scheme, m, n, k, options)) is not None:
        return prefill
    if m is None or m > MAX_BATCH:                    # prefill: the batched body, M blocked
        if scheme not in PREFILL_SCHEMES or not options.prefill_kernels:
            return None
        m = DYNAMIC_M
    if scheme in M1_ONLY and (m > 1 or k % 32):       # M = 1 only; 32 weights a step
        return None
    if k % QUANT_SCHEMES[scheme].block_elems:         # not whole blocks: not a GGUF weight
        return None
    # Q5_0 / Q4_0 widened to bytes grow by N K minus their raw bytes (Q8_0 shrinks), and IREE
    # hoists that repacking into initializers only within LoweringOptions.hoist_growth (1 MiB
    # by default): a larger weight would be widened on every call (a 4096 x 4096 Q5_0 GEMV
    # 1.5 -> 8.5 ms), so it keeps the fused form (measured: 3.1M Q5_0 weights hoisted, 4.2M
    # not; from its LAYOUTS planes IREE hoisted up to 4096 x 4096: conservative for Q5_0).
    # Q6_K's widening (its batched form) and Q5_1 / Q4_1's grow alike. At M = 1 Q6_K reads
    # planes of the file's size in either mode (Kernel.q6_k_packed, gemv_q8.q6_k_body).
    grows = scheme in I8_PLANE and n * (
        k - QUANT_SCHEMES[scheme].row_bytes(k)) > options.hoist_growth
    if grows and not (scheme == "gguf_q6_k" and m in (1, DYNAMIC_M)):
        return None
    q8_planes = (options.activation_quant == "q8" and scheme in Q8_SCHEMES
                 and k <= MAX_Q8_K)               # what the decode (M = 1) reads
    # a prefill reads the q8 decode's planes where they are the weight's own (Q4_K's, and
    # Q6_K's: the file's bytes), f32 x: no second copy of the weight held; or, where the
    # CPU has a dot product for it (VNNI on 512-bit vectors, or the portable form) and N
    # whole column blocks, runs the integer GEMM on them (gemm_q8; Q8_0's planes too)
    wide = m != 1 and options.vector_bits >= 512
    # a prefill: gemm_prefill's column blocks of 16 rows where N has them, wider workgroups
    outer = m == DYNAMIC_M and n % COLUMNS == 0
    int8 = outer and scheme in INT8_GEMM_SCHEMES and gemm_q8.has_dot(options.int_dot,
                                                                     16 if wide else 8)
    q8 = q8_planes and (m == 1 or q8_batch(scheme, m, k)
                        or (m == DYNAMIC_M and (scheme in Q8_PREFILL or int8)))
    if scheme in K_QUANTS and m == 1 and not q8 and k > gemv_exact.MAX_SCALES_K:
        return None                               # its S buffer would pass IREE's stack
    columns = options.prefill_columns if (outer and wide and not q8
                                          and n % options.prefill_columns == 0) else COLUMNS
    rows = workgroup_rows(n, k, columns if outer else ROWS_PER_TILE, q8=q8 and m == 1,
                          prefill="int8" if q8 and int8 else "exact" if outer else None)
    return Kernel(scheme, n, k, rows, batch=m, columns=columns,
                  int_dot=options.int_dot if q8 else None,
                  prefetch=options.decode_prefetch(scheme in HALF_PLANE) if m != DYNAMIC_M else 0,
                  lanes=16 if wide else 8)


def batched_int8(scheme: str, m: int, n: int, k: int, options: LoweringOptions
                 ) -> Kernel | None:
    """The kernel of a batched step's ``2 <= M <= MAX_BATCH`` rows where it is the ``q8``
    prefill's integer GEMM (:mod:`.gemm_q8`, one pass of 16 rows, those past ``M`` repeating
    row ``M - 1``): for :data:`INT8_BATCH_SCHEMES`, wherever the prefill of the same weight
    is that GEMM (``activation_quant="q8"``, whole column blocks, the CPU's dot product on
    512-bit vectors or the portable form), but where :func:`q8_batch` takes it (``M <= 4`` or
    ``K <= batched_q8_gemv_k``)."""
    gemv = q8_batch(scheme, m, k) and (m <= GROUP or k <= options.batched_q8_gemv_k)
    if not (1 < m <= MAX_BATCH and scheme in INT8_BATCH_SCHEMES) or gemv:   # faster there
        return None
    prefill = kernel_for(scheme, None, n, k, options)
    return prefill if prefill is not None and prefill.int8_gemm else None


def q8_batch(scheme: str, m: int, k: int) -> bool:
    """Whether a batched step of ``m`` rows can run :mod:`.gemv_q8_batched` in the ``q8``
    mode (Q8_0 / Q5_0 / Q4_0, ``x`` quantized on the stack: ``M K <= MAX_Q8_K``); where it
    does, :func:`batched_int8` (benchmarks/README.md, "The batched q8 GEMV")."""
    return 1 < m <= MAX_BATCH and scheme in BYTE_PLANE and m * k <= MAX_Q8_K


MAX_NORM_K = 4096
"""The RMSNorm and SwiGLU prologues keep ``x`` on the stack (``4 K`` bytes of IREE's 32 KiB)."""


def kernel_text(kern: Kernel) -> str:
    """The ``stream.executable`` of one kernel (one per scheme and shape)."""
    args: list[Binding | Scalar] = []
    dynamic = ("%m_rows",) if kern.batch == DYNAMIC_M else ()
    for name, mem in kern.bindings.items():
        if name == "x" and kern.norm_eps is not None:
            name = "xin"
        elif name == "x" and kern.glu:
            name = "gu"
        if name == "y" and dynamic:              # M: an index operand before the result
            args.append(Scalar("m_rows"))
            if outer_form(kern):                 # and the packed x's T
                args.append(Scalar("m_tiles"))
        packed = name in ("x", "xd", "xs") and outer_form(kern)
        dims = ("%m_tiles",) if packed else dynamic
        args.append(Binding(name, mem, dims if name in ("x", "xd", "xs", "r", "y") else ()))

    def body(t: Text) -> None:
        if kern.norm_eps is not None:
            norm_prologue(t, kern.k, kern.norm_eps)
        if kern.glu:
            glu_prologue(t, kern.k)
        if kern.q8_batched:
            q8_0_batched_body(t, kern)
            return
        if kern.scheme == F32:
            f32_body(t, kern)
            return
        if kern.batch != 1:
            form = ("byte" if kern.scheme in BYTE_PLANE else
                    "q6_k_q8" if kern.q6_k_q8 else
                    "q4_k_q8" if kern.int_dot is not None else
                    "q6_k" if kern.q6_k_packed else
                    "sixteen" if kern.scheme in SIXTEEN_PLANE else
                    "half" if kern.scheme in HALF_PLANE else "q4_k")
            if kern.int8_gemm:
                gemm_q8.int8_body(t, kern, form, pass_rows(kern))
            else:
                (outer_body if outer_form(kern) else batched_body)(t, kern, form)
            return
        if kern.int_dot is not None:
            q8_body(t, kern)
            return
        if kern.q6_k_packed:
            gemv_exact.q6_k_body(t, kern)
            return
        if kern.scheme in HALF_PLANE:
            gemv_exact.half_body(t, kern)
            return
        (gemv_exact.byte_body if kern.scheme in I8_PLANE else gemv_exact.q4_k_body)(t, kern)

    return executable_text(kern.symbol, args, body, kern.n // kern.rows, kern.rows)


def dispatch(ctx: LoweringContext, kern: Kernel, x: ir.Value, planes: list[ir.Value],
             residual: ir.Value | None = None, norm: Sequence[ir.Value] = ()) -> ir.Value:
    """``y [N]`` f32 = the kernel on ``x [K]`` f32 (``[2 K]`` in the SwiGLU form; ``[M,
    K]`` batched, ``M`` a dynamic dim in the prefill form) and the repacked weight
    ``planes`` (plus ``residual``, shaped as ``y``, in the residual form; ``norm`` = gamma,
    beta ``[K]`` f32 in the RMSNorm form); records the executable for
    :func:`..executable.declare_executables`."""
    assert (residual is not None) == kern.residual
    assert bool(norm) == (kern.norm_eps is not None)
    record(ctx, kern)
    entry = ir.SymbolRefAttr.get([kern.symbol, kern.symbol])
    operands = [x, *norm, *planes, *([residual] if residual is not None else [])]
    if kern.batch == DYNAMIC_M:                  # x, r, y [M, .]: M an index operand
        size = emit.dim(x, 0)                    # (static where the module's M is)
        m = emit.as_value(size)
        y = emit.tensor_type([size, kern.n], emit.f32())
        scalars = [m]
        if kern.int8_gemm:                       # x quantized [T, ...]: T after M
            assert kern.int_dot is not None
            packed, tiles = gemm_q8.quantize_rows(ctx, x, pass_rows(kern),
                                                  kern.scheme == "gguf_q4_k", kern.int_dot)
            operands[0:1] = packed
            scalars.append(emit.as_value(tiles))
        elif outer_form(kern):                   # x packed [T, K, rows]: T after M
            operands[0], tiles = pack_rows(x, pass_rows(kern))
            scalars.append(emit.as_value(tiles))
        # every dynamic dim of the tensor operands, in order (x or its packed form, r)
        dims = emit.dynamic_values([d for v in operands for d in emit.sizes(v)])
        return flow.DispatchOp([y], [emit.index(kern.n)], ir.ArrayAttr.get([entry]),
                               [*operands, *scalars], dims,
                               emit.dynamic_values([size])).results[0]
    y = ir.RankedTensorType.get([*([kern.batch] if kern.batch > 1 else []), kern.n], emit.f32())
    return flow.DispatchOp([y], [emit.index(kern.n)], ir.ArrayAttr.get([entry]), operands,
                           [], []).results[0]


__all__ = ["BYTE_PLANE", "F32", "HALF_PLANE", "I8_PLANE", "INT8_GEMM_SCHEMES", "M1_ONLY",
           "MAX_BATCH", "MAX_NORM_K", "MIN_PLANE", "PREFILL_SCHEMES", "Q5_K", "Q8_SCHEMES",
           "ROWS_PER_TILE", "SCHEMES", "SIXTEEN_PLANE", "Kernel", "dispatch", "kernel_for",
           "kernel_text", "workgroup_rows"]
