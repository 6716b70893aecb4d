"""What the torch importer reads from a ``torch.export.ExportedProgram``: its nodes, their
users, the weights behind placeholders, every value's symbolic sizes (from the
FakeTensors torch.export records in ``node.meta["val"]``), and the module path each node
comes from (``node.meta["nn_module_stack"]``).

Ops are named by their ATen overload packet (``linear``, ``scaled_dot_product_attention``,
``getitem`` for ``operator.getitem``); *pass-through* ops (``alias``, ``clone``, dropout
in eval mode, a ``to`` that keeps the element type) are seen through by the block matchers.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
import sympy
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx import Node

from rlx.importers.dims import SymDim, normalize, symbol
from rlx.ir.types import DType

IGNORED = frozenset({"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
                     "_assert_async"})
"""Ops that check and produce nothing rlx needs: never converted, never counted as users."""

CASTS = frozenset({"to", "_to_copy", "type_as"})
PASS_THROUGH = frozenset({"alias", "clone", "contiguous", "detach", "lift_fresh_copy",
                          "dropout", "feature_dropout", "alpha_dropout"})

TORCH_DTYPES: dict[torch.dtype, DType] = {
    torch.float32: DType.F32, torch.float16: DType.F16, torch.bfloat16: DType.BF16,
    torch.bool: DType.I1, torch.int8: DType.I8, torch.int16: DType.I16,
    torch.int32: DType.I32, torch.int64: DType.I64,
}
"""Element types a run-time tensor may have (f64, which only the ONNX importer takes, and
unsigned and complex ones may not)."""


def op_name(node: Node) -> str:
    """``linear`` for ``aten.linear.default``, ``getitem`` for ``operator.getitem``,
    ``placeholder`` / ``output`` for those nodes."""
    if node.op != "call_function":
        return node.op
    target = node.target
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


def is_inplace(node: Node) -> bool:
    """An in-place ATen op (``add_``, ``hardswish_``): its schema writes its first argument.
    (``nn.ReLU(inplace=True)`` and ``out += identity`` export to these.)"""
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.arguments or not op_name(node).endswith("_"):
        return False
    alias = schema.arguments[0].alias_info
    return alias is not None and alias.is_write


def functional_name(node: Node) -> str:
    """The op's name, an in-place variant's as its functional op's (``add_`` -> ``add``)."""
    name = op_name(node)
    return name[:-1] if is_inplace(node) else name


def full_name(node: Node) -> str:
    """The op as torch prints it: ``aten.linear.default`` (``getitem``)."""
    if node.op != "call_function" or node.target is operator.getitem:
        return op_name(node)
    return str(node.target)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A weight as numpy (bf16 through ml_dtypes, as the ONNX importer holds it)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def sym_dim(d: object) -> SymDim:
    """A torch size (int or SymInt) as an rlx size (sympy over rlx's symbols)."""
    if isinstance(d, int):
        return d
    expr = d.node.expr if isinstance(d, torch.SymInt) else d
    if not isinstance(expr, sympy.Expr):
        raise TypeError(f"not a size: {d!r}")
    return normalize(expr.xreplace({s: symbol(s.name) for s in expr.free_symbols}))


def _bound(v: object) -> int | None:
    """A dim's range bound as an int, None when unbounded: ``Dim.AUTO`` and a ``Dim``
    without ``max`` have torch's ``int_oo``, which calls itself finite and integer but is
    no sympy ``Integer`` (``int()`` of it raises)."""
    v = sympy.sympify(v)
    return int(v) if v.is_Integer else None


class ProgramView:
    """The nodes of one exported program, with what the importer and the matchers ask."""

    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.graph = ep.graph
        self.nodes: list[Node] = list(ep.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.users: dict[Node, list[Node]] = defaultdict(list)
        for n in self.nodes:
            if op_name(n) in IGNORED:
                continue
            for arg in n.all_input_nodes:
                self.users[arg].append(n)
        sig = ep.graph_signature
        self.weights: dict[Node, tuple[str, torch.Tensor]] = {}
        self.user_inputs: list[Node] = []
        by_name = {n.name: n for n in self.nodes}
        for spec in sig.input_specs:
            node = by_name[spec.arg.name]  # type: ignore[union-attr]
            if spec.kind == InputKind.USER_INPUT:
                self.user_inputs.append(node)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                               InputKind.CONSTANT_TENSOR):
                self.weights[node] = (spec.target, self._weight(spec.target))  # type: ignore[arg-type]
        out = next(n for n in self.nodes if n.op == "output")
        results = list(out.args[0])  # type: ignore[arg-type]
        self.outputs: list[Node | Any] = []
        self.mutations: list[str] = []
        for spec, r in zip(sig.output_specs, results, strict=True):
            if spec.kind == OutputKind.USER_OUTPUT:
                self.outputs.append(r)
            else:
                self.mutations.append(f"{spec.kind.name.lower()} of '{spec.target}'")
        self.output_nodes = {r for r in self.outputs if isinstance(r, Node)}
        # a derived dim (``2 * Dim("h")``) has an expression as its key, its range that
        # of its symbols: the symbols' own entries are kept
        self.ranges = {symbol(s.name): (_bound(r.lower), _bound(r.upper))
                       for s, r in ep.range_constraints.items() if getattr(s, "is_Symbol", False)}

    def _weight(self, target: str) -> torch.Tensor:
        if target in self.ep.state_dict:
            return self.ep.state_dict[target]
        value = self.ep.constants[target]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"constant '{target}' is a {type(value).__name__}")
        return value

    # -- naming ------------------------------------------------------------------------
    @staticmethod
    def scope(node: Node) -> str:
        """The module path of ``node`` (``model.layers.0.self_attn``); "" at top level."""
        stack = node.meta.get("nn_module_stack") or {}
        paths = [v[0] for v in stack.values() if isinstance(v, tuple) and v
                 and not str(v[0]).startswith("_empty")]
        return str(paths[-1]) if paths else ""

    def label(self, node: Node) -> str:
        """The label of the ops made from ``node``: its module path, else its name."""
        return self.scope(node) or node.name

    @staticmethod
    def common_scope(nodes: Iterable[Node]) -> str:
        """The deepest module path the nodes share."""
        parts = [ProgramView.scope(n).split(".") for n in nodes if ProgramView.scope(n)]
        if not parts:
            return ""
        common = parts[0]
        for p in parts[1:]:
            k = 0
            while k < min(len(common), len(p)) and common[k] == p[k]:
                k += 1
            common = common[:k]
        return ".".join(common)

    # -- values ------------------------------------------------------------------------
    @staticmethod
    def val(node: Node) -> Any:
        return node.meta.get("val")

    def is_tensor(self, node: Node) -> bool:
        return isinstance(self.val(node), torch.Tensor)

    def dims(self, node: Node) -> list[SymDim]:
        v = self.val(node)
        return [sym_dim(d) for d in v.shape]

    def shape(self, node: Node) -> tuple[int | None, ...] | None:
        """Static sizes (None where dynamic); None when ``node`` is not a tensor."""
        v = self.val(node)
        if not isinstance(v, torch.Tensor):
            return None
        return tuple(d if isinstance(d, int) else None for d in v.shape)

    def dtype(self, node: Node) -> torch.dtype | None:
        v = self.val(node)
        return v.dtype if isinstance(v, torch.Tensor) else None

    def weight(self, node: Node) -> np.ndarray | None:
        """The weight (parameter, buffer, lifted constant) a placeholder stands for."""
        found = self.weights.get(node) if isinstance(node, Node) else None
        return None if found is None else to_numpy(found[1])

    def weight_name(self, node: Node) -> str:
        return self.weights[node][0]

    # -- matching ----------------------------------------------------------------------
    def op(self, node: object, *names: str) -> Node | None:
        """``node`` when it is an FX node whose op is one of ``names``."""
        if not isinstance(node, Node) or node.op != "call_function":
            return None
        return node if op_name(node) in names else None

    @staticmethod
    def arg(node: Node, i: int, name: str, default: Any = None) -> Any:
        if len(node.args) > i:
            return node.args[i]
        return node.kwargs.get(name, default)

    def passes_through(self, node: Node) -> bool:
        """An op whose result is its input (a copy, a dropout in eval mode, a cast to the
        same element type)."""
        name = functional_name(node) if node.op == "call_function" else node.op
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], Node):
            return False
        if name in ("dropout", "feature_dropout", "alpha_dropout"):
            return not self.arg(node, 2, "train", False)
        if name in PASS_THROUGH:
            return True
        if name == "slice":
            return self._full_slice(node)
        if name in CASTS:
            src = node.args[0]
            return self.dtype(node) == self.dtype(src) and self.is_tensor(src)
        return False

    def _full_slice(self, node: Node) -> bool:
        """``x[:, 0:]``-style slices that keep the whole axis."""
        dims, out = self.shape(node.args[0]), self.shape(node)  # type: ignore[arg-type]
        start, step = self.arg(node, 2, "start", 0), self.arg(node, 4, "step", 1)
        return dims is not None and dims == out and start in (0, None) and step == 1 \
            and self.dims(node) == self.dims(node.args[0])  # type: ignore[arg-type]

    def through(self, node: object, nodes: set[Node]) -> object:
        """``node`` with the pass-through ops before it skipped (each added to ``nodes``)."""
        while isinstance(node, Node) and self.passes_through(node):
            nodes.add(node)
            node = node.args[0]
        return node

    def closed(self, nodes: set[Node], root: Node) -> bool:
        """Every value made inside ``nodes`` (but the root's) is used only inside."""
        for n in nodes:
            if n is root:
                continue
            if n in self.output_nodes or any(u not in nodes for u in self.users[n]):
                return False
        return True


__all__ = ["CASTS", "IGNORED", "PASS_THROUGH", "TORCH_DTYPES", "ProgramView", "full_name",
           "op_name", "sym_dim", "to_numpy"]
