"""Dispatches per call of the benchmarked blocks on llvm-cpu (the regression check of the
performance work that cannot flake: counts from --compile-to=flow/stream, not wall time).

The hand-written IREE 3.13 IR of cpu-performance-anchors.md runs 21 dispatches for the
prefill and for the decode block; ``BUDGET`` is what rlx runs now: 2 more for prefill,
5 fewer for decode (its attention is one dispatch of rlx's decode attention kernel, where
the decomposed form takes seven). The correctness barriers on q/k/v that IREE 3.13 needs
with data tiling (see mir_to_linalg/attention.py) split RoPE(K) from its head transpose,
and RoPE(Q) is not fused with its transpose. A change that adds dispatches fails here; one
that removes some should lower the budget.
"""

from __future__ import annotations

import pytest

from bench_blocks import rlx_block
from rlx.compiler import dispatch_counts

BUDGET = {  # block: (flow dispatches, flow encodes, dispatches one call runs)
    "rmsnorm": (1, 0, 1),
    "swiglu_ffn": (3, 1, 4),
    "attention": (5, 3, 8),
    "prefill_block": (16, 8, 23),
    "decode_step": (12, 5, 16),
}


@pytest.mark.parametrize("block", sorted(BUDGET))
def test_dispatches_per_block(block: str) -> None:
    got = dispatch_counts(rlx_block(block))
    assert (got.flow, got.encode, got.stream) == BUDGET[block]
