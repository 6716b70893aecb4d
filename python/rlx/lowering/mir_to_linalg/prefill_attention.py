"""A hand-written prefill attention kernel for llvm-cpu: ``S`` query rows a sequence (``S``
dynamic or static above 1) against that sequence's keys, in one dispatch that never stores a
score.

The decomposed attention (:mod:`.attention`) materializes the scores ``[B, H, S, S_k]`` in
f32 between its batch matmuls and the softmax: at the 135M model's 9 heads that is 9 MiB at
512 tokens and 151 MiB at 2048, far past the caches, and a 2048-token prompt spent 2.7-4 s a
layer in attention, 85 s in all. IREE's fused ``iree_linalg_ext.attention`` was slower
still on llvm-cpu (15.9 s a layer at 2048).

Here a workgroup is a **tile** of up to :data:`MAX_TILE` consecutive query rows of one head
of one sequence (``B · H · ceil(S / tile)`` workgroups), and walks the keys its rows see in
blocks of :data:`KEYS`, flash-attention style (online softmax):

- for each row of the tile that sees keys of the block: its 16 scores ``scale · (q · k_j)``
  as one vector (each key's ``q · k_j`` a vector of partial sums, the 16 summed across
  lanes together by a tree of shuffles; the block's K rows, read once from memory, stay in
  L1 for the tile's other rows); lanes outside the row's own keys get ``-inf``. Against
  one lane reduction per key: the 135M model's heads (9 over 3, 64 wide), causal, 5
  interleaved rounds on Zen 5, 512 tokens 5.90 -> 4.77 ms, 2048 91.0 -> 80.2 ms;
  Llama-3.2-1B's heads (32 over 8) 23.6 -> 21.0 and 332 -> 300 ms; outputs bit-identical
  (LLVM reduces a vector in the same pairs);
- the row's running max ``m`` grows to the block's (the block's max by a tree of rotations
  and ``a > b ? a : b`` selects, :meth:`PrefillAttentionKernel._lane_max`: 135M heads 512 /
  2048 tokens 3.38 -> 3.10 / 46.0 -> 40.4 ms, 1B heads 11.5 -> 10.2 / 164 -> 151 ms on Zen
  5, outputs bit-identical); its partial sums are rescaled by
  ``exp(m_old - m_new)``; weights ``e_j = exp(s_j - m)`` in one vector ``exp``; ``Σ e_j``
  and ``Σ e_j v_j`` (``hd / 16`` vectors) updated;
- every :data:`GROUP` keys the partial sums are added to the running totals (rescaled to
  the current max) and start again from zero: the decode kernel's two-level sums
  (:mod:`.decode_attention`), so that a long row's small weights are not lost against
  large running sums (2 queries against 65536 keys, scores spread by ~4: 1.2e-6 of the
  largest output off, 5.9e-6 with the partial sums never folded; the f32 tolerance is
  2e-5);
- ``o = Σ e_j v_j / Σ e_j``.

Causal masks cost nothing: a row reads only keys at or before its position (half the
pairs of a prompt, where the decomposed form scores every pair and masks half).

Semantics are the attention op's (``rlx-spec.md`` §2.9; queries are the last ``S`` of the
``S_k`` positions, ``off = S_k - S``, signed): query ``m`` sits at ``pos = off + m``
(causal, sliding_window) or ``pos = n_b - S + m`` (causal_lengths, ``n_b`` read on the
device); it sees keys ``max(0, pos - window) <= j <= pos`` of its row, clamped to the row;
with none (``pos < 0``) every score is the masked fill and the row is the uniform average
of all its keys, as the decomposed form's. mask_kind none sees every key; custom
(``[B, S_k]`` keep flags) every key, a key whose flag is below 0.5 with the masked fill.
Sums are taken in another order than the decomposed form's: within the f32 tolerance,
never bit-identical.

Heads up to 128 wide take :mod:`.prefill_rows`' kernel instead (the same work with a
tile's 16 query rows in the lanes of a vector, about twice as fast); this one keeps the
wider heads (Qwen3.5's 256), whose transposed tile would not fit that kernel's stack.

Taken where the decode kernel's conditions hold but for ``S``: the packed ``[B, S, H · hd]``
query and ``[B, S_k, Hkv · hd]`` K / V in f32, ``B`` static, ``hd`` a multiple of 16, no
softcap or bias. The stack holds two ``tile x hd`` f32 sum buffers (at most
2 · :data:`TILE_BYTES`: the tile shrinks for wide heads), the tile's key ranges and one
block of scores.

**Bounds.** Q and O are ``memref<?x(H · hd)xf32>`` of ``len_q = B · S`` rows (the value that
sizes both bindings, passed again as their memref dim); the kernel derives ``S = len_q / B``
from it and runs its body only for workgroups ``wg < B · H · ceil(S / tile)`` (the workload
the host passes, computed there from the same dim; any workgroup past the bound touches
nothing). Workgroup ``wg`` is tile ``t = wg mod T`` (``T = ceil(S / tile)``) of head
``(wg / T) mod H`` of sequence ``b = wg / (T · H) < B``: rows ``m0 = t · tile < S`` up to
``m0 + nq - 1``, ``nq = min(tile, S - m0)``, so query row ``b · S + m < B · S <= len_q``:
every Q load and O store is inside its binding. K / V rows are ``first + j`` with
``first = b · rows`` and ``0 <= j < rows``, ``rows`` the smallest binding's row count over
``B`` (as the decode kernel): each row's range is clamped into ``[0, rows]`` in signed
index arithmetic whatever ``n_b`` the caller passes, the tile's key loop runs over the union
of its rows' ranges, and a block ``[j0, bend)`` of it reads keys ``min(j0 + i, bend - 1)``
only (``bend <= kmax <= rows``), giving no weight to the lanes outside the row's own range.
The stack buffers are indexed by the row of the tile (``< nq <= tile``) and the lane of the
block (``j - j0 < KEYS``, since a block ends at ``min(j0 + KEYS, ...)``)."""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import arith, flow

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import decode_attention
from rlx.lowering.mir_to_linalg.decode_attention import MASKED, KernelShape
from rlx.lowering.mir_to_linalg.executable import (
    I16,
    V16,
    Binding,
    Scalar,
    Text,
    executable_text,
    f32_literal,
    record,
)
from rlx.lowering.registry import LoweringContext

TILE_BYTES = 8192
"""Stack bytes of one workgroup's f32 output sums (``tile · head_dim · 4``; twice that with
the running totals): the tile is the most query rows, up to :data:`MAX_TILE`, that fit."""

MAX_TILE = 8
"""Query rows a workgroup takes at most (they share every K / V row it reads)."""

KEYS = 16
"""Keys scored at a time: one vector of scores, one max, one vector ``exp``."""

GROUP = 128
"""Keys whose weighted sums are added up from zero before being added to the running totals
(the decode kernel's two-level sums: :data:`.decode_attention.BLOCK`)."""


@dataclass(frozen=True)
class PrefillAttentionKernel(KernelShape):
    """The prefill kernel: query rows ``m`` of a sequence; a window sees keys ``pos -
    window .. pos``, causal_lengths puts query ``m`` at ``pos = n_b - S + m``."""

    causal: bool = False
    """causal / sliding_window: ``pos = S_k - S + m``."""

    KIND: ClassVar[str] = "prefill"

    def mask_suffix(self) -> str:
        return super().mask_suffix() or ("_c" if self.causal else "")

    @property
    def tile(self) -> int:
        return max(1, min(MAX_TILE, TILE_BYTES // (4 * self.head_dim)))

    @property
    def positioned(self) -> bool:
        """Whether a query sees keys up to a position (else every key of its row)."""
        return self.causal or self.lengths

    def text(self) -> str:
        qo = f"memref<?x{self.heads * self.head_dim}xf32>"
        kv = f"memref<?x{self.kv_heads * self.head_dim}xf32>"
        mask = ([Binding("mask", "memref<?xf32>", ("%len_m",))] if self.masked else
                [Binding("filled", f"memref<{self.batch}xi32>")] if self.lengths else [])
        args = [Binding("q", qo, ("%len_q",)), Binding("k", kv, ("%len_k",)),
                Binding("v", kv, ("%len_v",)), *mask, Scalar("len_q"), Scalar("len_k"),
                Scalar("len_v"), *([Scalar("len_m")] if self.masked else []),
                Binding("o", qo, ("%len_q",))]
        tile = self.tile

        def count(t: Text) -> str:
            # B · H · ceil(S / tile), S = len_q / B: the workgroups that hold query rows
            t(f"%seq = affine.apply affine_map<()[s0] -> (s0 floordiv {self.batch})>()[%len_q]")
            t(f"%tiles = affine.apply affine_map<()[s0] -> (s0 ceildiv {tile})>()[%seq]")
            t(f"%wg_count = affine.apply affine_map<()[s0] -> "
              f"(s0 * {self.batch * self.heads})>()[%tiles]")
            return "%wg_count"

        return executable_text(self.symbol, args, lambda t: self._body(t, qo, kv), count)

    def _body(self, t: Text, qo: str, kv: str) -> None:
        self._where(t, qo, kv)
        self._stack(t)
        self._ranges(t)
        t.block("scf.for %g = %kmin to %kmax step %cgroup")
        t(f"%gend = affine.min affine_map<(d0)[s0] -> (d0 + {GROUP}, s0)>(%g)[%kmax]")
        t.block("scf.for %j0 = %g to %gend step %ckeys")
        t(f"%bend = affine.min affine_map<(d0)[s0] -> (d0 + {KEYS}, s0)>(%j0)[%gend]")
        self._keys(t)
        t.block("scf.for %qi = %c0 to %nq step %c1")
        self._block(t, qo, kv)
        t.end()
        t.end()
        t.block("scf.for %qi = %c0 to %nq step %c1")
        self._fold(t)
        t.end()
        t.end()
        t.block("scf.for %qi = %c0 to %nq step %c1")
        self._store(t, qo)
        t.end()

    def _where(self, t: Text, qo: str, kv: str) -> None:
        """The workgroup's sequence ``%row``, head ``%head``, query rows ``%m0 ..`` (``%nq``
        of them, at least one), its rows of K / V ``%first ..`` (``%rows``); constants and
        stack buffers."""
        tile, hd = self.tile, self.head_dim
        t("%len_kv = arith.minui %len_k, %len_v : index")
        if self.masked:
            t("%len_all = arith.minui %len_kv, %len_m : index")
        total = "%len_all" if self.masked else "%len_kv"
        t(f"%rows = affine.apply affine_map<()[s0] -> (s0 floordiv {self.batch})>()[{total}]")
        t("%tm = arith.remui %wg, %tiles : index")
        t("%bh = arith.divui %wg, %tiles : index")
        t(f"%head = affine.apply affine_map<()[s0] -> (s0 mod {self.heads})>()[%bh]")
        t(f"%row = affine.apply affine_map<()[s0] -> (s0 floordiv {self.heads})>()[%bh]")
        t(f"%m0 = affine.apply affine_map<()[s0] -> (s0 * {tile})>()[%tm]")
        # %tm < ceil(S / tile): m0 < S, so 1 <= nq <= tile
        t(f"%nq = affine.min affine_map<()[s0, s1] -> (s0 - s1, {tile})>()[%seq, %m0]")
        t("%qrow0 = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 + s2)>()"
          "[%row, %seq, %m0]")
        t("%first = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%row, %rows]")
        t(f"%qbase = affine.apply affine_map<()[s0] -> (s0 * {hd})>()[%head]")
        t(f"%kbase = affine.apply affine_map<()[s0] -> ((s0 floordiv "
          f"{self.heads // self.kv_heads}) * {hd})>()[%head]")
        for c in range(self.chunks):
            t(f"%qo{c} = affine.apply affine_map<()[s0] -> (s0 + {16 * c})>()[%qbase]")
            t(f"%ko{c} = affine.apply affine_map<()[s0] -> (s0 + {16 * c})>()[%kbase]")
            t(f"%ao{c} = arith.constant {16 * c} : index")
        t(f"%masked = arith.constant {f32_literal(MASKED)} : f32")
        t(f"%halfv = arith.constant dense<{f32_literal(0.5)}> : {V16}")
        t(f"%scalev = arith.constant dense<{f32_literal(self.scale)}> : {V16}")
        t(f"%ninf = arith.constant {f32_literal(-pymath.inf)} : f32")
        t("%zero = arith.constant 0.0 : f32")
        t("%one = arith.constant 1.0 : f32")
        t(f"%zv = arith.constant dense<0.0> : {V16}")
        t(f"%ninfv = arith.constant dense<{f32_literal(-pymath.inf)}> : {V16}")
        t(f"%maskedv = arith.constant dense<{f32_literal(MASKED)}> : {V16}")
        t(f"%iota = arith.constant dense<[{', '.join(map(str, range(KEYS)))}]> : {I16}")
        t(f"%ckeys = arith.constant {KEYS} : index")
        t(f"%cgroup = arith.constant {GROUP} : index")
        t("%c0n = arith.constant 0 : index")

    def _stack(self, t: Text) -> None:
        """The stack buffers: each row's key range, max and sum of weights, partial and
        total output sums, one block of scores."""
        tile, hd = self.tile, self.head_dim
        t(f"%qs = memref.alloca() : memref<{tile}xi32>")
        t(f"%qe = memref.alloca() : memref<{tile}xi32>")
        t(f"%qn = memref.alloca() : memref<{tile}xi8>")
        for name in ("mb", "lb", "mt", "lt"):
            t(f"%{name} = memref.alloca() : memref<{tile}xf32>")
        t(f"%acc = memref.alloca() : memref<{tile}x{hd}xf32>")
        t(f"%acct = memref.alloca() : memref<{tile}x{hd}xf32>")
        t(f"%sb = memref.alloca() : memref<{KEYS}xf32>")

    def _ranges(self, t: Text) -> None:
        """Each query's keys ``[%qs, %qe)`` of its row (and ``%qn``: it sees none, so every
        key of the row with the masked score), zeroed sums; ``[%kmin, %kmax)`` their union."""
        self._open_ranges(t, "%nq")
        t("%r_mq = arith.addi %m0, %qi : index")
        self._row_range(t)
        # kept as i32 / i8 (IREE's stack-size check cannot size an index or i1 buffer);
        # every key index is below a row count, itself below 2^31 (the verifier's limit)
        t("%r_s32 = arith.index_cast %r_s0 : index to i32")
        t("%r_e32 = arith.index_cast %r_e0 : index to i32")
        t("%r_n8 = arith.extui %r_none : i1 to i8")
        t(f"memref.store %r_s32, %qs[%qi] : memref<{self.tile}xi32>")
        t(f"memref.store %r_e32, %qe[%qi] : memref<{self.tile}xi32>")
        t(f"memref.store %r_n8, %qn[%qi] : memref<{self.tile}xi8>")
        for name, init in (("mb", "%ninf"), ("lb", "%zero"), ("mt", "%ninf"), ("lt", "%zero")):
            t(f"memref.store {init}, %{name}[%qi] : memref<{self.tile}xf32>")
        for c in range(self.chunks):
            for name in ("acc", "acct"):
                t(f"vector.store %zv, %{name}[%qi, %ao{c}] : "
                  f"memref<{self.tile}x{self.head_dim}xf32>, {V16}")
        self._close_ranges(t)

    @staticmethod
    def _open_ranges(t: Text, count: str) -> None:
        """Open the loop over ``%qi < count`` whose body takes one query's range
        (:meth:`_row_range`) into the union ``[%r_lo, %r_hi)`` (:meth:`_close_ranges`)."""
        t.block(f"%r_kr:2 = scf.for %qi = %c0 to {count} step %c1 "
                "iter_args(%r_lo = %rows, %r_hi = %c0n) -> (index, index)")

    @staticmethod
    def _close_ranges(t: Text) -> None:
        """Add the query's ``[%r_s0, %r_e0)`` to the union and close the loop; the union
        ``[%kmin, %kmax)``."""
        t("%r_lo2 = arith.minui %r_lo, %r_s0 : index")
        t("%r_hi2 = arith.maxui %r_hi, %r_e0 : index")
        t("scf.yield %r_lo2, %r_hi2 : index, index")
        t.end()
        t("%kmin = arith.addi %r_kr#0, %c0n : index")
        t("%kmax = arith.addi %r_kr#1, %c0n : index")

    def _row_range(self, t: Text) -> None:
        """Query ``%r_mq`` of the sequence (``m``): the keys it sees, ``[%r_s0, %r_e0)`` of
        its row, and ``%r_none`` (it sees none: every key of the row, with the masked
        score), in signed index arithmetic whatever ``n_b`` the caller passes."""
        if not self.positioned:
            t("%r_none = arith.constant false")
            t("%r_s0 = arith.addi %c0n, %c0n : index")
            t("%r_e0 = arith.addi %rows, %c0n : index")
        else:
            # the query's position, signed: off + m (off = rows - S) or n_b - S + m
            if self.lengths:
                t(f"%r_fill = memref.load %filled[%row] : memref<{self.batch}xi32>")
                t("%r_known = arith.index_cast %r_fill : i32 to index")
            else:
                t("%r_known = arith.addi %rows, %c0n : index")
            t("%r_base = arith.subi %r_known, %seq : index")
            t("%r_pos = arith.addi %r_base, %r_mq : index")
            t("%r_upto1 = arith.addi %r_pos, %c1 : index")
            t("%r_cnt = arith.maxsi %r_upto1, %c0n : index")
            t("%r_seen = arith.minsi %r_cnt, %rows : index")
            t("%r_none = arith.cmpi eq, %r_seen, %c0n : index")
            t("%r_e0 = arith.select %r_none, %rows, %r_seen : index")
            if self.window is None:
                t("%r_s0 = arith.addi %c0n, %c0n : index")
            else:   # max(0, pos - window), below the last seen key; 0 with none
                t(f"%r_cwin = arith.constant {self.window} : index")
                t("%r_wlo = arith.subi %r_pos, %r_cwin : index")
                t("%r_wlo0 = arith.maxsi %r_wlo, %c0n : index")
                t("%r_ulast = arith.subi %r_e0, %c1 : index")
                t("%wlo1 = arith.minsi %r_wlo0, %r_ulast : index")
                t("%r_s0 = arith.select %r_none, %c0n, %wlo1 : index")

    def _keys(self, t: Text) -> None:
        """The block's key rows ``%kr0 .. %kr15`` of K / V: key ``j0 + i`` clamped to the
        block's last, ``bend - 1`` (``j0 < bend <= kmax <= rows``, so ``first + j < first +
        rows``: inside both bindings); a lane past the block scores a key again and
        :meth:`_weigh` gives it no weight. custom: the keys' keep flags ``%keepv``."""
        for i in range(KEYS):
            t(f"%kj{i} = affine.min affine_map<(d0)[s0] -> (d0 + {i}, s0 - 1)>(%j0)[%bend]")
            t(f"%kr{i} = arith.addi %first, %kj{i} : index")
        if self.masked:
            self._keep(t)

    @staticmethod
    def _mask_loads(t: Text) -> None:
        """custom: the mask entries ``%mk0 .. %mk15`` of key rows ``%kr0 .. %kr15``."""
        for i in range(KEYS):
            t(f"%mk{i} = memref.load %mask[%kr{i}] : memref<?xf32>")

    def _keep(self, t: Text) -> None:
        """custom: the keys' keep flags (:meth:`_mask_loads`) as one vector ``%keepv``."""
        self._mask_loads(t)
        t(f"%mkv = vector.from_elements {', '.join(f'%mk{i}' for i in range(KEYS))} : {V16}")
        t(f"%keepv = arith.cmpf oge, %mkv, %halfv : {V16}")

    def _block(self, t: Text, qo: str, kv: str) -> None:
        """Query ``%qi`` against keys ``[%j0, %bend)``, where they meet its own range
        ``[%b_lo, %b_hi)``: the block's 16 scores as one vector into ``%sb``, then
        :meth:`_weigh`. Each key's ``q · k`` is a 16-lane vector of partial sums; the 16
        vectors are summed across lanes together (:meth:`_lane_sums`), not one by one."""
        tile = self.tile
        t(f"%b_s32 = memref.load %qs[%qi] : memref<{tile}xi32>")
        t(f"%b_e32 = memref.load %qe[%qi] : memref<{tile}xi32>")
        t(f"%b_n8 = memref.load %qn[%qi] : memref<{tile}xi8>")
        t("%b_s0 = arith.index_cast %b_s32 : i32 to index")
        t("%b_e0 = arith.index_cast %b_e32 : i32 to index")
        t("%b_none = arith.trunci %b_n8 : i8 to i1")
        t("%b_lo = arith.maxui %j0, %b_s0 : index")
        t("%b_hi = arith.minui %bend, %b_e0 : index")
        t("%meets = arith.cmpi ult, %b_lo, %b_hi : index")
        t.block("scf.if %meets")
        t("%b_qrow = arith.addi %qrow0, %qi : index")
        for c in range(self.chunks):
            t(f"%q{c} = vector.load %q[%b_qrow, %qo{c}] : {qo}, {V16}")
        dots = []
        for i in range(KEYS):
            prev = None
            for c in range(self.chunks):
                t(f"%kv{i}_{c} = vector.load %k[%kr{i}, %ko{c}] : {kv}, {V16}")
                t(f"%d{i}_{c} = " + (f"arith.mulf %q{c}, %kv{i}_{c} : {V16}" if prev is None
                                     else f"vector.fma %q{c}, %kv{i}_{c}, {prev} : {V16}"))
                prev = f"%d{i}_{c}"
            dots.append(prev)
        dot = self._lane_sums(t, dots)
        t(f"%sc0 = arith.mulf {dot}, %scalev : {V16}")
        if self.masked:
            t(f"%sc = arith.select %keepv, %sc0, %maskedv : vector<16xi1>, {V16}")
        else:
            t(f"%sc = arith.select %b_none, %maskedv, %sc0 : {V16}")
        t(f"vector.store %sc, %sb[%c0] : memref<{KEYS}xf32>, {V16}")
        self._weigh(t, kv)
        t.end()

    @staticmethod
    def _lane_sums(t: Text, vectors: list[str]) -> str:
        """One vector whose lane ``i`` is the sum of ``vectors[i]``'s 16 lanes: four levels
        of pairs, each adding a shuffle of the two vectors' low halves of every segment to
        one of their high halves (segments of 16, 8, 4, 2 lanes become 8, 4, 2, 1: 15
        adds and 30 shuffles for 16 vectors, where 16 reductions take 4 shuffles and adds
        each plus a lane extract and a store)."""
        level, half = vectors, KEYS // 2
        while half:
            low = [off + g * 2 * half + i for off in (0, KEYS)
                   for g in range(KEYS // (2 * half)) for i in range(half)]
            nxt = []
            for n in range(len(level) // 2):
                a, b = level[2 * n], level[2 * n + 1]
                name = f"%ls{half}_{n}"
                for part, lanes in (("lo", low), ("hi", [x + half for x in low])):
                    t(f"{name}{part} = vector.shuffle {a}, {b} "
                      f"[{', '.join(map(str, lanes))}] : {V16}, {V16}")
                t(f"{name} = arith.addf {name}lo, {name}hi : {V16}")
                nxt.append(name)
            level, half = nxt, half // 2
        return level[0]

    @staticmethod
    def _lane_max(t: Text, vec: str, out: str) -> None:
        """``out`` = the largest of ``vec``'s 16 lanes, by a tree of rotations and ``a > b ?
        a : b`` selects (x86's ``vmaxps``; ``maximumf``'s NaN checks cost ~25 instructions a
        block). A NaN score may then be passed over by the max, but its weight ``exp(NaN -
        m)`` is NaN and makes the row's sums NaN all the same, as ``maximumf`` would."""
        cur = vec
        for half in (8, 4, 2, 1):
            lanes = ", ".join(str((i + half) % KEYS) for i in range(KEYS))
            t(f"%lmr{half} = vector.shuffle {cur}, {cur} [{lanes}] : {V16}, {V16}")
            t(f"%lmc{half} = arith.cmpf ogt, {cur}, %lmr{half} : {V16}")
            t(f"%lms{half} = arith.select %lmc{half}, {cur}, %lmr{half} : vector<16xi1>, {V16}")
            cur = f"%lms{half}"
        t(f"{out} = vector.extract {cur}[0] : f32 from {V16}")

    def _weigh(self, t: Text, kv: str) -> None:
        """The block's scores in ``%sb`` (lanes ``[%b_lo, %b_hi)`` of the row's): the running
        max, the weights ``exp(s - m)``, ``%lb`` and ``%acc`` rescaled and summed."""
        tile, hd = self.tile, self.head_dim
        acc_t = f"memref<{tile}x{hd}xf32>"
        # lanes outside [lo, hi) (stale, or not this query's keys) weigh nothing
        t(f"%sv = vector.load %sb[%c0] : memref<{KEYS}xf32>, {V16}")
        t("%j0i = arith.index_cast %j0 : index to i32")
        t("%loi = arith.index_cast %b_lo : index to i32")
        t("%hii = arith.index_cast %b_hi : index to i32")
        t(f"%j0v = vector.broadcast %j0i : i32 to {I16}")
        t(f"%lov = vector.broadcast %loi : i32 to {I16}")
        t(f"%hiv = vector.broadcast %hii : i32 to {I16}")
        t(f"%keys = arith.addi %iota, %j0v : {I16}")
        t(f"%b_ge = arith.cmpi sge, %keys, %lov : {I16}")
        t(f"%b_below = arith.cmpi slt, %keys, %hiv : {I16}")
        t("%inb = arith.andi %b_ge, %b_below : vector<16xi1>")
        t(f"%svm = arith.select %inb, %sv, %ninfv : vector<16xi1>, {V16}")
        self._lane_max(t, "%svm", "%bm")
        t(f"%mold = memref.load %mb[%qi] : memref<{tile}xf32>")
        t("%mgt = arith.cmpf ogt, %mold, %bm : f32")
        t("%mnew = arith.select %mgt, %mold, %bm : f32")
        # the max so far, exp(-inf) = 0 before any key: alpha rescales the partial sums
        t("%mdiff = arith.subf %mold, %mnew : f32")
        t("%alpha = math.exp %mdiff : f32")
        t(f"%mnv = vector.broadcast %mnew : f32 to {V16}")
        t(f"%sd = arith.subf %svm, %mnv : {V16}")
        t(f"%pv = math.exp %sd : {V16}")
        t(f"vector.store %pv, %sb[%c0] : memref<{KEYS}xf32>, {V16}")
        t(f"%psum = vector.reduction <add>, %pv : {V16} into f32")
        t(f"%lold = memref.load %lb[%qi] : memref<{tile}xf32>")
        t("%lsc = arith.mulf %lold, %alpha : f32")
        t("%lnew = arith.addf %lsc, %psum : f32")
        t(f"memref.store %lnew, %lb[%qi] : memref<{tile}xf32>")
        t(f"memref.store %mnew, %mb[%qi] : memref<{tile}xf32>")
        t(f"%av = vector.broadcast %alpha : f32 to {V16}")
        for c in range(self.chunks):
            t(f"%a{c} = vector.load %acc[%qi, %ao{c}] : {acc_t}, {V16}")
            t(f"%as{c} = arith.mulf %a{c}, %av : {V16}")
        types = ", ".join([V16] * self.chunks)
        inits = ", ".join(f"%x{c} = %as{c}" for c in range(self.chunks))
        t.block(f"%pa:{self.chunks} = scf.for %j = %b_lo to %b_hi step %c1 iter_args({inits}) "
                f"-> ({types})")
        t("%b_lane = arith.subi %j, %j0 : index")
        t(f"%p = memref.load %sb[%b_lane] : memref<{KEYS}xf32>")
        t(f"%pb = vector.broadcast %p : f32 to {V16}")
        t("%vr = arith.addi %first, %j : index")
        for c in range(self.chunks):
            t(f"%vv{c} = vector.load %v[%vr, %ko{c}] : {kv}, {V16}")
            t(f"%y{c} = vector.fma %pb, %vv{c}, %x{c} : {V16}")
        t(f"scf.yield {', '.join(f'%y{c}' for c in range(self.chunks))} : {types}")
        t.end()
        for c in range(self.chunks):
            t(f"vector.store %pa#{c}, %acc[%qi, %ao{c}] : {acc_t}, {V16}")

    def _fold(self, t: Text) -> None:
        """End of a group of keys: the partial sums (relative to the max ``%mb``) added to
        the totals (relative to ``%mt``, rescaled to ``%mb``), then zeroed. A query that has
        seen no key yet (``%mb`` still -inf) has nothing to fold."""
        tile, hd = self.tile, self.head_dim
        acc_t = f"memref<{tile}x{hd}xf32>"
        t(f"%mcur = memref.load %mb[%qi] : memref<{tile}xf32>")
        t("%seenany = arith.cmpf ogt, %mcur, %ninf : f32")
        t.block("scf.if %seenany")
        t(f"%mtot = memref.load %mt[%qi] : memref<{tile}xf32>")
        t("%fd = arith.subf %mtot, %mcur : f32")
        t("%f = math.exp %fd : f32")
        t(f"%ltot = memref.load %lt[%qi] : memref<{tile}xf32>")
        t(f"%lpart = memref.load %lb[%qi] : memref<{tile}xf32>")
        t("%ltf = arith.mulf %ltot, %f : f32")
        t("%ltn = arith.addf %ltf, %lpart : f32")
        t(f"memref.store %ltn, %lt[%qi] : memref<{tile}xf32>")
        t(f"memref.store %mcur, %mt[%qi] : memref<{tile}xf32>")
        t(f"memref.store %zero, %lb[%qi] : memref<{tile}xf32>")
        t(f"%fv = vector.broadcast %f : f32 to {V16}")
        for c in range(self.chunks):
            t(f"%ft{c} = vector.load %acct[%qi, %ao{c}] : {acc_t}, {V16}")
            t(f"%fp{c} = vector.load %acc[%qi, %ao{c}] : {acc_t}, {V16}")
            t(f"%fn{c} = vector.fma %ft{c}, %fv, %fp{c} : {V16}")
            t(f"vector.store %fn{c}, %acct[%qi, %ao{c}] : {acc_t}, {V16}")
            t(f"vector.store %zv, %acc[%qi, %ao{c}] : {acc_t}, {V16}")
        t.end()

    def _store(self, t: Text, qo: str) -> None:
        """``o = Σ_j e_j v_j / Σ_j e_j`` for each query row of the tile."""
        tile, hd = self.tile, self.head_dim
        acc_t = f"memref<{tile}x{hd}xf32>"
        t("%o_qrow = arith.addi %qrow0, %qi : index")
        t(f"%o_ltot = memref.load %lt[%qi] : memref<{tile}xf32>")
        t("%o_inv = arith.divf %one, %o_ltot : f32")
        t(f"%o_invv = vector.broadcast %o_inv : f32 to {V16}")
        for c in range(self.chunks):
            t(f"%ot{c} = vector.load %acct[%qi, %ao{c}] : {acc_t}, {V16}")
            t(f"%out{c} = arith.mulf %ot{c}, %o_invv : {V16}")
            t(f"vector.store %out{c}, %o[%o_qrow, %qo{c}] : {qo}, {V16}")


def kernel_for(ctx: LoweringContext, op: Decoded, scale: float
               ) -> PrefillAttentionKernel | None:
    """The kernel for this attention op, or None (see
    :func:`.decode_attention.packed_f32`; one query: the decode kernel's)."""
    taken = decode_attention.packed_f32(ctx, op)
    if taken is None or taken[1] == 1:
        return None
    causal = op.attrs["mask_kind"] in ("causal", "sliding_window")
    return PrefillAttentionKernel.of(op, scale, taken[0], causal=causal)


def dispatch(ctx: LoweringContext, kern: PrefillAttentionKernel, op: Decoded) -> ir.Value:
    """The attention's ``[B, S, H · hd]`` result, computed by ``kern``."""
    record(ctx, kern)
    b, s, width = emit.sizes(op["q"])
    q = emit.collapse(op["q"], [[0, 1], [2]])
    tensors, lengths, dims = decode_attention.kernel_operands(
        op, kern.batch, kern.masked, kern.lengths, [q])
    rows = emit.sizes(q)[0]
    rows = rows if isinstance(rows, int) else lengths[0]    # Q's own dim: O is sized alike
    entry = ir.SymbolRefAttr.get([kern.symbol, kern.symbol])
    out = emit.tensor_type([rows, width], emit.f32())
    # B · H · ceil(S / tile): the workgroups the kernel's bound admits (it derives S again
    # from Q's rows; a workload past that bound would only launch idle workgroups)
    tiles = (-(-s // kern.tile) if isinstance(s, int) else
             arith.ceildivui(emit.as_value(s), emit.index(kern.tile)))
    workload = emit.as_value(emit.mul_sizes(tiles, kern.batch * kern.heads))
    o = flow.DispatchOp([out], [workload], ir.ArrayAttr.get([entry]), [*tensors, *lengths],
                        dims, emit.dynamic_values([rows])).results[0]
    return emit.expand(o, [[0, 1], [2]], [b, s, width])


__all__ = ["PrefillAttentionKernel", "dispatch", "kernel_for"]
