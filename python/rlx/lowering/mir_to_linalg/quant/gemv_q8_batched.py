"""The ``activation_quant="q8"`` decode GEMV of Q8_0 (and Q5_0 / Q4_0, widened to bytes) for a
batched step of ``2 <= M <= MAX_BATCH`` rows of ``x`` (rlx-serve's ``decode_R``, Qwen3.5's
``verify_K``): the ``M = 1`` body of :mod:`.gemv_q8` with the rows of ``x`` inside the loop
over the weight, so that each 32-byte block of a weight row is loaded (and its absolute value
formed) once and multiplied with every row of ``x``. The integer GEMM a prefill runs
(:mod:`.gemm_q8`) repacks the weight into its quads a chunk at a time and computes 16 rows
whatever ``M`` is: at ``M = 4`` that cost 2-2.5 one-row GEMVs.

**Semantics**: per row ``m`` of ``x``, :func:`.gemv_q8.q8_0_body`'s: ``x[m]`` quantized by
:func:`.gemv_q8.quantize_block` (the same lines, so the same bytes as a decode's), ``y[m, n]
= Σ_b (d_w[n, b] · d_x[m, b]) · Σ_i q_w q_x`` with the block sums exact in i32 (the module
docstring of :mod:`.gemv_q8`: no overflow) and the scaling and summation in f32, 8-lane
partial sums per row, in the same order: for the same ``x`` the result is that of ``M``
one-row calls bit for bit (checked at M = 3, 4, 5, 8; benchmarks/README.md, "The batched q8
GEMV", where the choice between this, the integer GEMM and the f32 body is measured).

**Register use**: a pass takes up to :data:`GROUP` rows of ``x``: 4 x ``GROUP`` 8-lane
accumulators, the tile's four weight blocks and their absolute values; ``M > GROUP`` runs
passes over the same row tile (its ``4 K`` weight bytes then come from L1 / L2).

**Bounds** (shapes as :class:`.gemv_kernels.Kernel` checks them: ``K`` a multiple of 32,
``M · K <= MAX_Q8_K``; ``tile < N / 4`` and ``r_i < N`` as in :mod:`.gemv_kernels`): the
stack ``xq [M K]`` i8 and ``xd [M K / 32]`` f32 (``1.125 M K <= 18`` KiB of IREE's 32),
written for block ``c < M K / 32`` at ``32 c + [0, 32)`` and ``c``, from ``x[c / (K / 32),
32 (c mod K / 32) + [0, 32)]`` (row ``< M``, column ``< K``); read for row ``m < M`` and
block ``b < K / 32`` at ``m K + 32 b + [0, 32) < M K`` and ``m K / 32 + b < M K / 32``; the
planes ``q [N / 4, 4 K]`` at ``128 b + 32 i + [0, 32) < 4 K`` and ``d [N / 4, K / 8]`` at
``4 b + [0, 4) < K / 8``; ``y`` and ``r [M, N]`` at ``[m, r_i]``.
"""

from __future__ import annotations

from rlx.lowering.mir_to_linalg.executable import Text, memref
from rlx.lowering.mir_to_linalg.quant.gemv_q8 import (
    I8L,
    V32B,
    Shape,
    block_dot,
    dot_constants,
    quantize_x,
    signed_operands,
)
from rlx.lowering.mir_to_linalg.quant.gemv_text import (
    ROWS_PER_TILE,
    V8,
    at,
    prefetch_ahead,
    rows_loop,
)

GROUP = 4
"""Rows of ``x`` a pass over a row tile takes (16 accumulators of 8 lanes)."""


def q8_0_batched_body(t: Text, kern: Shape) -> None:
    """Q8_0 (Q5_0 / Q4_0 widened), ``M = kern.batch`` rows of ``x``: per block ``y[m] +=
    (d_w · d_x[m]) · Σ q_w q_x[m]`` (module docstring)."""
    assert kern.int_dot is not None
    assert kern.batch > 1
    m, k, q, d = kern.batch, kern.k, kern.bindings["q"], kern.bindings["d"]
    quantize_x(t, k, sums=False, int_dot=kern.int_dot, rows=m)
    dot_constants(t, kern.int_dot)
    t("%acc_zero = arith.constant dense<0.0> : vector<8xf32>")
    rows_loop(t, kern.rows)
    for first in range(0, m, GROUP):
        _pass(t, kern, list(range(first, min(m, first + GROUP))), q, d)
    t.end()


def _pass(t: Text, kern: Shape, rows: list[int], q: str, d: str) -> None:
    """One pass of the rows ``rows`` of ``x`` over the row tile: the reduction over the
    blocks, then each row's results stored."""
    assert kern.int_dot is not None
    k, p = kern.k, rows[0]
    accs = [(i, j) for j in rows for i in range(ROWS_PER_TILE)]
    init = ", ".join(f"%a{p}_{i}_{j} = %acc_zero" for i, j in accs)
    t.block(f"%acc{p}:{len(accs)} = scf.for %blk{p} = %c0 to %q8_nb step %c1 iter_args({init})"
            f" -> ({', '.join([V8] * len(accs))})")
    t(f"%kb{p} = arith.muli %blk{p}, %q8_c32 : index")
    prefetch_ahead(t, kern, "q", f"%blk{p}", 32 * ROWS_PER_TILE)
    t(f"%dk{p} = {at(f'%blk{p}', ROWS_PER_TILE, 0)}")          # d[tile, 4 b + i]: 4 at once
    t(f"%dh{p} = vector.load %d[%tile, %dk{p}] : {d}, vector<4xf16>")
    t(f"%dw{p} = arith.extf %dh{p} : vector<4xf16> to vector<4xf32>")
    weights = []
    for i in range(ROWS_PER_TILE):
        t(f"%qk{p}_{i} = {at(f'%blk{p}', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%w{p}_{i} = vector.load %q[%tile, %qk{p}_{i}] : {q}, {V32B}")
        weights.append(f"%w{p}_{i}")
    out = []
    for j in rows:
        t(f"%xo{p}_{j} = affine.apply affine_map<()[s0] -> (s0 + {j * k})>()[%kb{p}]")
        t(f"%xv{p}_{j} = vector.load %xq[%xo{p}_{j}] : {memref([kern.batch * k], 'i8')}, "
          f"{V32B}")
        t(f"%xb{p}_{j} = affine.apply affine_map<()[s0] -> (s0 + {j * k // 32})>()[%blk{p}]")
        t(f"%dx{p}_{j} = memref.load %xd[%xb{p}_{j}] : {memref([kern.batch * k // 32], 'f32')}")
        t(f"%dxv{p}_{j} = vector.broadcast %dx{p}_{j} : f32 to vector<4xf32>")
        t(f"%dwx{p}_{j} = arith.mulf %dw{p}, %dxv{p}_{j} : vector<4xf32>")
        for i in range(ROWS_PER_TILE):
            tag = f"{p}_{i}_{j}"
            u, s = signed_operands(t, kern.int_dot, weights[i], f"%xv{p}_{j}", tag)
            dot = block_dot(t, kern.int_dot, u, s, tag)
            t(f"%df{tag} = arith.sitofp {dot} : {I8L} to {V8}")
            t(f"%sc{tag} = vector.extract %dwx{p}_{j}[{i}] : f32 from vector<4xf32>")
            t(f"%v{tag} = vector.broadcast %sc{tag} : f32 to {V8}")
            t(f"%n{tag} = vector.fma %df{tag}, %v{tag}, %a{tag} : {V8}")
            out.append(f"%n{tag}")
    t(f"scf.yield {', '.join(out)} : {', '.join([V8] * len(out))}")
    t.end()
    y = kern.bindings["y"]
    for j in rows:
        t(f"%mi{p}_{j} = arith.constant {j} : index")
    for n, (i, j) in enumerate(accs):
        t(f"%y{p}_{i}_{j} = vector.reduction <add>, %acc{p}#{n} : {V8} into f32")
        value = f"%y{p}_{i}_{j}"
        if "r" in kern.bindings:
            t(f"%res{p}_{i}_{j} = memref.load %r[%mi{p}_{j}, %r{i}] : {kern.bindings['r']}")
            t(f"%out{p}_{i}_{j} = arith.addf {value}, %res{p}_{i}_{j} : f32")
            value = f"%out{p}_{i}_{j}"
        t(f"memref.store {value}, %y[%mi{p}_{j}, %r{i}] : {y}")


__all__ = ["GROUP", "q8_0_batched_body"]
