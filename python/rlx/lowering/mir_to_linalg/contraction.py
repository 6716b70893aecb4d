"""mir-to-linalg for contractions: matmul.

Plain ``linalg.matmul`` / ``linalg.batch_matmul`` (the forms IREE data-tiles), leading
dims collapsed into rows, no transposes inside the contraction. 16-bit inputs accumulate in
f32 and are rounded once at the end. On llvm-cpu with the wide prefill tile (Intel CPUs with
AVX-512), an f32 prefill of a parameter weight is rlx's column-block GEMM instead
(:mod:`.quant.f32_matmul`).
"""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant.f32_matmul import lower_f32_prefill
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


def accumulator(t: ir.Type) -> ir.Type:
    return emit.f32() if isinstance(t, ir.F16Type | ir.BF16Type) else t


def _broadcast_to(v: ir.Value, out_sizes: emit.Sizes) -> ir.Value:
    if [emit.static_shape(v)[i] for i in range(emit.rank(v))] == [
            s if isinstance(s, int) else None for s in out_sizes]:
        return v
    return emit.map_elementwise([v], emit.elem(v), lambda x: x, list(out_sizes))


def matmul_acc(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """``lhs [..., M, K] @ rhs [..., K, N]`` in the accumulator type (numpy batching)."""
    acc = accumulator(emit.elem(lhs))
    lr, rr = emit.rank(lhs), emit.rank(rhs)
    if rr == 2:
        if lr == 2:
            return emit.matmul(lhs, rhs, acc)
        lead = emit.sizes(lhs)[:-1]
        rows = emit.collapse(lhs, [list(range(lr - 1)), [lr - 1]])
        out = emit.matmul(rows, rhs, acc)
        return emit.expand(out, [list(range(lr - 1)), [lr - 1]], [*lead, emit.dim(rhs, 1)])
    batch = _broadcast_batch(lhs, rhs)
    lhs = _broadcast_to(lhs, [*batch, emit.dim(lhs, -2), emit.dim(lhs, -1)])
    rhs = _broadcast_to(rhs, [*batch, emit.dim(rhs, -2), emit.dim(rhs, -1)])
    nb = len(batch)
    groups = [list(range(nb)), [nb], [nb + 1]]
    a3 = emit.collapse(lhs, groups) if nb != 1 else lhs
    b3 = emit.collapse(rhs, groups) if nb != 1 else rhs
    out = emit.batch_matmul(a3, b3, acc_type=acc)
    if nb == 1:
        return out
    return emit.expand(out, groups, [*batch, emit.dim(lhs, -2), emit.dim(rhs, -1)])


def _broadcast_batch(lhs: ir.Value, rhs: ir.Value) -> emit.Sizes:
    lb = emit.sizes(lhs)[:-2]
    rb = emit.sizes(rhs)[:-2]
    n = max(len(lb), len(rb))
    lb = [1] * (n - len(lb)) + lb
    rb = [1] * (n - len(rb)) + rb
    out: emit.Sizes = []
    for a, b in zip(lb, rb, strict=True):
        if a == 1:
            out.append(b)
        elif b == 1 or not isinstance(b, int):
            out.append(a)
        else:
            out.append(b)
    return out


def untiled_contraction(a: ir.Value, b: ir.Value, acc: ir.Type) -> ir.Value:
    """``[B, H, M, K] x [H, B, K, N]`` to ``[B, H, M, N]`` in ``acc``: two batch dims in
    another order in each operand, which IREE 3.13 can neither collapse into one nor
    data-tile (its data tiling takes one batch dim at most)."""
    init = emit.filled([emit.dim(a, 0), emit.dim(a, 1), emit.dim(a, 2), emit.dim(b, 3)],
                       acc, 0.0)
    maps = [emit.amap(5, [0, 1, 2, 4]), emit.amap(5, [1, 0, 4, 3]),
            emit.amap(5, [0, 1, 2, 3])]

    def body(x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        return emit.add(z, emit.mul(emit.convert(x, acc), emit.convert(y, acc)))

    return emit.generic([a, b], [init], maps, [emit.PARALLEL] * 4 + [emit.REDUCTION],
                        body)[0]


def untiled_config(vector_bits: int) -> str:
    """The configuration IREE 3.13 itself picks for an f32 ``[?, ?, ?]`` batch matmul that it
    does not data-tile (``--compile-to=executable-configurations``, 2026-12-06): vectors of
    32 N by 16 K on 512-bit CPUs (sapphirerapids, znver4), 8 by 8 on 256-bit ones (haswell,
    znver3)."""
    n, k = (32, 16) if vector_bits >= 512 else (8, 8)
    return ("#iree_codegen.compilation_info<lowering_config = #iree_cpu.lowering_config<"
            "distribution = [64, 64, 64, 0], cache_parallel = [64, 64, 64, 0], "
            f"vector_common_parallel = [1, 8, {n}, 0], vector_reduction = [0, 0, 0, {k}]>, "
            "translation_info = #iree_codegen.translation_info<"
            "pipeline = #iree_cpu.pipeline<DoubleTilingExpert>, {enable_loop_peeling}>>")


def _untiled_f32(lhs: ir.Value, rhs: ir.Value) -> bool:
    """Both operands f32 ``[B, M, K]`` / ``[B, K, N]``, some size dynamic."""
    return (emit.rank(lhs) == 3 and emit.rank(rhs) == 3
            and isinstance(emit.elem(lhs), ir.F32Type) and isinstance(emit.elem(rhs), ir.F32Type)
            and None in (*emit.static_shape(lhs), *emit.static_shape(rhs)))


def untiled_batch_matmul(ctx: LoweringContext, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """``lhs [B, M, K] @ rhs [B, K, N]`` (some size dynamic) as a ``linalg.batch_matmul``
    with a preset ``compilation_info``, which IREE's data tiling leaves alone (its
    AnnotateDataTilingHints skips ops with one). IREE 3.13's DispatchCreation data tiling
    computed wrong products over a dynamic batch in some dispatch contexts (YOSO's dynamo
    export, ``[4 b, s, 8] @ [4 b, 8, s]`` with its acos kernel fused after it: relative
    errors of 2e-2 at 9 tokens, NaN with prefill kernels off; the same matmul alone is
    right), and over a static batch failed to compile the same export ("'affine.
    delinearize_index' op no basis element may be statically non-positive"); such a
    matmul runs faster untiled anyway (16 x 256x64x256, batch dynamic or static: 1.9 ms
    against 2.4-3.1 ms data-tiled, Xeon, 2026-12-06)."""
    out = matmul_acc(lhs, rhs)                 # rank 3: one linalg.batch_matmul
    out.owner.attributes["compilation_info"] = ir.Attribute.parse(
        untiled_config(ctx.options.vector_bits))
    return out


def untiled_batches(lhs: ir.Value, rhs: ir.Value) -> ir.Value | None:
    """``lhs [..., H, M, K] @ rhs [..., H, K, N]`` as a contraction IREE 3.13 does not
    data-tile, where at least two batch dims and a dynamic one (a loose attention's
    ``[B, H, S, S]`` of an export with a dynamic batch); None otherwise. Collapsed into one
    batch ``B · H`` and data-tiled, IREE rejected the head transpose fused into the encoding
    ("no basis element may be statically non-positive"), and the attention's same pair of
    batch matmuls computed wrong outputs past 64 keys (the decomposed attention's, which
    comes here too): here the batch dims stay two, ``rhs`` behind a barrier
    as ``[H, B, K, N]``, whose other order IREE can neither collapse nor data-tile."""
    batch = _broadcast_batch(lhs, rhs)
    if len(batch) < 2 or all(isinstance(d, int) for d in batch):
        return None
    lhs = _broadcast_to(lhs, [*batch, emit.dim(lhs, -2), emit.dim(lhs, -1)])
    rhs = _broadcast_to(rhs, [*batch, emit.dim(rhs, -2), emit.dim(rhs, -1)])
    nb = len(batch)
    groups = [list(range(nb - 1)), [nb - 1], [nb], [nb + 1]]
    a4, b4 = (emit.collapse(x, groups) if nb != 2 else x for x in (lhs, rhs))
    out = untiled_contraction(a4, emit.barrier(emit.transpose(b4, [1, 0, 2, 3])),
                              accumulator(emit.elem(lhs)))
    if nb == 2:
        return out
    return emit.expand(out, groups, [*batch, emit.dim(lhs, -2), emit.dim(rhs, -1)])


@MIR_TO_LINALG.register("matmul")
def lower_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    lhs = op["lhs"]
    kernel = lower_f32_prefill(ctx, lhs, op["rhs"])   # llvm-cpu: a prefill of an f32 weight
    if kernel is not None:
        return [kernel]
    if ctx.options.data_tiling and emit.rank(lhs) >= 4 and emit.rank(op["rhs"]) >= 4:
        out = untiled_batches(lhs, op["rhs"])
        if out is not None:
            return [emit.convert_tensor(out, emit.elem(lhs))]
    if ctx.options.data_tiling and _untiled_f32(lhs, op["rhs"]):
        return [emit.convert_tensor(untiled_batch_matmul(ctx, lhs, op["rhs"]), emit.elem(lhs))]
    return [emit.convert_tensor(matmul_acc(fenced_rows(ctx, lhs, op["rhs"]), op["rhs"]),
                                emit.elem(lhs))]


_MOVES = frozenset({"rlx_mir.transpose", "rlx_mir.slice"})


def fenced_rows(ctx: LoweringContext, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """``lhs`` behind a compute barrier where IREE 3.13 would fuse its data movement into a
    data-tiled matmul's encoding and fail: the rows of a matmul by a 2-D weight, made by a
    strided slice (through reshapes) with a dynamic leading size, or by a transpose whose
    leading dims hold a dynamic size beside a static one (a LeViT export over a dynamic
    batch: ``[B, 16, 4, 4] -> [B, 16, 16]``, transposed,
    then its rows ``16 B``: "no basis element may be statically non-positive"; its query
    subsample, ``[B, 2, 2, 24]`` strided to ``[B, 1, 1, 24]``: "exceeded stack allocation
    limit of 32768 bytes")."""
    if not ctx.options.data_tiling or emit.rank(rhs) != 2 or emit.rank(lhs) < 3:
        return lhs
    lead = emit.static_shape(lhs)[:-1]
    if None not in lead:
        return lhs
    v = lhs
    while not isinstance(v.owner, ir.Block) and v.owner.name == "rlx_mir.reshape":
        v = v.owner.operands[0]
    if isinstance(v.owner, ir.Block) or v.owner.name not in _MOVES:
        return lhs
    if v.owner.name == "rlx_mir.transpose" and all(d is None or d == 1 for d in lead):
        return lhs          # rows of dynamic sizes only: IREE compiles those (every export's
                            # attention output, [B, S, H, hd] -> [B, S, H hd])
    return emit.barrier(lhs)
