"""IRDL export of the op schemas, so MLIR itself (``iree-opt --irdl-file``) checks rlx text.

IRDL checks what it can express: op names, operand / result counts (conditional operands
become one ``optional`` or trailing ``variadic`` group), that every value is a tensor, the
always-present attributes and their kinds, and the allowed values of enum attributes.
Shapes, element types and conditional attributes are rlx's own checks.

One limit: an IRDL constraint variable binds the first type it matches, so all values of a
``variadic`` group must have equal types, and two ``optional`` groups would need an
``operandSegmentSizes`` attribute. rlx writes none: several conditional operands become one
trailing ``variadic`` group. Their types agree for every op but ``dequant_matmul`` with
``scheme = "nvfp4"`` (block scales i8, global scale f32) and the scans' ``lstm`` / ``gru``
with ``has_peephole`` or ``has_lengths`` (states, peepholes and i64 lengths in one group),
which IRDL therefore rejects.

``iree-opt`` reads one ``--irdl-file`` (a second flag replaces the first), and HIR
functions may embed ``rlx_mir`` ops, so ``rlx_hir.irdl.mlir`` holds both dialects and
``rlx_mir.irdl.mlir`` the MIR dialect alone.
"""

from __future__ import annotations

from rlx.dialects.hir import HIR
from rlx.dialects.mir import MIR
from rlx.dialects.schema import Attr, AttrKind, Dialect, Operand, OpSchema

_BASE = {
    AttrKind.INT: '"#builtin.integer"',
    AttrKind.FLOAT: '"#builtin.float"',
    AttrKind.STR: '"#builtin.string"',
    AttrKind.INTS: '"#builtin.dense_array"',
    AttrKind.FLOATS: '"#builtin.dense_array"',
}


def _groups(values: tuple[Operand, ...], op: str, prefix: str,
            lines: list[str]) -> list[str]:
    """``name: [optional|variadic] %tensor`` entries, one constraint variable each (IRDL
    makes values that share a constraint variable have equal types)."""
    fixed = [v for v in values if v.when is None and not v.variadic]
    varying = [v for v in values if v.when is not None or v.variadic]
    if len(varying) > 1 and values[len(fixed):] != tuple(varying):
        raise ValueError(f"{op}: conditional operands must be trailing to export IRDL")
    entries: list[tuple[str, str]] = []
    if len(varying) <= 1:
        for v in values:
            kind = "variadic " if v.variadic else "optional " if v.when is not None else ""
            entries.append((v.name, kind))
    else:
        entries = [(v.name, "") for v in fixed]
        entries.append(("_".join(v.name for v in varying), "variadic "))
    out = []
    for i, (name, kind) in enumerate(entries):
        lines.append(f'    %{prefix}{i} = irdl.base "!builtin.tensor"')
        out.append(f"{name}: {kind}%{prefix}{i}")
    return out


def _attr_constraint(a: Attr, lines: list[str]) -> str:
    var = f"%{a.name}"
    if a.kind is AttrKind.ENUM:
        names = []
        for i, choice in enumerate(a.choices):
            lines.append(f'    {var}_{i} = irdl.is "{choice}"')
            names.append(f"{var}_{i}")
        lines.append(f"    {var} = irdl.any_of({', '.join(names)})")
    elif a.kind is AttrKind.BOOL:
        lines.append(f"    {var}_t = irdl.is true")
        lines.append(f"    {var}_f = irdl.is false")
        lines.append(f"    {var} = irdl.any_of({var}_t, {var}_f)")
    elif a.kind is AttrKind.DENSE:
        lines.append(f"    {var} = irdl.any")
    else:
        lines.append(f"    {var} = irdl.base {_BASE[a.kind]}")
    return f'"{a.name}" = {var}'


def _operation(schema: OpSchema) -> list[str]:
    lines = [f"  // {schema.summary}", f"  irdl.operation @{schema.name} {{"]
    attrs = [_attr_constraint(a, lines) for a in schema.attrs if a.always]
    operands = _groups(schema.operands, schema.full_name, "in", lines)
    results = _groups(schema.results, schema.full_name, "out", lines)
    if operands:
        lines.append(f"    irdl.operands({', '.join(operands)})")
    lines.append(f"    irdl.results({', '.join(results)})")
    if attrs:
        lines.append(f"    irdl.attributes {{{', '.join(attrs)}}}")
    lines.append("  }")
    return lines


def _dialect(dialect: Dialect) -> list[str]:
    lines = [f"irdl.dialect @{dialect.name} {{"]
    for name in sorted(dialect.ops):
        lines.extend(_operation(dialect.ops[name]))
    lines.append("}")
    return lines


HEADER = ("// Generated from the rlx op schemas by tools/gen_irdl.py; do not edit.\n"
          "// Use: iree-opt --irdl-file=THIS_FILE model.hir\n")


def irdl_text(stage: str) -> str:
    """The IRDL file for ``stage`` ``"hir"`` (HIR + MIR dialects) or ``"mir"``."""
    dialects = [HIR, MIR] if stage == "hir" else [MIR]
    body = "\n".join("\n".join(_dialect(d)) for d in dialects)
    return HEADER + body + "\n"
