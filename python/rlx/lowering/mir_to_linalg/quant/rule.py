"""The ``dequant_matmul`` rule: a GEMV kernel dispatch (llvm-cpu decode, :mod:`.gemv_kernels`)
or the fused form, the dequant a producer of the contraction (:func:`fused_matmul`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant import gemv_kernels
from rlx.lowering.mir_to_linalg.quant.dequant import gguf_weight, to_f32
from rlx.lowering.mir_to_linalg.quant.gemv_planes import shared_planes
from rlx.lowering.mir_to_linalg.quant.legacy import legacy_weight
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext


def contract(xg: ir.Value, w: ir.Value, x_map: list[int], w_map: list[int], outer: int
             ) -> ir.Value:
    """``y[m, o...] = Σ x · w`` in f32 over loops ``(m, o_1 .. o_outer, reductions...)``;
    ``x_map`` / ``w_map`` name the loop of each operand dim."""
    rank = max(*x_map, *w_map) + 1
    w_shape = emit.static_shape(w)
    out_sizes: emit.Sizes = [emit.dim(xg, 0)]
    for loop in range(1, 1 + outer):
        size = w_shape[w_map.index(loop)]
        assert size is not None
        out_sizes.append(size)
    init = emit.filled(out_sizes, emit.f32(), 0.0)
    maps = [emit.amap(rank, x_map), emit.amap(rank, w_map),
            emit.amap(rank, list(range(1 + outer)))]
    iters = [emit.PARALLEL] * (1 + outer) + [emit.REDUCTION] * (rank - 1 - outer)

    def body(a: ir.Value, b: ir.Value, acc: ir.Value) -> ir.Value:
        return arith.addf(acc, arith.mulf(emit.to_f32(a), to_f32(b)))

    return emit.generic([xg, w], [init], maps, iters, body)[0]


def rows_of(x: ir.Value) -> ir.Value:
    """``x [..., K]`` -> ``[M, K]``."""
    r = emit.rank(x)
    return x if r == 2 else emit.collapse(x, [list(range(r - 1)), [r - 1]])


K_MAJOR_PREFILL = tuple(s for s, q in QUANT_SCHEMES.items() if q.gguf)
"""Schemes whose llvm-cpu prefill dequantizes K-major (:func:`fused_matmul`)."""


def fused_matmul(ctx: LoweringContext, op: Decoded, x2: ir.Value) -> ir.Value:
    """``y [M, N']`` (``N'``: the padded rows) = ``x2 [M, K]`` times the dequantized
    weight, the dequant a producer IREE fuses into the contraction."""
    scheme = op.attrs["scheme"]
    # llvm-cpu prefill: the weight dequantized K-major, rows last, in a generic that IREE
    # fuses into the data-tiling pack of the weight (a [N0 = 16, K0 = 1] tile is then 16
    # adjacent values, the transposition done on the quantized side), and the contraction
    # is IREE's f32 mmt4d. 1B prefill of 128 tokens: F16 2.35 -> 1.9 s (dequantized in the
    # contraction body, the mixed f32 x f16 mmt4d ran at ~95 GFLOP/s against ~200), the
    # dequant-and-pack of a 2048 x 5632 weight 19 -> 6 ms (row-major it was a strided pack);
    # Q8_0 2.17 -> 1.68 s. Every GGUF scheme since its sub-byte shifts are computed, not
    # read from a constant table, in this form (:func:`.dequant.with_shifts`): the
    # dequant-and-pack of a 5632 x 2048 Q4_K weight 27.8 -> 3.0 ms, its M = 128 matmul
    # 57.5 -> 23.6 ms (Q8_0: 22.8 ms), and 2.2-2.6x for Q4_0 ... Q6_K (a table kept the
    # pack a dispatch of its own).
    k_major = (scheme in K_MAJOR_PREFILL and ctx.options.data_tiling
               and emit.static_shape(x2)[0] != 1)
    if QUANT_SCHEMES[scheme].gguf:
        w, order = gguf_weight(op["w"], scheme, ctx.options.target, k_major)
    else:
        w, order = legacy_weight(op, scheme, op.attrs["block_size"], ctx.options.target)
    rank = emit.rank(w)
    if rank == 2:                                # F16 / BF16: [N, K] or [K, N] (k_major)
        return contract(x2, w, [0, 2], [2, 1] if k_major else [1, 2], 1)
    if ctx.options.target == "vulkan" and (emit.static_shape(x2)[0] != 1
                                           or ctx.options.separate_decode_dequant):
        return contract(x2, separate_dequant(w, order), [0, 2], [1, 2], 1)
    shape = emit.static_shape(w)                 # [N', G, *group in loop order] (rows last
    if k_major:                                  # if k_major)
        shape = [shape[-1], *shape[:-1]]
    group = [shape[2 + order.index(i)] for i in range(len(order))]
    xg = emit.expand(x2, [[0], list(range(1, 2 + len(group)))], [emit.dim(x2, 0), shape[1],
                                                                  *group])
    x_map = [0, 2, *(3 + order.index(i) for i in range(len(order)))]
    w_map = [*range(2, rank + 1), 1] if k_major else list(range(1, rank + 1))
    return contract(xg, w, x_map, w_map, 1)


def separate_dequant(w: ir.Value, order: list[int]) -> ir.Value:
    """The dequantized ``w [N', G, *group in loop order]`` as ``[N', K]`` (K order), behind
    a compute barrier: Vulkan's prefill (M != 1) dequantizes in a dispatch of its own and
    multiplies with a plain ``[M, K] x [N', K]`` contraction.

    Fused, IREE 3.13's SPIR-V backend files the contraction over ``(G, *group)`` as
    ``matmul_like`` and, for most row widths, gives it the ``BaseDistribute`` pipeline,
    which tiles only M and N (``[1, 8]``) and stages the fused dequant's whole ``8 x K``
    f32 tile in shared memory: 8 K 4 bytes, 49152 for K = 1536 and 131072 for K = 4096
    against llvmpipe's 32 KiB (every block scheme at K = 1536 and 4096, M dynamic; K = 2048
    got ``SubgroupReduce`` and passed). Shaders of that form also took Mesa tens of
    seconds each to compile (63 s for the 13 GGUF schemes at K = 512 against 0.6 s in
    this form). A plain contraction gets the matmul pipeline, whose tiles fit. The cost is
    the f32 weight written and read once per call: decode (M = 1) keeps the dequant fused
    into the matvec on GPUs, where a step is bound by reading the weights, and takes this
    form only for lavapipe (``LoweringOptions.separate_decode_dequant``): there the fused
    matvec ran 5 s for rows 256 wide (Q4_0, 256 rows; Mesa compiling and running it) and
    did not finish in 100 to 300 s for 512, 576, 2048 or 4096, against 0.8 s in this form
    at 4096."""
    return emit.barrier(_k_rows(w, order))


def kernel_of(ctx: LoweringContext, op: ir.Operation) -> gemv_kernels.Kernel | None:
    """The GEMV kernel this dequant_matmul lowers to, if any (from static shapes only)."""
    x = emit.static_shape(op.operands[0])
    lead = x[:-1]
    m = math.prod(lead) if None not in lead else None     # type: ignore[arg-type]
    n, k = emit.static_shape(op.results[0])[-1], x[-1]
    assert n is not None
    assert k is not None
    return gemv_kernels.kernel_for(ir.StringAttr(op.attributes["scheme"]).value, m, n, k,
                                   ctx.options)


@dataclass(frozen=True)
class Neighbours:
    """What a GEMV kernel computes besides ``W x`` (found by :mod:`.fuse`)."""

    residual: ir.Value | None = None
    """``y = residual + W x``."""
    norm: ir.Operation | None = None
    """The rms_norm that computes ``x``: the kernel normalizes the norm's input."""
    gu: ir.Value | None = None
    """``x = silu(g) * u`` of ``gu = [g, u]``: the kernel computes it."""


def lower(ctx: LoweringContext, op: Decoded, kern: gemv_kernels.Kernel | None,
          near: Neighbours | None = None) -> ir.Value:
    """The dequant_matmul through GEMV kernel ``kern`` (:func:`kernel_of`) with what
    ``near`` names, or (``kern`` None) the fused form."""
    x = op["x"]
    n = emit.static_shape(op.op.results[0])[-1]
    assert n is not None
    if kern is not None:                         # llvm-cpu decode: rlx's kernel, y [M, N]
        y = _through_kernel(ctx, op, kern, n, near or Neighbours())
    else:
        assert near is None
        x2 = rows_of(x)
        y = fused_matmul(ctx, op, x2)
        if emit.static_shape(y)[1] != n:
            y = emit.extract_slice(y, [0, 0], [emit.dim(x2, 0), n])
    lead = emit.sizes(x)[:-1]
    if emit.rank(x) != 2:
        y = emit.expand(y, [list(range(len(lead))), [len(lead)]], [*lead, n])
    return emit.convert_tensor(y, emit.elem(x))


def _through_kernel(ctx: LoweringContext, op: Decoded, kern: gemv_kernels.Kernel, n: int,
                    near: Neighbours) -> ir.Value:
    """``y [M, N]`` f32 from the kernel's dispatch. (``x`` itself is read only where the
    kernel does not compute it: the rewrite drops the ops that did once nothing reads them.)"""
    gamma_beta: list[ir.Value] = []
    if near.norm is not None:                    # the kernel normalizes the norm's input
        kern = dataclasses.replace(kern, norm_eps=ir.FloatAttr(
            near.norm.attributes["eps"]).value)
        x2 = rows_of(near.norm.operands[0])
        gamma_beta = [emit.reshape(v, [kern.k]) for v in near.norm.operands[1:3]]
    elif near.gu is not None:                    # the kernel computes silu(g) * u
        kern = dataclasses.replace(kern, glu=True)
        x2 = rows_of(near.gu)
    else:
        x2 = rows_of(op["x"])
    xk = emit.convert_tensor(x2, emit.f32())     # [M, K]; M = 1: [K]
    rows = kern.batch != 1                       # batched or prefill: x [M, K], y [M, N]
    if not rows:
        xk = emit.collapse(xk, [[0, 1]])
    residual = None
    if near.residual is not None:                # y = r + W x in the kernel
        kern = dataclasses.replace(kern, residual=True)
        residual = rows_of(near.residual) if rows else emit.reshape(near.residual, [n])
    y = gemv_kernels.dispatch(ctx, kern, xk, shared_planes(ctx, kern, op["w"]), residual,
                              gamma_beta)
    return y if rows else emit.expand(y, [[0, 1]], [1, n])


@MIR_TO_LINALG.register("dequant_matmul")
def lower_dequant_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [lower(ctx, op, kernel_of(ctx, op.op))]


@MIR_TO_LINALG.register("dequant")
def lower_dequant(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Rows ``w [..., ROWBYTES]`` as f32 ``[..., K]``: the leading dims made one (dynamic or
    not), the dequant generics of :func:`.dequant.gguf_weight` without the matmul's row
    padding, put in K order."""
    w, scheme = op["w"], op.attrs["scheme"]
    lead = emit.sizes(w)[:-1]
    rank = len(lead) + 1
    rows = (emit.expand(w, [[0, 1]], [1, emit.dim(w, 0)]) if rank == 1 else
            emit.collapse(w, [list(range(rank - 1)), [rank - 1]]) if rank > 2 else w)
    values, order = gguf_weight(rows, scheme, ctx.options.target, pad=False)
    if emit.rank(values) == 2:                   # F16 / BF16: [S, K] 16-bit values
        flat = emit.map_elementwise([values], emit.f32(), to_f32)
    else:                                        # [S, G, *group in loop order]
        flat = _k_rows(values, order)
    if ctx.options.target == "vulkan":
        # fenced from its consumer: a gathered Q8_0 embedding's dequant fused into the
        # first RMSNorm's reduction (dynamic rows) took IREE's SPIR-V codegen minutes (a
        # 1B Q8_0 model over 6 minutes for 'ampere', stopped; 14 s fenced)
        flat = emit.barrier(flat)
    k = emit.static_shape(flat)[1]
    assert k is not None
    if rank == 2:
        return [flat]
    if rank == 1:
        return [emit.collapse(flat, [[0, 1]])]
    return [emit.expand(flat, [list(range(rank - 1)), [rank - 1]], [*lead, k])]


def _k_rows(w: ir.Value, order: list[int]) -> ir.Value:
    """The dequantized ``w [N, G, *group in loop order]`` (``N`` may be dynamic) as ``[N, K]``
    in K order: a copy where the loop order is not K's (GPU targets), then the group dims
    collapsed."""
    rank = emit.rank(w)
    if order != sorted(order):
        out_map = [0, 1, *(2 + order.index(i) for i in range(len(order)))]
        ss = emit.sizes(w)
        init = emit.empty([ss[p] for p in out_map], emit.f32())
        w = emit.generic([w], [init], [emit.identity(rank), emit.amap(rank, out_map)],
                         [emit.PARALLEL] * rank, lambda v, _: v)[0]
    return emit.collapse(w, [[0], list(range(1, rank))])


__all__ = ["K_MAJOR_PREFILL", "Neighbours", "contract", "fused_matmul", "kernel_of", "lower",
           "lower_dequant", "lower_dequant_matmul", "rows_of", "separate_dequant"]
