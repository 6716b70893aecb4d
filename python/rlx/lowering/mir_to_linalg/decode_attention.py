"""A hand-written decode attention kernel for llvm-cpu: one query position (``S = 1``)
against the whole KV cache, in one dispatch.

The decomposed attention (:mod:`.attention`) costs a decode step seven dispatches a layer on
llvm-cpu: IREE data-tiles both batch matmuls, so Q, K, the probabilities and V are each
packed by an encoding dispatch (K and V, the whole cache, on every token), then QKᵀ, the
softmax and P·V run. For one query row the packing buys nothing, and on a small model the
dispatches themselves are the cost: each is a command IREE records on the host and a
barrier the two workers meet at (the 135M model: 210 of a token's 394 dispatches). This
kernel is one ``stream.executable`` (written in ``vector`` / ``scf`` / ``memref`` on the
skeleton of :mod:`.executable`, as the GEMV kernels of :mod:`.quant.gemv_kernels`), one
workgroup per query head, or per group of ``g`` query heads that read the same KV head
(:func:`heads_per_workgroup`: each key's K and V rows loaded once for the group, each head's
arithmetic the one-head kernel's, in its order):

- ``m = max_j s_j`` with ``s_j = scale · (q · k_j)`` over the visible keys ``j``;
- ``o = Σ_j e_j v_j / Σ_j e_j`` with ``e_j = exp(s_j - m)`` (the scores computed again:
  two passes over K instead of a score buffer of dynamic length on the stack).

Semantics are the attention op's for one query at the last position (``mask_kind`` none or
causal: every key is visible; sliding_window: the last ``window + 1`` keys; custom: a key's
score is the decomposed form's masked fill where the query row's keep flag is below 0.5;
causal_lengths: row b's first ``n_b`` keys, ``n_b`` an i32 the kernel reads on the device
and clamps to the row's keys, every key masked when it is 0 or less),
summed in another order (within the f32 tolerance of the decomposed form, never
bit-identical to it). A batch of ``B`` query rows (``q [B, 1, H · hd]``, one per sequence,
K / V ``[B, S_k, ...]``, the batched decode of :mod:`rlx.models.llama_batch`) runs ``B · H /
g`` workgroups, row ``wg / (H / g)`` against its own rows of the cache: where IREE data-tiled the
decomposed form's batch matmuls, it packed (copied) every slot's whole K and V each step.
Query head ``h`` reads KV head ``h / (H / Hkv)`` (GQA, no K/V copy). Taken only where the
layout is the packed ``[1, 1, H · hd]`` query and ``[1, S_k, Hkv · hd]`` K / V in f32, with
``hd`` a multiple of 16 and no softcap, mask operand or bias; anything else keeps the
decomposed form.

The sums ``Σ_j e_j`` and ``Σ_j e_j v_j`` (``hd / 16`` vectors of 16 lanes) are taken in two
levels: each block of :data:`BLOCK` keys is summed into fresh zero accumulators, then the
block's sums are added to the running totals, so a rounding error grows with ``BLOCK + n /
BLOCK`` additions instead of ``n``. Summed in key order, a long cache's running sums
outgrow its weights: at 65536 keys of scores spread by ~4, most weights fall below half an
ulp of the sum, and the output was off by 1.2e-4 of its largest value (the f32 tolerance is
2e-5); in blocks, 7e-7 (``tests/numerics/test_attention.py``). The max needs no blocks: it
is exact in any order.

**Bounds.** Every load stays inside its binding for any row counts and workload the host
passes. K and V each come with their own row count (``len_k``, ``len_v``: the very values
that size their bindings, the dispatch's operand dims, passed again as the memrefs' dims),
and both passes run over ``start <= j < len = min(len_k, len_v)``, with ``start =
max(0, len - 1 - window)`` in index arithmetic that cannot go negative: a V shorter than K
(which the op's verifier rejects where the lengths are static) is attended over the keys
both have, never read past. The sum pass cuts that range into blocks ``b <= j < min(b +
BLOCK, len)`` for ``b = start, start + BLOCK, ...`` while ``b < len``: every key of the
range once, none past ``len`` (the last block partial; ``b + BLOCK`` cannot overflow, ``b``
being below a row count). A head ``h`` reads ``q`` / ``o`` at ``h · hd + [0, hd)`` and K / V
columns ``(h / (H / Hkv)) · hd + [0, hd)``, in bounds for ``h < H``: the workload is the
constant ``H / g``, and the body runs only for workgroup ids below it
(:func:`.executable.executable_text`); workgroup ``wg`` computes the flattened heads ``wg ·
g + i``, ``i < g``, at most ``(H / g - 1) g + g - 1 = H - 1`` (``g`` divides ``H / Hkv``, so
the group's heads share one KV head, ``(wg mod H / g) · g / (H / Hkv) < Hkv``). Batched or
masked (``B · H / g`` workgroups), row ``b = wg / (H / g) < B`` reads K / V / mask rows ``b ·
rows .. b · rows + rows - 1`` of the collapsed ``[B · S_k, ...]`` operands, ``rows`` the
smallest of their row counts divided by ``B``: below ``B · rows``, inside every binding, and
its heads ``wg · g + i < B · H``. With no key at all (``len = 0``) neither pass
runs, nothing is read and the result is 0 / 0; with one, each loop runs once.
"""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass, replace
from typing import ClassVar, Self

from iree.compiler import ir
from iree.compiler.dialects import flow

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import (
    V16,
    Binding,
    Scalar,
    Text,
    executable_text,
    f32_bits,
    f32_literal,
    record,
)
from rlx.lowering.registry import LoweringContext

MASK_KINDS = ("none", "causal", "sliding_window", "custom", "causal_lengths")
"""Mask kinds the kernel takes: one query at the last position sees a contiguous run of
keys, (custom) the keys its row of the mask keeps, or (causal_lengths) the first ``n_b``
keys of its row."""

MASKED = -1e9
"""A masked key's score: the decomposed form's (``attention.MASKED``, RLX's fill)."""

BLOCK = 128
"""Keys the sum pass adds up into fresh accumulators before adding them to the running
totals (see the module docstring). 64, 128 and 256 measured alike: at 65536 keys the
output is 4e-7 to 1.1e-6 of its largest value off (the sequential sum: 1.2e-4); the inner
loop is the sequential one's (x86 AVX2: 97 instructions a key against 96, as many stack
spills), plus a few adds a block; and the 135M model's heads (9 over 3, hd 64) at 128, 1024
and 4096 keys take within 1.5% of the sequential kernel's time, the spread between that
kernel and a copy of itself (one thread's CPU time, interleaved rounds, one process)."""


GROUP_CHUNKS = 16
"""The most 16-lane query vectors (heads x ``hd / 16``) a workgroup of the decode kernel keeps
in registers: query heads that share a KV head are taken together up to this (the 135M
model's 3 heads of 64, the 1B model's 4 of 64 of its 8), so that their K and V rows are read
once for all of them, not once a head."""

MIN_WORKGROUPS = 8
"""Grouped heads leave at least this many workgroups (the decode of one sequence keeps one
per head where a group would leave the two cores too few to share)."""


def heads_per_workgroup(batch: int, heads: int, kv_heads: int, head_dim: int) -> int:
    """The query heads one workgroup of the decode kernel computes: the largest divisor
    ``g`` of the GQA group ``heads / kv_heads`` with ``g · hd / 16 <=`` :data:`GROUP_CHUNKS`
    and ``batch · heads / g >=`` :data:`MIN_WORKGROUPS` (1 where none is)."""
    share = heads // kv_heads
    fits = [g for g in range(1, share + 1) if share % g == 0
            and g * (head_dim // 16) <= GROUP_CHUNKS and batch * heads // g >= MIN_WORKGROUPS]
    return max(fits, default=1)


@dataclass(frozen=True)
class KernelShape:
    """What rlx's llvm-cpu attention kernels are specialized for (this module's decode
    kernel, :mod:`.prefill_attention`'s prefill kernel): heads, scale, mask form, batch;
    and the executable's symbol, unique per shape."""

    heads: int
    kv_heads: int
    head_dim: int
    scale: float
    window: int | None = None
    """sliding_window: the query sees keys ``window`` positions back from its own."""
    batch: int = 1
    """Sequences, each with its rows of K / V (``[B, S_k, ...]``) and its query rows."""
    masked: bool = False
    """mask_kind custom: a key ``j`` of row ``b`` is seen where ``mask[b, j] >= 0.5``."""
    lengths: bool = False
    """mask_kind causal_lengths: row ``b`` has ``n_b`` keys filled (``n [B] i32``)."""

    KIND: ClassVar[str] = "decode"

    def mask_suffix(self) -> str:
        return "_m" if self.masked else "_n" if self.lengths else ""

    @property
    def symbol(self) -> str:
        window = "" if self.window is None else f"_w{self.window}"
        rows = "" if self.batch == 1 else f"_b{self.batch}"
        return (f"rlx_attention_{self.KIND}_{self.heads}x{self.kv_heads}x{self.head_dim}"
                f"_s{f32_bits(self.scale):08x}{window}{rows}{self.mask_suffix()}")

    @property
    def chunks(self) -> int:
        """16-lane chunks of a head."""
        return self.head_dim // 16

    @classmethod
    def of(cls, op: Decoded, scale: float, batch: int, **extra: bool) -> Self:
        """The shape of attention op ``op`` (``batch`` sequences, scores scaled by
        ``scale``)."""
        a = op.attrs
        kind, hd = a["mask_kind"], a["head_dim"]
        return cls(a["num_heads"], emit.static_shape(op["k"])[2] // hd, hd, scale,
                   (a.get("window") or 0) if kind == "sliding_window" else None, batch,
                   kind == "custom", kind == "causal_lengths", **extra)


@dataclass(frozen=True)
class AttentionKernel(KernelShape):
    """The decode kernel: one query row a sequence (``q [B, 1, H · hd]``); a window sees
    keys ``j >= S_k - 1 - window``, causal_lengths the keys ``j < n_b``. A workgroup
    computes ``group`` query heads of one row (:func:`heads_per_workgroup`), all reading
    the same KV head: each key's K and V rows are loaded once for the group, and each
    head's arithmetic is the one-head kernel's, in the same order (the same results, bit
    for bit)."""

    group: int = 1

    @property
    def symbol(self) -> str:
        return super().symbol + (f"_g{self.group}" if self.group > 1 else "")

    @property
    def rowwise(self) -> bool:
        """Whether each workgroup finds its query row (batch or mask): else the batch-1
        kernel's text, unchanged."""
        return self.batch != 1 or self.masked or self.lengths

    @property
    def per_row(self) -> int:
        """Workgroups a query row: its heads in groups of :attr:`group`."""
        return self.heads // self.group

    def text(self) -> str:
        """The kernel's ``stream.executable``."""
        hd, kv, qo, g = self.head_dim, self.kv_memref, self.qo_memref, self.group
        mask = ([Binding("mask", "memref<?xf32>", ("%len_m",))] if self.masked else
                [Binding("filled", f"memref<{self.batch}xi32>")] if self.lengths else [])
        args = [Binding("q", qo), Binding("k", kv, ("%len_k",)), Binding("v", kv, ("%len_v",)),
                *mask, Scalar("len_k"), Scalar("len_v"),
                *([Scalar("len_m")] if self.masked else []), Binding("o", qo)]
        # the workgroup's first head within its row: (wg mod H / g) · g
        head = f"(s0 mod {self.per_row}) * {g}" if self.rowwise else f"s0 * {g}"

        def body(t: Text) -> None:
            if self.rowwise:
                self._row_range(t)
            else:
                # the keys both K and V have: nothing past either binding is read
                t("%len = arith.minui %len_k, %len_v : index")
            # head i of the group is query head wg · g + i of the flattened [B · H]
            for i in range(g):
                t(f"%qbase{self._h(i)} = affine.apply affine_map<()[s0] -> "
                  f"((s0 * {g} + {i}) * {hd})>()[%wg]")
            t(f"%kbase = affine.apply affine_map<()[s0] -> ((({head}) floordiv "
              f"{self.heads // self.kv_heads}) * {hd})>()[%wg]")
            for c in range(self.chunks):
                t(f"%ko{c} = affine.apply affine_map<()[s0] -> (s0 + {16 * c})>()[%kbase]")
                for i in range(g):
                    h = self._h(i)
                    t(f"%qo{h}{c} = affine.apply affine_map<()[s0] -> (s0 + {16 * c})>()"
                      f"[%qbase{h}]")
                    t(f"%q{h}{c} = vector.load %q[%qo{h}{c}] : {qo}, {V16}")
            self._constants(t)
            self._sum_pass(t, self._max_pass(t))
            self._store(t)

        return executable_text(self.symbol, args, body, self.batch * self.per_row)

    def _h(self, i: int) -> str:
        """The SSA-name infix of head ``i`` of the group (none for a group of one: the
        one-head kernel's text)."""
        return f"h{i}_" if self.group > 1 else ""

    def _row_range(self, t: Text) -> None:
        """Workgroup ``wg`` is query row ``b = wg / (H / g)``; its keys are rows ``first =
        b · rows`` up to ``%len = first + rows`` of the collapsed ``[B · S_k, ...]`` K / V
        (and mask), ``rows`` the smallest binding's row count over B: for ``b < B`` every
        row read is below ``B · rows``, inside each binding."""
        t("%len_kv = arith.minui %len_k, %len_v : index")
        if self.masked:
            t("%len_all = arith.minui %len_kv, %len_m : index")
        total = "%len_all" if self.masked else "%len_kv"
        t(f"%rows = affine.apply affine_map<()[s0] -> (s0 floordiv {self.batch})>()[{total}]")
        t(f"%row = affine.apply affine_map<()[s0] -> (s0 floordiv {self.per_row})>()[%wg]")
        t("%first = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%row, %rows]")
        if not self.lengths:
            t("%len = affine.apply affine_map<()[s0, s1] -> (s0 + s1)>()[%first, %rows]")
            return
        # causal_lengths: the row's first n_b keys, n_b clamped to [0, rows] (signed: any
        # i32 the caller passes stays inside the row). With none (n_b <= 0) every key is
        # masked: the decomposed form's uniform average over the row's keys, which the
        # passes give by running over all of them with every score MASKED (%none).
        t(f"%fill = memref.load %filled[%row] : memref<{self.batch}xi32>")
        t("%filli = arith.index_cast %fill : i32 to index")
        t("%c0n = arith.constant 0 : index")
        t("%cnt = arith.maxsi %filli, %c0n : index")
        t("%seen = arith.minsi %cnt, %rows : index")
        t("%none = arith.cmpi eq, %seen, %c0n : index")
        t("%upto = arith.select %none, %rows, %seen : index")
        t("%len = affine.apply affine_map<()[s0, s1] -> (s0 + s1)>()[%first, %upto]")

    @property
    def kv_memref(self) -> str:
        return f"memref<?x{self.kv_heads * self.head_dim}xf32>"

    @property
    def qo_memref(self) -> str:
        return f"memref<{self.batch * self.heads * self.head_dim}xf32>"

    def _constants(self, t: Text) -> None:
        """``%start`` (the first visible key) and the softmax's constants."""
        first = "s1" if self.rowwise else "0"
        operands = "[%len, %first]" if self.rowwise else "[%len]"
        if self.window is None:
            t("%start = arith.constant 0 : index" if not self.rowwise
              else "%start = arith.addi %first, %c0 : index")
        else:   # max(first, len - 1 - window), index arithmetic that cannot go negative
            t(f"%start = affine.max affine_map<()[s0{', s1' if self.rowwise else ''}] -> "
              f"({first}, s0 - {1 + self.window})>(){operands}")
        if self.masked or self.lengths:
            t(f"%masked = arith.constant {f32_literal(MASKED)} : f32")
            t(f"%half = arith.constant {f32_literal(0.5)} : f32")
        t(f"%scale = arith.constant {f32_literal(self.scale)} : f32")
        t(f"%ninf = arith.constant {f32_literal(-pymath.inf)} : f32")
        t("%zero = arith.constant 0.0 : f32")
        t(f"%cblock = arith.constant {BLOCK} : index")
        t(f"%zv = arith.constant dense<0.0> : {V16}")

    def _score(self, t: Text, j: str) -> list[str]:
        """The group's scores of key ``j``, ``scale · (q_h · k_j)`` (its K row loaded once);
        masked: only for a kept key (its K row is not read otherwise), a masked one's is
        MASKED, as the decomposed form's (a row with every key masked is uniform, not
        NaN). Returns their names, head by head."""
        g, f32s = self.group, ", ".join(["f32"] * self.group)
        if self.masked:
            t(f"%mk = memref.load %mask[{j}] : memref<?xf32>")
            t("%keep = arith.cmpf oge, %mk, %half : f32")
            declared, results = _results("%sc", g)
            t.block(f"{declared} = scf.if %keep -> ({f32s})")
        for c in range(self.chunks):
            t(f"%kv{c} = vector.load %k[{j}, %ko{c}] : {self.kv_memref}, {V16}")
        scaled = []
        for i in range(g):
            h, prev = self._h(i), None
            for c in range(self.chunks):
                t(f"%d{h}{c} = " + (f"arith.mulf %q{h}{c}, %kv{c} : {V16}" if prev is None
                                    else f"vector.fma %q{h}{c}, %kv{c}, {prev} : {V16}"))
                prev = f"%d{h}{c}"
            t(f"%dot{h} = vector.reduction <add>, {prev} : {V16} into f32")
            name = f"%sc{h}" if not (self.lengths or self.masked) else f"%scaled{h}"
            t(f"{name} = arith.mulf %dot{h}, %scale : f32")
            scaled.append(name)
        if self.lengths:
            for i in range(g):
                t(f"%sc{self._h(i)} = arith.select %none, %masked, {scaled[i]} : f32")
        if not self.masked:
            return [f"%sc{self._h(i)}" for i in range(g)]
        t(f"scf.yield {', '.join(scaled)} : {f32s}")
        t.otherwise()
        t(f"scf.yield {', '.join(['%masked'] * g)} : {f32s}")
        t.end()
        return results

    def _max_pass(self, t: Text) -> list[str]:
        """The group's largest visible scores, head by head (their names)."""
        g, f32s = self.group, ", ".join(["f32"] * self.group)
        carried = ", ".join(f"%mx{self._h(i)} = %ninf" for i in range(g))
        declared, results = _results("%m", g)
        t.block(f"{declared} = scf.for %j = %start to %len step %c1 "
                f"iter_args({carried}) -> ({f32s})")
        scores = self._score(t, "%j")
        for i in range(g):
            h = self._h(i)
            t(f"%mx2{h} = arith.maximumf %mx{h}, {scores[i]} : f32")
        t(f"scf.yield {', '.join(f'%mx2{self._h(i)}' for i in range(g))} : {f32s}")
        t.end()
        return results

    def _sum_pass(self, t: Text, maxima: list[str]) -> None:
        """``%r#(i (c + 1))`` = ``Σ_j e_j`` of head ``i``, the next ``c`` = ``Σ_j e_j v_j``
        (``e_j = exp(s_j - m)``, ``c = hd / 16`` vectors), in two levels: each block of
        :data:`BLOCK` keys from ``%b`` (the last one partial) is summed into fresh zero
        accumulators (``%p``), then added to the running totals."""
        g, n = self.group, self.chunks + 1
        types = ", ".join((["f32"] + [V16] * self.chunks) * g)
        totals = ", ".join(f"%l{self._h(i)} = %zero, " + ", ".join(
            f"%a{self._h(i)}{c} = %zv" for c in range(self.chunks)) for i in range(g))
        t.block(f"%r:{n * g} = scf.for %b = %start to %len step %cblock "
                f"iter_args({totals}) -> ({types})")
        # the block's end, never past %len: %b < %len, and %b + BLOCK cannot overflow
        t(f"%bend = affine.min affine_map<(d0)[s0] -> (d0 + {BLOCK}, s0)>(%b)[%len]")
        sums = ", ".join(f"%bl{self._h(i)} = %zero, " + ", ".join(
            f"%ba{self._h(i)}{c} = %zv" for c in range(self.chunks)) for i in range(g))
        t.block(f"%p:{n * g} = scf.for %j = %b to %bend step %c1 "
                f"iter_args({sums}) -> ({types})")
        self._weigh(t, maxima)
        t.end()
        added = []
        for i in range(g):
            h = self._h(i)
            t(f"%l2{h} = arith.addf %l{h}, %p#{n * i} : f32")
            for c in range(self.chunks):
                t(f"%n{h}{c} = arith.addf %a{h}{c}, %p#{n * i + c + 1} : {V16}")
            added += [f"%l2{h}"] + [f"%n{h}{c}" for c in range(self.chunks)]
        t(f"scf.yield {', '.join(added)} : {types}")
        t.end()

    def _weigh(self, t: Text, maxima: list[str]) -> None:
        """One key ``%j`` of a block: head ``i``'s weight ``e_j`` added to its ``%bl``,
        ``e_j v_j`` to its ``%ba..`` (V's row loaded once for the group)."""
        g = self.group
        scores = self._score(t, "%j")
        for i in range(g):
            h = self._h(i)
            t(f"%sm{h} = arith.subf {scores[i]}, {maxima[i]} : f32")
            t(f"%e{h} = math.exp %sm{h} : f32")
            t(f"%bl2{h} = arith.addf %bl{h}, %e{h} : f32")
        vectors = ", ".join([V16] * (self.chunks * g))
        if self.masked:     # a key of weight 0 (masked, beside a kept one) adds nothing
            lives = [f"%live{self._h(i)}" for i in range(g)]
            for i, name in enumerate(lives):
                t(f"{name} = arith.cmpf one, %e{self._h(i)}, %zero : f32")
            live = lives[0]
            for i in range(1, g):       # a masked key weighs 0 in every head of its row
                t(f"%live_{i} = arith.ori {live}, {lives[i]} : i1")
                live = f"%live_{i}"
            t.block(f"%acc:{self.chunks * g} = scf.if {live} -> ({vectors})")
        for c in range(self.chunks):
            t(f"%vv{c} = vector.load %v[%j, %ko{c}] : {self.kv_memref}, {V16}")
        new, old = [], []
        for i in range(g):
            h = self._h(i)
            t(f"%ev{h} = vector.broadcast %e{h} : f32 to {V16}")
            for c in range(self.chunks):
                t(f"%bn{h}{c} = vector.fma %ev{h}, %vv{c}, %ba{h}{c} : {V16}")
            new += [f"%bn{h}{c}" for c in range(self.chunks)]
            old += [f"%ba{h}{c}" for c in range(self.chunks)]
        if self.masked:
            t(f"scf.yield {', '.join(new)} : {vectors}")
            t.otherwise()
            t(f"scf.yield {', '.join(old)} : {vectors}")
            t.end()
            new = [f"%acc#{k}" for k in range(self.chunks * g)]
        out = []
        for i in range(g):
            out += [f"%bl2{self._h(i)}", *new[i * self.chunks:(i + 1) * self.chunks]]
        t(f"scf.yield {', '.join(out)} : "
          f"{', '.join((['f32'] + [V16] * self.chunks) * g)}")

    def _store(self, t: Text) -> None:
        """``o = Σ_j e_j v_j / Σ_j e_j`` for each head of the group."""
        t("%one = arith.constant 1.0 : f32")
        for i in range(self.group):
            h, base = self._h(i), (self.chunks + 1) * i
            t(f"%inv{h} = arith.divf %one, %r#{base} : f32")
            t(f"%invv{h} = vector.broadcast %inv{h} : f32 to {V16}")
            for c in range(self.chunks):
                t(f"%out{h}{c} = arith.mulf %r#{base + c + 1}, %invv{h} : {V16}")
                t(f"vector.store %out{h}{c}, %o[%qo{h}{c}] : {self.qo_memref}, {V16}")


def _results(name: str, n: int) -> tuple[str, list[str]]:
    """An op's result declaration, ``name`` for one result or ``name:n``, and the names of
    its results."""
    return (name, [name]) if n == 1 else (f"{name}:{n}", [f"{name}#{i}" for i in range(n)])


def packed_f32(ctx: LoweringContext, op: Decoded) -> tuple[int, int | None] | None:
    """``(B, S)`` where rlx's llvm-cpu attention kernels take this op (this one for ``S =
    1``, :mod:`.prefill_attention` for more), or None (disabled, not the packed f32 layout
    with a static batch, or a mask, bias or softcap they do not take). The op's verifier
    has checked the rest: K and V alike, a static width of whole heads that divide
    ``num_heads``."""
    a = op.attrs
    if not ctx.options.attention_kernel or a["mask_kind"] not in MASK_KINDS:
        return None
    if a.get("attn_logit_softcap") is not None or a["head_dim"] % 16:
        return None
    q, k, v = op["q"], op["k"], op["v"]
    if any(emit.rank(x) != 3 or emit.elem(x) != emit.f32() for x in (q, k, v)):
        return None
    batch, seq = emit.static_shape(q)[:2]
    if batch is None or emit.static_shape(k)[0] != batch:
        return None
    if (a["mask_kind"] == "causal_lengths"
            and emit.elem(op["mask"]) != ir.IntegerType.get_signless(32)):
        return None
    return batch, seq


def kernel_for(ctx: LoweringContext, op: Decoded, scale: float) -> AttentionKernel | None:
    """The kernel for this attention op (scores scaled by ``scale``), or None (see
    :func:`packed_f32`; not one query)."""
    taken = packed_f32(ctx, op)
    if taken is None or taken[1] != 1:
        return None
    kern = AttentionKernel.of(op, scale, taken[0])
    return replace(kern, group=heads_per_workgroup(kern.batch, kern.heads, kern.kv_heads,
                                                   kern.head_dim))


def kernel_operands(op: Decoded, batch: int, masked: bool, lengths: bool,
                    lead: list[ir.Value]) -> tuple[list[ir.Value], list[ir.Value],
                                                   list[ir.Value]]:
    """A kernel dispatch's tensors (``lead``, K and V collapsed to ``[B · S_k, Hkv · hd]``,
    the mask), the row counts of the first of them and their dynamic dims: each binding's
    row count is the very value that sizes it (as the dispatch's operand dim, where
    dynamic), passed again as the kernel's memref dim."""
    k, v = (emit.collapse(op[name], [[0, 1], [2]]) for name in ("k", "v"))
    tensors = [*lead, k, v]
    if masked:      # [B, S_k] keep flags as f32 (1.0 / 0.0 from i1), one row of keys
        tensors.append(emit.collapse(emit.convert_tensor(op["mask"], emit.f32()), [[0, 1]]))
    sizes = [emit.sizes(x) for x in tensors]
    if lengths:     # [B] i32 (B checked by the op's verifier, at run time if dynamic)
        tensors.append(emit.cast_tensor(op["mask"], ir.RankedTensorType.get(
            [batch], ir.IntegerType.get_signless(32))))
    return (tensors, [emit.as_value(ss[0]) for ss in sizes],
            [d for ss in sizes for d in emit.dynamic_values(ss)])


def dispatch(ctx: LoweringContext, kern: AttentionKernel, op: Decoded) -> ir.Value:
    """The attention's ``[B, 1, H · hd]`` result, computed by ``kern``."""
    record(ctx, kern)
    q = emit.collapse(op["q"], [[0, 1, 2]])
    tensors, lengths, dims = kernel_operands(op, kern.batch, kern.masked, kern.lengths, [])
    entry = ir.SymbolRefAttr.get([kern.symbol, kern.symbol])
    width = kern.batch * kern.heads * kern.head_dim
    out = ir.RankedTensorType.get([width], emit.f32())
    o = flow.DispatchOp([out], [emit.index(kern.batch * kern.per_row)],
                        ir.ArrayAttr.get([entry]), [q, *tensors, *lengths], dims,
                        []).results[0]
    return emit.expand(o, [[0, 1, 2]], [kern.batch, 1, kern.heads * kern.head_dim])


__all__ = ["AttentionKernel", "KernelShape", "dispatch", "heads_per_workgroup", "kernel_for",
           "kernel_operands", "packed_f32"]
