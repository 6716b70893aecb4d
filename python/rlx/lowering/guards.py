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
carrying the message. The check sits in an ``scf.if`` on the broken relation rather than
taking ``select(ok, 0, 3)`` as its status: where IREE proves the sizes equal (the same
value, or a result's dim folded back to its input's), it folds the ``scf.if`` away, whereas
a status folded to the constant 0 fails IREE 3.13's verifier (``'vm.cond_fail' op status
is 0; expected to not be OK``). The checks are host-side integer compares on a call's shapes, a few
VM instructions each (the decode step's cost is measured in benchmarks/README.md).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, scf, util

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
    label, source = op.label, source_of(op.op.location)
    named = f' "{label}"' if label is not None else ""
    where = f"{source}: " if source else ""
    return (f"{where}error: '{op.op.name}'{named}: {rel.what}: expected {rel.expected}, "
            f"{SIZE_CHECK_FOUND}")


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


__all__ = ["INVALID_ARGUMENT", "check_sizes", "message"]
