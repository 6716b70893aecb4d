"""MIR quantized weights: dequant_matmul, and dequant (rows of a GGUF tensor as f32, e.g. an
embedding's gathered rows), lowered by ``mir_to_linalg/quant/``."""

from __future__ import annotations

from rlx.dialects.enums import QUANT_SCHEMES
from rlx.dialects.hir.quant import BLOCK_SIZE, OPERANDS, SCHEME, dequant_matmul_result
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, enum_attr
from rlx.ir.types import DType, TensorInfo

GGUF_SCHEME = enum_attr("scheme", tuple(s for s, q in QUANT_SCHEMES.items() if q.gguf),
                        "GGUF weight format of the rows")


@MIR.op("dequant_matmul", operands=OPERANDS, attrs=[SCHEME, BLOCK_SIZE])
def dequant_matmul(c: Check) -> list[TensorInfo]:
    """Matmul with quantized weights (``Op::DequantMatMul``); as ``rlx_hir.dequant_matmul``.

    Example::

        %y = "rlx_mir.dequant_matmul"(%x, %w) {scheme = "gguf_q8_0"}
            : (tensor<1x64xf32>, tensor<32x68xi8>) -> tensor<1x32xf32>
    """
    return [dequant_matmul_result(c)]


@MIR.op("dequant", operands=["w"], attrs=[GGUF_SCHEME])
def dequant(c: Check) -> list[TensorInfo]:
    """Rows of a GGUF tensor's raw bytes as f32 values: ``w [..., ROWBYTES]`` i8 ->
    ``[..., K]`` f32, ``K = ROWBYTES / block_bytes * block_elems`` (ggml's element order, as
    ``dequant_matmul`` reads ``w``). A model's embedding kept in the file's format is a
    ``gather`` of the token's rows, then this: one row a token is dequantized, and the
    tensor stays the file's bytes (a tied LM head reads the same ones). Leading dims may
    be dynamic.

    Example::

        %e = "rlx_mir.dequant"(%rows) {scheme = "gguf_q8_0"}
            : (tensor<1x?x68xi8>) -> tensor<1x?x64xf32>
    """
    scheme = QUANT_SCHEMES[c.attr("scheme")]
    w = c.min_rank("w", 1)
    c.dtype("w", {DType.I8})
    row = w.shape[-1]
    if row is None:
        c.fail("operand 'w' dim -1", "a static row size (ROWBYTES)", str(w))
    if row % scheme.block_bytes:
        c.fail("operand 'w' dim -1", f"a multiple of {scheme.block_bytes} (the bytes of a "
               f"{scheme.name} block)", f"{row} ({w})")
    k = row // scheme.block_bytes * scheme.block_elems
    return [TensorInfo((*w.shape[:-1], k), DType.F32)]
