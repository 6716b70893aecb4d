"""f32 prefill matmuls of parameter weights through rlx's column-block GEMM on llvm-cpu.

A ``matmul`` ``y [M, N] = x [M, K] W`` whose ``W [K, N]`` is an f32 parameter (or parameters
concatenated along ``N``: a packed gate / up projection) and whose ``M`` is dynamic or above
:data:`.gemv_kernels.MAX_BATCH` (a prefill) otherwise goes to IREE's data-tiled ``mmt4d``,
whose AVX-512 f32 tile is 16 x 16 x 1: per ``k`` one load of 16 weights and 16 FMAs, each
with a broadcast of ``x`` from memory (17 loads to 16 FMAs). Where the target CPU takes the
wide prefill tile (``LoweringOptions.prefill_columns`` = 32, :func:`.cpu_features.
prefill_columns_of`: Intel CPUs with AVX-512, AMD Zen 5), it runs :func:`.gemm_prefill.f32_body`
instead: 32 columns by 8 rows of ``x``, two weight loads and eight broadcasts to sixteen
FMAs, on a plane that holds ``W`` as its column blocks (made at load, :func:`.gemv_planes.
f32_plane`, in place of IREE's hoisted pack of the same size). Where the tile would be 16 x
16 (AMD, AVX2) the kernel would be IREE's tile with a partial-sum round trip added, so
those keep ``mmt4d``. Measured: benchmarks/README.md, "f32 prefill matmuls in column blocks
of 32".

Semantics are the matmul's, summed in another order (``k`` in order within a chunk of up to
256, :data:`.gemm_prefill.F32_CHUNK_BLOCKS`, chunks in order): within the f32 tolerance.
Bounds: :func:`.gemm_prefill.f32_body`; :class:`.gemv_kernels.Kernel` checks the shapes it
rests on (``K % 32 = 0``, ``N`` whole column blocks of 32 per workgroup).
"""

from __future__ import annotations

import math

from iree.compiler import ir

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant import gemv_kernels
from rlx.lowering.mir_to_linalg.quant.gemm_prefill import WIDE_COLUMNS
from rlx.lowering.mir_to_linalg.quant.gemv_batched import DYNAMIC_M
from rlx.lowering.mir_to_linalg.quant.gemv_planes import parameter_names, shared_planes
from rlx.lowering.mir_to_linalg.quant.gemv_text import workgroup_rows
from rlx.lowering.registry import LoweringContext, LoweringOptions


def f32_kernel(options: LoweringOptions, m: int | None, n: int, k: int
               ) -> gemv_kernels.Kernel | None:
    """The kernel of an f32 ``[M, K] x [K, N]`` prefill (``m`` None: dynamic), or None where
    IREE's matmul stays (not llvm-cpu with rlx's kernels, prefill kernels off, not the wide
    tile, ``M <= MAX_BATCH``, ``K`` not whole blocks of 32 or ``N`` not of 32 columns)."""
    if not (options.gemv_kernels and options.prefill_kernels and options.vector_bits >= 512
            and options.prefill_columns == WIDE_COLUMNS):
        return None
    if (m is not None and m <= gemv_kernels.MAX_BATCH) or k % 32 or n % WIDE_COLUMNS:
        return None
    return gemv_kernels.Kernel(gemv_kernels.F32, n, k, workgroup_rows(n, k, WIDE_COLUMNS),
                               batch=DYNAMIC_M, columns=WIDE_COLUMNS, lanes=16)


def lower_f32_prefill(ctx: LoweringContext, lhs: ir.Value, rhs: ir.Value) -> ir.Value | None:
    """``lhs [..., K] @ rhs [K, N]`` through :func:`f32_kernel`'s kernel, or None (the
    matmul is not an f32 prefill of a parameter weight, or has no such kernel)."""
    f32 = emit.f32()
    if emit.elem(lhs) != f32 or emit.elem(rhs) != f32 or emit.rank(rhs) != 2:
        return None
    if parameter_names(ctx, rhs, 1) is None:     # a weight computed per call: no plane
        return None
    k, n = emit.static_shape(rhs)
    lead = emit.sizes(lhs)[:-1]
    if k is None or n is None or not lead:
        return None
    m = math.prod(lead) if all(isinstance(s, int) for s in lead) else None  # type: ignore
    kern = f32_kernel(ctx.options, m, n, k)
    if kern is None:
        return None
    rank = len(lead) + 1
    x2 = lhs if rank == 2 else emit.collapse(lhs, [list(range(rank - 1)), [rank - 1]])
    y = gemv_kernels.dispatch(ctx, kern, x2, shared_planes(ctx, kern, rhs))
    return y if rank == 2 else emit.expand(y, [list(range(rank - 1)), [rank - 1]], [*lead, n])


__all__ = ["f32_kernel", "lower_f32_prefill"]
