"""The rlx dialects (``rlx_hir``, ``rlx_mir``) and whole-module verification."""

from __future__ import annotations

from iree.compiler import ir

from rlx.dialects.enums import FUSION_POLICIES
from rlx.dialects.hir import HIR
from rlx.dialects.mir import MIR
from rlx.dialects.schema import Decoded, Dialect, OpSchema, decode
from rlx.ir.diagnostics import VerifyError
from rlx.ir.locations import describe, label_of, source_of
from rlx.ir.text import walk_ops

DIALECTS: dict[str, Dialect] = {HIR.name: HIR, MIR.name: MIR}
STAGES = {"hir": (HIR.name, MIR.name), "mir": (MIR.name,)}
FUSION_POLICY_ATTR = "rlx.fusion_policy"


def lookup(op_name: str) -> OpSchema | None:
    """The schema of ``rlx_hir.X`` / ``rlx_mir.X``, or None."""
    dialect = DIALECTS.get(op_name.partition(".")[0])
    return dialect.get(op_name) if dialect else None


def _fail(op: ir.Operation, what: str, expected: str, found: str) -> VerifyError:
    return VerifyError(op.name, what, expected, found, label=label_of(op.location),
                       source=source_of(op.location))


def fusion_policy(module: ir.Module) -> str:
    """The module's ``rlx.fusion_policy`` (``direct`` when absent)."""
    attrs = module.operation.attributes
    if FUSION_POLICY_ATTR not in attrs:
        return "direct"
    attr = attrs[FUSION_POLICY_ATTR]
    value = ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else str(attr)
    if value not in FUSION_POLICIES:
        raise _fail(module.operation, f"attribute '{FUSION_POLICY_ATTR}'",
                    "one of " + ", ".join(f'"{p}"' for p in FUSION_POLICIES), str(attr))
    return value


def verify_module(module: ir.Module, stage: str = "hir") -> list[Decoded]:
    """Check every op of a HIR (or MIR) module against its schema.

    The module holds ``func.func`` ops whose bodies contain only ops of the stage's
    dialects (HIR functions may embed ``rlx_mir`` ops: the escape hatch) and
    ``func.return``. Raises :class:`VerifyError` on the first violation; returns the
    decoded ops in textual order.
    """
    allowed = STAGES[stage]
    fusion_policy(module)
    decoded: list[Decoded] = []
    weights: dict[str, ir.Operation] = {}
    for top in module.body.operations:
        top = top.operation
        if top.name != "func.func":
            raise _fail(top, "top-level op", "func.func", f"'{top.name}'")
        for op in walk_ops(top):
            decoded.extend(_verify_op(op, allowed))
            if op.name in PARAM_OPS:
                _check_weight(op, weights)
    return decoded


PARAM_OPS = ("rlx_hir.param", "rlx_mir.param")


def param_lead(op: ir.Operation) -> int:
    """A ``param`` op's ``lead`` (bytes its parameter entry holds before the weight), 0 when
    absent."""
    return ir.IntegerAttr(op.attributes["lead"]).value if "lead" in op.attributes else 0


def _check_weight(op: ir.Operation, seen: dict[str, ir.Operation]) -> None:
    """A weight name has one type (and lead) in the whole module (every function reads the
    same parameter): the first declaration of ``name`` wins, a later one of another type
    fails naming both places."""
    name = ir.StringAttr(op.attributes["name"]).value
    first = seen.setdefault(name, op)
    want, found = first.results[0].type, op.results[0].type
    if want != found:
        raise _fail(op, f"weight '{name}'", f"{want} (its type where it is first declared, "
                    f"{describe(first.location)})", str(found))
    if param_lead(first) != param_lead(op):
        raise _fail(op, f"weight '{name}'", f"lead {param_lead(first)} (its lead where it is "
                    f"first declared, {describe(first.location)})", f"lead {param_lead(op)}")


def _verify_op(op: ir.Operation, allowed: tuple[str, ...]) -> list[Decoded]:
    if op.name == "func.return":
        return []
    dialect = op.name.partition(".")[0]
    if dialect not in allowed:
        kinds = ", ".join(f"{d}.*" for d in allowed)
        raise _fail(op, "op", f"an op of {kinds} or func.return", f"'{op.name}'")
    schema = lookup(op.name)
    if schema is None:
        known = ", ".join(sorted(DIALECTS[dialect].ops))
        raise _fail(op, "op", f"a known {dialect} op ({known})", f"unknown op '{op.name}'")
    if op.regions and any(len(r.blocks) for r in op.regions):
        raise _fail(op, "regions", "none", f"{len(op.regions)}")
    return [decode(schema, op)]


__all__ = ["DIALECTS", "FUSION_POLICY_ATTR", "HIR", "MIR", "fusion_policy", "lookup",
           "param_lead", "verify_module"]
