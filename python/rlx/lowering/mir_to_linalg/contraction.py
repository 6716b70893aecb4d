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


@MIR_TO_LINALG.register("matmul")
def lower_matmul(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    lhs = op["lhs"]
    kernel = lower_f32_prefill(ctx, lhs, op["rhs"])   # llvm-cpu: a prefill of an f32 weight
    if kernel is not None:
        return [kernel]
    return [emit.convert_tensor(matmul_acc(lhs, op["rhs"]), emit.elem(lhs))]
