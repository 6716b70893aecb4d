"""mir-to-linalg for leaves: param (a load of its parameter global), constant."""

from __future__ import annotations

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG, load_param
from rlx.lowering.registry import LoweringContext


@MIR_TO_LINALG.register("param")
def lower_param(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    return [load_param(ctx, op.attrs["name"])]


@MIR_TO_LINALG.register("constant")
def lower_constant(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``arith.constant``; an i1 constant is stored as i8 and compared with 0: IREE 3.13's
    llvm-cpu data tiling cannot pack an i1 constant that fuses into a matmul's consumer
    ("'linalg.pack' op expected padding_value has 'i8' but got: 'i1'")."""
    value = op.attrs["value"]
    t = ir.RankedTensorType(value.type)
    if t.element_type != emit.i1():
        return [arith.ConstantOp(value.type, value).result]
    i8 = ir.IntegerType.get_signless(8)
    as_i8 = ir.RankedTensorType.get(t.shape, i8)
    dense = ir.DenseElementsAttr(value)
    if dense.is_splat:
        bits = np.full(t.shape, ir.IntegerAttr(dense.get_splat_value()).value != 0, np.int8)
    else:
        bits = np.array(dense).astype(np.int8)
    stored = arith.ConstantOp(as_i8, ir.DenseElementsAttr.get(bits, type=as_i8)).result
    zero = emit.scalar(0, i8)
    return [emit.map_elementwise([stored], emit.i1(),
                                 lambda v: arith.cmpi(arith.CmpIPredicate.ne, v, zero),
                                 emit.sizes(stored))]
