"""The host-side loop the scans lower to (``scf.for`` with tensor ``iter_args``), built so that
IREE 3.13 runs it right and in place.

Two IREE 3.13 behaviours shape it:

- **A carried initial value is read at offset 0 of the allocation it was packed into.** The
  stream passes pack the results of the execution region before the loop into one transient
  allocation; a loop ``iter_arg`` whose initial value is one of those results is entered as
  the whole allocation, without the value's offset in it, so the first step reads whatever
  sits at offset 0 (bytes of another value). Which values are packed together depends on how
  the function splits into execution regions, so an unrelated change elsewhere (a size check
  moved, found that way: Qwen3.5's prefill gave wrong DeltaNet outputs for the first steps,
  its final state right) exposes it; LSTM / GRU states computed in the module met it first.
  So :func:`for_loop` never carries a value computed before the loop: the loop carries
  uninitialized tensors (``tensor.empty``), step 0 reads each initial value as a value the
  loop captures (captured values keep their offsets; :func:`_select`, a branch on the
  host), and a loop of no steps returns the initial values. A carried ``tensor.empty`` has
  no contents to lose: it goes in as it is. The branch costs a step a second submission:
  Qwen3.5-0.8B Q8_0's 512-token prefill (18 scans of 512 steps) went from 113-119 to 103
  tokens/s (Zen 4; an elementwise select instead: 98-101), the price of right results (the
  old form was right only where the packing put the initial value at offset 0).
- **The affinity of an iter_arg is not inferred** (:func:`on_default_device`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import arith, scf

from rlx.lowering import emit

LoopBody = Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]]

DEFAULT_DEVICE = "__device_0"
"""The symbol IREE gives the device of a single-device target (``--iree-hal-target-device``);
its ``stream.affinity.default``."""


def on_default_device(v: ir.Value) -> ir.Value:
    """``flow.tensor.transfer v to #hal.device.affinity<@__device_0>``: states where ``v``
    lives. IREE 3.13's stream conversion cannot infer the affinity of an ``scf.for``
    iter_arg, puts a transfer of unknown origin on it, and that transfer's copy-on-write
    clones the whole carried tensor every trip (a ``[1024, 512]`` output filled one row a
    step: 220 us a step, growing with its size; pinned: 4 us a step). The transfer to the
    device the value already lives on folds away."""
    dyn = emit.dynamic_values(emit.sizes(v))
    target = ir.Attribute.parse(f"#hal.device.affinity<@{DEFAULT_DEVICE}>")
    op = ir.Operation.create("flow.tensor.transfer", results=[v.type], operands=[v, *dyn],
                             attributes={"target": target})
    return op.result


def _blank(v: ir.Value) -> bool:
    """Whether ``v`` is a ``tensor.empty`` (no contents: carried as it is)."""
    owner = v.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == "tensor.empty"


def _select(cond: ir.Value, a: ir.Value, b: ir.Value, branch: bool) -> ir.Value:
    """``cond ? a : b`` (``cond`` a scalar ``i1``): elementwise, or with ``branch`` an
    ``scf.if`` on the host, so that only the step it picks ``a`` in reads ``a`` (on Vulkan
    that branch in a loop lost the device: lavapipe, an LSTM's states, IREE 3.13). The
    then-branch yields a copy of ``a`` (:func:`emit.copy`): two plain yields fold into an
    ``arith.select`` that IREE fuses into every consumer, each then reading ``a`` at every
    step (Qwen3.5-0.8B's prefill of 512 tokens: ~15% slower; the branch: ~11%). The
    result's sizes are tied to ``b``'s (IREE does not resolve a ``tensor.dim`` of an
    ``scf.if``)."""
    if not branch:
        return emit.map_elementwise([a, b], emit.elem(a), lambda x, y: arith.select(cond, x, y))
    op = scf.IfOp(cond, [a.type], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp([emit.copy(a)])
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp([b])
    dyn = emit.dynamic_values(emit.sizes(b))
    if not dyn:
        return op.results[0]
    return ir.Operation.create("flow.tensor.tie_shape", results=[a.type],
                               operands=[op.results[0], *dyn]).result


def for_loop(upper: emit.Size, inits: Sequence[ir.Value], body: LoopBody,
             branch: bool = False) -> list[ir.Value]:
    """``scf.for %i = 0 to upper step 1``, carrying values that start as ``inits``;
    ``body(i, carried)`` returns the next carried values (cast back to the carried types).
    Loop-invariant work belongs before the call: the body is what runs once per step. The
    carried tensors are pinned to the device (:func:`on_default_device`) so IREE updates
    them in place; an initial value with contents is read by step 0 as a captured value,
    not carried in (the module docstring), chosen by a branch on the host where ``branch``
    (:func:`_select`: llvm-cpu)."""
    inits = list(inits)
    kept = [_blank(v) for v in inits]
    entry = [v if keep else emit.empty(emit.sizes(v), emit.elem(v))
             for v, keep in zip(inits, kept, strict=True)]
    loop = scf.ForOp(emit.index(0), emit.as_value(upper), emit.index(1), entry)
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        carried = [on_default_device(a) for a in loop.inner_iter_args]
        if not all(kept):
            first = arith.cmpi(arith.CmpIPredicate.eq, i, emit.index(0))
            carried = [c if keep else _select(first, v, c, branch)
                       for v, c, keep in zip(inits, carried, kept, strict=True)]
        nxt = body(i, carried)
        scf.YieldOp([emit.cast_tensor(v, e.type) for v, e in zip(nxt, entry, strict=True)])
    out = list(loop.results)
    if all(kept) or (isinstance(upper, int) and upper > 0):
        return out
    none = arith.cmpi(arith.CmpIPredicate.eq, emit.as_value(upper), emit.index(0))
    return [r if keep else _select(none, v, r, branch)
            for v, r, keep in zip(inits, out, kept, strict=True)]


__all__ = ["DEFAULT_DEVICE", "LoopBody", "for_loop", "on_default_device"]
