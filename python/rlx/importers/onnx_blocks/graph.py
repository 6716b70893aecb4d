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
from rlx.importers.onnx_ops.indexing import slice_range
from rlx.importers.onnx_ops.shape import clamp_range
from rlx.importers.onnx_sizes import SAME_SHAPE
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

    carried: dict[str, list[SymDim | None]] = field(default_factory=dict)
    """Sizes shape inference leaves unknown, carried exactly from the one runtime input of
    a node that keeps its sizes (see :meth:`_carry`)."""
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
            self._carry(node)
            self._fold_ahead(node)

    def _carry(self, node: Node) -> None:
        """Sizes of ``node``'s result that shape inference does not know, taken from the
        inputs they are the sizes of: the broadcast of an elementwise op's, norm's or
        softmax's operands (per axis, a static size other than 1, else the one size all
        others share; constants count by their shapes), a ``MatMul`` by a constant matrix
        (the input's leading sizes), a ``Transpose``. Exact, not a guess: the TorchScript
        exporter's head reshapes take ``Shape(h)[0]`` of the hidden state ``h`` while they
        reshape ``h W + b``, and one unknown size of ``h`` must be the same size in both;
        RoPE's ``q cos + rotate(q) sin`` keeps q's head count."""
        out = node.proto.output[0] if node.proto.output else ""
        known = self.imp.inferred.get(out)
        if not out or known is None or None not in known:
            return
        runtime = [n for n in node.proto.input if n and self._value(n) is None]
        consts = [self._value(n) for n in node.proto.input if n and n not in runtime]
        ins = [self._sizes(n) for n in runtime]
        if not ins or any(x is None for x in ins):
            return
        x = ins[0]
        dims: list[SymDim | None] | None = None
        if node.op_type in SAME_SHAPE:
            dims = _broadcast([*ins, *([int(d) for d in c.shape] for c in consts)])  # type: ignore[union-attr]
        elif node.op_type == "MatMul" and len(runtime) == 1 and runtime[0] == node.proto.input[
                0] and len(consts) == 1 and consts[0].ndim == 2 and len(x) >= 2:  # type: ignore[union-attr,arg-type]
            dims = [*x[:-1], int(consts[0].shape[-1])]  # type: ignore[union-attr,index]
        elif node.op_type == "Slice" and node.version >= 10 and runtime == [
                node.proto.input[0]]:
            names = [*node.proto.input[1:], "", ""][:4]
            args = [self.const(n) if n else None for n in names]
            if all(a is not None for a, n in zip(args, names, strict=True) if n):
                dims = _sliced(x, args)  # type: ignore[arg-type]
        elif node.op_type == "Concat" and len({len(d) for d in ins}) == 1 and not consts:  # type: ignore[arg-type]
            axis = node.attr("axis") % len(x)  # type: ignore[arg-type]
            dims = _broadcast([[*d[:axis], 1, *d[axis + 1:]] for d in ins])  # type: ignore[index,misc]
            sizes = [d[axis] for d in ins]  # type: ignore[index]
            dims[axis] = sum(int(d) for d in sizes) if all(is_static(d) for d in sizes) \
                else None
        elif node.op_type == "Transpose":
            perm = node.ints("perm") or list(range(len(x)))[::-1]  # type: ignore[arg-type]
            dims = [x[p] for p in perm] if len(perm) == len(x) else None  # type: ignore[index,arg-type]
        if dims is not None and len(dims) == len(known):
            self.carried[out] = [k if k is not None else d for k, d in zip(known, dims,
                                                                          strict=True)]

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
        dims = self.carried.get(name) or self.imp.inferred.get(name)
        if dims is None:
            return None
        found = self._reshaped(name) if None in dims else None
        if found is not None and len(found) == len(dims):
            dims = tuple(d if d is not None else f for d, f in zip(dims, found, strict=True))
        return [symbol(f"{name}[{a}]?") if d is None else d for a, d in enumerate(dims)]

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
        carried = self.carried.get(name)
        if carried is not None:
            inferred = tuple(int(d) if d is not None and is_static(d) else None
                             for d in carried)
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


def _sliced(x: list[SymDim], args: list[np.ndarray | None]) -> list[SymDim | None] | None:
    """Sizes of a Slice of sizes ``x`` by constant starts / ends / axes / steps: a static
    axis as Python's slice gives it, a dynamic one kept when taken whole, else None."""
    starts, ends, axes, steps = args
    if starts is None or ends is None:
        return None
    rank = len(x)
    axes_list = list(range(starts.size)) if axes is None else [int(a) % rank
                                                                for a in axes.reshape(-1)]
    step_list = [1] * len(axes_list) if steps is None else [int(v) for v in steps.reshape(-1)]
    out: list[SymDim | None] = list(x)
    for a, lo, hi, step in zip(axes_list, starts.reshape(-1).tolist(),
                               ends.reshape(-1).tolist(), step_list, strict=False):
        if is_static(x[a]):
            out[a] = slice_range(int(x[a]), int(lo), int(hi), step)[1]
        elif not (lo == 0 and hi >= 2**31 - 1 and step == 1):
            out[a] = None
    return out


def _broadcast(shapes: list[list[SymDim]]) -> list[SymDim | None]:
    """numpy's broadcast of sizes: per axis, a static size other than 1 where one input has
    it, else the size every input that is not 1 there shares; None where they differ.
    Exact, where ``onnx_sizes.propagated``'s broadcast (a hint for the walk, which checks
    sizes at run time) takes the first dynamic size."""
    rank = max(len(x) for x in shapes)
    out: list[SymDim | None] = []
    for axis in range(rank):
        sizes = {x[axis - rank + len(x)] for x in shapes if axis - rank + len(x) >= 0}
        static = {int(d) for d in sizes if is_static(d) and int(d) != 1}
        dynamic = {d for d in sizes if not is_static(d)}
        if static:
            out.append(static.pop() if len(static) == 1 else None)
        else:
            out.append(dynamic.pop() if len(dynamic) == 1 else None if dynamic else 1)
    return out


def const_tensor(imp: GraphImporter, node: Node, arr: np.ndarray, name: str) -> HirValue:
    return imp.materialize(arr, name, node)


__all__ = ["GraphView", "Match", "const_tensor", "other_input", "scalar", "tensor_of"]
