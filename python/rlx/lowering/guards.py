"""Run-time checks of the size relations an op's verifier left undecided.

An op's verifier decides every relation between sizes that are static; where a side is
dynamic it records the relation instead (:class:`rlx.dialects.verifier.SizeRelation`:
K's length equals V's, cos has at least S rows, a packed weight holds N elements...).
Lowerings rely on those relations: a loop bound read from one operand indexes another,
and a mismatch at run time would read or write past a buffer. So the mir-to-linalg
wrapper emits, before each op's lowering, one check per recorded relation:

    %broken = arith.cmpi ne, %a, %b : index
    scf.if %broken {
      %c3 = arith.constant 3 : i32                          // INVALID_ARGUMENT
      util.status.check_ok %c3, "<position>: error: 'rlx_mir.attention' \"attn\": ..."
    }

``util.status.check_ok`` (not ``cf.assert``, which IREE strips at -O1 and above) stays in
every build: the call fails with that message before any dispatch of it is queued (the
sizes are known to the host: they are the input buffers' shapes), so a raw IREE caller
gets IREE's own failure and ``rlx.runtime`` raises a :class:`~rlx.ir.diagnostics.RunError`
carrying the message.

Where a check sits matters: a host-side op between two dispatches splits IREE's stream
execution region there (one region per layer: the 135M decode step went from 2 command
buffers to 32; a prefill's per-layer regions each kept a transient slab until the call
ended, 220 MB for the 135M model at 512 tokens). So once the module is lowered,
:func:`hoist_checks` resolves each checked size to the function's inputs (MLIR's
``resolve-ranked-shaped-type-result-dims``: a concatenated KV cache's length is the cache
input's plus one; and a hand-written kernel's result size to the dispatch's operand for
it, so a layer's input resolves back to the prompt's length) and moves every check
whose sizes then come from the inputs alone to the top of the function, before any work
is queued; a check on a size only known later (a kernel's dynamic result) stays at its op.

The check sits in an ``scf.if`` on the broken relation rather than
taking ``select(ok, 0, 3)`` as its status: where IREE proves the sizes equal (the same
value, or a result's dim folded back to its input's), it folds the ``scf.if`` away, whereas
a status folded to the constant 0 fails IREE 3.13's verifier (``'vm.cond_fail' op status
is 0; expected to not be OK``). The checks are host-side integer compares on a call's shapes, a few
VM instructions each (the decode step's cost is measured in benchmarks/README.md).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, scf, util
from iree.compiler.passmanager import PassManager

from rlx.dialects.schema import Decoded
from rlx.dialects.verifier import DimRef, SizeRelation
from rlx.ir.diagnostics import SIZE_CHECK_FOUND
from rlx.ir.locations import source_of
from rlx.lowering import emit

INVALID_ARGUMENT = 3
"""IREE's status code for a failed check (``iree_status_code_t``)."""


def message(op: Decoded, rel: SizeRelation) -> str:
    """``POS: error: 'rlx_mir.attention' "attn": operand 'v' dim 1: expected the size of
    operand 'k' dim 1 (the key length of 'k'), found another size at run time``."""
    return _text(op, rel.what, rel.expected)


def _text(op: Decoded, what: str, expected: str) -> str:
    label, source = op.label, source_of(op.op.location)
    named = f' "{label}"' if label is not None else ""
    where = f"{source}: " if source else ""
    return f"{where}error: '{op.op.name}'{named}: {what}: expected {expected}, {SIZE_CHECK_FOUND}"


def _operand(op: Decoded, name: str) -> ir.Value:
    return op.variadic[int(name[1:])] if name.startswith("#") else op[name]


def _size(op: Decoded, name: str, axis: int | None) -> emit.Size:
    value = _operand(op, name)
    if axis is None:
        return emit.product(emit.sizes(value))
    return emit.dim(value, axis)


def _broken(op: Decoded, rel: SizeRelation) -> ir.Value | None:
    """An ``i1`` that is true when ``rel`` is broken, or None when it holds statically."""
    a = _size(op, rel.operand, rel.axis)
    if rel.kind == "multiple":
        assert isinstance(rel.other, int)
        if isinstance(a, int):
            return None
        rem = arith.remui(a, emit.index(rel.other))
        return arith.cmpi(arith.CmpIPredicate.ne, rem, emit.index(0))
    other = rel.other
    if isinstance(other, DimRef) and rel.axis == other.axis and (
            _operand(op, rel.operand) == _operand(op, other.operand)):
        return None     # one value's own dim
    b = _size(op, other.operand, other.axis) if isinstance(other, DimRef) else other
    if isinstance(a, int) and isinstance(b, int):
        return None
    pred = arith.CmpIPredicate.ne if rel.kind == "eq" else arith.CmpIPredicate.ult
    return arith.cmpi(pred, emit.as_value(a), emit.as_value(b))


def check_sizes(op: Decoded) -> int:
    """Emit a run-time check for each relation ``op``'s verifier recorded (at the current
    insertion point and location); returns how many were emitted."""
    emitted = 0
    for rel in op.relations:
        broken = _broken(op, rel)
        if broken is None:
            continue
        fail = scf.IfOp(broken)
        with ir.InsertionPoint(fail.then_block):
            status = arith.constant(ir.IntegerType.get_signless(32), INVALID_ARGUMENT)
            util.status_check_ok(status, message=message(op, rel))
            scf.YieldOp([])
        emitted += 1
    return emitted


def check(op: Decoded, broken: ir.Value, what: str, expected: str) -> None:
    """A run-time check of a condition no verifier relation expresses (an ``i1`` true when
    broken), with the message shape of the size checks (``rlx.runtime`` reports it)."""
    text = _text(op, what, expected)
    fail = scf.IfOp(broken)
    with ir.InsertionPoint(fail.then_block):
        status = arith.constant(ir.IntegerType.get_signless(32), INVALID_ARGUMENT)
        util.status_check_ok(status, message=text)
        scf.YieldOp([])


HOISTABLE = ("arith.", "affine.apply", "index.")
"""Pure scalar ops a hoisted check's condition may be computed with (besides ``tensor.dim``
of a function input)."""


def _slice(check: ir.Operation, args: set[ir.Value]) -> list[ir.Operation] | None:
    """The ops computing the values ``check`` uses (its condition; the status constant,
    which folding may have moved out of it) from the function's inputs' sizes, in no order;
    None when it depends on anything else."""
    ops: dict[ir.Operation, None] = {}
    inner = [o.operation for o in check.regions[0].blocks[0].operations]
    stack = [check.operands[0], *(v for o in inner for v in o.operands
                                  if isinstance(v.owner, ir.Block)
                                  or v.owner.operation not in inner)]
    while stack:
        v = stack.pop()
        if v in args:
            return None      # a function input itself, not one of its sizes
        owner = v.owner
        if isinstance(owner, ir.Block):
            return None      # a region's argument
        op = owner.operation
        if op in ops:
            continue
        if op.name == "tensor.dim":
            if op.operands[0] not in args:
                return None
            stack.append(op.operands[1])
        elif op.name.startswith(HOISTABLE) and not op.regions:
            stack.extend(op.operands)
        else:
            return None
        ops[op] = None
    return list(ops)


def _checks(block: ir.Block) -> list[ir.Operation]:
    """The ``scf.if`` ops of :func:`check_sizes` directly in ``block``."""
    out = []
    for op in block.operations:
        op = op.operation
        if op.name != "scf.if" or len(op.regions[0].blocks) != 1:
            continue
        body = [o.operation.name for o in op.regions[0].blocks[0].operations]
        if body[:1] == ["util.status.check_ok"]:
            out.append(op)
    return out


def _dispatch_dim(dim: ir.Operation) -> ir.Value | None:
    """The size a ``tensor.dim`` of a ``flow.dispatch`` result (a hand-written kernel's)
    reads: the dispatch's own operand for that dynamic dim (its ``result_dims``), which
    MLIR's resolve pass does not look through; None for any other ``tensor.dim``."""
    src, axis = dim.operands[0], dim.operands[1].owner
    disp = src.owner
    if isinstance(disp, ir.Block) or disp.operation.name != "flow.dispatch" or isinstance(
            axis, ir.Block) or axis.operation.name != "arith.constant":
        return None
    disp, axis = disp.operation, ir.IntegerAttr(axis.operation.attributes["value"]).value
    results = list(disp.results)
    index = next(i for i, r in enumerate(results) if r == src)
    kind = ir.RankedTensorType(src.type)
    if not kind.is_dynamic_dim(axis):
        return None
    dynamic = sum(1 for r in results[:index]
                  for a in range(ir.RankedTensorType(r.type).rank)
                  if ir.RankedTensorType(r.type).is_dynamic_dim(a))
    dynamic += sum(1 for a in range(axis) if kind.is_dynamic_dim(a))
    workload, arguments, argument_dims, result_dims = ir.DenseI32ArrayAttr(
        disp.attributes["operandSegmentSizes"])
    declared = sum(1 for r in results for a in range(ir.RankedTensorType(r.type).rank)
                   if ir.RankedTensorType(r.type).is_dynamic_dim(a))
    if result_dims != declared:     # not one size per dynamic dim (tied results): unread
        return None
    return disp.operands[workload + arguments + argument_dims + dynamic]


def _resolve_dims(module: ir.Module) -> None:
    """Resolve the sizes the checks read to what computes them, as far as the function's
    inputs where that is how they are made: MLIR's ``resolve-ranked-shaped-type-result-dims``
    (a dim of a linalg op's or a reshape's result), :func:`_dispatch_dim` (of a kernel's
    result) and :data:`BARRIERS` (of a compute barrier's result: its input's), in turn until
    nothing changes (a layer's input is the previous layer's kernel's output: one round per
    layer)."""
    pm = PassManager.parse("builtin.module(func.func(resolve-ranked-shaped-type-result-dims))",
                           module.context)
    for _ in range(MAX_RESOLVE_ROUNDS):
        pm.run(module.operation)
        folded = 0
        for func in module.body.operations:
            if func.operation.name != "func.func":
                continue
            for op in list(func.operation.regions[0].blocks[0].operations):
                op = op.operation
                if op.name != "tensor.dim":
                    continue
                source = op.operands[0].owner
                if not isinstance(source, ir.Block) and source.operation.name in BARRIERS and (
                        len(source.operation.results) == 1):
                    op.operands[0] = source.operation.operands[0]   # the same sizes
                    folded += 1
                    continue
                value = _dispatch_dim(op)
                if value is not None:
                    op.results[0].replace_all_uses_with(value)
                    op.erase()
                    folded += 1
        if not folded:
            return


BARRIERS = ("iree_tensor_ext.compute_barrier.start", "iree_tensor_ext.compute_barrier.end")
"""Ops that pass a tensor through unchanged (sizes included); MLIR's resolve pass does not
look through them."""
MAX_RESOLVE_ROUNDS = 256
"""Rounds of :func:`_resolve_dims` at most (a model's layers, each one round, and some)."""


def hoist_checks(module: ir.Module) -> int:
    """Move every size check whose sizes resolve to the function's inputs to the top of its
    function (see the module docstring); returns how many moved."""
    with module.context:
        _resolve_dims(module)
    moved = 0
    for func in module.body.operations:
        func = func.operation
        if func.name != "func.func":
            continue
        block = func.regions[0].blocks[0]
        args = set(block.arguments)
        order = {op.operation: i for i, op in enumerate(block.operations)}
        last: ir.Operation | None = None     # the end of the block's hoisted prefix
        hoisted: set[ir.Operation] = set()
        for check in _checks(block):
            ops = _slice(check, args)
            if ops is None:
                continue
            for op in [*sorted(ops, key=lambda o: order[o]), check]:
                if op in hoisted:
                    continue
                if last is not None:
                    op.move_after(last)
                elif op != block.operations[0].operation:
                    op.move_before(block.operations[0].operation)
                last = op
                hoisted.add(op)
            moved += 1
    return moved


__all__ = ["INVALID_ARGUMENT", "check_sizes", "hoist_checks", "message"]
