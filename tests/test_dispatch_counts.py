"""Dispatches per call of the benchmarked blocks on llvm-cpu (the regression check of the
performance work that cannot flake: counts from --compile-to=flow/stream, not wall time).

The hand-written IREE 3.13 IR of cpu-performance-anchors.md runs 21 dispatches for the
prefill and for the decode block; ``budget`` is what rlx runs now. A change that adds
dispatches fails here; one that removes some should lower the budget.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlx.compiler import dispatch_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.blocks import rlx_block

BUDGET = {  # block: (flow dispatches, flow encodes, dispatches one call runs)
    "rmsnorm": (1, 0, 1),
    "swiglu_ffn": (3, 1, 4),
    "attention": (5, 3, 8),
    "prefill_block": (16, 7, 22),
    "decode_step": (15, 7, 21),
}


@pytest.mark.parametrize("block", sorted(BUDGET))
def test_dispatches_per_block(block: str) -> None:
    got = dispatch_counts(rlx_block(block))
    assert (got.flow, got.encode, got.stream) == BUDGET[block]
