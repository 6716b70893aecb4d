"""The prefill attention kernel with a tile's 16 query rows in the 16 lanes of a vector:
:mod:`.prefill_attention`'s kernel (same operands, workgroups, key ranges, masks and online
softmax in two levels), its arithmetic laid out the other way round.

That kernel holds a row's 16 scores of a block in one vector: each key's ``q · k`` is a
vector of partial sums over the head dim, summed across lanes by a tree of shuffles, and
each key's ``e_j v_j`` is a broadcast of one weight against the V row: per (query, key)
pair, ``hd / 16`` K loads and FMAs, two shuffles, ``hd / 16`` V loads and FMAs and the
scalar work of one lane (the 135M model's prefill spent 17% of its time there at 512 tokens,
at a third of its GEMMs' FLOP rate). Here a workgroup is 16 consecutive query rows of one
head (:data:`ROWS`, lane ``r`` holds row ``m0 + r``) and every vector is a column of the
tile:

- the tile's Q transposed once, by 16 x 16 shuffle transposes, into ``qᵀ [hd, 16]`` on the
  stack (lane ``r`` of ``qᵀ[d]`` is ``q[m0 + r, d]``);
- a block of 16 keys: 16 score vectors ``s_j = scale · Σ_d k_j[d] · qᵀ[d]``, one FMA of a
  broadcast K element against a ``qᵀ`` column each (``hd`` iterations of 1 vector load and
  16 FMAs whose K operand LLVM folds into the FMA as a broadcast load): no shuffle, no
  reduction;
- the block max, weights and sums of every row at once: 15 lane-wise max selects, 16 vector
  ``exp``\\ s; no row loop;
- ``oᵀ[d] = α · oᵀ[d] + Σ_j v_j[d] · e_j``: per ``d`` one load and store of the stack's
  partial-sum column and 16 FMAs of a broadcast V element (four chains, then summed);
- every :data:`.prefill_attention.GROUP` keys the partial sums folded into the totals
  (``oᵀ_tot [hd, 16]``), as there; at the end the totals are transposed back into rows and
  each row the tile holds is stored.

Against the 8-row kernel, both in one process, 5 interleaved rounds on Zen 5 (AMD EPYC
family 26 model 2), causal, outputs within 1.4e-6: the 135M model's heads (9 over 3, 64
wide) 512 tokens 2.74 -> 1.33 ms, 2048 40.0 -> 19.3 ms; Llama-3.2-1B's (32 over 8) 9.0 ->
4.4 and 142 -> 66 ms; 8 over 2 heads 128 wide 3.3 -> 2.3 and 53 -> 30 ms. Compiled for
``znver3`` (AVX2: every vector two halves) and run on the same CPU, 12-20% faster at 512
and 2048 tokens, level at 128.

Rows of the tile past the sequence's (``r >= nq``) repeat its last row (their loads stay
in the binding) and are never stored. The stack holds ``qᵀ``, the partial and the total
sums: ``3 · hd · 64`` bytes, 24 KiB at ``hd = 128`` (IREE's llvm-cpu limit is 32 KiB):
wider heads (Qwen3.5's 256) keep :mod:`.prefill_attention`'s kernel.

Lanes that are not a row's keys (before its window, past its position, past the block)
score ``-inf``; a row that has seen no key yet keeps ``m = -inf``, and its ``exp``\\ s are
taken against 0 instead (``exp(-inf) = 0``, where ``-inf - -inf`` would be NaN). A NaN
score passes the max selects, and its weight ``exp(NaN - m)`` makes that row NaN, as the
other kernel's.

**Bounds** are the other kernel's (its docstring): Q rows ``qrow0 + min(r, nq - 1) <
B · S <= len_q``; K / V rows ``first + min(j0 + i, bend - 1) < first + rows`` or, where
``rows >= 16``, the block's 16 consecutive rows ``first + jb + i`` with ``jb = min(j0,
rows - 16)``: ``0 <= jb`` and ``jb + 15 < rows``, and they hold every key of ``[j0, bend)``
(``bend <= rows``); the lanes of keys before ``j0`` (the previous block's) and from
``bend`` on weigh nothing. Their columns ``kbase + d < Hkv · hd``; ``qᵀ`` and the sums are
indexed by ``d < hd`` and a lane; O is stored for ``r < nq`` only."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import ClassVar

from rlx.dialects.schema import Decoded
from rlx.lowering.mir_to_linalg import prefill_attention
from rlx.lowering.mir_to_linalg.executable import I16, V16, Text, f32_literal
from rlx.lowering.mir_to_linalg.prefill_attention import GROUP, KEYS, PrefillAttentionKernel
from rlx.lowering.registry import LoweringContext

ROWS = 16
"""Query rows a workgroup: one per lane of a vector (:data:`.prefill_attention.KEYS`)."""

STACK_BYTES = 24 * 1024
"""The most stack this kernel takes (``qᵀ`` and the two sums, ``3 · hd · ROWS · 4``)."""

CHAINS = 4
"""Independent FMA chains of ``oᵀ[d]``'s 16 updates a block, summed at the end."""


def fits(head_dim: int) -> bool:
    """Whether a head this wide fits the kernel's stack."""
    return 3 * head_dim * ROWS * 4 <= STACK_BYTES


def transpose16(t: Text, rows: list[str], tag: str) -> list[str]:
    """The 16 columns of the 16 x 16 matrix whose rows are ``rows``: four rounds, each
    swapping one bit of the row index with the same bit of the lane index (pairs of
    vectors ``a``, ``b = a | bit``: ``a`` keeps its lanes without the bit and takes ``b``'s
    lane ``c ^ bit`` for the others; ``b`` the converse), 64 two-source shuffles."""
    cur = list(rows)
    for bit in (1, 2, 4, 8):
        nxt = list(cur)
        for a in range(16):
            if a & bit:
                continue
            b = a | bit
            lo = [c if not c & bit else 16 + (c ^ bit) for c in range(16)]
            hi = [c | bit if not c & bit else 16 + c for c in range(16)]
            for dst, lanes in ((a, lo), (b, hi)):
                name = f"%{tag}{bit}_{dst}"
                t(f"{name} = vector.shuffle {cur[a]}, {cur[b]} "
                  f"[{', '.join(map(str, lanes))}] : {V16}, {V16}")
                nxt[dst] = name
        cur = nxt
    return cur


def renamed(lines: list[str], suffix: str) -> list[str]:
    """``lines`` with every SSA name they define (results, loop variables, iter_args)
    given ``suffix``: a second copy of a region's body beside the first."""
    defined = set()
    for line in lines:
        defined.update(re.findall(r"(%[A-Za-z_]\w*)(?::\d+)? = ", line))
    pattern = re.compile("|".join(re.escape(n) for n in sorted(defined, key=len,
                                                              reverse=True)) + r"(?!\w)")
    return [pattern.sub(lambda m: m.group(0) + suffix, line) for line in lines]


def _tree(t: Text, values: list[str], tag: str, op: str) -> str:
    """``values`` combined pairwise (``add``: ``arith.addf``; ``max``: ``a > b ? a : b``)."""
    level, n = list(values), 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), 2):
            a, b, name = level[i], level[i + 1], f"%{tag}{n}"
            n += 1
            if op == "add":
                t(f"{name} = arith.addf {a}, {b} : {V16}")
            else:
                t(f"{name}c = arith.cmpf ogt, {a}, {b} : {V16}")
                t(f"{name} = arith.select {name}c, {a}, {b} : vector<16xi1>, {V16}")
            nxt.append(name)
        level = nxt
    return level[0]


@dataclass(frozen=True)
class PrefillRowsKernel(PrefillAttentionKernel):
    """The prefill kernel, 16 query rows a workgroup, one a lane."""

    KIND: ClassVar[str] = "prefill_rows"

    @property
    def tile(self) -> int:
        return ROWS

    def _body(self, t: Text, qo: str, kv: str) -> None:
        hd = self.head_dim
        col = f"memref<{hd}x{ROWS}xf32>"
        self._where(t, qo, kv)
        t(f"%chd = arith.constant {hd} : index")
        t(f"%onev = arith.constant dense<1.0> : {V16}")
        t(f"%half = arith.constant {f32_literal(0.5)} : f32")
        t(f"%qs = memref.alloca() : memref<{ROWS}xi32>")
        t(f"%qe = memref.alloca() : memref<{ROWS}xi32>")
        t(f"%qn = memref.alloca() : memref<{ROWS}xi32>")
        for name in ("qt", "acc", "acct"):
            t(f"%{name} = memref.alloca() : {col}")
        self._lane_ranges(t)
        t("%full = arith.cmpi uge, %rows, %ckeys : index")
        self._load_q(t, qo, col)
        t.block("scf.for %zd = %c0 to %chd step %c1")
        for name in ("acc", "acct"):
            t(f"vector.store %zv, %{name}[%zd, %c0] : {col}, {V16}")
        t.end()
        t.block("%gr:3 = scf.for %g = %kmin to %kmax step %cgroup iter_args(%gm = %ninfv, "
                f"%gmt = %ninfv, %glt = %zv) -> ({V16}, {V16}, {V16})")
        t(f"%gend = affine.min affine_map<(d0)[s0] -> (d0 + {GROUP}, s0)>(%g)[%kmax]")
        t.block("%br:2 = scf.for %j0 = %g to %gend step %ckeys iter_args(%bm0 = %gm, "
                f"%bl0 = %zv) -> ({V16}, {V16})")
        t(f"%bend = affine.min affine_map<(d0)[s0] -> (d0 + {KEYS}, s0)>(%j0)[%gend]")
        # 16 keys in a row where the sequence has them (their K / V addresses one pointer
        # and 16 constant offsets; 16 clamped rows took 16 pointers, which LLVM spilled)
        t.block(f"%bk:2 = scf.if %full -> ({V16}, {V16})")
        self._block(t, kv, col, consecutive=True)
        t("scf.yield %mnew, %lnew : " + f"{V16}, {V16}")
        t.otherwise()
        other = Text()
        other.depth = t.depth
        self._block(other, kv, col, consecutive=False)
        other("scf.yield %mnew, %lnew : " + f"{V16}, {V16}")
        t.lines += renamed(other.lines, "_c")
        t.end()
        t(f"scf.yield %bk#0, %bk#1 : {V16}, {V16}")
        t.end()
        self._fold_lanes(t, col)
        t.end()
        self._store_rows(t, qo, col)

    def _lane_ranges(self, t: Text) -> None:
        """Lane ``r``'s keys ``[%sv, %ev)`` and ``%nonev`` (it sees none), for query ``m0 +
        min(r, nq - 1)``; ``[%kmin, %kmax)`` the union over the lanes."""
        self._open_ranges(t, "%ckeys")
        t("%r_mq = affine.min affine_map<(d0)[s0, s1] -> (d0 + s1, s0 + s1 - 1)>"
          "(%qi)[%nq, %m0]")
        self._row_range(t)
        # every key index is below a row count, itself below 2^31 (the verifier's limit)
        t("%r_s32 = arith.index_cast %r_s0 : index to i32")
        t("%r_e32 = arith.index_cast %r_e0 : index to i32")
        t("%r_n32 = arith.extui %r_none : i1 to i32")
        for buf, v in (("qs", "%r_s32"), ("qe", "%r_e32"), ("qn", "%r_n32")):
            t(f"memref.store {v}, %{buf}[%qi] : memref<{ROWS}xi32>")
        self._close_ranges(t)
        for buf, v in (("qs", "%sv"), ("qe", "%ev"), ("qn", "%nv")):
            t(f"{v} = vector.load %{buf}[%c0] : memref<{ROWS}xi32>, {I16}")
        t(f"%zi = arith.constant dense<0> : {I16}")
        t(f"%nonev = arith.cmpi ne, %nv, %zi : {I16}")

    def _load_q(self, t: Text, qo: str, col: str) -> None:
        """``qᵀ``: lane ``r`` of column ``d`` is ``q[m0 + min(r, nq - 1), d]``."""
        for r in range(ROWS):
            t(f"%ql{r} = affine.min affine_map<()[s0, s1] -> (s1 + {r}, s0 + s1 - 1)>()"
              "[%nq, %qrow0]")
        for c in range(self.chunks):
            rows = []
            for r in range(ROWS):
                t(f"%qr{c}_{r} = vector.load %q[%ql{r}, %qo{c}] : {qo}, {V16}")
                rows.append(f"%qr{c}_{r}")
            for d, v in enumerate(transpose16(t, rows, f"qx{c}_")):
                t(f"%qd{c}_{d} = arith.constant {16 * c + d} : index")
                t(f"vector.store {v}, %qt[%qd{c}_{d}, %c0] : {col}, {V16}")

    def _block(self, t: Text, kv: str, col: str, consecutive: bool) -> None:
        """Keys ``[j0, bend)``: their rows ``%kr0 .. %kr15`` of K / V, scores, weights and
        sums (``%mnew``, ``%lnew``). ``consecutive`` (the sequence has 16 rows or more):
        rows ``first + jb + i``, ``jb = min(j0, rows - 16)`` (``0 <= jb``, ``jb + 15 <
        rows``), the lanes before ``j0`` (the previous block's keys) weighing nothing;
        else :meth:`_keys`' rows ``first + min(j0 + i, bend - 1)``."""
        if consecutive:
            t("%jb = affine.min affine_map<(d0)[s0] -> (d0, s0 - 16)>(%j0)[%rows]")
            t("%krb = arith.addi %first, %jb : index")
            for i in range(KEYS):
                t(f"%kr{i} = affine.apply affine_map<(d0) -> (d0 + {i})>(%krb)")
            if self.masked:
                self._keep(t)
            t("%jfirst = arith.addi %jb, %c0n : index")
        else:
            self._keys(t)
            t("%jfirst = arith.addi %j0, %c0n : index")
        scores = self._scores(t, kv, col)
        self._softmax_block(t, scores, kv, col)

    def _keep(self, t: Text) -> None:
        """custom: the mask entries only, each compared in :meth:`_scores` (a key's flag
        selects its whole score vector)."""
        self._mask_loads(t)

    def _scores(self, t: Text, kv: str, col: str) -> list[str]:
        """The block's 16 score vectors (lane: query row): ``scale · q · k_j``, the masked
        fill for keys a row does not keep (custom) or a row that sees none, ``-inf`` for
        keys outside its range ``[%sv, min(%ev, bend))``."""
        acc = ", ".join(f"%a{i} = %zv" for i in range(KEYS))
        types = ", ".join([V16] * KEYS)
        t.block(f"%qk:{KEYS} = scf.for %d = %c0 to %chd step %c1 iter_args({acc}) -> ({types})")
        t(f"%qv = vector.load %qt[%d, %c0] : {col}, {V16}")
        t("%kd = arith.addi %kbase, %d : index")
        for i in range(KEYS):
            t(f"%ke{i} = memref.load %k[%kr{i}, %kd] : {kv}")
            t(f"%kb{i} = vector.broadcast %ke{i} : f32 to {V16}")
            t(f"%an{i} = vector.fma %kb{i}, %qv, %a{i} : {V16}")
        t(f"scf.yield {', '.join(f'%an{i}' for i in range(KEYS))} : {types}")
        t.end()
        t("%bend32 = arith.index_cast %bend : index to i32")
        t(f"%bendv = vector.broadcast %bend32 : i32 to {I16}")
        t(f"%hiv = arith.minsi %ev, %bendv : {I16}")
        t("%j032 = arith.index_cast %jfirst : index to i32")
        t("%jlo32 = arith.index_cast %j0 : index to i32")
        t(f"%jlov = vector.broadcast %jlo32 : i32 to {I16}")
        t(f"%lov = arith.maxsi %sv, %jlov : {I16}")
        out = []
        for i in range(KEYS):
            t(f"%sc{i} = arith.mulf %qk#{i}, %scalev : {V16}")
            if self.masked:
                t(f"%kp{i} = arith.cmpf oge, %mk{i}, %half : f32")
                t(f"%sm{i} = arith.select %kp{i}, %sc{i}, %maskedv : {V16}")
            else:
                t(f"%sm{i} = arith.select %nonev, %maskedv, %sc{i} : vector<16xi1>, {V16}")
            t(f"%ci{i} = arith.constant {i} : i32")
            t(f"%ji{i} = arith.addi %j032, %ci{i} : i32")
            t(f"%jv{i} = vector.broadcast %ji{i} : i32 to {I16}")
            t(f"%ge{i} = arith.cmpi sge, %jv{i}, %lov : {I16}")
            t(f"%lt{i} = arith.cmpi slt, %jv{i}, %hiv : {I16}")
            t(f"%in{i} = arith.andi %ge{i}, %lt{i} : vector<16xi1>")
            t(f"%s{i} = arith.select %in{i}, %sm{i}, %ninfv : vector<16xi1>, {V16}")
            out.append(f"%s{i}")
        return out

    def _softmax_block(self, t: Text, scores: list[str], kv: str, col: str) -> None:
        """The running max ``%bm0`` grown to the block's, the weights, the sum of weights
        ``%bl0`` and the partial sums ``oᵀ`` rescaled and added to: ``%mnew``, ``%lnew``."""
        bmax = _tree(t, scores, "bx", "max")
        t(f"%mg = arith.cmpf ogt, %bm0, {bmax} : {V16}")
        t(f"%mnew = arith.select %mg, %bm0, {bmax} : vector<16xi1>, {V16}")
        t(f"%mnone = arith.cmpf oeq, %mnew, %ninfv : {V16}")
        t(f"%msafe = arith.select %mnone, %zv, %mnew : vector<16xi1>, {V16}")
        t(f"%mdiff = arith.subf %bm0, %msafe : {V16}")
        t(f"%alpha = math.exp %mdiff : {V16}")
        weights = []
        for i, s in enumerate(scores):
            t(f"%sd{i} = arith.subf {s}, %msafe : {V16}")
            t(f"%p{i} = math.exp %sd{i} : {V16}")
            weights.append(f"%p{i}")
        psum = _tree(t, weights, "ps", "add")
        t(f"%lsc = arith.mulf %bl0, %alpha : {V16}")
        t(f"%lnew = arith.addf %lsc, {psum} : {V16}")
        t.block("scf.for %d2 = %c0 to %chd step %c1")
        t(f"%od = vector.load %acc[%d2, %c0] : {col}, {V16}")
        t("%vd = arith.addi %kbase, %d2 : index")
        t(f"%os = arith.mulf %od, %alpha : {V16}")
        chains: list[str] = ["%os"] + [""] * (CHAINS - 1)
        for i in range(KEYS):
            t(f"%ve{i} = memref.load %v[%kr{i}, %vd] : {kv}")
            t(f"%vb{i} = vector.broadcast %ve{i} : f32 to {V16}")
            c = i % CHAINS
            t(f"%oc{i} = " + (f"vector.fma %vb{i}, %p{i}, {chains[c]} : {V16}" if chains[c]
                              else f"arith.mulf %vb{i}, %p{i} : {V16}"))
            chains[c] = f"%oc{i}"
        total = _tree(t, chains, "cs", "add")
        t(f"vector.store {total}, %acc[%d2, %c0] : {col}, {V16}")
        t.end()

    def _fold_lanes(self, t: Text, col: str) -> None:
        """End of a group: the partial sums (relative to the running max) added to the
        totals (relative to ``%gmt``, rescaled), then zeroed; yields max, totals' max and
        sum. A lane that has seen no key yet (max still ``-inf``) folds zeros."""
        t(f"%fseen = arith.cmpf ogt, %br#0, %ninfv : {V16}")
        t(f"%fms = arith.select %fseen, %br#0, %zv : vector<16xi1>, {V16}")
        t(f"%fd = arith.subf %gmt, %fms : {V16}")
        t(f"%ff = math.exp %fd : {V16}")
        t(f"%flt = arith.mulf %glt, %ff : {V16}")
        t(f"%fltn = arith.addf %flt, %br#1 : {V16}")
        t(f"%fmt = arith.select %fseen, %br#0, %gmt : vector<16xi1>, {V16}")
        t.block("scf.for %d3 = %c0 to %chd step %c1")
        t(f"%ft = vector.load %acct[%d3, %c0] : {col}, {V16}")
        t(f"%fp = vector.load %acc[%d3, %c0] : {col}, {V16}")
        t(f"%fn = vector.fma %ft, %ff, %fp : {V16}")
        t(f"vector.store %fn, %acct[%d3, %c0] : {col}, {V16}")
        t(f"vector.store %zv, %acc[%d3, %c0] : {col}, {V16}")
        t.end()
        t(f"scf.yield %br#0, %fmt, %fltn : {V16}, {V16}, {V16}")

    def _store_rows(self, t: Text, qo: str, col: str) -> None:
        """``o = oᵀ_tot / Σ e`` transposed back into rows; rows ``r < nq`` stored."""
        t(f"%inv = arith.divf %onev, %gr#2 : {V16}")
        for r in range(ROWS):
            t(f"%or{r} = arith.constant {r} : index")
            t(f"%oin{r} = arith.cmpi ult, %or{r}, %nq : index")
            t(f"%orow{r} = arith.addi %qrow0, %or{r} : index")
        for c in range(self.chunks):
            cols = []
            for d in range(16):
                t(f"%od{c}_{d} = arith.constant {16 * c + d} : index")
                t(f"%ol{c}_{d} = vector.load %acct[%od{c}_{d}, %c0] : {col}, {V16}")
                t(f"%on{c}_{d} = arith.mulf %ol{c}_{d}, %inv : {V16}")
                cols.append(f"%on{c}_{d}")
            for r, v in enumerate(transpose16(t, cols, f"ox{c}_")):
                t.block(f"scf.if %oin{r}")
                t(f"vector.store {v}, %o[%orow{r}, %qo{c}] : {qo}, {V16}")
                t.end()


def kernel_for(ctx: LoweringContext, op: Decoded, scale: float
               ) -> PrefillAttentionKernel | None:
    """The prefill kernel for this attention op (:func:`.prefill_attention.kernel_for`),
    16 rows a workgroup where the head fits (:func:`fits`), or None."""
    kern = prefill_attention.kernel_for(ctx, op, scale)
    if kern is None or not fits(kern.head_dim):
        return kern
    return PrefillRowsKernel(**{f.name: getattr(kern, f.name) for f in fields(kern)})


__all__ = ["PrefillRowsKernel", "fits", "kernel_for", "transpose16"]
