"""What the ONNX importer knows of the sizes of values: the model's shape annotations and
ONNX's shape inference (named dims parsed as :mod:`rlx.importers.dims` sizes), and sizes
carried from a node's inputs to its outputs where those leave them unknown."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize, parse_dim
from rlx.importers.onnx_ops import Node, Value


def propagated(node: Node, v: HirValue, inferred: tuple | None,
               dims_of: Callable[[str, Value], list[SymDim]]) -> list[SymDim] | None:
    """Sizes of an output the annotations leave unknown, from the node's inputs:
    broadcast for elementwise ops, batch dims and the outer sizes for ``MatMul``, the
    permutation for ``Transpose``."""
    rank = len(v.shape)
    values = node.importer.values
    ins = [dims_of(n, values[n]) for n in node.proto.input if n and n in values]
    guess: list[SymDim | None] | None = None
    if node.op_type == "Transpose" and ins:
        perm = node.ints("perm") or list(range(len(ins[0])))[::-1]
        guess = [ins[0][p] for p in perm]
    elif node.op_type in ("MatMul", "MatMulInteger") and len(ins) >= 2 and min(
            len(ins[0]), len(ins[1])) >= 2:  # (MatMulInteger's zero points after A, B)
        a, b = ins[:2]
        guess = [*_broadcast_dims(a[:-2], b[:-2]), a[-2], b[-1]]
    elif node.op_type == "Gather" and len(ins) == 2 and ins[0]:
        axis = node.attr("axis", 0) % len(ins[0])
        guess = [*ins[0][:axis], *ins[1], *ins[0][axis + 1:]]
    elif node.op_type == "Concat" and ins and len({len(d) for d in ins}) == 1:
        axis = node.attr("axis") % len(ins[0])
        guess = _broadcast_dims(*ins)
        guess[axis] = normalize(sum(d[axis] for d in ins))
    elif node.op_type in SAME_SHAPE and ins and all(len(d) <= rank for d in ins):
        guess = _broadcast_dims(*ins)
        node.importer.sizes.unify(ins)
    if guess is None or len(guess) != rank:
        return None
    if inferred is not None and len(inferred) == rank:
        guess = [i if i is not None and not is_static(i) else g
                 for i, g in zip(inferred, guess, strict=True)]
    return [g if g is not None and not is_static(g) else None  # type: ignore[misc]
            for g in guess]



SAME_SHAPE = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Cast", "CastLike",
    "Relu", "Sigmoid", "Tanh", "Gelu", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs",
    "Reciprocal", "Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization",
    "Identity", "Dropout", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "IsNaN",
    "IsInf", "Sin", "Cos", "Tan", "Atan", "Round", "Floor", "Ceil", "Sign", "Softplus",
    "Trilu", "Mod", "BatchNormalization", "QuantizeLinear", "DequantizeLinear",
    "DynamicQuantizeLinear", "PRelu", "Elu", "Celu", "Selu", "ThresholdedRelu", "Softsign",
    "Mish", "Swish", "Shrink", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift",
    "InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization",
    "LpNormalization", "Hardmax", "ScatterND", "ScatterElements", "Scatter",
    "TensorScatter", "RotaryEmbedding", "LRN"})
"""Ops whose output has the numpy broadcast of their inputs' shapes."""


def _broadcast_dims(*shapes: list[SymDim]) -> list[SymDim | None]:
    rank = max((len(s) for s in shapes), default=0)
    out: list[SymDim | None] = []
    for axis in range(rank):
        sizes = [s[axis - (rank - len(s))] for s in shapes if axis >= rank - len(s)]
        dynamic = [d for d in sizes if not is_static(d)]
        static = [d for d in sizes if is_static(d) and int(d) != 1]
        out.append(static[0] if static else dynamic[0] if dynamic else 1)
    return out


def inferred_shapes(model: onnx.ModelProto, elem_types: dict[str, int] | None = None
                    ) -> dict[str, tuple[SymDim | None, ...]]:
    """The shapes the model's annotations and ONNX's shape inference know, by value name:
    a static dim, a named size (a ``dim_param``: ``batch``, torch.export's ``s0 + s1``),
    or None (unknown). ``elem_types`` (when given) gets the element types it knows."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return {}
    out = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if t is not None and elem_types is not None and t.elem_type:
            elem_types[vi.name] = t.elem_type
        if t is None or not t.HasField("shape"):
            continue
        out[vi.name] = tuple(_inferred_dim(d) for d in t.shape.dim)
    return out


def _inferred_dim(d: onnx.TensorShapeProto.Dimension) -> SymDim | None:
    if d.HasField("dim_value"):
        return int(d.dim_value) if d.dim_value > 0 else None
    if d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
        return parse_dim(d.dim_param)
    return None


__all__ = ["SAME_SHAPE", "inferred_shapes", "propagated"]
