"""What the ONNX block matchers share: :class:`Match` (a subgraph to import as one block)
and :class:`GraphView` (producers, consumers, constants and static shapes of the graph)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize, shape_vector, symbol, tidy
from rlx.importers.onnx_ops import FOLDERS, Node, Value, is_symbolic
from rlx.importers.onnx_ops.shape import clamp_range
from rlx.ir.diagnostics import RlxError

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter


@dataclass
class Match:
    """A subgraph to import as one block, emitted at node ``output``."""

    kind: str
    nodes: set[int]
    output: int
    outputs: list[str]
    label: str
    emit: Callable[[GraphImporter], list[Value]]
    scope: str = ""
    parts: dict[str, Any] = field(default_factory=dict)
    """What a larger block made of this one needs (input names, weights, attributes)."""


@dataclass
class GraphView:
    """Producers, consumers, constants and (partial) static shapes of the graph."""

    imp: GraphImporter
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    outputs: set[str] = field(default_factory=set)
    taken: set[int] = field(default_factory=set)

    ahead: dict[str, np.ndarray] = field(default_factory=dict)
    """Values the walk will fold that the pre-pass could not: computed from ``Shape`` of
    tensors whose sizes the annotations and shape inference know (symbolic where dynamic),
    as the walk will (the ``1 / sqrt(head_dim)`` the TorchScript exporter computes from
    ``Shape(q)`` when the sequence is dynamic)."""

    def __post_init__(self) -> None:
        for node in self.imp.nodes:
            for o in node.proto.output:
                if o:
                    self.producer[o] = node.index
            for i in node.proto.input:
                if i:
                    self.consumers[i].append(node.index)
        self.outputs = {o.name for o in self.imp.graph.output}
        for node in self.imp.nodes:
            self._fold_ahead(node)

    def _fold_ahead(self, node: Node) -> None:
        outputs = [o for o in node.proto.output if o]
        if not outputs or all(isinstance(self.imp.values.get(o), np.ndarray) for o in outputs):
            return
        if node.op_type == "Shape":
            dims = self._sizes(node.proto.input[0])
            if dims is None:
                return
            start, end = clamp_range(node.attr("start", 0), node.attr("end"), len(dims))
            self.ahead[outputs[0]] = tidy(shape_vector(dims[start:end]))
            return
        fold = FOLDERS.get(node.op_type)
        inputs = [self._value(n) if n else None for n in node.proto.input]
        if fold is None or any(n and v is None for n, v in zip(node.proto.input, inputs,
                                                               strict=True)):
            return
        try:
            out = fold(node, inputs)
        except (RlxError, ArithmeticError, TypeError, ValueError):  # the walk will say
            return
        for name, v in zip(node.proto.output, out or [], strict=False):
            if name:
                self.ahead[name] = tidy(np.asarray(v))

    def _sizes(self, name: str) -> list[SymDim] | None:
        """The inferred sizes of ``name``, a size nothing knows as a symbol of its own
        (only the static entries of what is computed from them matter to the matchers)."""
        dims = self.imp.inferred.get(name)
        return None if dims is None else [symbol(f"{name}[{a}]?") if d is None else d
                                          for a, d in enumerate(dims)]

    def _value(self, name: str) -> np.ndarray | None:
        v = self.imp.values.get(name)
        return v if isinstance(v, np.ndarray) else self.ahead.get(name)

    def node(self, name: str, *ops: str) -> Node | None:
        """The producer of ``name`` when its op is one of ``ops`` and it is still free."""
        i = self.producer.get(name)
        if i is None or i in self.taken or isinstance(self.imp.values.get(name), np.ndarray):
            return None
        node = self.imp.nodes[i]
        return node if node.op_type in ops else None

    def const(self, name: str) -> np.ndarray | None:
        v = self._value(name)
        return v if v is not None and not is_symbolic(v) else None

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        v = self.imp.values.get(name)
        if isinstance(v, HirValue):
            return tuple(v.shape)
        if isinstance(v, np.ndarray):
            return tuple(v.shape)
        inferred = self.imp.shapes.get(name)
        if inferred is not None and None not in inferred:
            return inferred
        found = self._reshaped(name)
        if found is None or inferred is None or len(found) != len(inferred):
            return inferred or found
        return tuple(i if i is not None else f for i, f in zip(inferred, found, strict=True))

    def _reshaped(self, name: str) -> tuple[int | None, ...] | None:
        """Static sizes of a ``Reshape`` to a target the look-ahead knows (the
        TorchScript exporter's ``[B, S, H, hd]`` of ``Concat(Shape(x)[0], ...)``, whose
        static entries shape inference loses), or of a ``Transpose`` of one."""
        i = self.producer.get(name)
        node = self.imp.nodes[i] if i is not None else None
        if node is not None and node.op_type == "Transpose":
            x = self.shape(node.proto.input[0])
            perm = node.ints("perm") or list(range(len(x or ())))[::-1]
            return None if x is None or len(perm) != len(x) else tuple(x[p] for p in perm)
        if node is None or node.op_type != "Reshape" or len(node.proto.input) < 2:
            return None
        target = self._value(node.proto.input[1])
        if target is None or target.ndim != 1:
            return None
        x = self._sizes(node.proto.input[0])
        entries: list[SymDim | None] = []
        for k, t in enumerate(target.tolist()):
            if is_static(t) and int(t) == 0 and not node.attr("allowzero", 0):
                entries.append(x[k] if x is not None and k < len(x) else None)
            else:
                entries.append(None if is_static(t) and int(t) < 0 else normalize(t))
        free = [k for k, t in enumerate(target.tolist()) if is_static(t) and int(t) == -1]
        known = [e for k, e in enumerate(entries) if k not in free]
        if len(free) == 1 and x is not None and None not in known:
            inferred = sympy.simplify(sympy.sympify(math.prod(x)) / math.prod(known))
            entries[free[0]] = int(inferred) if inferred.is_Integer else None
        return tuple(int(e) if e is not None and is_static(e) else None for e in entries)

    def closed(self, nodes: set[int], root: int) -> bool:
        """Every value made inside ``nodes`` (but the root's) is used only inside."""
        for i in nodes:
            if i == root:
                continue
            for o in self.imp.nodes[i].proto.output:
                if o and (o in self.outputs or any(c not in nodes for c in self.consumers[o])):
                    return False
        return True

    def axis_is_last(self, name: str, axes: Sequence[int]) -> bool:
        shape = self.shape(name)
        if shape is None or len(axes) != 1:
            return False
        return int(axes[0]) % len(shape) == len(shape) - 1


def scalar(arr: np.ndarray | None) -> float | None:
    if arr is None or arr.size != 1 or arr.dtype.kind not in "fiu":
        return None
    return float(arr.reshape(-1)[0])


def other_input(node: Node, name: str) -> str:
    """The other input of a binary node."""
    a, b = node.proto.input[0], node.proto.input[1]
    return b if a == name else a


def tensor_of(imp: GraphImporter, node: Node, name: str) -> HirValue:
    v = imp.values[name]
    return node.as_tensor(v, name)


def const_tensor(imp: GraphImporter, node: Node, arr: np.ndarray, name: str) -> HirValue:
    return imp.materialize(arr, name, node)


__all__ = ["GraphView", "Match", "const_tensor", "other_input", "scalar", "tensor_of"]
