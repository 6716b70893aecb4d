"""What the ONNX block matchers share: :class:`Match` (a subgraph to import as one block)
and :class:`GraphView` (producers, consumers, constants and static shapes of the graph)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import shape_vector, tidy
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
            dims = self.imp.inferred.get(node.proto.input[0])
            if dims is None or None in dims:
                return
            start, end = clamp_range(node.attr("start", 0), node.attr("end"), len(dims))
            self.ahead[outputs[0]] = tidy(shape_vector(dims[start:end]))  # type: ignore[arg-type]
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
        return self.imp.shapes.get(name)

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
