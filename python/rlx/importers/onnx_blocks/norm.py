"""Block matcher of the norm family: ``rms_norm``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlx.importers.onnx_blocks.graph import (
    GraphView,
    Match,
    const_tensor,
    other_input,
    scalar,
    tensor_of,
)
from rlx.importers.onnx_ops import Node, Value

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter


def _reduce_mean_axes(g: GraphView, node: Node) -> list[int] | None:
    if node.version >= 18:
        axes = g.const(node.proto.input[1]) if len(node.proto.input) > 1 else None
        return None if axes is None else [int(a) for a in axes.reshape(-1)]
    return node.ints("axes")


def _mean_square(g: GraphView, name: str, nodes: set[int]) -> tuple[str, float] | None:
    """``Add(ReduceMean(x², -1, keepdims), eps)``: (x, eps)."""
    add = g.node(name, "Add")
    if add is None:
        return None
    for cand in add.proto.input[:2]:
        mean = g.node(cand, "ReduceMean")
        eps = scalar(g.const(other_input(add, cand)))
        if mean is None or eps is None or eps <= 0 or not mean.attr("keepdims", 1):
            continue
        sq = g.node(mean.proto.input[0], "Pow", "Mul")
        if sq is None:
            continue
        x = sq.proto.input[0]
        if sq.op_type == "Pow" and scalar(g.const(sq.proto.input[1])) != 2.0:
            continue
        if sq.op_type == "Mul" and sq.proto.input[1] != x:
            continue
        axes = _reduce_mean_axes(g, mean)
        if axes is None or not g.axis_is_last(x, axes):
            continue
        nodes |= {add.index, mean.index, sq.index}
        return x, eps
    return None


def _rms_core(g: GraphView, name: str, nodes: set[int]) -> tuple[str, float] | None:
    """``x * 1/sqrt(ms + eps)`` or ``x / sqrt(ms + eps)`` producing ``name``."""
    node = g.node(name, "Mul", "Div")
    if node is None:
        return None
    if node.op_type == "Div":
        sqrt = g.node(node.proto.input[1], "Sqrt")
        if sqrt is None:
            return None
        found = _mean_square(g, sqrt.proto.input[0], nodes)
        if found is None or found[0] != node.proto.input[0]:
            return None
        nodes |= {node.index, sqrt.index}
        return found
    for cand in node.proto.input[:2]:
        inv = g.node(cand, "Reciprocal", "Div")
        if inv is None:
            continue
        if inv.op_type == "Div" and scalar(g.const(inv.proto.input[0])) != 1.0:
            continue
        sqrt = g.node(inv.proto.input[-1], "Sqrt")
        if sqrt is None:
            continue
        found = _mean_square(g, sqrt.proto.input[0], nodes)
        if found is None or found[0] != other_input(node, cand):
            continue
        nodes |= {node.index, inv.index, sqrt.index}
        return found
    return None


def match_rms_norm(g: GraphView, root: Node) -> Match | None:
    if root.op_type not in ("Mul", "Div"):
        return None
    nodes: set[int] = set()
    gamma = None
    found = None
    if root.op_type == "Mul":
        for cand in root.proto.input[:2]:
            gamma = g.const(other_input(root, cand))
            if gamma is not None and gamma.ndim >= 1 and (
                    found := _rms_core(g, cand, nodes)) is not None:
                nodes.add(root.index)
                break
            nodes.clear()
    if found is None:
        gamma = None
        found = _rms_core(g, root.proto.output[0], nodes)
    if found is None:
        return None
    x_name, eps = found
    shape = g.shape(x_name)
    if shape is None or shape[-1] is None or len(shape) < 1:
        return None
    d = shape[-1]
    if gamma is not None and (gamma.size != d or gamma.shape[-1] != d or gamma.dtype.kind != "f"):
        return None
    if not g.closed(nodes, root.index):
        return None
    gamma_name = next((i for i in root.proto.input if g.const(i) is gamma), None)

    def emit(imp: GraphImporter) -> list[Value]:
        x = tensor_of(imp, root, x_name)
        dtype = np.asarray(root.scalar(0, x)).dtype
        gm = np.ones(d, dtype) if gamma is None else gamma.reshape(d).astype(dtype)
        g_value = const_tensor(imp, root, gm, gamma_name if gamma is not None else None)
        zero = root.mir("expand", [np.zeros(1, dtype)], target_shape=[d])
        return [imp.h.rms_norm(x, g_value, zero, eps=eps)]

    return Match("rms_norm", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"x": x_name, "gamma": gamma, "gamma_name": gamma_name, "eps": eps,
                        "width": d})


__all__ = ["match_rms_norm"]
