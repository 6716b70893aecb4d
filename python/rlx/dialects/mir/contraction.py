"""MIR contractions: matmul (quantized weights: :mod:`.quant`)."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import FLOAT_TYPES
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check
from rlx.ir.types import Dim, DType, TensorInfo, dims_compatible, merge_dim


@MIR.op("matmul", operands=["lhs", "rhs"])
def matmul(c: Check) -> list[TensorInfo]:
    """Batched matrix product ``[..., M, K] x [..., K, N] -> [..., M, N]`` (``Op::MatMul``).

    Both operands have rank >= 2; batch dims broadcast (numpy rules; a rank-2 ``rhs`` is
    shared by every batch). Float operands (f16 / bf16 accumulate in f32), or i32: the
    integer product, its sums wrapping in i32 (ONNX ``MatMulInteger``, whose 8-bit operands
    less their zero points are widened to i32 first).

    Example::

        %y = "rlx_mir.matmul"(%x, %w)
            : (tensor<?x768xf32>, tensor<768x64xf32>) -> tensor<?x64xf32>
    """
    t = checks.float_operands(c, "lhs", "rhs", types=FLOAT_TYPES | {DType.I32})
    lhs, rhs = c.min_rank("lhs", 2), c.min_rank("rhs", 2)
    c.dim("rhs", -2, c.ref("lhs", -1), "K = 'lhs' dim -1")
    lb, rb = lhs.shape[:-2], rhs.shape[:-2]
    rank = max(len(lb), len(rb))
    batch: list[Dim] = []
    for i in range(rank):
        ia, ib = i - rank + len(lb), i - rank + len(rb)
        a = lb[ia] if ia >= 0 else 1
        b = rb[ib] if ib >= 0 else 1
        if a == 1:
            batch.append(b)
        elif b == 1:
            batch.append(a)
        elif dims_compatible(a, b):
            batch.append(merge_dim(a, b))
            c.dim("rhs", ib, c.ref("lhs", ia), "a batch dim (numpy broadcasting; a dynamic "
                  "dim is not stretched)")
        else:
            c.fail("operand 'rhs' batch dims", f"dims broadcastable with 'lhs' {lb}", str(rhs))
    return [t.with_shape((*batch, lhs.shape[-2], rhs.shape[-1]))]

