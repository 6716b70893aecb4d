"""The Gated DeltaNet decode step as a hand-written llvm-cpu kernel that updates the state in
its own buffer: ``gated_delta_net`` with ``carry_state``, ``state_in_place`` and one step
(``S = 1``), one dispatch whose state operand is tied to its final-state result.

Why: a decode step must read the old state and write the new one. Lowered as linalg (the
:mod:`.recurrent` step), the new state is a new tensor; IREE (3.13) updates an imported
argument in place only where a write is its one use, so a state passed in and returned is
written to a fresh buffer each step, and a batched server's per-slot states had to be
stacked into the recurrence's rows and split out again: 288 copies of 1 MiB (and 288 of
72 KiB for the conv frames) in an 8-slot step of the 0.8B model. Here the one use of the
state is this dispatch, which reads and writes it in place, so a batched state ``[slots,
H, n, n]`` stays in one buffer that every step updates.

**Per (row, head)** (workgroup ``w < B · H``), on the state ``S [n, n]`` (rows ``i``: the key
dim, columns ``j``: the value dim), the :mod:`.recurrent` step's formula and order:

- pass 1 reads ``S``: ``ka_j = Σ_i S[i, j] k_i`` and ``qa_j = Σ_i S[i, j] q_i`` (``i`` in
  order, 16 columns a vector, the ``2 n / 16`` accumulators in registers);
- per column ``d_j = (v_j - e ka_j) β`` and ``y_j = (e qa_j) / sqrt(n) + kq d_j`` (``e =
  exp(g)``, ``kq = (k·q) / sqrt(n)``, computed before the dispatch as the linalg form does);
- pass 2 writes ``S[i, j] = e S[i, j] + k_i d_j`` in place: row ``i`` of the new state
  needs only row ``i`` of the old one and ``d``, and pass 1 has read all it needs.

One workgroup owns its ``(row, head)``'s ``n x n`` block and no other reads or writes it,
so the in-place update races with nothing. ``S`` of 128 x 128 is 64 KiB: pass 2 finds it in
the L2 that pass 1 brought it to.

**Bounds** (all shapes static, checked by :func:`kernel_for`: ``n % 16 == 0``, ``n <=
MAX_N``, the state's ``B' >= B`` by the op's verifier): the guard runs ``w < B · H``
(``_guard``); ``S [B' · H, n, n]`` at ``[w, i, 16 s + [0, 16)]`` with ``w < B · H <= B' ·
H``, ``i < n``, ``s < n / 16``; ``k``, ``q``, ``v``, ``y [B · H, n]`` at ``[w, i]`` and ``[w,
16 s + [0, 16)]``; ``e``, ``β``, ``kq [B · H]`` at ``[w]``. A state of ``B' > B`` rows (a
batched server's, whose first ``B`` slots step): rows ``w >= B · H`` are neither read nor
written, so the tied result holds them as they were.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import flow

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import (
    V16,
    Binding,
    Text,
    executable_text,
    f32_literal,
    memref,
    record,
)
from rlx.lowering.registry import LoweringContext

LANES = 16
MAX_N = 128
"""The widest state a kernel takes: pass 1 keeps ``2 n / 16`` vectors of accumulators in
registers (16 at 128: half of AVX-512's)."""


@dataclass(frozen=True)
class GdnStepKernel:
    """The kernel for ``rows = B · H`` states of ``n x n``, the first of ``state_rows = B'
    · H`` (a state of more rows than the step: the rest are left as they are)."""

    rows: int
    state_rows: int
    n: int

    @property
    def symbol(self) -> str:
        extra = f"_of{self.state_rows}" if self.state_rows != self.rows else ""
        return f"rlx_gdn_step_{self.rows}x{self.n}{extra}"

    def text(self) -> str:
        r, n = self.rows, self.n
        args = [Binding("s", memref([self.state_rows, n, n], "f32"))]
        args += [Binding(name, memref([r, n], "f32")) for name in ("k", "q", "v")]
        args += [Binding(name, memref([r], "f32")) for name in ("e", "beta", "kq")]
        args.append(Binding("y", memref([r, n], "f32")))
        return executable_text(self.symbol, args, self._body, r)

    def _body(self, t: Text) -> None:
        n, vecs = self.n, self.n // LANES
        sm, vm = memref([self.state_rows, n, n], "f32"), memref([self.rows, n], "f32")
        hm = memref([self.rows], "f32")
        t(f"%cn = arith.constant {n} : index")
        for s in range(vecs):
            t(f"%o{s} = arith.constant {LANES * s} : index")
        t(f"%zero = arith.constant dense<0.0> : {V16}")
        t(f"%scale = arith.constant {f32_literal(1.0 / math.sqrt(n))} : f32")
        for name in ("e", "beta", "kq"):
            t(f"%{name}s = memref.load %{name}[%wg] : {hm}")
            t(f"%{name}v = vector.broadcast %{name}s : f32 to {V16}")
        t(f"%scv = vector.broadcast %scale : f32 to {V16}")
        inits = ", ".join(f"%ka{s} = %zero" for s in range(vecs))
        inits += ", " + ", ".join(f"%qa{s} = %zero" for s in range(vecs))
        types = ", ".join([V16] * (2 * vecs))
        t.block(f"%acc:{2 * vecs} = scf.for %i = %c0 to %cn step %c1 iter_args({inits}) "
                f"-> ({types})")
        for name in ("k", "q"):
            t(f"%{name}i = memref.load %{name}[%wg, %i] : {vm}")
            t(f"%{name}b = vector.broadcast %{name}i : f32 to {V16}")
        new = []
        for s in range(vecs):
            t(f"%sv{s} = vector.load %s[%wg, %i, %o{s}] : {sm}, {V16}")
            t(f"%nk{s} = vector.fma %sv{s}, %kb, %ka{s} : {V16}")
            new.append(f"%nk{s}")
        for s in range(vecs):
            t(f"%nq{s} = vector.fma %sv{s}, %qb, %qa{s} : {V16}")
            new.append(f"%nq{s}")
        t(f"scf.yield {', '.join(new)} : {types}")
        t.end()
        for s in range(vecs):
            t(f"%vv{s} = vector.load %v[%wg, %o{s}] : {vm}, {V16}")
            t(f"%ek{s} = arith.mulf %ev, %acc#{s} : {V16}")
            t(f"%dm{s} = arith.subf %vv{s}, %ek{s} : {V16}")
            t(f"%d{s} = arith.mulf %dm{s}, %betav : {V16}")
            t(f"%eq{s} = arith.mulf %ev, %acc#{vecs + s} : {V16}")
            t(f"%ys{s} = arith.mulf %eq{s}, %scv : {V16}")
            t(f"%y{s} = vector.fma %kqv, %d{s}, %ys{s} : {V16}")
            t(f"vector.store %y{s}, %y[%wg, %o{s}] : {vm}, {V16}")
        t.block("scf.for %i2 = %c0 to %cn step %c1")
        t(f"%k2 = memref.load %k[%wg, %i2] : {vm}")
        t(f"%k2b = vector.broadcast %k2 : f32 to {V16}")
        for s in range(vecs):
            t(f"%so{s} = vector.load %s[%wg, %i2, %o{s}] : {sm}, {V16}")
            t(f"%se{s} = arith.mulf %ev, %so{s} : {V16}")
            t(f"%sn{s} = vector.fma %k2b, %d{s}, %se{s} : {V16}")
            t(f"vector.store %sn{s}, %s[%wg, %i2, %o{s}] : {sm}, {V16}")
        t.end()


def kernel_for(ctx: LoweringContext, state: ir.Value, q: ir.Value) -> GdnStepKernel | None:
    """The kernel for a ``state_in_place`` step on llvm-cpu with hand-written kernels, one
    step of static shapes and ``n`` a multiple of 16 up to :data:`MAX_N`; else None (the
    linalg form)."""
    if ctx.options.target != "llvm-cpu" or not ctx.options.attention_kernel:
        return None
    shape = emit.static_shape(q)
    if (None in shape or None in emit.static_shape(state) or shape[1] != 1
            or emit.elem(state) != emit.f32()):
        return None
    b, _, h, n = (int(d or 0) for d in shape)      # all static: checked above
    if n % LANES or n > MAX_N:
        return None
    return GdnStepKernel(b * h, int(emit.static_shape(state)[0] or 0) * h, n)


def dispatch(ctx: LoweringContext, kern: GdnStepKernel, state: ir.Value,
             vectors: tuple[ir.Value, ir.Value, ir.Value],
             per_head: tuple[ir.Value, ir.Value, ir.Value]) -> tuple[ir.Value, ir.Value]:
    """``(S', y)`` of one step: ``state [B', H, n, n]`` f32 (tied to ``S'``), ``vectors`` =
    ``k, q, v [B, 1, H, n]`` f32, ``per_head`` = ``e, β, kq [B, 1, H]`` f32; ``y [B, H,
    n]``."""
    record(ctx, kern)
    bs, h, n, _ = emit.static_shape(state)
    b = emit.static_shape(vectors[0])[0]
    flat_s = emit.collapse(state, [[0, 1], [2], [3]])     # [B' H, n, n]: rows w < B H stepped
    flat_v = [emit.collapse(x, [[0, 1, 2], [3]]) for x in vectors]
    flat_h = [emit.collapse(x, [[0, 1, 2]]) for x in per_head]
    entry = ir.SymbolRefAttr.get([kern.symbol, kern.symbol])
    index = ir.IndexType.get()
    tied = ir.ArrayAttr.get([ir.IntegerAttr.get(index, 0), ir.IntegerAttr.get(index, -1)])
    y_t = ir.RankedTensorType.get([kern.rows, kern.n], emit.f32())
    op = flow.DispatchOp([flat_s.type, y_t], [emit.index(kern.rows)],
                         ir.ArrayAttr.get([entry]), [flat_s, *flat_v, *flat_h], [], [],
                         tied_operands=tied)
    new = emit.expand(op.results[0], [[0, 1], [2], [3]], [bs, h, n, n])
    y = emit.expand(op.results[1], [[0, 1], [2]], [b, h, n])
    return new, y


__all__ = ["MAX_N", "GdnStepKernel", "dispatch", "kernel_for"]
