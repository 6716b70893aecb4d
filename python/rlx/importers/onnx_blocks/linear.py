"""Block matchers of the linear family: ``linear`` (MatMul / Gemm [+ bias] [-> activation])
and ``swiglu``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlx.importers.onnx_blocks.graph import (
    GraphView,
    Match,
    const_tensor,
    other_input,
    tensor_of,
)
from rlx.importers.onnx_ops import Node, Value

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter


ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


def _silu_input(g: GraphView, node: Node) -> tuple[str, Node] | None:
    """``Mul(y, Sigmoid(y))`` (either order): y and the Sigmoid node."""
    if node.op_type != "Mul":
        return None
    for a, b in (node.proto.input[:2], node.proto.input[1::-1]):
        sig = g.node(b, "Sigmoid")
        if sig is not None and sig.proto.input[0] == a:
            return a, sig
    return None


def match_linear(g: GraphView, root: Node) -> Match | None:
    nodes = {root.index}
    activation = "none"
    top = root
    if root.op_type in ACTIVATIONS or root.op_type == "Gelu":
        activation = ACTIVATIONS.get(root.op_type) or (
            "gelu" if root.attr("approximate", "none") == "none" else "gelu_approx")
        inner = root.proto.input[0]
    elif (silu := _silu_input(g, root)) is not None:
        activation, inner = "silu", silu[0]
        nodes.add(silu[1].index)
    else:
        inner = None
    if inner is not None:
        top = g.node(inner, "Add", "MatMul", "Gemm")
        if top is None:
            return None
        nodes.add(top.index)
    bias_name = None
    mm = top
    if top.op_type == "Add":
        for cand in top.proto.input[:2]:
            mm = g.node(cand, "MatMul")
            if mm is not None:
                bias_name = other_input(top, cand)
                break
        if mm is None:
            return None
        nodes.add(mm.index)
    if mm.op_type not in ("MatMul", "Gemm"):
        return None
    return _linear(g, root, mm, bias_name, activation, nodes)


def _linear(g: GraphView, root: Node, mm: Node, bias_name: str | None, activation: str,
            nodes: set[int]) -> Match | None:
    x_name, w_name = mm.proto.input[0], mm.proto.input[1]
    w = g.const(w_name)
    x_shape = g.shape(x_name)
    if w is None or w.ndim != 2 or x_shape is None or len(x_shape) < 2:
        return None
    if w.dtype.kind != "f" or x_shape[-1] not in (None, w.shape[0] if mm.op_type == "MatMul"
                                                  or not mm.attr("transB", 0) else w.shape[1]):
        return None
    if mm.op_type == "Gemm":
        if mm.attr("transA", 0) or mm.attr("alpha", 1.0) != 1.0 or (
                len(mm.proto.input) > 2 and mm.proto.input[2] and mm.attr("beta", 1.0) != 1.0):
            return None
        if bias_name is not None:
            return None
        bias_name = mm.proto.input[2] if len(mm.proto.input) > 2 and mm.proto.input[2] else None
        if mm.attr("transB", 0):
            w_name, w = f"{w_name}.T", np.ascontiguousarray(w.T)
    n = w.shape[1]
    bias = None
    if bias_name is not None:
        bias = g.const(bias_name)
        if bias is None or bias.size != n or bias.shape[-1] != n or bias.dtype != w.dtype:
            return None
        bias = bias.reshape(n)
    if not g.closed(nodes, root.index):
        return None

    def emit(imp: GraphImporter) -> list[Value]:
        x = tensor_of(imp, root, x_name)
        wt = const_tensor(imp, root, w, w_name)
        b = None if bias is None else const_tensor(imp, root, bias, f"{bias_name}")
        return [imp.h.linear(x, wt, b, activation=None if activation == "none"
                             else activation)]

    return Match("linear", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"x": x_name, "w": w, "w_name": w_name, "bias": bias,
                        "activation": activation})



def match_swiglu(g: GraphView, root: Node) -> Match | None:
    if root.op_type != "MatMul":
        return None
    down = g.const(root.proto.input[1])
    prod = g.node(root.proto.input[0], "Mul")
    if down is None or down.ndim != 2 or prod is None:
        return None
    for gate_side, up_side in (prod.proto.input[:2], prod.proto.input[1::-1]):
        silu_node = g.node(gate_side, "Mul")
        silu = _silu_input(g, silu_node) if silu_node is not None else None
        up_mm = g.node(up_side, "MatMul")
        if silu is None or up_mm is None:
            continue
        gate_mm = g.node(silu[0], "MatMul")
        if gate_mm is None or gate_mm.proto.input[0] != up_mm.proto.input[0]:
            continue
        x_name = up_mm.proto.input[0]
        gate, up = g.const(gate_mm.proto.input[1]), g.const(up_mm.proto.input[1])
        x_shape = g.shape(x_name)
        if gate is None or up is None or gate.shape != up.shape or gate.ndim != 2 or (
                up.shape[1] != down.shape[0]) or x_shape is None or len(x_shape) < 2:
            continue
        nodes = {root.index, prod.index, silu_node.index, silu[1].index, up_mm.index,  # type: ignore[union-attr]
                 gate_mm.index}
        if not g.closed(nodes, root.index):
            continue
        names = [up_mm.proto.input[1], gate_mm.proto.input[1], root.proto.input[1]]

        def emit(imp: GraphImporter, names: list[str] = names, x_name: str = x_name,
                 arrays: tuple = (up, gate, down)) -> list[Value]:
            x = tensor_of(imp, root, x_name)
            u, gt, dn = (const_tensor(imp, root, a, n) for a, n in zip(arrays, names,
                                                                         strict=True))
            return [imp.h.swiglu_ffn(x, u, gt, dn)]

        return Match("swiglu", nodes, root.index, [root.proto.output[0]], root.label, emit,
                     parts={"x": x_name, "weights": list(zip(names, (up, gate, down),
                                                              strict=True))})
    return None


__all__ = ["match_linear", "match_swiglu"]
