"""What the ONNX block matchers share: :class:`Match` (a subgraph to import as one block)
and :class:`GraphView` (producers, consumers, constants and static shapes of the graph)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops import Node, Value, is_symbolic

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

    def __post_init__(self) -> None:
        for node in self.imp.nodes:
            for o in node.proto.output:
                if o:
                    self.producer[o] = node.index
            for i in node.proto.input:
                if i:
                    self.consumers[i].append(node.index)
        self.outputs = {o.name for o in self.imp.graph.output}

    def node(self, name: str, *ops: str) -> Node | None:
        """The producer of ``name`` when its op is one of ``ops`` and it is still free."""
        i = self.producer.get(name)
        if i is None or i in self.taken or isinstance(self.imp.values.get(name), np.ndarray):
            return None
        node = self.imp.nodes[i]
        return node if node.op_type in ops else None

    def const(self, name: str) -> np.ndarray | None:
        v = self.imp.values.get(name)
        return v if isinstance(v, np.ndarray) and not is_symbolic(v) else None

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
