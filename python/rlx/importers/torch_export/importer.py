"""The walk over an exported program that builds HIR: inputs, weights, blocks, converters.

User inputs become function inputs (a dim torch.export keeps dynamic is ``?``), weights
(parameters, buffers, lifted constants) become ``rlx_hir.param`` ops named by their
module path when they are used (small ones inline constants), outputs keep their order.
Recognized blocks (:mod:`rlx.importers.torch_export.blocks`) are built at their last node;
size-only values (:mod:`rlx.importers.torch_export.probe`) when a run-time op needs them;
every other node through its converter. Ops made from a node are labelled with the node's
module path (``model.layers.0.self_attn``), a block with the path its nodes share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np
import torch
from torch.fx import Node

from rlx.dialects.builder import HirModule, HirValue
from rlx.importers.dims import SizeSource, SymDim, is_static
from rlx.importers.result import unique_name
from rlx.importers.torch_export import (  # noqa: F401 (register)
    ops_nn,
    ops_resample,
    ops_select,
    ops_shape,
    ops_tensor,
)
from rlx.importers.torch_export.blocks import Match, find_blocks
from rlx.importers.torch_export.convert import CONVERTERS, Op, rlx_dtype
from rlx.importers.torch_export.probe import Probe
from rlx.importers.torch_export.program import (
    TORCH_DTYPES,
    ProgramView,
    full_name,
    functional_name,
    is_inplace,
    op_name,
    sym_dim,
    to_numpy,
)
from rlx.importers.torch_export.report import Block, TorchReport
from rlx.ir.diagnostics import ModelImportError, RlxError
from rlx.ir.types import DType

INLINE_MAX_BYTES = 1024
"""Constants up to this size are inline ``rlx_hir.constant`` ops; larger ones weights."""
CREATION = frozenset({"zeros", "ones", "full", "new_zeros", "new_ones", "new_full", "arange"})
"""Size-only ops built at their run-time sizes rather than folded at the largest."""


class ProgramImporter:
    """Builds one exported program into ``h`` (its current function)."""

    def __init__(self, ep: torch.export.ExportedProgram, h: HirModule, source: str, *,
                 blocks: bool = True, param_prefix: str = "") -> None:
        self.g = ProgramView(ep)
        self.probe = Probe(self.g)
        self.h = h
        self.source = source
        self.use_blocks = blocks
        self.param_prefix = param_prefix
        self.values: dict[Node, Any] = {}
        self.reshaped_from: dict[object, HirValue] = {}
        """A reshape's result (its ``ir.Value``) -> the tensor it reshaped: a view that
        rlx cannot say from a flattened tensor is said from that one instead."""
        self.params: dict[str, np.ndarray] = {}
        self._materialized: dict[object, HirValue] = {}
        self._dims: dict[object, list[SymDim]] = {}
        self.sizes = SizeSource(h)
        self.report = TorchReport(source, nodes=sum(n.op == "call_function"
                                                    for n in self.g.nodes))

    # -- errors --------------------------------------------------------------------------
    def where(self, node: Node) -> str:
        scope = self.g.scope(node)
        return (f"{self.source}: error: node '{node.name}' ({full_name(node)})"
                + (f" in module '{scope}'" if scope else ""))

    def fail(self, node: Node, message: str) -> NoReturn:
        raise ModelImportError(f"{self.where(node)}: {message}")

    # -- sizes ---------------------------------------------------------------------------
    def known(self, v: HirValue, dims: Sequence[SymDim]) -> HirValue:
        """Record that ``v`` has sizes ``dims``."""
        dims = list(dims)
        if len(dims) == len(v.shape):
            self._dims[v.value] = dims
            self.sizes.note(v, dims)
        return v

    def dims_of(self, v: HirValue | np.ndarray) -> list[SymDim]:
        if isinstance(v, np.ndarray):
            return [int(d) for d in v.shape]
        known = self._dims.get(v.value)
        if known is not None:
            return list(known)
        return [d if d is not None else self.sizes_fail(v) for d in v.shape]

    def sizes_fail(self, v: HirValue) -> NoReturn:
        raise ModelImportError(f"{self.source}: error: a value of type {v.type} has "
                               "dynamic sizes the importer did not record (an rlx bug)")

    # -- values --------------------------------------------------------------------------
    @staticmethod
    def np_dtype(dtype: DType) -> np.dtype:
        if dtype == DType.BF16:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return dtype.numpy

    def value(self, node: Node) -> Any:
        """The value of ``node``: a HIR value, a numpy array (weight or folded), a size
        (int or sympy), or a list of those (ops with several results)."""
        if node in self.values:
            return self.values[node]
        if node in self.g.weights:
            arr = self.g.weight(node)
            self.values[node] = arr
            return arr
        if self.probe._is_size(node):
            return sym_dim(self.g.val(node))
        if node.op == "call_function" and self.probe.size_only(node):
            self._realize(node)
            return self.values[node]
        self.fail(node, "used before it is computed (an rlx importer bug)")

    def materialize(self, arr: np.ndarray, source: Node | None, name: str | None,
                    user: Node) -> HirValue:
        """A constant as a HIR value: inline when small, a scalar expanded when all equal,
        else a weight named by its module path (or ``name``)."""
        key: object = source if source is not None else (name, arr.shape, arr.dtype.str,
                                                         hash(arr.tobytes()))
        if key in self._materialized:
            return self._materialized[key]
        if arr.dtype.name != "bfloat16" and arr.dtype.kind not in "fib":
            self.fail(user, f"constant '{name}' has element type {arr.dtype}")
        dtype = rlx_dtype(_torch_dtype(arr), lambda m: self.fail(user, f"constant '{name}': "
                                                                  + m))
        data = np.ascontiguousarray(arr)
        if data.nbytes <= INLINE_MAX_BYTES or data.size == 0:
            value = self.h.constant(data.view(np.uint16) if dtype == DType.BF16 else data,
                                    dtype)
        elif np.all(data == data.reshape(-1)[0]):
            one = self.h.constant(data.reshape(-1)[:1].reshape([1] * data.ndim), dtype)
            value = self.h.mir("expand", [one], target_shape=list(data.shape))
        else:
            pname = self._param_name(self.g.weight_name(source) if source in self.g.weights
                                     else (name or "const"))
            value = self.h.param(pname, data.shape, dtype)
            self.params[pname] = data
            self.report.params += 1
            self.report.param_bytes += data.nbytes
        self._materialized[key] = value
        return value

    def weight_tensor(self, arr: np.ndarray, name: str, user: Node) -> HirValue:
        """A weight the importer derived (a transposed linear weight, a RoPE table)."""
        return self.materialize(arr, None, name, user)

    def _param_name(self, name: str) -> str:
        return unique_name(self.param_prefix, name, self.params)

    def _realize(self, node: Node) -> None:
        """A size-only node: its value at import time (sliced to the run-time sizes), or
        op by op when it cannot be folded."""
        dynamic = self.g.is_tensor(node) and not all(is_static(d) for d in self.g.dims(node))
        direct = dynamic and op_name(node) in CREATION
        folded = self.probe.fold(node) if self.g.is_tensor(node) and not direct else None
        if folded is None:
            self._convert(node)
            return
        full, dynamic = folded
        arr = to_numpy(full)
        self.report.folded[full_name(node)] += 1
        if not dynamic:
            self.values[node] = arr
            return
        start = len(self.h)
        v = self.materialize(arr, None, f"{node.name}.table", node)
        dims = self.g.dims(node)
        for axis in dynamic:
            v = self.h.mir("gather", [v, self.sizes.iota(dims[axis], DType.I64, lambda m:
                                                          self.fail(node, m))], axis=axis)
        self.values[node] = self.known(v, dims)
        self.h.label_nodes_since(start, self.g.label(node))

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> list[HirValue]:
        if self.g.mutations:
            raise ModelImportError(f"{self.source}: error: the program mutates state "
                                   f"({', '.join(self.g.mutations)}); export the model in "
                                   "eval mode (model.eval()) without in-place buffer updates")
        for node in self.g.user_inputs:
            if not self.g.is_tensor(node) and not self.g.users[node]:
                continue  # a constant argument (use_cache=False) the export specialized
            self.values[node] = self._input(node)
        matches = find_blocks(self) if self.use_blocks else {}
        covered = {n for m in matches.values() for n in m.nodes}
        needed = self._needed(matches)
        for node in self.g.nodes:
            if node.op != "call_function" or node not in needed or node in self.values:
                continue
            if node in matches:
                self._emit_block(matches[node])
            elif node not in covered and not self.probe.size_only(node):
                self._convert(node)
        return [self._output(o) for o in self.g.outputs]

    def _needed(self, matches: dict[Node, Match]) -> set[Node]:
        """The nodes the outputs depend on (a block needs its inputs, not its insides)."""
        needed: set[Node] = set()
        stack = [o for o in self.g.outputs if isinstance(o, Node)]
        writes: dict[Node, list[Node]] = {}  # a tensor -> the in-place ops that write it
        for n in self.g.nodes:
            if n.op == "call_function" and is_inplace(n):
                self._check_inplace(n)
                writes.setdefault(n.args[0], []).append(n)  # type: ignore[arg-type]
        while stack:
            n = stack.pop()
            if n in needed:
                continue
            needed.add(n)
            stack.extend(matches[n].inputs if n in matches else n.all_input_nodes)
            # what reads a tensor after an in-place write reads the written value, whether
            # or not anything uses the in-place op's own result
            stack.extend(writes.get(n, []))
        return needed

    def _input(self, node: Node) -> HirValue:
        val = self.g.val(node)
        user = next(iter(self.g.users[node]), node)
        if not isinstance(val, torch.Tensor):
            self.fail(user, f"input '{node.name}' is a {type(val).__name__}: rlx takes tensor "
                      "inputs")
        dtype = rlx_dtype(val.dtype, lambda m: self.fail(user, f"input '{node.name}': {m}"))
        dims = self.g.dims(node)
        self._check_sizes(node, dims)
        v = self.h.input(node.name, [int(d) if is_static(d) else None for d in dims], dtype)
        return self.known(v, dims)

    def _check_sizes(self, node: Node, dims: Sequence[SymDim]) -> None:
        for d in dims:
            if not is_static(d) and any(s.name.startswith("u") for s in d.free_symbols):
                self.fail(node, f"a size ({d}) that depends on the data (nonzero, unique, "
                          "boolean masking...): rlx needs sizes known from the inputs' sizes")

    def _convert(self, node: Node) -> None:
        if self.g.passes_through(node):
            self.values[node] = self.value(node.args[0])  # type: ignore[arg-type]
            return
        if self.g.is_tensor(node):
            self._check_sizes(node, self.g.dims(node))
        conv = CONVERTERS.get(functional_name(node))
        if conv is None:
            self.fail(node, "no rlx converter for this ATen op")
        start = len(self.h)
        try:
            out = conv(Op(self, node))
        except ModelImportError:
            raise
        except RlxError as e:  # an op the converter built breaks its schema
            raise ModelImportError(f"{self.where(node)}: {str(e).removeprefix('error: ')}"
                                   ) from None
        self._store(node, out)
        if is_inplace(node):  # later readers of the written tensor see the new value
            self.values[node.args[0]] = self.values[node]  # type: ignore[index]
        self.h.label_nodes_since(start, self.g.label(node))
        self.report.converted[full_name(node)] += 1

    def _check_inplace(self, node: Node) -> None:
        """An in-place op is its functional op, whose result replaces the written tensor
        for the nodes after it. That holds when the written tensor is an op's own result;
        writing through a view (``x[:, :3].add_(1)``) would also change the tensor it views,
        which the walk does not track: one error instead."""
        target = node.args[0]
        producer = getattr(getattr(target, "target", None), "_schema", None)
        viewed = producer is not None and any(  # Tensor(a): a view; Tensor(a!): in place
            r.alias_info is not None and not r.alias_info.is_write for r in producer.returns)
        if not isinstance(target, Node) or target.op != "call_function" or viewed:
            self.fail(node, f"an in-place op writing {getattr(target, 'name', target)!r}, "
                      "a view or an input of the program: rlx converts in-place ops on "
                      "the results of other ops only")

    def _store(self, node: Node, out: Any) -> None:
        val = self.g.val(node)
        if isinstance(out, list | tuple) and isinstance(val, list | tuple):
            for v, meta in zip(out, val, strict=False):
                if isinstance(v, HirValue) and isinstance(meta, torch.Tensor):
                    self.known(v, [sym_dim(d) for d in meta.shape])
            self.values[node] = list(out)
            return
        if isinstance(out, HirValue):
            rlx_dtype(_torch_dtype_of(out), lambda m: self.fail(node, m))
            if isinstance(val, torch.Tensor):
                self.known(out, self.g.dims(node))
        self.values[node] = out

    def _emit_block(self, match: Match) -> None:
        start = len(self.h)
        try:
            out = match.emit(self)
        except ModelImportError:
            raise
        except RlxError as e:
            raise ModelImportError(f"{self.where(match.root)}: "
                                   f"{str(e).removeprefix('error: ')}") from None
        self.values[match.root] = self.known(out, self.g.dims(match.root))
        label = self.g.common_scope(match.nodes) or match.root.name
        self.h.label_nodes_since(start, label)
        ordered = sorted(match.nodes, key=self.g.index.__getitem__)
        self.report.blocks.append(Block(match.kind, label, tuple(n.name for n in ordered),
                                        self.g.common_scope(match.nodes)))

    def _output(self, out: object) -> HirValue:
        if not isinstance(out, Node):
            raise ModelImportError(f"{self.source}: error: an output is {out!r}, not a tensor "
                                   "computed by the program")
        v = self.value(out)
        if isinstance(v, HirValue):
            return v
        if isinstance(v, np.ndarray):
            start = len(self.h)
            t = self.materialize(v, out if out in self.g.weights else None, out.name, out)
            self.h.label_nodes_since(start, self.g.label(out))
            return t
        self.fail(out, f"the output is {type(v).__name__}, not a tensor")


def _torch_dtype(arr: np.ndarray) -> torch.dtype:
    if arr.dtype.name == "bfloat16":
        return torch.bfloat16
    try:
        return torch.from_numpy(np.zeros(0, arr.dtype)).dtype
    except TypeError:
        return torch.complex128


def _torch_dtype_of(v: HirValue) -> torch.dtype:
    return next((t for t, d in TORCH_DTYPES.items() if d == v.dtype), torch.float64)


__all__ = ["INLINE_MAX_BYTES", "ProgramImporter"]
