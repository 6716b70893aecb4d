"""Reading ONNX files for the importer: parsing, ONNX's checker, initializers, and the op
schema version of each node (one error naming the file or node for anything bad)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from rlx.ir.diagnostics import ModelImportError

MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()
DEFAULT_DOMAINS = ("", "ai.onnx")
CONTRIB_DOMAIN = "com.microsoft"
CONTRIB_OPS = frozenset({"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
                         "QLinearGlobalAveragePool", "QLinearConcat", "QGemm"})
"""The ONNX Runtime contrib ops rlx imports (``onnx_ops/contrib.py``): those its
quantization tools write in the QOperator format. Their converters are registered as
``com.microsoft.<op>``, the name a node of that domain has during import."""


def read_model(path: str | Path, *, validate: bool = True) -> onnx.ModelProto:
    """Parse (and with ``validate``, check) an ONNX file; a missing, truncated or corrupt
    file is one :class:`ModelImportError`."""
    p = Path(path)
    if not p.is_file():
        raise ModelImportError(f"{p}: error: no such file")
    try:
        model = onnx.load(str(p), load_external_data=True)
    except (DecodeError, OSError, ValueError, RuntimeError, TypeError) as e:
        raise ModelImportError(f"{p}: error: not a valid ONNX model (the protobuf does not "
                               f"parse: {_first_line(e)})") from None
    check_parsed(model, str(p))
    if validate:
        check(model, str(p), p)
    return model


def check_parsed(model: onnx.ModelProto, source: str) -> None:
    """A protobuf that parsed may still be no model (an empty or truncated file)."""
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelImportError(f"{source}: error: not a valid ONNX model (no IR version or "
                               "graph: truncated or not an ONNX file)")


def check(model: onnx.ModelProto, source: str, path: Path | None = None) -> None:
    """ONNX's checker; run after rlx's own per-node checks (which name the node)."""
    try:
        onnx.checker.check_model(str(path) if path is not None else model)
    except (onnx.checker.ValidationError, DecodeError, ValueError, OSError) as e:
        raise ModelImportError(f"{source}: error: invalid ONNX model: {_first_line(e)}"
                               ) from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def _tensor_array(init: onnx.TensorProto, source: str) -> np.ndarray:
    try:
        arr = numpy_helper.to_array(init)
    except (ValueError, TypeError, OSError, RuntimeError) as e:
        raise ModelImportError(f"{source}: error: initializer '{init.name}' is corrupt: "
                               f"{_first_line(e)}") from None
    expected = tuple(int(d) for d in init.dims)
    if arr.shape != expected:
        raise ModelImportError(f"{source}: error: initializer '{init.name}' holds "
                               f"{arr.size} elements for dims {list(expected)} (truncated?)")
    return arr


def default_opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    return 1


def node_version(model: onnx.ModelProto, opset: int, proto: onnx.NodeProto, index: int,
                 source: str) -> int:
    """The version of the node's op schema in effect; an op of another domain, an opset
    outside rlx's range or an op the opset lacks is an error naming the node."""
    label = proto.name or f"{proto.op_type}_{index}"
    where = f"{source}: error: node '{label}'"
    if proto.domain not in DEFAULT_DOMAINS:
        versions = {e.domain: e.version for e in model.opset_import}
        if proto.domain == CONTRIB_DOMAIN and proto.op_type in CONTRIB_OPS:
            return int(versions.get(proto.domain, 1))
        also = (f"; of '{CONTRIB_DOMAIN}', ONNX Runtime's quantized ops "
                f"{', '.join(sorted(CONTRIB_OPS))}")
        raise ModelImportError(
            f"{where} ({proto.domain}.{proto.op_type}, opset "
            f"{versions.get(proto.domain, '?')}): ops of domain '{proto.domain}' are not "
            f"supported (rlx imports the default ai.onnx domain{also})")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ModelImportError(f"{where} ({proto.op_type}, opset {opset}): opset {opset} is "
                               f"not supported (rlx imports ai.onnx opsets {MIN_OPSET}.."
                               f"{MAX_OPSET})")
    try:
        return onnx.defs.get_schema(proto.op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        raise ModelImportError(f"{where} ({proto.op_type}, opset {opset}): no such op in "
                               f"ai.onnx opset {opset}") from None


def check_nodes(model: onnx.ModelProto, source: str) -> None:
    """:func:`node_version` of every node (before ONNX's checker, whose errors do not name
    the node)."""
    opset = default_opset(model)
    for i, proto in enumerate(model.graph.node):
        node_version(model, opset, proto, i, source)


__all__ = ["DEFAULT_DOMAINS", "MAX_OPSET", "MIN_OPSET", "check", "check_nodes", "check_parsed",
           "default_opset", "node_version", "read_model"]
