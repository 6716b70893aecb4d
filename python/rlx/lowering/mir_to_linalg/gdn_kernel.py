"""The Gated DeltaNet recurrence as one hand-written llvm-cpu kernel that walks the sequence
inside and updates the state in its own buffer: ``gated_delta_net`` on llvm-cpu (static
heads, ``n`` a multiple of 16 up to :data:`MAX_N`, the state computed in f32), one dispatch
whose state operand is tied to its final-state result. A decode step is its one-step form,
a prefill the same kernel over the prompt's length.

Why, for a decode step: a step must read the old state and write the new one. Lowered as
linalg (the :mod:`.recurrent` step), the new state is a new tensor; IREE (3.13) updates an
imported argument in place only where a write is its one use, so a state passed in and
returned is written to a fresh buffer each step, and a batched server's per-slot states
had to be stacked into the recurrence's rows and split out again: 288 copies of 1 MiB (and
288 of 72 KiB for the conv frames) in an 8-slot step of the 0.8B model. Here the one use
of the state is this dispatch, which reads and writes it in place, so a batched state
``[slots, H, n, n]`` stays in one buffer that every step updates.

Why, for a prefill: the linalg form is a host ``scf.for`` over the prompt
(:func:`rlx.lowering.loops.for_loop`) of three dispatches a step, and IREE copies the whole
carried output to a new allocation every step (O(S²) bytes). Here one dispatch runs every
step of a (row, head) with the state kept in that workgroup's cache. Measured on a Zen 4
(2 threads, 2026-12-05): one layer of Qwen3.5-0.8B's shape (16 heads of 128, 512 steps)
95.6 ms as the loop, 10.7 ms here; the 0.8B Q8_0 model's 512-token prefill 4.82 s -> 4.41
s (medians of 5 interleaved calls).

The state operand is tied to the result whether or not the op has ``state_in_place``: IREE
keeps a tied operand's value for its other uses by copying it first, so the licence only
tells where no copy is needed.

**Per (row, head)** (workgroup ``w < B · H``: ``b = w / H``, ``h = w mod H``), on the state
``S [n, n]`` (rows ``i``: the key dim, columns ``j``: the value dim), for ``t = 0 .. S-1``
in order, the :mod:`.recurrent` step's formula and order:

- pass 1 reads ``S``: ``ka_j = Σ_i S[i, j] k_i`` and ``qa_j = Σ_i S[i, j] q_i`` (``i`` in
  order, 16 columns a vector, the ``2 n / 16`` accumulators in registers), and ``kq = Σ_i
  (k_i q_i) / sqrt(n)`` (``i`` in order, as the linalg form's reduction body scales each
  product);
- per column ``d_j = (v_j - e ka_j) β`` and ``y_j = (e qa_j) / sqrt(n) + kq d_j`` (``e =
  exp(g)``, computed before the dispatch as the linalg form does);
- pass 2 writes ``S[i, j] = e S[i, j] + k_i d_j`` in place: row ``i`` of the new state
  needs only row ``i`` of the old one and ``d``, and pass 1 has read all it needs.

One workgroup owns its ``(row, head)``'s ``n x n`` block and no other reads or writes it,
so the in-place update races with nothing. ``kq`` is the kernel's own sum (not IREE's
reduction, whose order varies with how many rows a call has), so every step is the same
arithmetic wherever a call's boundaries fall: a prompt in chunks gives the whole prompt's
outputs and state bit for bit. ``S`` of 128 x 128 is 64 KiB: pass 2 finds it in
the L2 that pass 1 brought it to, and so does the next step.

**Bounds.** The inputs are viewed as ``[B · S, H · n]`` (``k``, ``q``, ``v``, ``y``) and
``[B · S, H]`` (``e``, ``β``), step ``t`` of row ``b`` at row ``b · S + t``, head
``h`` at columns ``h · n + [0, n)``; the state as ``[B' · H, n, n]``. Checked by
:func:`kernel_for`: ``H``, ``n`` static, ``n % 16 == 0``, ``n <= MAX_N``. ``B``, ``S`` and
``B'`` may be dynamic (rlx-serve's batched prefill has a dynamic ``B``). With ``B`` and
``S`` static every view has ``B · S`` rows. Else each view is sized by its own operand's
row count (a push constant each) and the kernel walks ``S = min(those counts) / B`` steps,
so ``b · S + t < B · S <=`` every view's rows whatever the counts are (the op's verifier
has them equal, checked at run time by :mod:`rlx.lowering.guards`). The guard runs ``w <
min(B, B') · H`` (``_guard``; ``B' >= B`` by the op's verifier, static or checked at run
time, so that is ``B · H``): ``S [B' · H, n, n]`` at ``[w, i, 16 s + [0, 16)]`` with ``w <
B' · H``, ``i < n``, ``s < n / 16``; the others at columns ``h · n + i`` (``h < H``, ``i <
n``) and ``h``, rows ``b · S + t`` with ``b = w / H < B``. A state of ``B' > B`` rows (a
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
    Scalar,
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

VECTORS = ("k", "q", "v")
PER_HEAD = ("e", "beta")


@dataclass(frozen=True)
class GdnScanKernel:
    """The kernel for ``batch`` rows of ``heads`` states of ``n x n`` over ``steps`` tokens,
    on a state of ``state_batch`` rows (more than ``batch``: the rest are left as they
    are); None: a size known at run time (a push constant)."""

    batch: int | None
    heads: int
    n: int
    state_batch: int | None
    steps: int | None

    @property
    def symbol(self) -> str:
        def size(v: int | None) -> str:
            return "d" if v is None else str(v)

        extra = f"_of{size(self.state_batch)}" if self.state_batch != self.batch else ""
        steps = "dyn" if self.steps is None else f"s{self.steps}"
        return f"rlx_gdn_scan_{size(self.batch)}x{self.heads}x{self.n}_{steps}{extra}"

    @property
    def dynamic_rows(self) -> bool:
        """Whether the views' ``B · S`` rows are known only at run time."""
        return self.batch is None or self.steps is None

    def _view(self, cols: int) -> str:
        """The memref type of an input viewed as ``[B · S, cols]``."""
        rows = "?" if self.dynamic_rows else (self.batch or 0) * (self.steps or 0)
        return memref([rows, cols], "f32")

    def _state(self) -> str:
        rows = "?" if self.state_batch is None else self.state_batch * self.heads
        return memref([rows, self.n, self.n], "f32")

    def text(self) -> str:
        width, h = self.heads * self.n, self.heads
        dyn = self.dynamic_rows

        def view(name: str, cols: int) -> Binding:
            return Binding(name, self._view(cols), (f"%len_{name}",) if dyn else ())

        args: list[Binding | Scalar] = [
            Binding("s", self._state(), ("%len_s",) if self.state_batch is None else ())]
        args += [view(name, width) for name in VECTORS]
        args += [view(name, h) for name in PER_HEAD]
        if dyn:
            args += [Scalar(f"len_{name}") for name in VECTORS + PER_HEAD]
        if self.batch is None:
            args.append(Scalar("nb"))
        if self.state_batch is None:
            args.append(Scalar("len_s"))
        args.append(Binding("y", self._view(width), ("%len_k",) if dyn else ()))
        if self.batch is not None and self.state_batch is not None:
            return executable_text(self.symbol, args, self._body, self.batch * h)

        def count(t: Text) -> str:
            # min(B, B') · H: every (row, head) of the inputs with a row of the state
            # (B' >= B by the op's verifier, checked at run time where either is dynamic)
            t(f"%ch_count = arith.constant {h} : index")
            b = "%nb" if self.batch is None else "%cb_count"
            if self.batch is not None:
                t(f"%cb_count = arith.constant {self.batch} : index")
            if self.state_batch is None:
                t("%sb_count = arith.divui %len_s, %ch_count : index")
            else:
                t(f"%sb_count = arith.constant {self.state_batch} : index")
            t(f"%b_count = arith.minui {b}, %sb_count : index")
            t("%wg_count = arith.muli %b_count, %ch_count : index")
            return "%wg_count"

        return executable_text(self.symbol, args, self._body, count)

    def _body(self, t: Text) -> None:
        n, h = self.n, self.heads
        t(f"%cn = arith.constant {n} : index")
        t(f"%ch = arith.constant {h} : index")
        t("%bi = arith.divui %wg, %ch : index")
        t("%hi = arith.remui %wg, %ch : index")
        t("%col = arith.muli %hi, %cn : index")
        for s in range(n // LANES):
            t(f"%o{s} = arith.constant {LANES * s} : index")
            t(f"%co{s} = arith.addi %col, %o{s} : index")
        self._steps(t)
        t("%base = arith.muli %bi, %steps : index")
        t(f"%zero = arith.constant dense<0.0> : {V16}")
        t("%fzero = arith.constant 0.0 : f32")
        t(f"%scale = arith.constant {f32_literal(1.0 / math.sqrt(n))} : f32")
        t(f"%scv = vector.broadcast %scale : f32 to {V16}")
        t.block("scf.for %t = %c0 to %steps step %c1")
        t("%r = arith.addi %base, %t : index")
        hm = self._view(h)
        for name in PER_HEAD:
            t(f"%{name}s = memref.load %{name}[%r, %hi] : {hm}")
            t(f"%{name}v = vector.broadcast %{name}s : f32 to {V16}")
        self._read(t)
        self._write(t)
        t.end()

    def _steps(self, t: Text) -> None:
        """``%steps``: ``S``, static or ``min(every view's rows) / B``."""
        if not self.dynamic_rows:
            t(f"%steps = arith.constant {self.steps} : index")
            return
        # row b·S + t of every view is in bounds (B >= 1 here: the guard admits no workgroup
        # where B = 0)
        least = "%len_k"
        for name in ("q", "v", *PER_HEAD):
            t(f"%least_{name} = arith.minui {least}, %len_{name} : index")
            least = f"%least_{name}"
        if self.batch is None:
            t(f"%steps = arith.divui {least}, %nb : index")
        else:
            t(f"%cb = arith.constant {self.batch} : index")
            t(f"%steps = arith.divui {least}, %cb : index")

    def _read(self, t: Text) -> None:
        """Pass 1 of step ``%r``: ``%acc`` = ``kᵀS``, ``qᵀS`` (16 columns a vector) and
        ``k·q / sqrt(n)``."""
        vecs, vm, sm = self.n // LANES, self._view(self.heads * self.n), self._state()
        inits = ", ".join(f"%ka{s} = %zero" for s in range(vecs))
        inits += ", " + ", ".join(f"%qa{s} = %zero" for s in range(vecs))
        types = ", ".join([V16] * (2 * vecs))
        t.block(f"%acc:{2 * vecs + 1} = scf.for %i = %c0 to %cn step %c1 iter_args({inits}, "
                f"%kqa = %fzero) -> ({types}, f32)")
        t("%ci = arith.addi %col, %i : index")
        for name in ("k", "q"):
            t(f"%{name}i = memref.load %{name}[%r, %ci] : {vm}")
            t(f"%{name}b = vector.broadcast %{name}i : f32 to {V16}")
        t("%kqi = arith.mulf %ki, %qi : f32")
        t("%kqs = arith.mulf %kqi, %scale : f32")
        t("%nkq = arith.addf %kqa, %kqs : f32")
        new = []
        for s in range(vecs):
            t(f"%sv{s} = vector.load %s[%wg, %i, %o{s}] : {sm}, {V16}")
            t(f"%nk{s} = vector.fma %sv{s}, %kb, %ka{s} : {V16}")
            new.append(f"%nk{s}")
        for s in range(vecs):
            t(f"%nq{s} = vector.fma %sv{s}, %qb, %qa{s} : {V16}")
            new.append(f"%nq{s}")
        t(f"scf.yield {', '.join(new)}, %nkq : {types}, f32")
        t.end()

    def _write(self, t: Text) -> None:
        """Step ``%r``'s ``d`` and ``y`` (``y`` stored), then pass 2: ``S = e S + k dᵀ``."""
        vecs, vm, sm = self.n // LANES, self._view(self.heads * self.n), self._state()
        t(f"%kqv = vector.broadcast %acc#{2 * vecs} : f32 to {V16}")
        for s in range(vecs):
            t(f"%vv{s} = vector.load %v[%r, %co{s}] : {vm}, {V16}")
            t(f"%ek{s} = arith.mulf %ev, %acc#{s} : {V16}")
            t(f"%dm{s} = arith.subf %vv{s}, %ek{s} : {V16}")
            t(f"%d{s} = arith.mulf %dm{s}, %betav : {V16}")
            t(f"%eq{s} = arith.mulf %ev, %acc#{vecs + s} : {V16}")
            t(f"%ys{s} = arith.mulf %eq{s}, %scv : {V16}")
            t(f"%y{s} = vector.fma %kqv, %d{s}, %ys{s} : {V16}")
            t(f"vector.store %y{s}, %y[%r, %co{s}] : {vm}, {V16}")
        t.block("scf.for %i2 = %c0 to %cn step %c1")
        t("%ci2 = arith.addi %col, %i2 : index")
        t(f"%k2 = memref.load %k[%r, %ci2] : {vm}")
        t(f"%k2b = vector.broadcast %k2 : f32 to {V16}")
        for s in range(vecs):
            t(f"%so{s} = vector.load %s[%wg, %i2, %o{s}] : {sm}, {V16}")
            t(f"%se{s} = arith.mulf %ev, %so{s} : {V16}")
            t(f"%sn{s} = vector.fma %k2b, %d{s}, %se{s} : {V16}")
            t(f"vector.store %sn{s}, %s[%wg, %i2, %o{s}] : {sm}, {V16}")
        t.end()


def kernel_for(ctx: LoweringContext, state: ir.Value | None, q: ir.Value
               ) -> GdnScanKernel | None:
    """The kernel for a ``gated_delta_net`` on llvm-cpu with hand-written kernels: ``q
    [B, S, H, n]`` with ``H`` and ``n`` static, ``n`` a multiple of 16 up to
    :data:`MAX_N`, and ``state`` ``[B', H, n, n]`` (already widened to f32 by the lowering;
    or none: the zero state); else None (the linalg form)."""
    if ctx.options.target != "llvm-cpu" or not ctx.options.attention_kernel:
        return None
    b, s, h, n = emit.static_shape(q)
    if h is None or n is None or n % LANES or n > MAX_N:
        return None
    state_batch = b
    if state is not None:
        shape = emit.static_shape(state)
        if None in shape[1:]:
            return None
        state_batch = shape[0]
    return GdnScanKernel(b, h, n, state_batch, s)


def dispatch(ctx: LoweringContext, kern: GdnScanKernel, state: ir.Value,
             vectors: tuple[ir.Value, ir.Value, ir.Value],
             per_head: tuple[ir.Value, ir.Value]) -> tuple[ir.Value, ir.Value]:
    """``(S', y)``: ``state [B', H, n, n]`` f32 (tied to ``S'``), ``vectors`` = ``k, q, v
    [B, S, H, n]`` f32, ``per_head`` = ``e, β [B, S, H]`` f32; ``y [B, S, H, n]``."""
    record(ctx, kern)
    h, n = kern.heads, kern.n
    bs = emit.dim(state, 0)
    b, s = emit.dim(vectors[0], 0), emit.dim(vectors[0], 1)
    flat_s = emit.collapse(state, [[0, 1], [2], [3]])     # [B' H, n, n]: rows w < B H stepped
    flat = [emit.collapse(x, [[0, 1], [2, 3]]) for x in vectors]
    flat += [emit.collapse(x, [[0, 1], [2]]) for x in per_head]
    lengths = [emit.as_value(emit.dim(x, 0)) for x in flat] if kern.dynamic_rows else []
    state_dims = [] if kern.state_batch is not None else [emit.as_value(emit.dim(flat_s, 0))]
    scalars = [*lengths, *([emit.as_value(b)] if kern.batch is None else []), *state_dims]
    entry = ir.SymbolRefAttr.get([kern.symbol, kern.symbol])
    index = ir.IndexType.get()
    tied = ir.ArrayAttr.get([ir.IntegerAttr.get(index, 0), ir.IntegerAttr.get(index, -1)])
    rows: emit.Size = lengths[0] if kern.dynamic_rows else emit.mul_sizes(b, s)
    y_t = emit.tensor_type([rows, h * n], emit.f32())
    op = flow.DispatchOp([flat_s.type, y_t], [emit.as_value(emit.mul_sizes(b, h))],
                         ir.ArrayAttr.get([entry]), [flat_s, *flat, *scalars],
                         [*state_dims, *lengths], [*state_dims, *emit.dynamic_values([rows])],
                         tied_operands=tied)
    new = emit.expand(op.results[0], [[0, 1], [2], [3]], [bs, h, n, n])
    y = emit.expand(op.results[1], [[0, 1], [2, 3]], [b, s, h, n])
    return new, y


__all__ = ["MAX_N", "GdnScanKernel", "dispatch", "kernel_for"]
