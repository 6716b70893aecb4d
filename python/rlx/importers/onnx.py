"""Import ONNX models as rlx HIR modules: ``rlx.importers.onnx.load(path)`` and the
``rlx-import-onnx`` tool.

Built on the ``onnx`` package (parsing, the checker, shape inference). Graph inputs become
function inputs (symbolic dims stay ``?``), initializers become ``rlx_hir.param`` weights
(small ones inline constants), outputs keep their order. Nodes whose inputs are all known
at import time are folded in numpy (shape arithmetic, ``Constant``, ``Range``, ...);
common subgraphs are recognized as HIR blocks (:mod:`rlx.importers.onnx_blocks`); every
other node becomes MIR ops through its converter (:mod:`rlx.importers.onnx_ops`). Every op
made from a node carries the node's name (or ``<op_type>_<index>``) as its label.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import onnx

from rlx.dialects.builder import HirModule, HirValue
from rlx.importers.dims import (
    SizeSource,
    SymDim,
    is_static,
    normalize,
    parse_dim,
    symbol,
    tidy,
)
from rlx.importers.onnx_blocks import Match, find_blocks
from rlx.importers.onnx_ops import (
    CONVERTERS,
    FLOAT8_OPS,
    FOLDERS,
    NARROW_ONNX,
    ONNX_DTYPES,
    RUNTIME_DTYPES,
    UNSIGNED,
    UNSIGNED_OPS,
    Node,
    Value,
    dtype_of,
    is_symbolic,
    onnx_dtype_name,
    why_unsupported,
)
from rlx.importers.onnx_read import (
    _tensor_array,
    check,
    check_nodes,
    check_parsed,
    default_opset,
    node_version,
    read_model,
)
from rlx.importers.onnx_sizes import inferred_shapes, propagated
from rlx.importers.result import Block, Imported, Report, counts, unique_name
from rlx.ir.diagnostics import ModelImportError, RlxError
from rlx.ir.dtypes import NARROW
from rlx.ir.types import DType

INLINE_MAX_BYTES = 1024
"""Constants up to this size are inline ``rlx_hir.constant`` ops; larger ones are weights in
the parameter file (never inlined), except splats, which are a scalar expanded."""


TYPE_KEEPING = frozenset({
    "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "MaxPool",
    "DepthToSpace", "SpaceToDepth", "Dropout", "Resize"})
"""Ops whose outputs have input 0's element type: given it where ONNX's shape inference
could not (downstream of an op of another domain, whose schema it lacks)."""
DATA_DEPENDENT = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression"})
"""Ops whose output sizes depend on run-time values: one error saying so when they cannot be
folded."""


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass
class ImportReport(Report):
    """What the ONNX importer did with each node."""

    opset: int = 0

    def summary(self) -> str:
        lines = [f"{self.source}: {self.nodes} nodes, ai.onnx opset {self.opset}",
                 f"  blocks recognized: {len(self.blocks)} ({counts(self.block_counts())})"]
        lines += [f"    {b.kind} \"{b.label}\"{f' [{b.scope}]' if b.scope else ''} <- "
                  f"{len(b.nodes)} nodes: {', '.join(b.nodes)}" for b in self.blocks]
        in_blocks = sum(len(b.nodes) for b in self.blocks)
        lines += [f"  nodes in blocks: {in_blocks}",
                  f"  folded at import: {sum(self.folded.values())} ({counts(self.folded)})",
                  f"  converted to MIR ops: {sum(self.converted.values())} "
                  f"({counts(self.converted)})",
                  f"  weights: {self.params} ({_size(self.param_bytes)})"]
        return "\n".join(lines)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / 2**20:.1f} MiB"


@dataclass
class OnnxImport(Imported):
    """An imported ONNX model: the HIR module, its weights, and the report."""

    report: ImportReport


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# The graph importer
# --------------------------------------------------------------------------------------


class GraphImporter:
    """Walks one ONNX graph in order and builds HIR into ``h`` (its current function)."""

    def __init__(self, model: onnx.ModelProto, h: HirModule, source: str, *,
                 bind: Mapping[str, np.ndarray] | None = None, blocks: bool = True,
                 param_prefix: str = "") -> None:
        self.model = model
        self.graph = model.graph
        self.h = h
        self.source = source
        self.bind = dict(bind or {})
        self.use_blocks = blocks
        self.param_prefix = param_prefix
        self.opset = default_opset(model)
        self.values: dict[str, Value] = {}
        self.params: dict[str, np.ndarray] = {}
        self._materialized: dict[str, HirValue] = {}
        self._const_count = 0
        self._by_value: dict[object, list[SymDim]] = {}
        self.reshaped_from: dict[object, HirValue] = {}
        """The tensor each reshape made by the importer reshaped (by result value)."""
        self.report = ImportReport(source, opset=self.opset, nodes=len(self.graph.node))
        self.elem_types: dict[str, int] = {}
        """ONNX element types shape inference knows, by value name (for the matchers)."""
        self.inferred = inferred_shapes(model, self.elem_types)
        for vi in [*self.graph.input, *self.graph.output, *self.graph.value_info]:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                self.elem_types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        self.shapes = {name: tuple(d if isinstance(d, int) else None for d in dims)
                       for name, dims in self.inferred.items()}
        self.sizes = SizeSource(h)
        self.sym: dict[str, list[SymDim]] = {}
        """The sizes of each runtime tensor, symbolic where dynamic."""
        self.nodes = [Node(self, proto, i, node_version(model, self.opset, proto, i, source))
                      for i, proto in enumerate(self.graph.node)]

    # -- checks ------------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        raise ModelImportError(f"{self.source}: error: {message}")

    # -- values --------------------------------------------------------------------------
    def materialize(self, arr: np.ndarray, name: str | None, node: Node | None) -> HirValue:
        """A constant as a HIR value: inline when small, a weight when large, a scalar
        expanded when every element is equal."""
        if name is not None and name in self._materialized:
            return self._materialized[name]

        def fail(message: str) -> NoReturn:
            if node is not None:
                node.fail(message)
            self.fail(message)

        if is_symbolic(arr):
            value = self._runtime_sizes(arr, name, fail)
            if name is not None:
                self._materialized[name] = value
            return value
        dtype = dtype_of(arr)
        if dtype is None or dtype not in RUNTIME_DTYPES:
            fail(f"constant '{name}' has element type {arr.dtype.name}: "
                 f"{why_unsupported(arr.dtype.name)}")
        if arr.dtype.name in NARROW:  # int4, ...: its values, in the type holding them
            arr = arr.astype(dtype.numpy)
        elif arr.dtype.kind == "u":  # unsigned: its bits as the signless type (dtype_of)
            arr = arr.view(dtype.numpy)
        data = np.asarray(arr.view(np.uint16) if dtype == DType.BF16 else arr, order="C")
        if data.nbytes <= INLINE_MAX_BYTES or data.size == 0:
            value = self.h.constant(data, dtype)
        elif np.all(data == data.reshape(-1)[0]):
            one = self.h.constant(data.reshape(-1)[:1].reshape([1] * data.ndim), dtype)
            value = self.h.mir("expand", [one], target_shape=list(data.shape))
        else:
            pname = self._param_name(name)
            value = self.h.param(pname, data.shape, dtype)
            self.params[pname] = data
            self.report.params += 1
            self.report.param_bytes += data.nbytes
        if name is not None:
            self._materialized[name] = value
        return value

    def _runtime_sizes(self, arr: np.ndarray, name: str | None,
                       fail: Callable[[str], NoReturn]) -> HirValue:
        """A shape vector holding dynamic sizes used as data: an int64 tensor computed
        when the module runs (each size counted from a tensor that has it)."""
        entries = list(arr.reshape(-1))
        if not all(isinstance(e, int | np.integer) or hasattr(e, "free_symbols")
                   for e in entries):
            fail(f"'{name}' holds {entries}: not sizes")
        if not all(self.sizes.can_build(normalize(e)) for e in entries):
            fail(f"'{name}' is a shape holding dynamic sizes ({entries}), used as data, "
                 "and rlx cannot compute them at run time")
        parts = [self.h.mir("reshape", [self.sizes.scalar(normalize(e), DType.I64, fail)],
                            new_shape=[1]) for e in entries]
        flat = parts[0] if len(parts) == 1 else self.h.mir("concat", parts, axis=0)
        return flat if arr.shape == (len(entries),) else self.h.mir(
            "reshape", [flat], new_shape=list(arr.shape) or [1])

    # -- sizes ---------------------------------------------------------------------------
    def dims_of(self, name: str | None, v: Value) -> list[SymDim]:
        """The sizes of a value: a constant's shape, a tensor's recorded sizes."""
        if isinstance(v, np.ndarray):
            return [int(d) for d in v.shape]
        if name is not None and name in self.sym and len(self.sym[name]) == len(v.shape):
            return list(self.sym[name])
        known = self._by_value.get(v.value)
        if known is not None:
            return list(known)
        return self.record(name, v)

    def record(self, name: str | None, v: HirValue, hint: list[SymDim] | None = None
               ) -> list[SymDim]:
        """Give the tensor ``v`` (the value ``name``) its sizes: static dims as they are;
        a dynamic dim from ``hint`` (what the converter knows), else from the model's shape
        annotations and ONNX's shape inference, else a new size of its own."""
        if hint is None:
            hint = self._by_value.get(v.value)
        inferred = self.inferred.get(name or "") if hint is None else hint
        if inferred is not None and len(inferred) != len(v.shape):
            inferred = None
        dims: list[SymDim] = []
        for axis, d in enumerate(v.shape):
            if d is not None:
                dims.append(int(d))
                continue
            guess = inferred[axis] if inferred is not None else None
            if guess is None or is_static(guess):
                guess = self.sizes.unnamed(name or "value", axis)
            dims.append(self.sizes.name(guess))
        if name is not None:
            self.sym[name] = dims
        self._by_value[v.value] = dims
        self.sizes.note(v, dims)
        return dims

    def _param_name(self, name: str | None) -> str:
        if name is None:
            self._const_count += 1
            name = f"const.{self._const_count}"
        return unique_name(self.param_prefix, name, self.params)

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> list[HirValue]:
        for init in self.graph.initializer:
            self.values[init.name] = _tensor_array(init, self.source)
        if len(self.graph.sparse_initializer):
            self.fail("sparse initializers are not supported")
        for name, arr in self.bind.items():
            self.values[name] = np.asarray(arr)
        for inp in self.graph.input:
            if inp.name not in self.values:
                self.values[inp.name] = self._input(inp)
        for node in self.nodes:
            self._try_fold(node, prepass=True)
        matches: dict[int, Match] = {}
        covered: set[int] = set()
        if self.use_blocks:
            matches = find_blocks(self)
            covered = {i for m in matches.values() for i in m.nodes}
        for node in self.nodes:
            if node.index in matches:
                self._emit_block(matches[node.index])
            elif node.index not in covered:
                self._convert(node)
        return [self._output(o.name) for o in self.graph.output]

    def inline(self, node: Node, graph: onnx.GraphProto) -> list[Value]:
        """The nodes of ``graph`` (a branch of ``node``, an ``If``) converted in order into
        the current function, reading outer values by name; its outputs' values."""
        for init in graph.initializer:
            self.values[init.name] = _tensor_array(init, self.source)
        for i, proto in enumerate(graph.node):
            version = node_version(self.model, self.opset, proto, i, self.source)
            self._convert(Node(self, proto, len(self.nodes) + i, version))
        outs = []
        for o in graph.output:
            if o.name not in self.values:
                node.fail(f"branch output '{o.name}' is not produced by the branch")
            outs.append(self.values[o.name])
        return outs

    def forget(self, graph: onnx.GraphProto) -> None:
        """Drop what is held by the names ``graph`` (a ``Loop`` body) binds and computes,
        before it is inlined again: its values, their materialized constants and sizes."""
        names = {i.name for i in graph.input} | {o for n in graph.node for o in n.output}
        for table in (self.values, self._materialized, self.sym):
            for name in names & table.keys():
                del table[name]

    def _consumer(self, name: str) -> Node | None:
        return next((n for n in self.nodes if name in n.proto.input), None)

    def _input(self, inp: onnx.ValueInfoProto) -> HirValue:
        t = inp.type.tensor_type if inp.type.HasField("tensor_type") else None
        user = self._consumer(inp.name)
        if t is None:
            where = f"node '{user.label}' ({user.op_type}, opset {self.opset}): " if user else ""
            self.fail(f"{where}graph input '{inp.name}' is not a tensor (sequences, maps and "
                      "optionals are not supported)")
        dtype = ONNX_DTYPES.get(t.elem_type)
        if dtype is None or dtype not in RUNTIME_DTYPES:
            name = onnx_dtype_name(t.elem_type)
            if user is not None:
                user.fail(f"input '{inp.name}' is {name}: {why_unsupported(name)}")
            self.fail(f"graph input '{inp.name}' is {name}: {why_unsupported(name)}")
        if not t.HasField("shape"):
            self.fail(f"graph input '{inp.name}' has no shape (rank unknown)")
        sizes: list[SymDim] = []
        for axis, d in enumerate(t.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                sizes.append(int(d.dim_value))
                continue
            # a name, or -1 / 0 / nothing (how older exporters spell a dynamic dim)
            named = parse_dim(d.dim_param) if d.HasField("dim_param") else None
            sizes.append(named if named is not None and not is_static(named)
                         else symbol(f"{inp.name}[{axis}]"))
        value = self.h.input(inp.name, [d if isinstance(d, int) else None for d in sizes],
                             dtype, unsigned=t.elem_type in UNSIGNED,
                             narrow=NARROW_ONNX[t.elem_type].name if t.elem_type in NARROW_ONNX
                             else None)
        self.record(inp.name, value, sizes)
        return value

    def _try_fold(self, node: Node, *, prepass: bool = False) -> bool:
        """Compute ``node`` in numpy when every input it has is known (and a folder
        exists); in the pre-pass, ``Shape`` also folds when ONNX's shape inference knows a
        static shape."""
        outputs = [o for o in node.proto.output if o]
        if outputs and all(isinstance(self.values.get(o), np.ndarray) for o in outputs):
            return True
        fold = FOLDERS.get(node.op_type)
        if fold is None:
            return False
        inputs: list[np.ndarray | None] = []
        for name in node.proto.input:
            v = self.values.get(name) if name else None
            if name and not isinstance(v, np.ndarray):
                static = self.shapes.get(name) if prepass and node.op_type in (
                    "Shape", "Size") else None
                if static is None or None in static:
                    return False
                v = np.broadcast_to(np.zeros((), np.bool_), static)
            inputs.append(v)
        out = fold(node, inputs)
        if out is None:
            return False
        for name, v in zip(node.proto.output, out, strict=False):
            if name:
                self.values[name] = tidy(np.asarray(v))  # numpy folds 0-d to scalars
        self.report.folded[node.op_type] += 1
        return True

    def _convert(self, node: Node) -> None:
        if self._try_fold(node):
            return
        conv = CONVERTERS.get(node.op_type)
        if conv is None and node.op_type in DATA_DEPENDENT:
            node.fail("the size of its output depends on the values of its inputs, computed "
                      "at run time (a data-dependent shape); rlx compiles shapes that follow "
                      "from the input sizes (it folds this op when its inputs are constants)")
        if conv is None:
            node.fail("no rlx importer for this op (the supported ops are listed in "
                      "docs/onnx-coverage.md)")
        if node.version < conv.since:
            node.fail(f"{node.op_type}-{node.version} (the version of opset {self.opset}) is "
                      f"not supported; rlx imports {node.op_type} from version {conv.since}")
        self._check_element_types(node)
        start = len(self.h)
        try:
            outs = conv.fn(node)
        except ModelImportError:
            raise
        except RlxError as e:  # an op the converter built breaks its schema: a bug
            raise ModelImportError(f"{node.where()}: {str(e).removeprefix('error: ')}") from e
        self._store(node, outs)
        self.h.label_nodes_since(start, node.label)
        if all(isinstance(v, np.ndarray) for v in outs):
            self.report.folded[node.op_type] += 1
        else:
            self.report.converted[node.op_type] += 1

    def _check_element_types(self, node: Node) -> None:
        """Refuse unsigned integers where the converter would read them as signed, and
        8-bit floats where it would compute on them."""
        if node.op_type not in FLOAT8_OPS:
            for i, name in enumerate(node.proto.input):
                narrow = node.narrow(i)
                if narrow is not None:
                    node.fail(f"input {i} ('{name}') is {narrow.name}: rlx imports "
                              f"{narrow.name} in casts and data movement "
                              f"({', '.join(sorted(FLOAT8_OPS))}), as ONNX allows it")
                if node.has(i) and isinstance(node.value(i), HirValue) and (
                        node.value(i).dtype.is_float8):
                    node.fail(f"input {i} ('{name}') is {node.value(i).dtype.numpy.name}: "
                              f"rlx holds 8-bit floats as storage (cast, moved); cast it to "
                              f"f16, bf16 or f32 to compute {node.op_type}")
            for k, name in enumerate(node.proto.output):
                narrow = node.out_narrow(k)
                if narrow is not None:
                    node.fail(f"output '{name}' is {narrow.name}: rlx imports {narrow.name} "
                              "in casts and data movement")
        if node.op_type in UNSIGNED_OPS:
            return
        for i, name in enumerate(node.proto.input):
            if node.unsigned(i):
                kind = (onnx_dtype_name(self.elem_types[name]) if name in self.elem_types
                         else "unsigned")
                node.fail(f"input {i} ('{name}') is {kind}: rlx imports {node.op_type} of "
                          "signed integers and floats; unsigned integers only in "
                          f"{', '.join(sorted(UNSIGNED_OPS))}")
        for k, name in enumerate(node.proto.output):
            if node.out_unsigned(k):
                node.fail(f"output '{name}' is {onnx_dtype_name(self.elem_types[name])}: rlx "
                          f"imports {node.op_type} of signed integers and floats")

    def narrow_outputs(self) -> dict[int, str]:
        """The graph outputs of narrow types (by position: the type's name)."""
        return {i: NARROW_ONNX[t].name for i, o in enumerate(self.graph.output)
                if (t := self.elem_types.get(o.name)) in NARROW_ONNX}

    def unsigned_outputs(self) -> list[int]:
        """The graph outputs of unsigned integer types (by position)."""
        return [i for i, o in enumerate(self.graph.output)
                if self.elem_types.get(o.name) in UNSIGNED]

    def _store(self, node: Node, outs: list[Value]) -> None:
        wanted = [o for o in node.proto.output]
        source = self.elem_types.get(node.proto.input[0]) if node.proto.input else None
        if source is not None and node.op_type in TYPE_KEEPING:
            for name in wanted:  # after a contrib op ONNX's inference knows no types
                if name:
                    self.elem_types.setdefault(name, source)
        if len(outs) < len([o for o in wanted if o]):
            node.fail(f"{len(wanted)} outputs asked for; rlx produces {len(outs)}")
        for name, v in zip(wanted, outs, strict=False):
            if not name:
                continue
            if isinstance(v, HirValue) and v.dtype not in RUNTIME_DTYPES:
                node.fail(f"output '{name}' would be {v.dtype}: {why_unsupported(str(v.dtype))}")
            if isinstance(v, np.ndarray):
                v = tidy(v)
            self.values[name] = v
            if isinstance(v, HirValue) and name not in self.sym:
                hint = node.out_dims.get(wanted.index(name))
                if hint is None and v.value not in self._by_value:
                    hint = propagated(node, v, self.inferred.get(name), self.dims_of)
                self.record(name, v, hint)

    def _emit_block(self, match: Match) -> None:
        start = len(self.h)
        node = self.nodes[match.output]
        try:
            outs = match.emit(self)
        except ModelImportError:
            raise
        except RlxError as e:
            raise ModelImportError(f"{node.where()}: {str(e).removeprefix('error: ')}") from e
        like = next((match.parts[k] for k in ("like", "x", "q") if k in match.parts), None)
        for name, v in zip(match.outputs, outs, strict=True):
            self.values[name] = v
            if not isinstance(v, HirValue):
                continue
            hint = None
            if like is not None and like in self.values:
                dims = self.dims_of(like, self.values[like])
                hint = dims if len(dims) == len(v.shape) else None
            self.record(name, v, hint)
        self.h.label_nodes_since(start, match.label)
        self.report.blocks.append(Block(match.kind, match.label,
                                        tuple(self.nodes[i].label for i in sorted(match.nodes)),
                                        match.scope))

    def _output(self, name: str) -> HirValue:
        v = self.values.get(name)
        if v is None:
            self.fail(f"graph output '{name}' is not produced by any node")
        if isinstance(v, HirValue):
            return v
        start = len(self.h)
        producer = self._producer(name)
        out = self.materialize(v, name, producer)
        self.h.label_nodes_since(start, producer.label if producer is not None else name)
        return out

    def _producer(self, name: str) -> Node | None:
        return next((n for n in self.nodes if name in n.proto.output), None)


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def _module_name(model: onnx.ModelProto, source: str) -> str:
    raw = model.graph.name or Path(source).stem or "model"
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in raw)
    return name if name and not name[0].isdigit() else f"m_{name}"


def import_model(model: str | Path | onnx.ModelProto, *, module: HirModule | None = None,
                 function: str = "main", bind: Mapping[str, np.ndarray] | None = None,
                 blocks: bool = True, param_prefix: str = "", source: str | None = None
                 ) -> OnnxImport:
    """Import an ONNX model (a path or a ``ModelProto``) into a new HIR module, or into
    function ``function`` of ``module``.

    ``bind`` turns graph inputs into constants (their values known at import time);
    ``blocks=False`` imports node by node, without recognizing blocks; ``param_prefix``
    prefixes the weight names.
    """
    path = Path(model) if isinstance(model, str | Path) else None
    if path is not None:
        source = source or str(path)
        proto = read_model(path, validate=False)
    else:
        source = source or (model.graph.name or "model") + ".onnx"  # type: ignore[union-attr]
        proto = model  # type: ignore[assignment]
        check_parsed(proto, source)
    check_nodes(proto, source)
    check(proto, source, path)
    if module is None:
        h = HirModule(_module_name(proto, source), function=function)
    else:
        h = module.function(function)
    importer = GraphImporter(proto, h, source, bind=bind, blocks=blocks,
                             param_prefix=param_prefix)
    h.set_outputs(importer.run(), unsigned=importer.unsigned_outputs(),
                  narrow=importer.narrow_outputs())
    return OnnxImport(h, importer.params, importer.report)


def load(path: str | Path, *, params_out: str | Path | None = None) -> HirModule:
    """The HIR module of an ONNX file; with ``params_out``, its weights are written there
    (``.irpa``). :func:`import_model` also returns the weights and the report."""
    result = import_model(path)
    if params_out is not None:
        from rlx.runtime import save_params

        target = Path(params_out)
        tmp = target.with_name(f".{target.stem}.tmp.irpa")
        try:
            save_params(result.params, tmp)
            os.replace(tmp, target)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise ModelImportError(f"{target}: error: cannot write: {e.strerror or e}"
                                   ) from None
    return result.module


__all__ = ["Block", "ImportReport", "OnnxImport", "import_model", "load", "read_model"]
