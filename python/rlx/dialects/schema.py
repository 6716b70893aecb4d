"""Op schemas: the single description of every ``rlx_hir`` / ``rlx_mir`` op.

A schema names the operands (in order, some present only for certain attribute values),
the attributes (kind, allowed values, builder default), the results, the default label,
and one function that verifies an op and infers its result types. The function's
docstring is the op's documentation (summary, operands and attributes, an IR example).

The same schema serves the Python builder (verify before the op is created), the text
reader (verify every parsed op), the IRDL generator and the lowering passes (which read
operands and attributes by name through :func:`decode`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from iree.compiler import ir

from rlx.dialects.verifier import AttrValues, Check, SizeRelation
from rlx.ir.diagnostics import VerifyError
from rlx.ir.locations import label_of, source_of
from rlx.ir.types import TensorInfo


class AttrKind(enum.Enum):
    INT = "integer"
    FLOAT = "float"
    BOOL = "bool"
    STR = "string"
    ENUM = "enum"
    INTS = "integer array"
    FLOATS = "float array"
    DENSE = "dense elements"


_NO_DEFAULT = object()


@dataclass(frozen=True)
class Attr:
    """One attribute of an op.

    ``when`` makes the attribute conditional: it must be present exactly when ``when(attrs)``
    holds (e.g. ``window`` only for a sliding-window mask). ``optional`` attributes may be
    absent (their value is then None). ``default`` is used by the Python builder only: the
    text format always spells every attribute out.
    """

    name: str
    kind: AttrKind
    doc: str = ""
    choices: tuple[str, ...] = ()
    default: Any = _NO_DEFAULT
    optional: bool = False
    when: Callable[[AttrValues], bool] | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    def present(self, attrs: AttrValues) -> bool:
        return self.when is None or bool(self.when(attrs))

    @property
    def always(self) -> bool:
        return self.when is None and not self.optional


def int_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.INT, doc, **kw)


def float_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.FLOAT, doc, **kw)


def bool_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.BOOL, doc, **kw)


def str_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.STR, doc, **kw)


def enum_attr(name: str, choices: Sequence[str], doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.ENUM, doc, choices=tuple(choices), **kw)


def ints_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.INTS, doc, **kw)


def floats_attr(name: str, doc: str = "", **kw: Any) -> Attr:
    return Attr(name, AttrKind.FLOATS, doc, **kw)


@dataclass(frozen=True)
class Operand:
    """One operand (or result). ``when`` makes it conditional on the attributes;
    ``variadic`` takes any number of values (only as the sole operand group)."""

    name: str
    doc: str = ""
    when: Callable[[AttrValues], bool] | None = None
    variadic: bool = False

    def present(self, attrs: AttrValues) -> bool:
        return self.when is None or bool(self.when(attrs))


def opt(name: str, when: Callable[[AttrValues], bool], doc: str = "") -> Operand:
    return Operand(name, doc, when=when)


def variadic(name: str, doc: str = "") -> Operand:
    return Operand(name, doc, variadic=True)


InferFn = Callable[["Check"], list[TensorInfo]]
LabelRule = str | Callable[[AttrValues], str] | None


@dataclass(frozen=True)
class OpSchema:
    dialect: str
    name: str
    operands: tuple[Operand, ...]
    attrs: tuple[Attr, ...]
    results: tuple[Operand, ...]
    infer: InferFn
    label: LabelRule
    family: str

    @property
    def full_name(self) -> str:
        return f"{self.dialect}.{self.name}"

    @property
    def doc(self) -> str:
        return (self.infer.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        """The docstring's first paragraph, on one line."""
        para = self.doc.split("\n\n", 1)[0]
        return " ".join(line.strip() for line in para.splitlines())

    def attr(self, name: str) -> Attr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def default_label(self, attrs: AttrValues) -> str | None:
        if callable(self.label):
            return self.label(attrs)
        return self.label

    def operand_names(self, attrs: AttrValues) -> list[str]:
        return [o.name for o in self.operands if o.present(attrs)]

    def result_names(self, attrs: AttrValues) -> list[str]:
        return [r.name for r in self.results if r.present(attrs)]

    @property
    def is_variadic(self) -> bool:
        return any(o.variadic for o in self.operands)


@dataclass
class Dialect:
    """A registry of op schemas; families add ops with the :meth:`op` decorator."""

    name: str
    ops: dict[str, OpSchema] = field(default_factory=dict)

    def op(
        self,
        name: str,
        *,
        operands: Iterable[str | Operand] = (),
        attrs: Iterable[Attr] = (),
        results: Iterable[str | Operand] = ("y",),
        label: LabelRule = None,
    ) -> Callable[[InferFn], InferFn]:
        ops = tuple(o if isinstance(o, Operand) else Operand(o) for o in operands)
        res = tuple(r if isinstance(r, Operand) else Operand(r) for r in results)

        def register(fn: InferFn) -> InferFn:
            if name in self.ops:
                raise ValueError(f"op '{self.name}.{name}' is registered twice")
            family = fn.__module__.rsplit(".", 1)[-1]
            self.ops[name] = OpSchema(self.name, name, ops, tuple(attrs), res, fn, label,
                                      family)
            return fn

        return register

    def get(self, full_name: str) -> OpSchema | None:
        dialect, _, short = full_name.partition(".")
        if dialect != self.name:
            return None
        return self.ops.get(short)


def check_counts(schema: OpSchema, attrs: AttrValues, n_operands: int,
                 raise_: Callable[[str, str, str], NoReturn]) -> list[str]:
    """The operand names for ``attrs``; raises (via ``raise_``) when the count differs."""
    if schema.is_variadic:
        return []
    names = schema.operand_names(attrs)
    if n_operands != len(names):
        why = _presence_reason(schema, attrs)
        raise_("operands", f"{len(names)} ({', '.join(names)}){why}", str(n_operands))
    return names


def _presence_reason(schema: OpSchema, attrs: AttrValues) -> str:
    conditional = [o for o in schema.operands if o.when is not None]
    if not conditional:
        return ""
    decided = sorted({a.name for a in schema.attrs if a.name in attrs and a.kind in (
        AttrKind.BOOL, AttrKind.ENUM)})
    shown = ", ".join(f"{k} = {_show(attrs[k])}" for k in decided)
    return f" for {shown}" if shown else ""


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def validate(
    schema: OpSchema,
    operand_types: Sequence[TensorInfo],
    attrs: AttrValues,
    *,
    label: str | None = None,
    source: str | None = None,
    declared: Sequence[TensorInfo] = (),
) -> list[TensorInfo]:
    """Check operand count and run the schema's verifier; returns the inferred results.

    ``declared`` are the result types the caller asks for; only ops whose result type is
    not a function of their operands (``param``, ``constant``) read them."""

    def raise_(what: str, expected: str, found: str) -> NoReturn:
        raise VerifyError(schema.full_name, what, expected, found, label=label, source=source)

    _check_attr_values(schema, attrs, raise_)
    names = check_counts(schema, attrs, len(operand_types), raise_)
    return _infer(schema, names, operand_types, attrs, label, source, declared).results


@dataclass
class Inferred:
    """What an op's verifier returned: its result types, and the size relations it could
    not decide statically (for run-time checks)."""

    results: list[TensorInfo]
    relations: list[SizeRelation]


def _infer(schema: OpSchema, names: Sequence[str], operand_types: Sequence[TensorInfo],
           attrs: AttrValues, label: str | None, source: str | None,
           declared: Sequence[TensorInfo]) -> Inferred:
    if schema.is_variadic:
        check = Check(schema, {}, operand_types, attrs, label=label, source=source,
                      declared=declared)
    else:
        check = Check(schema, dict(zip(names, operand_types, strict=True)), [], attrs,
                      label=label, source=source, declared=declared)
    results = schema.infer(check)
    expected_results = schema.result_names(attrs)
    if len(results) != len(expected_results):
        raise AssertionError(f"{schema.full_name}: infer returned {len(results)} results "
                             f"for {expected_results}")
    return Inferred(results, check.relations)


def _check_attr_values(schema: OpSchema, attrs: AttrValues,
                       raise_: Callable[[str, str, str], NoReturn]) -> None:
    for a in schema.attrs:
        present = a.name in attrs and attrs[a.name] is not None
        if a.when is not None and not a.present(attrs):
            if present:
                raise_(f"attribute '{a.name}'", "no such attribute for these attributes "
                       f"({_presence_reason_attrs(schema, attrs, a)})", _show(attrs[a.name]))
            continue
        if not present:
            if a.optional:
                continue
            raise_(f"attribute '{a.name}'", f"a{_article(a.kind)} {a.kind.value} attribute",
                   "none")
        if a.kind is AttrKind.ENUM and attrs[a.name] not in a.choices:
            raise_(f"attribute '{a.name}'", "one of " + ", ".join(f'"{c}"' for c in a.choices),
                   _show(attrs[a.name]))


def _presence_reason_attrs(schema: OpSchema, attrs: AttrValues, skip: Attr) -> str:
    shown = [f"{a.name} = {_show(attrs[a.name])}" for a in schema.attrs
             if a is not skip and a.kind in (AttrKind.ENUM, AttrKind.BOOL) and a.name in attrs]
    return ", ".join(shown)


def _article(kind: AttrKind) -> str:
    return "n" if kind.value[0] in "aeiou" else ""


def with_defaults(schema: OpSchema, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` plus the builder defaults of absent attributes (None means absent)."""
    values: dict[str, Any] = {}
    for a in schema.attrs:
        v = attrs.get(a.name)
        if v is None and a.has_default and a.present(values):
            v = a.default
        if v is not None:
            values[a.name] = v
    return values


def create(
    schema: OpSchema,
    operands: Sequence[ir.Value],
    attrs: Mapping[str, Any],
    *,
    loc: ir.Location | None = None,
    ip: ir.InsertionPoint | None = None,
    label: str | None = None,
    results: Sequence[TensorInfo] | None = None,
) -> ir.Operation:
    """Verify and create one op (at ``ip`` / ``loc``, or the current ones).

    ``results`` overrides the inferred result types (they must be compatible)."""
    values = with_defaults(schema, attrs)
    types = [TensorInfo.from_mlir(v.type) for v in operands]
    inferred = validate(schema, types, values, label=label, declared=results or ())
    if results is not None and schema.operands:
        for i, (want, got) in enumerate(zip(results, inferred, strict=True)):
            if not want.compatible(got):
                raise VerifyError(schema.full_name, f"result #{i}", str(got), str(want),
                                  label=label)
        inferred = list(results)
    return ir.Operation.create(
        schema.full_name,
        results=[r.mlir() for r in inferred],
        operands=list(operands),
        attributes={a.name: encode_attr(a, values[a.name]) for a in schema.attrs
                    if a.name in values},
        loc=loc,
        ip=ip,
    )


# --------------------------------------------------------------------------------------
# Attributes <-> MLIR
# --------------------------------------------------------------------------------------


def encode_attr(a: Attr, value: Any) -> ir.Attribute:
    """Python value -> MLIR attribute (needs an active context)."""
    if a.kind is AttrKind.INT:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    if a.kind is AttrKind.FLOAT:
        return ir.FloatAttr.get_f32(float(value))
    if a.kind is AttrKind.BOOL:
        return ir.BoolAttr.get(bool(value))
    if a.kind in (AttrKind.STR, AttrKind.ENUM):
        return ir.StringAttr.get(str(value))
    if a.kind is AttrKind.INTS:
        return ir.DenseI64ArrayAttr.get([int(v) for v in value])
    if a.kind is AttrKind.FLOATS:
        return ir.DenseF32ArrayAttr.get([float(v) for v in value])
    if a.kind is AttrKind.DENSE:
        if not isinstance(value, ir.Attribute):
            raise TypeError(f"attribute '{a.name}' needs an MLIR elements attribute")
        return value
    raise AssertionError(a.kind)


def decode_attr(a: Attr, attr: ir.Attribute,
                raise_: Callable[[str, str, str], NoReturn]) -> Any:
    """MLIR attribute -> Python value, raising (via ``raise_``) on the wrong kind."""
    what = f"attribute '{a.name}'"
    if a.kind is AttrKind.INT:
        if isinstance(attr, ir.IntegerAttr) and not isinstance(attr, ir.BoolAttr):
            return ir.IntegerAttr(attr).value
        raise_(what, "an integer (like 8 : i64)", str(attr))
    if a.kind is AttrKind.FLOAT:
        if isinstance(attr, ir.FloatAttr):
            return ir.FloatAttr(attr).value
        raise_(what, "a float (like 1.0e-05 : f32)", str(attr))
    if a.kind is AttrKind.BOOL:
        if isinstance(attr, ir.BoolAttr):
            return ir.BoolAttr(attr).value
        raise_(what, "a bool (true or false)", str(attr))
    if a.kind in (AttrKind.STR, AttrKind.ENUM):
        if isinstance(attr, ir.StringAttr):
            return ir.StringAttr(attr).value
        raise_(what, "a string", str(attr))
    if a.kind is AttrKind.INTS:
        if isinstance(attr, ir.DenseI64ArrayAttr):
            return tuple(ir.DenseI64ArrayAttr(attr))
        raise_(what, "an integer array (like array<i64: 0, 2, 1>)", str(attr))
    if a.kind is AttrKind.FLOATS:
        if isinstance(attr, ir.DenseF32ArrayAttr):
            return tuple(ir.DenseF32ArrayAttr(attr))
        raise_(what, "a float array (like array<f32: 1.0, 2.0>)", str(attr))
    if a.kind is AttrKind.DENSE:
        if isinstance(attr, ir.DenseElementsAttr | ir.DenseResourceElementsAttr):
            return attr
        raise_(what, "dense elements (like dense<1.0> : tensor<4xf32>)", str(attr))
    raise AssertionError(a.kind)


# --------------------------------------------------------------------------------------
# Reading an MLIR op through its schema
# --------------------------------------------------------------------------------------


@dataclass
class Decoded:
    """An MLIR op read through its schema: operands by name, attribute values, types."""

    schema: OpSchema
    op: ir.Operation
    values: dict[str, ir.Value]
    variadic: list[ir.Value]
    attrs: dict[str, Any]
    types: dict[str, TensorInfo]
    results: list[TensorInfo]
    relations: list[SizeRelation] = field(default_factory=list)
    """The size relations the verifier left to run time (only when decoded with
    ``check``)."""

    def __getitem__(self, name: str) -> ir.Value:
        return self.values[name]

    def has(self, name: str) -> bool:
        return name in self.values

    @property
    def label(self) -> str | None:
        return label_of(self.op.location)


def _raiser(schema_name: str, op: ir.Operation) -> Callable[[str, str, str], NoReturn]:
    label = label_of(op.location)
    source = source_of(op.location)

    def raise_(what: str, expected: str, found: str) -> NoReturn:
        raise VerifyError(schema_name, what, expected, found, label=label, source=source)

    return raise_


def _type_of(value: ir.Value, what: str,
             raise_: Callable[[str, str, str], NoReturn]) -> TensorInfo:
    try:
        return TensorInfo.from_mlir(value.type)
    except ValueError:
        raise_(what, "a ranked tensor of a known element type (f32, f16, bf16, f64, i1, i8, "
               "i16, i32, i64)", str(value.type))


def decode(schema: OpSchema, op: ir.Operation, *, check: bool = True) -> Decoded:
    """Read ``op`` through ``schema``; with ``check``, verify it fully (raises VerifyError)."""
    raise_ = _raiser(schema.full_name, op)
    attrs: dict[str, Any] = {}
    known = {a.name: a for a in schema.attrs}
    for name in op.attributes:
        attr = op.attributes[name]
        if name in known:
            attrs[name] = decode_attr(known[name], attr, raise_)
        elif "." not in name:
            listing = ", ".join(known) if known else "none"
            raise_(f"attribute '{name}'", f"only the attributes of this op ({listing})",
                   f"unknown attribute '{name}'")
    operand_values = list(op.operands)
    if check:
        _check_attr_values(schema, attrs, raise_)
        names = check_counts(schema, attrs, len(operand_values), raise_)
    else:
        names = schema.operand_names(attrs)
    types: dict[str, TensorInfo] = {}
    variadic_values: list[ir.Value] = []
    vtypes: list[TensorInfo] = []
    if schema.is_variadic:
        variadic_values = operand_values
        vtypes = [_type_of(v, f"operand #{i}", raise_) for i, v in enumerate(operand_values)]
    else:
        for n, v in zip(names, operand_values, strict=False):
            types[n] = _type_of(v, f"operand '{n}'", raise_)
    declared = [_type_of(r, f"result #{i}", raise_) for i, r in enumerate(op.results)]
    relations: list[SizeRelation] = []
    if check:
        operand_types = vtypes if schema.is_variadic else [types[n] for n in names]
        verdict = _infer(schema, names, operand_types, attrs, label_of(op.location),
                         source_of(op.location), declared)
        inferred, relations = verdict.results, verdict.relations
        rnames = schema.result_names(attrs)
        if len(declared) != len(inferred):
            raise_("results", f"{len(inferred)} ({', '.join(rnames)})", str(len(declared)))
        for i, (d, inf) in enumerate(zip(declared, inferred, strict=True)):
            if not d.compatible(inf):
                raise_(f"result '{rnames[i]}' type", str(inf), str(d))
    values = dict(zip(names, operand_values, strict=False))
    return Decoded(schema, op, values, variadic_values, attrs, types, declared, relations)
