"""Dispatches per call of the benchmarked blocks on llvm-cpu (the regression check of the
performance work that cannot flake: counts from --compile-to=flow/stream, not wall time).

The hand-written IREE 3.13 IR of cpu-performance-anchors.md runs 21 dispatches for the
prefill and for the decode block; ``BUDGET`` is what rlx runs now: 4 fewer for prefill
and 5 fewer for decode, whose attention is one dispatch of rlx's prefill or decode attention
kernel (the decomposed form takes seven or eight, data tiling's packs included). The
correctness barriers on q/k/v that IREE 3.13 needs with data tiling (see
mir_to_linalg/attention.py) split RoPE(K) from its head transpose, and RoPE(Q) is not fused
with its transpose. A change that adds dispatches fails here; one
that removes some should lower the budget.

Where the target CPU takes the wide prefill tile (an Intel CPU with AVX-512:
``prefill_columns`` 32), the f32 prefill matmuls of parameter weights are rlx's column-block
GEMM (quant/f32_matmul.py), each a dispatch beside the packing of its ``x``, where IREE's
data tiling took an encode and a matmul: ``BUDGET_COLUMNS`` (checked on any host: the
vector width is forced, as the kernels' code runs at any width).
"""

from __future__ import annotations

import pytest

import rlx.compiler
from bench_blocks import rlx_block
from rlx.compiler import dispatch_counts

BUDGET = {  # block: (flow dispatches, flow encodes, dispatches one call runs)
    "rmsnorm": (1, 0, 1),
    "swiglu_ffn": (3, 1, 4),
    "attention": (1, 0, 1),
    "prefill_block": (12, 6, 17),
    "decode_step": (12, 5, 16),
}


BUDGET_COLUMNS = {"swiglu_ffn": (4, 0, 4), "prefill_block": (16, 0, 16)}


@pytest.mark.parametrize("block", sorted(BUDGET))
def test_dispatches_per_block(block: str) -> None:
    got = dispatch_counts(rlx_block(block), prefill_columns=16)
    assert (got.flow, got.encode, got.stream) == BUDGET[block]


@pytest.mark.parametrize("block", sorted(BUDGET_COLUMNS))
def test_dispatches_with_f32_prefill_kernels(block: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setattr(rlx.compiler, "vector_bits_of", lambda cpu, flags: 512)
    got = dispatch_counts(rlx_block(block), prefill_columns=32)
    assert (got.flow, got.encode, got.stream) == BUDGET_COLUMNS[block]
