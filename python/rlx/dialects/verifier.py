"""What an op's verifier sees (:class:`Check`), and the size relations it records.

An infer function reads operand types and attributes through a :class:`Check` and raises a
:class:`VerifyError` when the op breaks its schema. A relation between two sizes that are
both static is decided there. Where a side is dynamic (``?``), the verifier cannot decide
it, and a lowering that relies on it (a loop bound taken from one operand, a load from
another) would read out of bounds when the sizes disagree at run time. So the verifier
also *records* every relation it could not decide (:class:`SizeRelation`: operand dim
against another operand's dim, a constant, at least a size, a multiple of a factor), and
the mir-to-linalg wrapper turns each into a run-time check (:mod:`rlx.lowering.guards`):
a relation is checked statically or at run time, never assumed.

To record a relation the verifier must know where an expected size comes from: sizes
taken from another operand are passed as :class:`DimRef` (``c.ref(name, axis)`` /
``c.refs(name)``), not as the bare ``int | None`` of ``c[name].shape``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from rlx.ir.diagnostics import VerifyError
from rlx.ir.types import Dim, DType, TensorInfo, dims_compatible

if TYPE_CHECKING:
    from rlx.dialects.schema import OpSchema

AttrValues = Mapping[str, Any]


@dataclass(frozen=True)
class DimRef:
    """Dim ``axis`` (non-negative) of operand ``operand``, whose size is ``size`` (None:
    dynamic). Passed where a verifier expects one operand's size to match another's."""

    operand: str
    axis: int
    size: Dim

    def __str__(self) -> str:
        return "?" if self.size is None else str(self.size)

    def describe(self) -> str:
        whose = f"operand {self.operand}" if self.operand.startswith("#") else (
            f"operand '{self.operand}'")
        return f"{whose} dim {self.axis}"


Expected = int | None | DimRef
"""An expected size: static, unknown (nothing to check), or another operand's dim."""


def size_of(e: Expected) -> Dim:
    return e.size if isinstance(e, DimRef) else e


RELATION_KINDS = ("eq", "ge", "multiple")


@dataclass(frozen=True)
class SizeRelation:
    """``operand`` dim ``axis`` (``None``: its element count) relates to ``other`` as
    ``kind``: ``eq`` (equal to a size or another dim), ``ge`` (at least it), ``multiple``
    (a multiple of the int ``other``). Recorded only where a side is dynamic, so the
    relation can only be checked at run time. Variadic operands are named ``#i``."""

    operand: str
    axis: int | None
    kind: str
    other: DimRef | int
    why: str

    @property
    def what(self) -> str:
        whose = f"operand {self.operand}" if self.operand.startswith("#") else (
            f"operand '{self.operand}'")
        return f"{whose} element count" if self.axis is None else f"{whose} dim {self.axis}"

    @property
    def expected(self) -> str:
        other = self.other.describe() if isinstance(self.other, DimRef) else str(self.other)
        prefix = {"eq": "the size of " if isinstance(self.other, DimRef) else "",
                  "ge": "at least the size of " if isinstance(self.other, DimRef)
                  else "at least ", "multiple": "a multiple of "}[self.kind]
        return f"{prefix}{other} ({self.why})"


class Check:
    """What an infer function sees: operand types by name, attribute values, and helpers
    that raise :class:`VerifyError` naming the op, its label and position. ``relations``
    collects the size relations left to run time (dynamic sizes)."""

    def __init__(
        self,
        schema: OpSchema,
        operands: Mapping[str, TensorInfo],
        variadic: Sequence[TensorInfo],
        attrs: AttrValues,
        *,
        label: str | None,
        source: str | None,
        declared: Sequence[TensorInfo] = (),
    ) -> None:
        self.schema = schema
        self.declared = list(declared)
        self.operands = dict(operands)
        self.variadic = list(variadic)
        self.attrs = dict(attrs)
        self.label = label
        self.source = source
        self.relations: list[SizeRelation] = []

    # -- failure ------------------------------------------------------------------------
    def fail(self, what: str, expected: str, found: str) -> NoReturn:
        raise VerifyError(self.schema.full_name, what, expected, found,
                          label=self.label, source=self.source)

    def expect(self, cond: bool, what: str, expected: str, found: str) -> None:
        if not cond:
            self.fail(what, expected, found)

    # -- access -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> TensorInfo:
        """Operand ``name``; ``"#i"`` is variadic operand ``i``."""
        if name.startswith("#"):
            return self.variadic[int(name[1:])]
        return self.operands[name]

    def has(self, name: str) -> bool:
        return name in self.operands

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    def ref(self, name: str, axis: int) -> DimRef:
        """Dim ``axis`` of operand ``name`` as an expected size that remembers its source."""
        t = self[name]
        axis %= t.rank
        return DimRef(name, axis, t.shape[axis])

    def refs(self, name: str) -> tuple[DimRef, ...]:
        """Every dim of operand ``name`` as :meth:`ref`."""
        return tuple(self.ref(name, i) for i in range(self[name].rank))

    # -- operand checks -----------------------------------------------------------------
    def rank(self, name: str, *ranks: int) -> TensorInfo:
        t = self[name]
        if t.rank not in ranks:
            want = " or ".join(str(r) for r in ranks)
            self.fail(f"operand '{name}'", f"rank {want}", f"rank {t.rank} ({t})")
        return t

    def min_rank(self, name: str, n: int) -> TensorInfo:
        t = self[name]
        if t.rank < n:
            self.fail(f"operand '{name}'", f"rank >= {n}", f"rank {t.rank} ({t})")
        return t

    def dtype(self, name: str, allowed: Collection[DType]) -> TensorInfo:
        t = self[name]
        if t.dtype not in allowed:
            want = "/".join(sorted(str(d) for d in allowed))
            self.fail(f"operand '{name}'", f"element type {want}", f"{t.dtype} ({t})")
        return t

    def same_dtype(self, *names: str) -> DType:
        first = self[names[0]]
        for n in names[1:]:
            if self[n].dtype != first.dtype:
                self.fail(f"operand '{n}'", f"element type {first.dtype} (as '{names[0]}')",
                          f"{self[n].dtype} ({self[n]})")
        return first.dtype

    def dim(self, name: str, axis: int, expected: Expected, why: str) -> None:
        """Dim ``axis`` of ``name`` must equal ``expected``: checked here when both sizes
        are static, recorded for run time when one is dynamic and ``expected`` is a
        constant or a :class:`DimRef`."""
        t = self[name]
        actual = t.shape[axis]
        if not dims_compatible(actual, size_of(expected)):
            self.fail(f"operand '{name}' dim {axis}", f"{size_of(expected)} ({why})",
                      f"{actual} ({t})")
        self._relate(name, axis, "eq", expected, why)

    def shape(self, name: str, expected: Sequence[Expected], why: str) -> None:
        """``name`` must have exactly the rank of ``expected`` and compatible dims (each
        dim as :meth:`dim`)."""
        t = self[name]
        want = TensorInfo(tuple(size_of(e) for e in expected), t.dtype)
        if t.rank != len(expected) or not t.compatible(want):
            self.fail(f"operand '{name}'", f"shape {_dims(expected)} ({why})",
                      f"{_dims(t.shape)} ({t})")
        for axis, e in enumerate(expected):
            self._relate(name, axis, "eq", e, why)

    def at_least(self, name: str, axis: int, bound: Expected, why: str) -> None:
        """Dim ``axis`` of ``name`` must be ``>= bound`` (statically or at run time)."""
        t = self[name]
        actual, low = t.shape[axis], size_of(bound)
        if actual is not None and low is not None and actual < low:
            self.fail(f"operand '{name}' dim {axis}", f">= {low} ({why})", f"{actual} ({t})")
        self._relate(name, axis, "ge", bound, why)

    def multiple(self, name: str, axis: int, factor: int, why: str) -> None:
        """Dim ``axis`` of ``name`` must be a multiple of ``factor`` (statically or at run
        time)."""
        t = self[name]
        actual = t.shape[axis]
        if actual is not None and actual % factor:
            self.fail(f"operand '{name}' dim {axis}", f"a multiple of {factor} ({why})",
                      f"{actual} ({t})")
        self._relate(name, axis, "multiple", factor, why)

    def _relate(self, name: str, axis: int, kind: str, other: Expected, why: str) -> None:
        """Record a relation that only run time can decide (a dynamic side)."""
        rank = self[name].rank
        axis %= rank
        actual = self[name].shape[axis]
        if other is None:
            return          # nothing known to compare with
        if isinstance(other, DimRef):
            if (other.operand, other.axis) == (name, axis):
                return
            if actual is not None and other.size is not None:
                return
        elif actual is not None:
            return
        if (kind == "multiple" and other == 1) or (kind == "ge" and isinstance(other, int)
                                                   and other <= 0):
            return
        self.relations.append(SizeRelation(name, axis, kind, other, why))

    def numel(self, name: str, expected: int, why: str, *, multiple: bool = False) -> None:
        """``name`` holds ``expected`` elements (with ``multiple``: a multiple of it),
        checked here when its shape is static, else at run time."""
        t = self[name]
        n = t.numel
        if n is None:
            if not (multiple and expected == 1):
                self.relations.append(SizeRelation(name, None, "multiple" if multiple
                                                   else "eq", expected, why))
            return
        if (n % expected if multiple else n != expected):
            want = f"a multiple of {expected}" if multiple else str(expected)
            self.fail(f"operand '{name}'", f"{want} elements ({why})", f"{n} ({t})")

    def positive(self, attr: str) -> Any:
        v = self.attrs[attr]
        if not v > 0:
            self.fail(f"attribute '{attr}'", "a value > 0", repr(v))
        return v

    def non_negative(self, attr: str) -> Any:
        v = self.attrs[attr]
        if v < 0:
            self.fail(f"attribute '{attr}'", "a value >= 0", repr(v))
        return v


def _dims(shape: Sequence[Expected]) -> str:
    return "[" + ", ".join("?" if size_of(d) is None else str(size_of(d)) for d in shape) + "]"


__all__ = ["RELATION_KINDS", "AttrValues", "Check", "DimRef", "Expected", "SizeRelation",
           "size_of"]
