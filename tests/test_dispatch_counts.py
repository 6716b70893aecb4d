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
"""

from __future__ import annotations

import pytest

from bench_blocks import rlx_block
from rlx.compiler import dispatch_counts

BUDGET = {  # block: (flow dispatches, flow encodes, dispatches one call runs)
    "rmsnorm": (1, 0, 1),
    "swiglu_ffn": (3, 1, 4),
    "attention": (1, 0, 1),
    "prefill_block": (12, 6, 17),
    "decode_step": (12, 5, 16),
}


@pytest.mark.parametrize("block", sorted(BUDGET))
def test_dispatches_per_block(block: str) -> None:
    got = dispatch_counts(rlx_block(block))
    assert (got.flow, got.encode, got.stream) == BUDGET[block]
