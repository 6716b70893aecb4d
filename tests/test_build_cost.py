"""Building and lowering a model costs work linear in its op count (issue 25, point 6): the
LLaMA builder, ``load`` and the lowering to linalg (no IREE), for 1 and 4 layers. Counted,
not timed: Python lines executed (``sys.settrace``) and ops the MLIR bindings hand out by
listing a block (``Block.operations``, where a loop in C++ hides from the line count: the
builder once listed its whole block to find the terminator on every op it built, 119 s for
the 135M model). Each count per HIR op may grow at most ``SLACK`` from 1 to 4 layers; a
cost quadratic in the ops grows it about 4 times over (``test_counter_sees_a_quadratic_
builder`` checks that the count sees one)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pytest
from iree.compiler import ir

from rlx.compiler import TargetConfig, load, lower
from rlx.dialects.hir_module import HirModuleCore
from rlx.ir.text import walk_ops
from rlx.models import llama

SLACK = 1.3
"""How much the work per op may grow from 1 to 4 layers (fixed costs only shrink it)."""


@dataclass
class Work:
    ops: int = 0
    lines: int = 0
    listed: int = 0

    def per_op(self) -> tuple[float, float]:
        return self.lines / self.ops, self.listed / self.ops


def config(layers: int) -> llama.LlamaConfig:
    return llama.LlamaConfig(vocab_size=64, hidden_size=32, num_layers=layers, num_heads=2,
                             num_kv_heads=1, head_dim=16, intermediate_size=48,
                             weight_schemes={f"layers.{i}.up": "gguf_q8_0"
                                             for i in range(layers)})


def build_and_lower(layers: int) -> ir.Module:
    lowered = load(llama.build(config(layers)))
    lower(lowered, TargetConfig(target="llvm-cpu"))
    return lowered.module


def counted(fn: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> Work:
    """Run ``fn`` counting the lines it executes and the ops listed from blocks."""
    work = Work()
    listing = ir.Block.__dict__["operations"]

    class Counting:
        """A block's operation list that counts the ops iterated (indexing is O(1))."""

        def __init__(self, block: ir.Block) -> None:
            self._ops = listing.__get__(block)

        def __iter__(self) -> Iterator[ir.Operation]:
            for op in self._ops:
                work.listed += 1
                yield op

        def __len__(self) -> int:
            return len(self._ops)

        def __getitem__(self, i: int) -> ir.Operation:
            return self._ops[i]

        def __getattr__(self, name: str) -> Any:
            return getattr(self._ops, name)

    def operations(block: ir.Block) -> Counting:
        return Counting(block)

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., Any]:
        if event == "line":
            work.lines += 1
        return trace

    with monkeypatch.context() as m:
        m.setattr(ir.Block, "operations", property(operations))
        sys.settrace(trace)
        try:
            fn()
        finally:
            sys.settrace(None)
    return work


def hir_ops(layers: int) -> int:
    h = llama.build(config(layers))
    return sum(1 for op in walk_ops(h.mlir.operation) if op.name.startswith("rlx_"))


def assert_linear(run: Callable[[int], object], monkeypatch: pytest.MonkeyPatch) -> None:
    run(1)                                            # imports, caches: not the model's cost
    small, large = (counted(lambda n=n: run(n), monkeypatch) for n in (1, 4))
    small.ops, large.ops = hir_ops(1), hir_ops(4)
    assert large.ops > 3 * small.ops / 1.5, (small, large)
    for what, a, b in zip(("lines", "listed ops"), small.per_op(), large.per_op(), strict=True):
        assert b <= SLACK * a, f"{what} per HIR op: {a:.1f} at 1 layer, {b:.1f} at 4 ({small}, " \
                               f"{large})"


def test_build_and_lower_are_linear_in_the_op_count(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_linear(build_and_lower, monkeypatch)


def test_counter_sees_a_quadratic_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder's old terminator lookup (every op of the block listed per op built)
    fails the check: the count can see what it guards against."""

    def listing_terminator(self: HirModuleCore) -> ir.Operation:
        return list(self._block.operations)[-1].operation

    monkeypatch.setattr(HirModuleCore, "_terminator", property(listing_terminator))
    with pytest.raises(AssertionError, match="listed ops per HIR op"):
        assert_linear(lambda n: llama.build(config(n)), monkeypatch)
