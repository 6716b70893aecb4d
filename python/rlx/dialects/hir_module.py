"""The machinery of a HIR module under construction: :class:`HirValue`, the MLIR module and
its functions, op creation checked against the schemas, labels, outputs, text, parsing and
verification. :class:`rlx.dialects.builder.HirModule` adds the op API (one method per HIR
block) on top of :class:`HirModuleCore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
from iree.compiler import ir

from rlx.dialects import FUSION_POLICY_ATTR, HIR, MIR, fusion_policy, lookup, verify_module
from rlx.dialects.enums import FUSION_POLICIES, WORD_TYPES
from rlx.dialects.mir_module import MirModule, mir_lowering
from rlx.dialects.schema import OpSchema, create, decode, validate, with_defaults
from rlx.ir.context import new_context
from rlx.ir.diagnostics import BuildError, VerifyError
from rlx.ir.dtypes import NARROW
from rlx.ir.locations import label_loc, label_of, relabel
from rlx.ir.text import parse_file, parse_module, print_module
from rlx.ir.types import DType, Shape, TensorInfo

UNSIGNED_ATTR = "rlx.unsigned"
"""Marks a function argument or result whose integers the caller passes and gets as
numpy's unsigned types (the vmfb's reflection lists them; ``rlx.runtime`` views them)."""


def unsigned_positions(func: ir.Operation, key: str) -> list[int]:
    """The positions whose ``key`` (``arg_attrs`` / ``res_attrs``) entry is unsigned."""
    if key not in func.attributes:
        return []
    return [i for i, a in enumerate(ir.ArrayAttr(func.attributes[key]))
            if UNSIGNED_ATTR in ir.DictAttr(a)]


NARROW_ATTR = "rlx.narrow"
"""Marks a function argument or result of an element type narrower than a byte (its value
is what the module holds, :data:`rlx.ir.dtypes.NARROW`): the attribute names ml_dtypes'
type, which callers pass and get (the vmfb's reflection lists them; ``rlx.runtime``
converts)."""


def narrow_positions(func: ir.Operation, key: str) -> dict[int, str]:
    """The positions whose ``key`` (``arg_attrs`` / ``res_attrs``) entry is narrow, with
    the narrow type's name."""
    if key not in func.attributes:
        return {}
    out = {}
    for i, a in enumerate(ir.ArrayAttr(func.attributes[key])):
        d = ir.DictAttr(a)
        if NARROW_ATTR in d:
            out[i] = ir.StringAttr(d[NARROW_ATTR]).value
    return out


def check_narrow(name: str, dtype: DType, what: str) -> None:
    """A narrow type ``name`` held in ``dtype``: its storage type, or a BuildError."""
    narrow = NARROW.get(name)
    if narrow is None:
        raise BuildError(f"{what}: unknown narrow type {name!r} (known: "
                         f"{', '.join(NARROW)})")
    if dtype != narrow.storage:
        raise BuildError(f"{what}: {name} is held as {narrow.storage}, found {dtype}")


ShapeLike = Sequence[int | str | None]


Operand = Any  # a HirValue, or a Python / numpy number or array (made a constant)


class HirValue:
    """A tensor value of a :class:`HirModule` (a function input or an op result).

    ``+ - * /`` (and unary ``-``) build ``rlx_mir.binary`` ops (``rlx_mir.activation``
    ``neg`` for a float ``-x``) with numpy broadcasting and no type promotion: the other
    side is a HirValue of the same element type, or a Python / numpy number or array, which
    becomes a constant of this value's element type. Inside ``h.named("name", ...)`` the
    ops carry that label::

        y = h.named("ffn", lambda h: x + h.swiglu_ffn(x, up, gate, down))   # a residual
        z = (y - mean) / std * 2.0
    """

    __slots__ = ("_module", "value")
    __array_ufunc__ = None  # ``np_array + value`` defers to ``value.__radd__``

    def __init__(self, module: HirModuleCore, value: ir.Value) -> None:
        self._module = module
        self.value = value

    @property
    def module(self) -> HirModuleCore:
        return self._module

    @property
    def type(self) -> TensorInfo:
        return TensorInfo.from_mlir(self.value.type)

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def op(self) -> ir.Operation | None:
        """The defining op (None for a function input)."""
        owner = self.value.owner
        if isinstance(owner, ir.Block):
            return None
        return owner.operation if isinstance(owner, ir.OpView) else owner

    @property
    def label(self) -> str | None:
        op = self.op
        return label_of(op.location) if op is not None else None

    def __repr__(self) -> str:
        op = self.op
        src = op.name if op is not None else "input"
        return f"HirValue({self.type} from {src})"

    # -- arithmetic (rlx_mir.binary / activation) ----------------------------------------
    def __add__(self, other: Operand) -> HirValue:
        return self._module._arith("add", self, other)

    def __radd__(self, other: Operand) -> HirValue:
        return self._module._arith("add", other, self)

    def __sub__(self, other: Operand) -> HirValue:
        return self._module._arith("sub", self, other)

    def __rsub__(self, other: Operand) -> HirValue:
        return self._module._arith("sub", other, self)

    def __mul__(self, other: Operand) -> HirValue:
        return self._module._arith("mul", self, other)

    def __rmul__(self, other: Operand) -> HirValue:
        return self._module._arith("mul", other, self)

    def __truediv__(self, other: Operand) -> HirValue:
        return self._module._arith("div", self, other)

    def __rtruediv__(self, other: Operand) -> HirValue:
        return self._module._arith("div", other, self)

    def __neg__(self) -> HirValue:
        return self._module._negate(self)


def to_dims(shape: ShapeLike) -> tuple[int | None, ...]:
    """``None``, ``"?"`` or a symbol name (``"batch"``) is a dynamic dim."""
    out: list[int | None] = []
    for d in shape:
        if d is None or isinstance(d, str):
            out.append(None)
        elif isinstance(d, int | np.integer) and d >= 0:
            out.append(int(d))
        else:
            raise BuildError(f"shape {list(shape)}: dims are sizes >= 0, or None / a name "
                             f"for a dynamic dim; found {d!r}")
    return tuple(out)


class HirModuleCore:
    """A HIR module's MLIR module, functions and op creation (see :class:`HirModule`, the
    class to use)."""

    def __init__(self, name: str = "main", fusion_policy: str = "direct",
                 *, function: str = "main") -> None:
        self._ctx = new_context()
        with self._ctx, ir.Location.unknown():
            self._module = ir.Module.create()
            self._module.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        self.fusion_policy = fusion_policy
        self._nodes: list[ir.Value | ir.Operation] = []
        self._weights: dict[str, ir.Operation] = {}  # name -> its first param op
        self._labels: list[str] = []  # the enclosing ``named`` blocks, innermost last
        self._func = self._new_function(function)

    # -- construction helpers ----------------------------------------------------------
    def _new_function(self, name: str) -> ir.Operation:
        if not name.isidentifier():
            raise BuildError(f"function name: expected an identifier, found {name!r}")
        with self._ctx, ir.Location.unknown(), ir.InsertionPoint(self._module.body):
            ftype = ir.FunctionType.get([], [])
            func_op = ir.Operation.create(
                "func.func", regions=1,
                attributes={"sym_name": ir.StringAttr.get(name),
                            "function_type": ir.TypeAttr.get(ftype)})
            block = func_op.regions[0].blocks.append()
            with ir.InsertionPoint(block):
                ir.Operation.create("func.return")
        return func_op

    @classmethod
    def _wrap(cls, module: ir.Module) -> Self:
        self = cls.__new__(cls)
        self._ctx = module.context
        self._module = module
        self._nodes = []
        self._weights = {}
        self._labels = []
        funcs = [op.operation for op in module.body.operations]
        self._func = funcs[0] if funcs else self._new_function("main")
        for func_op in funcs:
            block = func_op.regions[0].blocks[0]
            self._nodes.extend(block.arguments)
            self._nodes.extend(op.operation for op in block.operations
                               if op.operation.name != "func.return")
        for node in self._nodes:
            if isinstance(node, ir.Operation) and node.name == "rlx_hir.param":
                self._weights.setdefault(ir.StringAttr(node.attributes["name"]).value, node)
        return self

    @property
    def _block(self) -> ir.Block:
        return self._func.regions[0].blocks[0]

    @property
    def _terminator(self) -> ir.Operation:
        """The function's ``func.return``, in constant time: listing the block's operations
        made building quadratic in the op count (and every listed op costs the bindings an
        import lookup): 135M LLaMA 119 s -> well under a second."""
        op = ir.InsertionPoint.at_block_terminator(self._block).ref_operation
        assert op is not None
        return op.operation

    def _update_signature(self) -> None:
        block = self._block
        inputs = [a.type for a in block.arguments]
        outputs = [v.type for v in self._terminator.operands]
        with self._ctx:
            self._func.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(inputs, outputs))

    def _check_value(self, v: HirValue, what: str) -> ir.Value:
        if not isinstance(v, HirValue):
            raise BuildError(f"{what}: expected a HirValue of this module, found "
                             f"{type(v).__name__}")
        if v.module is not self:
            raise BuildError(f"{what}: the value belongs to another HirModule")
        return v.value

    def _emit(
        self,
        schema: OpSchema,
        operands: Sequence[HirValue | None],
        attrs: dict[str, Any],
        *,
        out_shape: ShapeLike | TensorInfo | None = None,
        label: str | None = None,
        default_label: bool = True,
    ) -> list[HirValue]:
        unknown = set(attrs) - {a.name for a in schema.attrs}
        if unknown:
            known = ", ".join(a.name for a in schema.attrs) or "none"
            raise BuildError(f"{schema.full_name}: unknown attribute(s) "
                             f"{', '.join(sorted(unknown))} (known: {known})")
        present = [o for o in operands if o is not None]
        ir_operands = [self._check_value(o, f"{schema.full_name} operand #{i}")
                       for i, o in enumerate(present)]
        if label is None and default_label:
            label = schema.default_label(with_defaults(schema, attrs))
        results: list[TensorInfo] | None = None
        if isinstance(out_shape, TensorInfo):
            results = [out_shape]
        elif out_shape is not None:
            types = [TensorInfo.from_mlir(v.type) for v in ir_operands]
            inferred = validate(schema, types, with_defaults(schema, attrs), label=label)
            want = inferred[0].with_shape(to_dims(out_shape))
            if not want.compatible(inferred[0]):
                raise VerifyError(schema.full_name, "out_shape", f"a shape compatible with "
                                  f"the inferred {inferred[0]}", str(want), label=label)
            results = [want, *inferred[1:]]
        with self._ctx:
            op = create(schema, ir_operands, attrs, loc=label_loc(label), label=label,
                        ip=ir.InsertionPoint(self._terminator), results=results)
        self._nodes.append(op)
        return [HirValue(self, r) for r in op.results]

    def _hir(self, name: str, operands: Sequence[HirValue | None], attrs: dict[str, Any],
             out_shape: ShapeLike | None = None, label: str | None = None) -> HirValue:
        return self._emit(HIR.ops[name], operands, attrs, out_shape=out_shape, label=label)[0]

    def _constant_like(self, data: Any, like: HirValue) -> HirValue:
        """``data`` as a ``rlx_hir.constant`` of ``like``'s element type (no promotion:
        floats round to it, a value an integer type cannot hold exactly is a BuildError)."""
        dtype = like.dtype
        arr = np.asarray(data)
        if arr.dtype.kind not in "biuf":
            raise BuildError(f"arithmetic on {like!r}: expected a HirValue, a number or a "
                             f"numeric array, found {type(data).__name__}")
        with np.errstate(invalid="ignore", over="ignore"):
            cast = arr.astype(dtype.numpy)
        if dtype.is_int and not np.array_equal(cast.astype(arr.dtype), arr):
            raise BuildError(f"arithmetic on {like!r}: {data!r} is not exactly a {dtype} "
                             "(no type promotion: convert one side)")
        with self._ctx:
            attr = ir.DenseElementsAttr.get(np.asarray(cast, order="C"),
                                            type=TensorInfo(tuple(cast.shape), dtype).mlir())
        return self._emit(HIR.ops["constant"], [], {"value": attr}, default_label=False)[0]

    def _arith(self, kind: str, lhs: Operand, rhs: Operand) -> HirValue:
        """``lhs <kind> rhs`` as ``rlx_mir.binary`` (one side may be a number or array)."""
        if not isinstance(lhs, HirValue):
            lhs = self._constant_like(lhs, rhs)
        elif not isinstance(rhs, HirValue):
            rhs = self._constant_like(rhs, lhs)
        return self._emit(MIR.ops["binary"], [lhs, rhs], {"kind": kind},
                          label=self._labels[-1] if self._labels else None,
                          default_label=False)[0]

    def _negate(self, x: HirValue) -> HirValue:
        """``-x``: ``activation neg`` for floats, ``0 - x`` for integers."""
        if x.dtype.is_float:
            return self._emit(MIR.ops["activation"], [x], {"kind": "neg"},
                              label=self._labels[-1] if self._labels else None,
                              default_label=False)[0]
        return self._arith("sub", 0, x)

    # -- functions ---------------------------------------------------------------------
    @property
    def function_names(self) -> list[str]:
        return [ir.StringAttr(op.operation.attributes["sym_name"]).value
                for op in self._module.body.operations]

    def function(self, name: str) -> Self:
        """Build into function ``name`` from now on (created on first use). Weights with
        the same name are shared by all functions: a model's ``prefill`` and ``decode``
        entry points read one set of parameters."""
        for op in self._module.body.operations:
            op = op.operation
            if ir.StringAttr(op.attributes["sym_name"]).value == name:
                self._func = op
                return self
        self._func = self._new_function(name)
        return self

    # -- module properties -------------------------------------------------------------
    @property
    def name(self) -> str:
        return ir.StringAttr(self._module.operation.attributes["sym_name"]).value

    @property
    def fusion_policy(self) -> str:
        return fusion_policy(self._module)

    @fusion_policy.setter
    def fusion_policy(self, policy: str) -> None:
        if policy not in FUSION_POLICIES:
            raise BuildError(f"fusion policy: expected one of {', '.join(FUSION_POLICIES)}, "
                             f"found {policy!r}")
        with self._ctx:
            self._module.operation.attributes[FUSION_POLICY_ATTR] = ir.StringAttr.get(policy)

    def with_fusion_policy(self, policy: str) -> Self:
        self.fusion_policy = policy
        return self

    @property
    def mlir(self) -> ir.Module:
        """The underlying MLIR module (shared, not copied)."""
        return self._module

    @property
    def context(self) -> ir.Context:
        return self._ctx

    def __len__(self) -> int:
        """Number of nodes (inputs and ops, as RLX counts them)."""
        return len(self._nodes)

    @property
    def inputs(self) -> list[HirValue]:
        return [HirValue(self, a) for a in self._block.arguments]

    @property
    def outputs(self) -> list[HirValue]:
        return [HirValue(self, v) for v in self._terminator.operands]

    @property
    def ops(self) -> list[ir.Operation]:
        """The ops of the current function in creation order (no terminator)."""
        return [n for n in self._nodes if isinstance(n, ir.Operation)]

    def _arg_attrs(self) -> list[ir.Attribute]:
        """Each argument's attribute dictionary (``rlx.name``, ``rlx.unsigned``)."""
        if "arg_attrs" not in self._func.attributes:
            with self._ctx:
                return [ir.DictAttr.get({}) for _ in self._block.arguments]
        return list(ir.ArrayAttr(self._func.attributes["arg_attrs"]))

    @property
    def unsigned_inputs(self) -> list[int]:
        """The inputs declared ``unsigned`` (by position)."""
        return unsigned_positions(self._func, "arg_attrs")

    @property
    def unsigned_outputs(self) -> list[int]:
        """The outputs declared ``unsigned`` (by position)."""
        return unsigned_positions(self._func, "res_attrs")

    @property
    def narrow_inputs(self) -> dict[int, str]:
        """The inputs of a narrow type (by position: its name)."""
        return narrow_positions(self._func, "arg_attrs")

    @property
    def narrow_outputs(self) -> dict[int, str]:
        """The outputs of a narrow type (by position: its name)."""
        return narrow_positions(self._func, "res_attrs")

    @property
    def input_names(self) -> list[str]:
        """The user's input names (``rlx.name``; ``argN`` where none was given)."""
        if "arg_attrs" not in self._func.attributes:
            return [f"arg{i}" for i in range(len(self._block.arguments))]
        names = []
        for i, a in enumerate(ir.ArrayAttr(self._func.attributes["arg_attrs"])):
            d = ir.DictAttr(a)
            names.append(ir.StringAttr(d["rlx.name"]).value if "rlx.name" in d else f"arg{i}")
        return names

    # -- labels --------------------------------------------------------------------------
    def named(self, name: str, build: Callable[[Self], HirValue]) -> HirValue:
        """Build with ``build(self)`` and label the op of the returned value ``name``
        (and the ops that ``+ - * /`` on values build inside it)."""
        self._labels.append(name)
        try:
            value = build(self)
        finally:
            self._labels.pop()
        op = value.op
        if op is None:
            raise BuildError(f"named({name!r}): the block returned a function input, not an op")
        with self._ctx:
            op.location = relabel(op.location, name)
        return value

    def label_nodes_since(self, start: int, name: str) -> None:
        """Label every op created at or after node ``start`` that has no label, or only its
        op's default label, ``name`` (what importers do per source node). Inputs, params
        and constants keep their names."""
        if not name:
            return
        with self._ctx:
            for node in self._nodes[start:]:
                if not isinstance(node, ir.Operation) or node.name.endswith(
                        (".param", ".constant")):
                    continue
                current = label_of(node.location)
                if current is None or current == _default_label(node):
                    node.location = relabel(node.location, name)

    # -- outputs, text, verification -----------------------------------------------------
    def set_outputs(self, outputs: Iterable[HirValue], *, unsigned: Iterable[int] = (),
                    narrow: Mapping[int, str] | None = None) -> None:
        """Make ``outputs`` the function results (replaces earlier outputs); ``unsigned``:
        the positions of integer outputs the caller gets as numpy's unsigned types;
        ``narrow``: position -> the narrow type (``"int4"``, ...) an output holds."""
        values = [self._check_value(v, f"output #{i}") for i, v in enumerate(outputs)]
        flagged = sorted(set(unsigned))
        narrow = dict(narrow or {})
        for i in [*flagged, *narrow]:
            if not 0 <= i < len(values):
                raise BuildError(f"set_outputs: output #{i} marked unsigned or narrow: "
                                 f"there are {len(values)} outputs")
            dtype = TensorInfo.from_mlir(values[i].type).dtype
            if i in narrow:
                check_narrow(narrow[i], dtype, f"set_outputs: output #{i}")
            elif dtype not in WORD_TYPES:
                raise BuildError(f"set_outputs: unsigned output #{i}: expected an integer "
                                 f"output of 8 to 64 bits, found {dtype}")
        old = self._terminator
        with self._ctx, ir.Location.unknown():
            ir.Operation.create("func.return", operands=values, ip=ir.InsertionPoint(old))
            if flagged or narrow:
                entries: list[dict[str, ir.Attribute]] = [{} for _ in values]
                for i in flagged:
                    entries[i][UNSIGNED_ATTR] = ir.UnitAttr.get()
                for i, name in narrow.items():
                    entries[i][NARROW_ATTR] = ir.StringAttr.get(name)
                self._func.attributes["res_attrs"] = ir.ArrayAttr.get(
                    [ir.DictAttr.get(e) for e in entries])
            elif "res_attrs" in self._func.attributes:
                del self._func.attributes["res_attrs"]
        old.erase()
        self._update_signature()

    def verify(self) -> None:
        """Re-check every op against its schema and the module against MLIR's verifier."""
        verify_module(self._module, "hir")
        with self._ctx:
            if not self._module.operation.verify():
                raise BuildError("module does not verify")

    def __str__(self) -> str:
        return print_module(self._module)

    def __repr__(self) -> str:
        return f"HirModule(@{self.name}, {len(self)} nodes, policy={self.fusion_policy})"

    @classmethod
    def parse(cls, text: str, source: str = "<string>") -> Self:
        """Read HIR text through MLIR's parser; every op is checked against its schema."""
        module = parse_module(text, source)
        verify_module(module, "hir")
        return cls._wrap(module)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        module = parse_file(path)
        verify_module(module, "hir")
        return cls._wrap(module)

    def lower_to_mir(self, fusion_policy: str | None = None) -> MirModule:
        """A new MIR module (``hir-to-mir`` with this module's, or the given, policy);
        this module is left as it is. The lowering is ``rlx.lowering.lower_to_mir``, which
        ``rlx.lowering`` installs when imported (``import rlx`` does)."""
        return mir_lowering()(self, fusion_policy)

    def lower_for_autodiff(self) -> MirModule:
        """``lower_to_mir`` with the ``for_autodiff`` policy (primitive chains)."""
        return self.lower_to_mir("for_autodiff")

    @classmethod
    def wrap_mir_graph(cls, mir: MirModule | ir.Module | str) -> Self:
        """A HIR module whose ops are the given MIR module's ops (escape-hatch nodes),
        with the ``direct`` policy."""
        if isinstance(mir, MirModule):
            mir = mir.mlir
        text = mir if isinstance(mir, str) else print_module(mir)
        module = parse_module(text)
        verify_module(module, "mir")
        self = cls._wrap(module)
        self.fusion_policy = "direct"
        return self


def _default_label(op: ir.Operation) -> str | None:
    schema = lookup(op.name)
    if schema is None:
        return None
    return schema.default_label(decode(schema, op, check=False).attrs)


__all__ = ["HirModuleCore", "HirValue", "ShapeLike", "to_dims"]
