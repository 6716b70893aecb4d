"""MIR quantized-weight contraction: dequant_matmul (lowered by ``mir_to_linalg/quant/``)."""

from __future__ import annotations

from rlx.dialects.hir.quant import BLOCK_SIZE, OPERANDS, SCHEME, dequant_matmul_result
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check
from rlx.ir.types import TensorInfo


@MIR.op("dequant_matmul", operands=OPERANDS, attrs=[SCHEME, BLOCK_SIZE])
def dequant_matmul(c: Check) -> list[TensorInfo]:
    """Matmul with quantized weights (``Op::DequantMatMul``); as ``rlx_hir.dequant_matmul``.

    Example::

        %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"}
            : (tensor<1x64xf32>, tensor<32x68xi8>) -> tensor<1x32xf32>
    """
    return [dequant_matmul_result(c)]
