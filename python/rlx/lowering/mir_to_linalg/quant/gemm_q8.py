"""The ``activation_quant="q8"`` form of the prefill GEMM (:mod:`.gemm_prefill`): ``y [M, N]
= x̃ [M, K] W^T`` with 8-bit activations and integer dot products, where llama.cpp's prefill
runs (its repacked Q8_0 / Q4_K GEMMs against ``q8_0`` / ``q8_K`` activations).

The f32 outer-product form is bound by FMA throughput: one FMA lane per weight and row of
``x``, which on 2 Zen 4 cores is already ~90% of the f32 peak at 512 rows. ``vpdpbusd``
(AVX-512 VNNI) does four byte products a lane, 64 an instruction, against 16 for an f32
FMA; per 32 weights, 16 rows of ``W`` and one row of ``x`` this form issues 8 of them and
three f32 operations (convert, scale, FMA) where the f32 form issues 32 FMAs.

**x**, quantized once per call by a dispatch of its own (:class:`RowQuantizer`, with the
very lines of the decode kernels' :func:`.gemv_q8.quantize_block`, so a decode and a
prefill see the same bytes): per row and block ``b`` of 32, ``d = amax / 127`` and ``q =
round-half-even(x / d)`` in ``[-127, 127]``, stored as the unsigned byte ``q + 128`` (``vpdpbusd``
multiplies unsigned by signed bytes: ``x`` is the unsigned side so that every scheme's
weight can be the signed one) in quads ``xu [T, K / 4, P]`` i32 (the ``P`` rows of a pass
side by side at each quad of four ``k``, as :func:`.gemm_prefill.pack_rows` packs the f32
form's ``x``), ``xd [T, K / 32, P]`` the scales and, for Q4_K's mins, ``xs [T, K / 32, P]``
= ``d · Σ q``.

**Weights**: per column block (16 rows of ``W``: four row tiles) and chunk of ``C`` weights,
the decode's planes (no second copy held) are repacked into ``wq [C / 4, 16]`` i32: quad
``e`` of every column side by side (a 4 x 8 transpose of dwords per tile and block), as
signed bytes (Q8_0 / Q5_0 / Q4_0: ``q``; Q4_K: the nibble ``0 .. 15``; Q6_K: ``q - 32``);
per unit of ``u`` weights (32; Q6_K 16, its scale's) and column the scale ``A`` (``d``, ``d ·
sc``), the offset ``O = -128 Σ w`` (``Σ (q + 128) w - 128 Σ w = Σ q w``: computed by the same
dot product against bytes of 1) and, for Q4_K, ``-dmin · m``.

**Per pass** of ``P`` rows of ``x`` and unit: the ``u / 4`` quads of ``wq``, and for each row
``j`` an i32 vector ``O + Σ_e vpdpbusd(xu[j, e], wq[e])`` (``Σ_k q_x w`` of the unit for 16
columns), converted and accumulated as ``acc_j += (A · d_x[j]) · dot`` (Q4_K: ``+= (-dmin ·
m) · xs[j]`` too). The accumulators start from ``y`` (or ``r``, or zero at the first chunk)
and go back to it after each chunk, as in the f32 form.

**Numerics**: ``W x̃`` for ggml's ``q8_0`` quantization ``x̃`` of ``x``, as the decode's q8
kernels (:mod:`.gemv_q8`, whose error bound against ``W x`` holds here unchanged). Every
integer is exact: a lane's four products are at most ``4 · 255 · 128``, a unit's 32 at most
``1044480``, plus ``|O| <= 524288``: below ``2^24``, so exact in i32 and in its f32
conversion too.

**Bounds** (as :mod:`.gemm_prefill`'s; its column blocks, chunks and passes, the weights'
plane indices as :mod:`.gemv_batched`'s chunk code for the same plane and chunk): ``wq [C /
4, 16]`` written at ``[8 ub + e, 4 tq + [0, 4))`` (``ub < C / 32``, ``e < 8``, ``tq < 4``)
and read at ``[qpu u + e]``, ``u < C / w``, ``e < w / 4``; the unit planes ``[C / w, 16]``
at ``[u, 4 tq + [0, 4))`` and ``[u, [0, 16))``; ``xu`` at ``[p, C / 4 · ch + qpu u + e, j]
< [T, K / 4, P]`` and ``xd``, ``xs`` at ``[p, C / 32 · ch + ub, j]`` (``ub = u`` or ``u /
2``). The quantizer: workgroup ``p < T`` writes ``xu[p, 8 b + e, j]``, ``xd[p, b, j]``,
``xs[p, b, j]`` (``b < K / 32``, ``e < 8``, ``j < P``) and reads ``x[min(P p + j, M - 1), 32 b
+ [0, 32)]``: a row below ``M`` since ``p < T = ceil(M / P)`` makes ``M >= 1`` (``T`` and
``M`` are operands of both dispatches, the lowering computes ``T`` from ``M`` once,
:func:`quantize_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from iree.compiler import ir
from iree.compiler.dialects import flow

from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.executable import (
    Binding,
    Scalar,
    Text,
    executable_text,
    memref,
    record,
)
from rlx.lowering.mir_to_linalg.quant.gemm_prefill import (
    COLUMNS,
    close_passes,
    open_column_blocks,
    open_passes,
    pass_count,
)
from rlx.lowering.mir_to_linalg.quant.gemv_batched import aligned_alloca, chunk_blocks
from rlx.lowering.mir_to_linalg.quant.gemv_q8 import (
    q6_k_quarter,
    quantize_block,
    quantize_constants,
)
from rlx.lowering.mir_to_linalg.quant.gemv_text import ROWS_PER_TILE, at, q6_k_scales
from rlx.lowering.registry import LoweringContext

V64B = "vector<64xi8>"
I16V = "vector<16xi32>"
F16V = "vector<16xf32>"


class Shape(Protocol):
    """What this body reads of a :class:`.gemv_kernels.Kernel`."""

    scheme: str
    k: int
    rows: int
    residual: bool
    int_dot: str | None

    @property
    def bindings(self) -> dict[str, str]: ...


def has_dot(int_dot: str | None, lanes: int) -> bool:
    """Whether this GEMM is written for ``int_dot`` on a kernel of ``lanes`` f32 lanes:
    ``vpdpbusd`` on 512-bit vectors (``vnni`` with 16 lanes: AVX-512 VNNI; AVX-VNNI alone has
    no 512-bit form), and plain ``vector`` code (``portable``, any target). AVX2's
    ``vpmaddubsw`` would saturate on Q8_0's ``(q + 128) · w`` pairs (up to ``2 · 255 · 128``):
    an AVX2 CPU keeps the f32 outer form."""
    return int_dot == "portable" or (int_dot == "vnni" and lanes == 16)


def unit_weights(scheme: str) -> int:
    """Weights one scale covers: 16 for Q6_K, else 32."""
    return 16 if scheme == "gguf_q6_k" else 32


def x_bindings(k: int, rows: int, sums: bool) -> dict[str, str]:
    """The quantized ``x`` as the GEMM reads it (:class:`RowQuantizer`'s results)."""
    xu = {"x": memref(["?", k // 4, rows], "i32"), "xd": memref(["?", k // 32, rows], "f32")}
    return xu | ({"xs": memref(["?", k // 32, rows], "f32")} if sums else {})


@dataclass(frozen=True)
class RowQuantizer:
    """``x [M, K]`` f32 -> ``xu``, ``xd`` (and ``xs``) of :func:`x_bindings`: one workgroup a
    pass of ``rows`` rows (module docstring)."""

    k: int
    rows: int
    sums: bool
    int_dot: str

    @property
    def symbol(self) -> str:
        return (f"rlx_q8_rows_{self.k}_p{self.rows}{'_sums' if self.sums else ''}"
                f"_{self.int_dot}")

    def text(self) -> str:
        outs = x_bindings(self.k, self.rows, self.sums)
        args: list[Binding | Scalar] = [Binding("xin", memref(["?", self.k], "f32"),
                                                ("%m_rows",)),
                                         Scalar("m_rows"), Scalar("m_tiles")]
        args += [Binding(name, mem, ("%m_tiles",)) for name, mem in outs.items()]

        def count(t: Text) -> str:
            return "%m_tiles"

        return executable_text(self.symbol, args, self._body, count)

    def _body(self, t: Text) -> None:
        k, rows = self.k, self.rows
        xin = memref(["?", k], "f32")
        mems = x_bindings(k, rows, self.sums)
        quantize_constants(t, k // 32)
        t(f"%c_p = arith.constant {rows} : index")
        t("%c8 = arith.constant 8 : index")
        t("%flip = arith.constant dense<-128> : vector<32xi8>")
        t("%last = arith.subi %m_rows, %c1 : index")
        t("%row0 = arith.muli %wg, %c_p : index")
        t.block("scf.for %j = %c0 to %c_p step %c1")
        t("%ru = arith.addi %row0, %j : index")
        t("%row = arith.minui %ru, %last : index")
        t.block("scf.for %qb = %c0 to %q8_nb step %c1")
        t("%qk = arith.muli %qb, %q8_c32 : index")
        t(f"%qv = vector.load %xin[%row, %qk] : {xin}, vector<32xf32>")
        quantize_block(t, self.int_dot)
        t("%qi = arith.fptosi %qn : vector<32xf32> to vector<32xi8>")
        t("%qu = arith.xori %qi, %flip : vector<32xi8>")        # q + 128 as an unsigned byte
        t("%qw = vector.bitcast %qu : vector<32xi8> to vector<8xi32>")
        t("%q4 = arith.muli %qb, %c8 : index")
        for e in range(8):
            t(f"%qe{e} = vector.extract %qw[{e}] : i32 from vector<8xi32>")
            t(f"%qx{e} = affine.apply affine_map<()[s0] -> (s0 + {e})>()[%q4]")
            t(f"memref.store %qe{e}, %x[%wg, %qx{e}, %j] : {mems['x']}")
        t(f"memref.store %qd, %xd[%wg, %qb, %j] : {mems['xd']}")
        if self.sums:
            t("%qsq = vector.reduction <add>, %qn : vector<32xf32> into f32")
            t("%qsum = arith.mulf %qsq, %qd : f32")
            t(f"memref.store %qsum, %xs[%wg, %qb, %j] : {mems['xs']}")
        t.end()
        t.end()


def quantize_rows(ctx: LoweringContext, x: ir.Value, rows: int, sums: bool, int_dot: str
                  ) -> tuple[list[ir.Value], emit.Size]:
    """``x [M, K]`` f32 quantized for the GEMM (:class:`RowQuantizer`'s dispatch): its
    results and ``T = ceil(M / rows)``."""
    k = emit.static_shape(x)[1]
    assert k is not None
    quant = RowQuantizer(k, rows, sums, int_dot)
    record(ctx, quant)
    m = emit.dim(x, 0)
    tiles = pass_count(m, rows)
    types = [emit.tensor_type([tiles, k // 4, rows], ir.IntegerType.get_signless(32)),
             emit.tensor_type([tiles, k // 32, rows], emit.f32())]
    if sums:
        types.append(types[1])
    entry = ir.SymbolRefAttr.get([quant.symbol, quant.symbol])
    op = flow.DispatchOp(types, [emit.as_value(tiles)], ir.ArrayAttr.get([entry]),
                         [x, emit.as_value(m), emit.as_value(tiles)],
                         emit.dynamic_values([m]), emit.dynamic_values([tiles] * len(types)))
    return list(op.results), tiles


def int8_body(t: Text, kern: Shape, form: str, rows: int) -> None:
    """The GEMM body (module docstring); ``form`` as :func:`.gemv_batched.batched_body`'s
    (``byte``, ``q4_k_q8``, ``q6_k_q8``), ``rows`` of ``x`` a pass."""
    assert kern.int_dot in ("vnni", "portable")
    cb = chunk_blocks(form, kern.k)
    wc, unit = 32 * cb, unit_weights(kern.scheme)
    units, qpu = wc // unit, unit // 4
    mems = {"wq": memref([wc // 4, COLUMNS], "i32"), "sa": memref([units, COLUMNS], "f32"),
            "so": memref([units, COLUMNS], "i32"), "sn": memref([wc // 32, COLUMNS], "f32")}
    for name, value in (("c2", 2), ("c4", 4), ("c_rows", rows), ("c_chunks", kern.k // wc),
                        ("c_units", units), ("c_blocks", cb), ("c_cols", kern.rows // COLUMNS)):
        t(f"%{name} = arith.constant {value} : index")
    for j in range(rows):
        t(f"%jc{j} = arith.constant {j} : index")
    t(f"%zero16i = arith.constant dense<0> : {I16V}")
    t(f"%ones64 = arith.constant dense<1> : {V64B}")
    t(f"%m128 = arith.constant dense<-128> : {I16V}")
    if kern.int_dot == "portable":
        t("%c128v = arith.constant dense<128> : vector<64xi32>")
    if form in ("q4_k_q8", "q6_k_q8"):
        t("%lo4 = arith.constant dense<15> : vector<32xi8>")
        t("%sh4 = arith.constant dense<4> : vector<32xi8>")
    if form == "q6_k_q8":
        t("%sh2 = arith.constant dense<2> : vector<32xi8>")
        t("%hi2 = arith.constant dense<48> : vector<32xi8>")
        t("%b32 = arith.constant dense<32> : vector<32xi8>")
    for name in ("wq", "sa", "so") + (("sn",) if form == "q4_k_q8" else ()):
        t(f"%{name} = {aligned_alloca(mems[name])}")
    open_column_blocks(t, kern, chunk_offset=False)
    t.block("scf.for %tq = %c0 to %c4 step %c1")
    t("%tile = arith.addi %tilec, %tq : index")
    t("%col = arith.muli %tq, %c4 : index")
    {"byte": _byte_fill, "q4_k_q8": _q4_k_fill, "q6_k_q8": _q6_k_fill}[form](t, kern, mems)
    t.end()
    _offsets(t, kern, mems, qpu)
    _passes(t, kern, mems, rows, qpu)
    t.end()
    t.end()


def dot64(t: Text, int_dot: str | None, acc: str, u: str, s: str, tag: str) -> str:
    """``%d{tag}`` = ``acc`` + the 16-lane dot product of ``u`` (64 bytes read unsigned) and
    ``s`` (64 signed bytes), lane ``c`` summing bytes ``4c .. 4c + 3``; returns its name."""
    out = f"%d{tag}"
    if int_dot == "vnni":
        t(f'{out} = llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"({acc}, {u}, {s}) : '
          f"({I16V}, {V64B}, {V64B}) -> {I16V}")
        return out
    t(f"%du{tag} = arith.extui {u} : {V64B} to vector<64xi32>")
    # s sign-extended as (zext(s) ^ 128) - 128: IREE 3.13 (x86-64 generic) compiled an
    # arith.extsi of these bitcast bytes as a zero extension (w = -1 multiplied as 255)
    t(f"%dz{tag} = arith.extui {s} : {V64B} to vector<64xi32>")
    t(f"%dx{tag} = arith.xori %dz{tag}, %c128v : vector<64xi32>")
    t(f"%ds{tag} = arith.subi %dx{tag}, %c128v : vector<64xi32>")
    t(f"%dp{tag} = arith.muli %du{tag}, %ds{tag} : vector<64xi32>")
    prev = acc
    for j in range(4):                          # lanes 4c + j of the products
        mask = ", ".join(str(4 * c + j) for c in range(COLUMNS))
        t(f"%dj{tag}_{j} = vector.shuffle %dp{tag}, %dp{tag} [{mask}] : vector<64xi32>, "
          "vector<64xi32>")
        t(f"%da{tag}_{j} = arith.addi {prev}, %dj{tag}_{j} : {I16V}")
        prev = f"%da{tag}_{j}"
    t(f"{out} = arith.addi {prev}, %zero16i : {I16V}")
    return out


def _transposed(t: Text, rows: list[str], elem: str, plane: str, mem: str, base: str,
                tag: str) -> None:
    """``plane[base + e, %col + i]`` = lane ``e`` of ``rows[i]`` (four ``vector<8x{elem}>``:
    the tile's rows' 8 dwords of a block, or 8 scales): a 4 x 8 transpose."""
    mat = f"%z48{tag}"
    t(f"{mat} = arith.constant dense<0{'.0' if elem == 'f32' else ''}> : vector<4x8x{elem}>")
    for i, row in enumerate(rows):
        t(f"%tm{tag}_{i} = vector.insert {row}, {mat} [{i}] : vector<8x{elem}> into "
          f"vector<4x8x{elem}>")
        mat = f"%tm{tag}_{i}"
    t(f"%tt{tag} = vector.transpose {mat}, [1, 0] : vector<4x8x{elem}> to vector<8x4x{elem}>")
    for e in range(8):
        t(f"%te{tag}_{e} = vector.extract %tt{tag}[{e}] : vector<4x{elem}> from "
          f"vector<8x4x{elem}>")
        t(f"%tk{tag}_{e} = affine.apply affine_map<()[s0] -> (s0 + {e})>()[{base}]")
        t(f"vector.store %te{tag}_{e}, %{plane}[%tk{tag}_{e}, %col] : {mem}, vector<4x{elem}>")


def _byte_fill(t: Text, kern: Shape, mems: dict[str, str]) -> None:
    """Q8_0 / Q5_0 / Q4_0: block ``b = cb ch + ub`` of the tile's rows, ``q[tile, 128 b + 32 i
    + [0, 32)]``, and ``A`` = ``d[tile, 4 b + i]``."""
    q, d = kern.bindings["q"], kern.bindings["d"]
    t.block("scf.for %ub = %c0 to %c_blocks step %c1")
    t("%bch = arith.muli %ch, %c_blocks : index")
    t("%b = arith.addi %bch, %ub : index")
    rows = []
    for i in range(ROWS_PER_TILE):
        t(f"%qk{i} = {at('%b', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%qb{i} = vector.load %q[%tile, %qk{i}] : {q}, vector<32xi8>")
        t(f"%qw{i} = vector.bitcast %qb{i} : vector<32xi8> to vector<8xi32>")
        rows.append(f"%qw{i}")
    t(f"%q0 = {at('%ub', 8, 0)}")
    _transposed(t, rows, "i32", "wq", mems["wq"], "%q0", "b")
    t(f"%dk = {at('%b', ROWS_PER_TILE, 0)}")
    t(f"%dh = vector.load %d[%tile, %dk] : {d}, vector<4xf16>")
    t("%df = arith.extf %dh : vector<4xf16> to vector<4xf32>")
    t(f"vector.store %df, %sa[%ub, %col] : {mems['sa']}, vector<4xf32>")
    t.end()


def _q4_k_fill(t: Text, kern: Shape, mems: dict[str, str]) -> None:
    """Q4_K (the q8 planes: the file's ``qs`` bytes): pair ``pg = 4 ch + pq`` of the tile's
    rows, ``q[tile, 128 pg + 32 i + [0, 32)]``, its low nibbles block ``2 pq``, its high ones
    ``2 pq + 1``; ``A = d · sc`` from ``sc[tile, 8 pg + 2 i + h]``; ``-dmin · m`` of the
    superblock's 8 groups from ``mn[tile, 32 ch + 8 i + g]``; ``d``, ``dmin [tile, 4 ch + i]``
    (:func:`.gemv_batched._q4_k_q8_chunk`'s indices)."""
    mem = kern.bindings
    t(f"%kd = {at('%ch', ROWS_PER_TILE, 0)}")
    for f in ("d", "dmin"):
        t(f"%{f}h = vector.load %{f}[%tile, %kd] : {mem[f]}, vector<4xf16>")
        t(f"%{f}4 = arith.extf %{f}h : vector<4xf16> to vector<4xf32>")
    mins = []
    for i in range(ROWS_PER_TILE):
        t(f"%km{i} = {at('%ch', 32, 8 * i)}")
        t(f"%mb{i} = vector.load %mn[%tile, %km{i}] : {mem['mn']}, vector<8xi8>")
        t(f"%mi{i} = arith.extui %mb{i} : vector<8xi8> to vector<8xi32>")
        t(f"%mf{i} = arith.uitofp %mi{i} : vector<8xi32> to vector<8xf32>")
        t(f"%me{i} = vector.extract %dmin4[{i}] : f32 from vector<4xf32>")
        t(f"%mv{i} = vector.broadcast %me{i} : f32 to vector<8xf32>")
        t(f"%mp{i} = arith.mulf %mf{i}, %mv{i} : vector<8xf32>")
        t(f"%mn{i} = arith.negf %mp{i} : vector<8xf32>")
        mins.append(f"%mn{i}")
    _transposed(t, mins, "f32", "sn", mems["sn"], "%c0", "m")
    t.block("scf.for %pq = %c0 to %c4 step %c1")
    t(f"%pp = {at('%ch', 4, 0)}")
    t("%pg = arith.addi %pp, %pq : index")
    halves: list[list[str]] = [[], []]
    for i in range(ROWS_PER_TILE):
        t(f"%qk{i} = {at('%pg', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%qb{i} = vector.load %q[%tile, %qk{i}] : {mem['q']}, vector<32xi8>")
        for h, op in ((0, f"arith.andi %qb{i}, %lo4"), (1, f"arith.shrui %qb{i}, %sh4")):
            t(f"%qn{i}_{h} = {op} : vector<32xi8>")
            t(f"%qw{i}_{h} = vector.bitcast %qn{i}_{h} : vector<32xi8> to vector<8xi32>")
            halves[h].append(f"%qw{i}_{h}")
    for h in range(2):
        t(f"%q0_{h} = {at('%pq', 16, 8 * h)}")
        _transposed(t, halves[h], "i32", "wq", mems["wq"], f"%q0_{h}", f"h{h}")
    t(f"%ks = {at('%pg', 2 * ROWS_PER_TILE, 0)}")
    t(f"%scb = vector.load %sc[%tile, %ks] : {mem['sc']}, vector<8xi8>")   # lane 2 i + h
    t("%sci = arith.extui %scb : vector<8xi8> to vector<8xi32>")
    t("%scf = arith.uitofp %sci : vector<8xi32> to vector<8xf32>")
    t("%d8 = vector.shuffle %d4, %d4 [0, 0, 1, 1, 2, 2, 3, 3] : vector<4xf32>, vector<4xf32>")
    t("%a8 = arith.mulf %scf, %d8 : vector<8xf32>")
    for h in range(2):
        t(f"%ah{h} = vector.shuffle %a8, %a8 [{h}, {2 + h}, {4 + h}, {6 + h}] : "
          "vector<8xf32>, vector<8xf32>")
        t(f"%ua{h} = {at('%pq', 2, h)}")
        t(f"vector.store %ah{h}, %sa[%ua{h}, %col] : {mems['sa']}, vector<4xf32>")
    t.end()


def _q6_k_fill(t: Text, kern: Shape, mems: dict[str, str]) -> None:
    """Q6_K (the q8 planes: the file's bytes): half ``hu = 2 ch + hq`` of the tile's rows,
    ``ql[tile, 256 hu + 64 i + [0, 64)]``, ``qh[tile, 128 hu + 32 i + [0, 32)]``, quarter
    ``p``'s signed bytes ``(lo | hi << 4) - 32`` (:func:`.gemv_q8.q6_k_body`'s) block ``4 hq
    + p``; ``A = d · sc`` of its 8 units of 16 (:func:`.gemv_text.q6_k_scales`)."""
    mem = kern.bindings
    t.block("scf.for %hq = %c0 to %c2 step %c1")
    t(f"%h2 = {at('%ch', 2, 0)}")
    t("%hu = arith.addi %h2, %hq : index")
    blocks: list[list[str]] = [[] for _ in range(4)]
    scales = []
    for i in range(ROWS_PER_TILE):
        for r in range(2):
            t(f"%kl{i}_{r} = {at('%hu', 64 * ROWS_PER_TILE, 64 * i + 32 * r)}")
            t(f"%ql{i}_{r} = vector.load %ql[%tile, %kl{i}_{r}] : {mem['ql']}, vector<32xi8>")
        t(f"%kh{i} = {at('%hu', 32 * ROWS_PER_TILE, 32 * i)}")
        t(f"%qh{i} = vector.load %qh[%tile, %kh{i}] : {mem['qh']}, vector<32xi8>")
        for p in range(4):
            tag = f"{i}_{p}"
            w = q6_k_quarter(t, f"%ql{i}_{p % 2}", f"%qh{i}", p, tag, "vector<32xi8>")
            t(f"%ww{tag} = vector.bitcast {w} : vector<32xi8> to vector<8xi32>")
            blocks[p].append(f"%ww{tag}")
        scales.append(q6_k_scales(t, mem, "%hu", i))
    for p in range(4):
        t(f"%qz{p} = {at('%hq', 32, 8 * p)}")
        _transposed(t, blocks[p], "i32", "wq", mems["wq"], f"%qz{p}", f"p{p}")
    t(f"%u0 = {at('%hq', 8, 0)}")
    _transposed(t, scales, "f32", "sa", mems["sa"], "%u0", "a")
    t.end()


def _offsets(t: Text, kern: Shape, mems: dict[str, str], qpu: int) -> None:
    """``so[u]`` = ``-128 Σ w`` over unit ``u`` of each column: the dot of its quads with
    bytes of 1."""
    t.block("scf.for %uo = %c0 to %c_units step %c1")
    t(f"%oq = {at('%uo', qpu, 0)}")
    acc = "%zero16i"
    for e in range(qpu):
        t(f"%ok{e} = affine.apply affine_map<()[s0] -> (s0 + {e})>()[%oq]")
        t(f"%ow{e} = vector.load %wq[%ok{e}, %c0] : {mems['wq']}, {I16V}")
        t(f"%ob{e} = vector.bitcast %ow{e} : {I16V} to {V64B}")
        acc = dot64(t, kern.int_dot, acc, "%ones64", f"%ob{e}", f"o{e}")
    t(f"%oo = arith.muli {acc}, %m128 : {I16V}")
    t(f"vector.store %oo, %so[%uo, %c0] : {mems['so']}, {I16V}")
    t.end()


def _passes(t: Text, kern: Shape, mems: dict[str, str], rows: int, qpu: int) -> None:
    """Every pass of ``rows`` rows of ``x`` over the column block's chunk (module
    docstring)."""
    x, xd = kern.bindings["x"], kern.bindings["xd"]
    mins = "xs" in kern.bindings
    per_block = 32 // (4 * qpu)                  # units a block of x's scales: 1 or 2
    t("%kqc = arith.muli %ch, %c_units : index")         # the chunk's first unit
    accs, col = open_passes(t, kern, rows, COLUMNS)    # one 16-lane vector a row
    types = ", ".join([F16V] * rows)
    t.block(f"%mm:{rows} = scf.for %u = %c0 to %c_units step %c1 "
            f"iter_args({', '.join(accs)}) -> ({types})")
    t(f"%av = vector.load %sa[%u, %c0] : {mems['sa']}, {F16V}")
    t(f"%iv = vector.load %so[%u, %c0] : {mems['so']}, {I16V}")
    t("%ug = arith.addi %kqc, %u : index")                  # the unit's index in the row
    t(f"%xq0 = {at('%ug', qpu, 0)}")
    t(f"%xb = affine.apply affine_map<()[s0] -> (s0 floordiv {per_block})>()[%ug]")
    t(f"%uq = {at('%u', qpu, 0)}")
    if mins:
        t(f"%nv = vector.load %sn[%u, %c0] : {mems['sn']}, {F16V}")
    for e in range(qpu):
        t(f"%wk{e} = affine.apply affine_map<()[s0] -> (s0 + {e})>()[%uq]")
        t(f"%wl{e} = vector.load %wq[%wk{e}, %c0] : {mems['wq']}, {I16V}")
        t(f"%wb{e} = vector.bitcast %wl{e} : {I16V} to {V64B}")
        t(f"%xk{e} = affine.apply affine_map<()[s0] -> (s0 + {e})>()[%xq0]")
    new = []
    for j in range(rows):
        acc = "%iv"
        for e in range(qpu):
            t(f"%xw{j}_{e} = memref.load %x[%pv, %xk{e}, %jc{j}] : {x}")
            t(f"%xv{j}_{e} = vector.broadcast %xw{j}_{e} : i32 to {I16V}")
            t(f"%xc{j}_{e} = vector.bitcast %xv{j}_{e} : {I16V} to {V64B}")
            acc = dot64(t, kern.int_dot, acc, f"%xc{j}_{e}", f"%wb{e}", f"{j}_{e}")
        t(f"%f{j} = arith.sitofp {acc} : {I16V} to {F16V}")
        t(f"%dx{j} = memref.load %xd[%pv, %xb, %jc{j}] : {xd}")
        t(f"%db{j} = vector.broadcast %dx{j} : f32 to {F16V}")
        t(f"%s{j} = arith.mulf %av, %db{j} : {F16V}")
        t(f"%n{j} = vector.fma %f{j}, %s{j}, %ma{j}_0 : {F16V}")
        out = f"%n{j}"
        if mins:
            t(f"%xm{j} = memref.load %xs[%pv, %xb, %jc{j}] : {kern.bindings['xs']}")
            t(f"%xmb{j} = vector.broadcast %xm{j} : f32 to {F16V}")
            t(f"%nm{j} = vector.fma %nv, %xmb{j}, %n{j} : {F16V}")
            out = f"%nm{j}"
        new.append(out)
    t(f"scf.yield {', '.join(new)} : {types}")
    t.end()
    close_passes(t, kern, rows, COLUMNS, col)


__all__ = ["RowQuantizer", "has_dot", "int8_body", "quantize_rows", "unit_weights", "x_bindings"]
