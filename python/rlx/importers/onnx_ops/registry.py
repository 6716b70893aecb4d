"""The ONNX converter and folder tables, and what the op-family converters share.

A converter is ``convert_<op>(node) -> list[Value]`` registered with ``@converter("Op")``
right above its body: it reads the node's inputs through :class:`Node` (runtime tensors as
HIR values, import-time constants as numpy arrays) and returns one value per output, built
with the ``HirModule`` builder (MIR ops through the escape hatch). A folder,
``@folder("Op")``, computes a node whose inputs are all known at import time in numpy
(shape arithmetic, ``Constant``, ``Range``, ...). Both read ONNX semantics from the ONNX
operator specification; neither shares code with rlx's lowering or its reference.

Values during import are a :class:`~rlx.dialects.builder.HirValue` (a runtime tensor), a
numpy array (a constant), or a numpy object array whose entries are ints or sympy
expressions (a shape vector holding dynamic sizes, :mod:`rlx.importers.dims`, from
``Shape`` of a tensor with ``?`` dims). Every runtime tensor also has its sizes as
:data:`~rlx.importers.dims.SymDim` (``Node.dims``), so that sizes that are equal are
known to be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from onnx import NodeProto, TensorProto, helper

from rlx.dialects.builder import HirModule, HirValue
from rlx.importers.dims import SizeSource, SymDim
from rlx.importers.onnx_read import CONTRIB_DOMAIN, CONTRIB_OPS, DEFAULT_DOMAINS
from rlx.ir.diagnostics import ModelImportError
from rlx.ir.dtypes import FLOAT8S, NARROW, Narrow
from rlx.ir.types import DType, TensorInfo

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter


Value = HirValue | np.ndarray

ONNX_DTYPES: dict[int, DType] = {
    TensorProto.FLOAT: DType.F32, TensorProto.FLOAT16: DType.F16,
    TensorProto.BFLOAT16: DType.BF16, TensorProto.DOUBLE: DType.F64,
    TensorProto.BOOL: DType.I1, TensorProto.INT8: DType.I8, TensorProto.INT16: DType.I16,
    TensorProto.INT32: DType.I32, TensorProto.INT64: DType.I64,
    TensorProto.UINT8: DType.I8, TensorProto.UINT16: DType.I16, TensorProto.UINT32: DType.I32,
    TensorProto.UINT64: DType.I64,
    TensorProto.FLOAT8E4M3FN: DType.F8E4M3FN, TensorProto.FLOAT8E4M3FNUZ: DType.F8E4M3FNUZ,
    TensorProto.FLOAT8E5M2: DType.F8E5M2, TensorProto.FLOAT8E5M2FNUZ: DType.F8E5M2FNUZ,
    TensorProto.FLOAT8E8M0: DType.F8E8M0FNU,
    TensorProto.INT4: DType.I8, TensorProto.UINT4: DType.I8, TensorProto.INT2: DType.I8,
    TensorProto.UINT2: DType.I8, TensorProto.FLOAT4E2M1: DType.F8E4M3FN,
}
"""The rlx element type of each ONNX one rlx imports. Unsigned integers are the signless
integers of their width (MLIR's and LLVM's view): the ops that read them as unsigned say so
(``udiv``, ``ult``, a ``cast`` with ``unsigned``), and the module's inputs and outputs are
marked so that callers pass and get numpy's unsigned types."""
NARROW_ONNX: dict[int, Narrow] = {
    TensorProto.INT4: NARROW["int4"], TensorProto.UINT4: NARROW["uint4"],
    TensorProto.INT2: NARROW["int2"], TensorProto.UINT2: NARROW["uint2"],
    TensorProto.FLOAT4E2M1: NARROW["float4_e2m1fn"]}
"""The types narrower than a byte, held as their values (:class:`rlx.ir.dtypes.Narrow`):
imported in casts and data movement (``FLOAT8_OPS``), which is where ONNX allows them."""
UNSIGNED = frozenset({TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32,
                      TensorProto.UINT64})
UNSIGNED_OPS = frozenset({
    # the same bits whatever the sign (wrapping arithmetic, data movement)
    "Add", "Sub", "Mul", "Sum", "Neg", "Equal", "Where", "Identity", "Dropout", "Reshape",
    "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split", "Slice", "Gather",
    "GatherElements", "GatherND", "Expand", "Tile", "Trilu", "Shape", "Size", "Constant",
    "ConstantOfShape", "CumSum", "ReduceSum", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    "BitwiseNot", "BitShift", "DepthToSpace", "SpaceToDepth", "OneHot", "ScatterND",
    "ScatterElements", "Scatter",
    # converted with the order mapped to the signed one
    "ArgMax", "ArgMin", "TopK",
    # converted with the unsigned kinds
    "Div", "Mod", "Max", "Min", "Mean", "Clip", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "Cast", "CastLike", "Pow", "Abs", "MaxPool", "QuantizeLinear",
    "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearMatMul",
    "QLinearConv", "ConvInteger", *(f"{CONTRIB_DOMAIN}.{op}" for op in CONTRIB_OPS),
})
"""The ops rlx imports with unsigned integer inputs or outputs; any other refuses them
(one error naming the node) rather than computing them as signed."""
FLOAT8_OPS = frozenset({
    "Cast", "CastLike", "Identity", "Dropout", "Reshape", "Transpose", "Squeeze",
    "Unsqueeze", "Flatten", "Concat", "Split", "Slice", "Gather", "Expand", "Tile", "Shape",
    "Size", "Constant", "QuantizeLinear", "DequantizeLinear"})
"""The ops rlx imports with 8-bit float inputs, and with those of the narrow types: casts
and data movement (8-bit floats are storage; a model computes on them cast to f16 / bf16 /
f32)."""
RUNTIME_DTYPES = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64, DType.I1, DType.I8,
                            DType.I16, DType.I32, DType.I64, *FLOAT8S})
"""Element types a runtime tensor may have. f64 compiles for llvm-cpu only (rlx.compile
keeps it there; IREE demotes f64 to f32 for the GPU targets, and rlx refuses those); the
8-bit floats are storage (cast to and from, moved), on llvm-cpu only, likewise."""


def onnx_dtype_name(elem_type: int) -> str:
    if elem_type == TensorProto.STRING:  # numpy's is object
        return "string"
    try:
        return helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, ValueError, TypeError):
        return TensorProto.DataType.Name(elem_type).lower()


def why_unsupported(dtype: str) -> str:
    return "rlx has no such element type"


def dtype_of(arr: np.ndarray) -> DType | None:
    """The rlx element type of a numpy array (None: none)."""
    if arr.dtype.name == "bfloat16":
        return DType.BF16
    if arr.dtype.name in NARROW:  # held as its values
        return NARROW[arr.dtype.name].storage
    if arr.dtype.name.startswith("float8"):
        try:
            return DType.parse(arr.dtype)
        except ValueError:
            return None
    if arr.dtype.kind == "u" and arr.dtype.itemsize in (1, 2, 4, 8):
        return DType.parse(f"int{8 * arr.dtype.itemsize}")  # its bits, signless
    if arr.dtype.kind not in "fib":
        return None
    try:
        return DType.parse(arr.dtype)
    except ValueError:
        return None


def np_dtype(dtype: DType) -> np.dtype:
    """The numpy dtype an import-time constant of ``dtype`` has (bf16: ml_dtypes')."""
    if dtype == DType.BF16:
        return helper.tensor_dtype_to_np_dtype(TensorProto.BFLOAT16)
    return dtype.numpy


def is_symbolic(arr: np.ndarray) -> bool:
    return arr.dtype == object


class Node:
    """One ONNX node being converted: its attributes, inputs by position, and the builder."""

    def __init__(self, importer: GraphImporter, proto: NodeProto, index: int,
                 version: int) -> None:
        self.importer = importer
        self.proto = proto
        self.index = index
        self.version = version
        self.op_type = proto.op_type if proto.domain in DEFAULT_DOMAINS else (
            f"{proto.domain}.{proto.op_type}")
        """The op's name; an op of another domain's is ``<domain>.<op>``, the key of its
        converter (``com.microsoft.QGemm``), so it is never taken for an ai.onnx op."""
        self.label = proto.name or f"{proto.op_type}_{index}"
        self.attrs: dict[str, Any] = {a.name: helper.get_attribute_value(a)
                                      for a in proto.attribute}
        self.out_dims: dict[int, list[SymDim]] = {}
        """Sizes of outputs the converter knows better than shape inference (by index)."""

    # -- identity ------------------------------------------------------------------------
    @property
    def h(self) -> HirModule:
        return self.importer.h

    @property
    def opset(self) -> int:
        return self.importer.opset

    def where(self) -> str:
        return (f"{self.importer.source}: error: node '{self.label}' ({self.op_type}, opset "
                f"{self.opset})")

    def fail(self, message: str) -> NoReturn:
        """Raise the one error of an unsupported (or malformed) node."""
        raise ModelImportError(f"{self.where()}: {message}")

    # -- attributes ----------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def ints(self, name: str, default: Sequence[int] | None = None) -> list[int] | None:
        v = self.attrs.get(name)
        return [int(x) for x in v] if v is not None else (
            None if default is None else list(default))

    # -- inputs --------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.proto.input)

    def has(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def value(self, i: int) -> Value | None:
        if not self.has(i):
            return None
        return self.importer.values[self.proto.input[i]]

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as an import-time array (symbolic shape vectors included)."""
        v = self.value(i)
        if isinstance(v, np.ndarray):
            return v
        self.fail(f"input {i} ('{self.proto.input[i]}', {what}) must be known at import time; "
                  "it is computed at run time (data-dependent shapes are not supported)")

    def static(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as an import-time array without dynamic dims in it."""
        arr = self.const(i, what)
        if is_symbolic(arr):
            self.fail(f"input {i} ('{self.proto.input[i]}', {what}) holds dynamic sizes "
                      f"({list(arr.reshape(-1))}); rlx needs them as numbers here "
                      "(data-dependent shapes are not supported)")
        return arr

    def maybe_const(self, i: int) -> np.ndarray | None:
        v = self.value(i)
        return v if isinstance(v, np.ndarray) and not is_symbolic(v) else None

    def unsigned(self, i: int) -> bool:
        """Input ``i`` holds unsigned integers (its ONNX type, or a constant's numpy type)."""
        if not self.has(i):
            return False
        v = self.value(i)
        if isinstance(v, np.ndarray) and v.dtype != object:
            return v.dtype.kind == "u"
        return self.importer.elem_types.get(self.proto.input[i]) in UNSIGNED

    def narrow(self, i: int) -> Narrow | None:
        """The narrow type input ``i`` holds (its ONNX type, or a constant's numpy type)."""
        if not self.has(i):
            return None
        v = self.value(i)
        if isinstance(v, np.ndarray):
            return NARROW.get(v.dtype.name)
        return NARROW_ONNX.get(self.importer.elem_types.get(self.proto.input[i], 0))

    def out_narrow(self, k: int = 0) -> Narrow | None:
        """The narrow type of output ``k`` (by ONNX's type inference)."""
        return NARROW_ONNX.get(self.importer.elem_types.get(self.proto.output[k], 0)) if (
            k < len(self.proto.output)) else None

    def out_unsigned(self, k: int = 0) -> bool:
        """Output ``k`` is of an unsigned integer type (by ONNX's type inference)."""
        return (k < len(self.proto.output) and
                self.importer.elem_types.get(self.proto.output[k]) in UNSIGNED)

    def tensor(self, i: int) -> HirValue:
        """Input ``i`` as a runtime tensor (constants are materialized)."""
        v = self.value(i)
        if v is None:
            self.fail(f"input {i} is required")
        return self.as_tensor(v, self.proto.input[i])

    def as_tensor(self, v: Value, name: str | None = None) -> HirValue:
        if isinstance(v, HirValue):
            return v
        return self.importer.materialize(v, name, self)

    def info(self, i: int) -> TensorInfo:
        """Shape and element type of input ``i`` (a constant's are static)."""
        v = self.value(i)
        if isinstance(v, HirValue):
            return v.type
        if v is None:
            self.fail(f"input {i} is required")
        dtype = dtype_of(v)
        if dtype is None:
            self.fail(f"input {i} ('{self.proto.input[i]}') has element type {v.dtype}: "
                      f"{why_unsupported(v.dtype.name)}")
        return TensorInfo(tuple(v.shape), dtype)

    def rank(self, i: int) -> int:
        return self.info(i).rank

    def dims(self, i: int) -> list[SymDim]:
        """The sizes of input ``i``, symbolic where dynamic."""
        v = self.value(i)
        if v is None:
            self.fail(f"input {i} is required")
        return self.importer.dims_of(self.proto.input[i], v)

    def dims_of(self, v: Value, name: str | None = None) -> list[SymDim]:
        return self.importer.dims_of(name, v)

    def known(self, v: HirValue, dims: Sequence[SymDim]) -> HirValue:
        """Record that the tensor ``v`` has sizes ``dims`` (equal to sizes seen before)."""
        self.importer.record(None, v, list(dims))
        return v

    def build_fail(self, message: str) -> NoReturn:
        self.fail(message)

    @property
    def sizes(self) -> SizeSource:
        """Builds tensors of run-time sizes (:mod:`rlx.importers.dims`)."""
        return self.importer.sizes

    # -- building ------------------------------------------------------------------------
    def mir(self, op: str, inputs: Sequence[Value], **attrs: Any) -> HirValue:
        """One ``rlx_mir`` op through the escape hatch; array operands become constants."""
        return self.h.mir(op, [self.as_tensor(v) for v in inputs], **attrs)

    def scalar(self, value: float | int | bool, like: HirValue | DType) -> np.ndarray:
        """A 0-d constant in the element type of ``like``."""
        dtype = like.dtype if isinstance(like, HirValue) else like
        return np.asarray(value).astype(np_dtype(dtype))

    def reshape(self, v: Value, shape: Sequence[int]) -> HirValue:
        t = self.as_tensor(v)
        if tuple(t.shape) == tuple(shape):
            return t
        return self.mir("reshape", [t], new_shape=list(shape))

    def cast(self, v: Value, dtype: DType, unsigned: str | None = None) -> HirValue:
        """``v`` converted to ``dtype``; ``unsigned``: ``cast``'s attribute (which side's
        integers are unsigned)."""
        t = self.as_tensor(v)
        if t.dtype == dtype:  # the same bits, whatever the signs
            return t
        return self.mir("cast", [t], to=str(dtype), unsigned=unsigned)


ConvertFn = Callable[[Node], list[Value]]
FoldFn = Callable[[Node, list[np.ndarray | None]], list[np.ndarray] | None]


@dataclass(frozen=True)
class Converter:
    """How one ONNX op type is imported. ``const_inputs`` must be known at import time
    (shapes, axes, pads: what real models hold as initializers); ``since`` is the oldest
    version of the op's schema the converter implements."""

    op_type: str
    fn: ConvertFn
    const_inputs: tuple[int, ...]
    since: int
    family: str


CONVERTERS: dict[str, Converter] = {}
FOLDERS: dict[str, FoldFn] = {}


def converter(*op_types: str, const_inputs: Sequence[int] = (), since: int = 1
              ) -> Callable[[ConvertFn], ConvertFn]:
    def register(fn: ConvertFn) -> ConvertFn:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"ONNX op {op_type} has two converters")
            CONVERTERS[op_type] = Converter(op_type, fn, tuple(const_inputs), since,
                                            fn.__module__.rsplit(".", 1)[-1])
        return fn

    return register


def folder(*op_types: str) -> Callable[[FoldFn], FoldFn]:
    def register(fn: FoldFn) -> FoldFn:
        for op_type in op_types:
            if op_type in FOLDERS:
                raise ValueError(f"ONNX op {op_type} has two folders")
            FOLDERS[op_type] = fn
        return fn

    return register


def normalize_axes(node: Node, axes: Sequence[int], rank: int, what: str = "axes"
                   ) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= int(a) < rank:
            node.fail(f"{what} {list(axes)}: axis {a} is outside [{-rank}, {rank})")
        out.append(int(a) % rank)
    return out


__all__ = ["CONVERTERS", "FLOAT8_OPS", "FOLDERS", "NARROW_ONNX", "ONNX_DTYPES",
           "RUNTIME_DTYPES", "UNSIGNED", "UNSIGNED_OPS", "ConvertFn", "Converter",
           "FoldFn", "Node", "Value", "converter", "dtype_of", "folder",
           "is_symbolic", "normalize_axes", "np_dtype", "onnx_dtype_name", "why_unsupported"]
