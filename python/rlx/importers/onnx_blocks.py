"""Recognizing ONNX subgraphs as HIR blocks.

Each matcher starts at the node that produces a block's result and walks back through
producers; a match covers nodes whose every result is used only inside the match (so
nothing else needs the intermediate values) and takes its weights from import-time
constants. Matches are tried largest first (attention, SwiGLU, RMSNorm, RoPE, then linear
layers), and a node belongs to at most one. The block is built at its last node, labelled
with that node's name.

- ``linear``: ``MatMul(x, W)`` [``+ b``] [``-> Relu / Sigmoid / Tanh / Gelu / SiLU``], or
  ``Gemm`` with ``alpha = beta = 1``; W and b constants.
- ``rms_norm``: ``x * 1 / sqrt(mean(x², -1) + eps)`` [``* gamma``] (``Pow`` or ``Mul`` for
  the square, ``Reciprocal`` or ``Div`` for the inverse).
- ``swiglu``: ``(silu(x Wg) * (x Wu)) Wd`` with constant weights.
- ``rope``: rotate-half RoPE ``x cos + cat(-x2, x1) sin`` with constant cos / sin tables
  whose two halves are equal (what HF's ``cat(freqs, freqs)`` gives).
- ``attention``: ``softmax(Q Kᵀ * scale [+ mask]) V`` over ``[B, H, S, hd]``; K and V may
  be GQA-expanded (``Unsqueeze -> Expand -> Reshape``), which the block undoes; a
  constant causal mask becomes ``mask = "causal"``, any other additive mask a ``bias``.
- ``llama_decoder_block``: the blocks above assembled as one pre-norm LLaMA layer (RMSNorm,
  q / k / v projections split into heads, RoPE, causal GQA attention, output projection,
  residual, RMSNorm, SwiGLU, residual).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops import Node, Value, is_symbolic

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter

ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


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


def _scalar(arr: np.ndarray | None) -> float | None:
    if arr is None or arr.size != 1 or arr.dtype.kind not in "fiu":
        return None
    return float(arr.reshape(-1)[0])


def _other(node: Node, name: str) -> str:
    """The other input of a binary node."""
    a, b = node.proto.input[0], node.proto.input[1]
    return b if a == name else a


def _tensor(imp: GraphImporter, node: Node, name: str) -> HirValue:
    v = imp.values[name]
    return node.as_tensor(v, name)


def _const_tensor(imp: GraphImporter, node: Node, arr: np.ndarray, name: str) -> HirValue:
    return imp.materialize(arr, name, node)


# --------------------------------------------------------------------------------------
# linear
# --------------------------------------------------------------------------------------


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
                bias_name = _other(top, cand)
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
        x = _tensor(imp, root, x_name)
        wt = _const_tensor(imp, root, w, w_name)
        b = None if bias is None else _const_tensor(imp, root, bias, f"{bias_name}")
        return [imp.h.linear(x, wt, b, activation=None if activation == "none"
                             else activation)]

    return Match("linear", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"x": x_name, "w": w, "w_name": w_name, "bias": bias,
                        "activation": activation})


# --------------------------------------------------------------------------------------
# rms_norm
# --------------------------------------------------------------------------------------


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
        eps = _scalar(g.const(_other(add, cand)))
        if mean is None or eps is None or eps <= 0 or not mean.attr("keepdims", 1):
            continue
        sq = g.node(mean.proto.input[0], "Pow", "Mul")
        if sq is None:
            continue
        x = sq.proto.input[0]
        if sq.op_type == "Pow" and _scalar(g.const(sq.proto.input[1])) != 2.0:
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
        if inv.op_type == "Div" and _scalar(g.const(inv.proto.input[0])) != 1.0:
            continue
        sqrt = g.node(inv.proto.input[-1], "Sqrt")
        if sqrt is None:
            continue
        found = _mean_square(g, sqrt.proto.input[0], nodes)
        if found is None or found[0] != _other(node, cand):
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
            gamma = g.const(_other(root, cand))
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
        x = _tensor(imp, root, x_name)
        dtype = np.asarray(root.scalar(0, x)).dtype
        gm = np.ones(d, dtype) if gamma is None else gamma.reshape(d).astype(dtype)
        g_value = _const_tensor(imp, root, gm, gamma_name if gamma is not None else None)
        zero = root.mir("expand", [np.zeros(1, dtype)], target_shape=[d])
        return [imp.h.rms_norm(x, g_value, zero, eps=eps)]

    return Match("rms_norm", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"x": x_name, "gamma": gamma, "gamma_name": gamma_name, "eps": eps,
                        "width": d})


# --------------------------------------------------------------------------------------
# swiglu
# --------------------------------------------------------------------------------------


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
            x = _tensor(imp, root, x_name)
            u, gt, dn = (_const_tensor(imp, root, a, n) for a, n in zip(arrays, names,
                                                                         strict=True))
            return [imp.h.swiglu_ffn(x, u, gt, dn)]

        return Match("swiglu", nodes, root.index, [root.proto.output[0]], root.label, emit,
                     parts={"x": x_name, "weights": list(zip(names, (up, gate, down),
                                                              strict=True))})
    return None


# --------------------------------------------------------------------------------------
# rope (rotate-half)
# --------------------------------------------------------------------------------------


def _slice_last(g: GraphView, node: Node, x: str, hd: int) -> tuple[int, int] | None:
    """(start, end) of a step-1 Slice of ``x``'s last dim (opset >= 10)."""
    if node.op_type != "Slice" or node.proto.input[0] != x or node.version < 10:
        return None
    args = [g.const(n) if n else None for n in [*node.proto.input[1:], "", ""][:4]]
    starts, ends, axes, steps = args
    if starts is None or ends is None or starts.size != 1:
        return None
    rank = len(g.shape(x) or ())
    if axes is not None and int(axes.reshape(-1)[0]) % rank != rank - 1:
        return None
    if axes is None and rank != 1:
        return None
    if steps is not None and int(steps.reshape(-1)[0]) != 1:
        return None
    start, end = int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])
    start, end = (v + hd if v < 0 else v for v in (start, end))
    return min(max(start, 0), hd), min(max(end, 0), hd)


def _rotate_half(g: GraphView, name: str, nodes: set[int]) -> str | None:
    """``Concat(Neg(x[..., r:]), x[..., :r])`` along the last axis: x."""
    cat = g.node(name, "Concat")
    if cat is None or len(cat.proto.input) != 2:
        return None
    neg = g.node(cat.proto.input[0], "Neg")
    if neg is None:
        return None
    hi = g.node(neg.proto.input[0], "Slice")
    lo = g.node(cat.proto.input[1], "Slice")
    if hi is None or lo is None or hi.proto.input[0] != lo.proto.input[0]:
        return None
    x = lo.proto.input[0]
    shape = g.shape(x)
    if shape is None or shape[-1] is None or shape[-1] % 2:
        return None
    hd = shape[-1]
    if cat.attr("axis") % len(shape) != len(shape) - 1:
        return None
    if _slice_last(g, hi, x, hd) != (hd // 2, hd) or _slice_last(g, lo, x, hd) != (0, hd // 2):
        return None
    nodes |= {cat.index, neg.index, hi.index, lo.index}
    return x


def _rope_table(table: np.ndarray | None, hd: int, seq_axis_len: int | None
                ) -> np.ndarray | None:
    """cos / sin ``[.., S, hd]`` (leading dims 1, halves equal) as ``[S, hd / 2]``."""
    if table is None or table.ndim < 2 or table.shape[-1] != hd:
        return None
    if any(d != 1 for d in table.shape[:-2]):
        return None
    t = table.reshape(table.shape[-2], hd)
    half = hd // 2
    if not np.array_equal(t[:, :half], t[:, half:]):
        return None
    if seq_axis_len is not None and t.shape[0] < seq_axis_len:
        return None
    return np.ascontiguousarray(t[:, :half])


def match_rope(g: GraphView, root: Node) -> Match | None:
    if root.op_type != "Add":
        return None
    for cos_side, sin_side in (root.proto.input[:2], root.proto.input[1::-1]):
        nodes = {root.index}
        mul_cos, mul_sin = g.node(cos_side, "Mul"), g.node(sin_side, "Mul")
        if mul_cos is None or mul_sin is None:
            continue
        for rot_name in mul_sin.proto.input[:2]:
            x = _rotate_half(g, rot_name, nodes)
            if x is None or x not in mul_cos.proto.input[:2]:
                continue
            shape = g.shape(x)
            if shape is None or len(shape) not in (3, 4):
                continue
            hd = shape[-1]
            seq = shape[-2]
            cos_name, sin_name = _other(mul_cos, x), _other(mul_sin, rot_name)
            cos = _rope_table(g.const(cos_name), hd, seq)  # type: ignore[arg-type]
            sin = _rope_table(g.const(sin_name), hd, seq)  # type: ignore[arg-type]
            if cos is None or sin is None:
                continue
            nodes |= {mul_cos.index, mul_sin.index}
            transpose = g.node(x, "Transpose")
            head_major = len(shape) == 4
            source = x
            if head_major and transpose is not None and transpose.ints("perm") == [0, 2, 1, 3] \
                    and g.closed(nodes | {transpose.index}, root.index):
                nodes.add(transpose.index)
                source = transpose.proto.input[0]
            if not g.closed(nodes, root.index):
                continue
            return _rope_match(root, nodes, x, source, head_major, hd, (cos, cos_name),
                               (sin, sin_name))
    return None


def _rope_match(root: Node, nodes: set[int], x: str, source: str, head_major: bool, hd: int,
                cos: tuple[np.ndarray, str], sin: tuple[np.ndarray, str]) -> Match:
    def emit(imp: GraphImporter) -> list[Value]:
        v = _tensor(imp, root, source)
        if head_major and source == x:  # [B, H, S, hd] -> [B, S, H, hd]
            v = root.mir("transpose", [v], perm=[0, 2, 1, 3])
        c = _const_tensor(imp, root, cos[0], f"{cos[1]}.half")
        s = _const_tensor(imp, root, sin[0], f"{sin[1]}.half")
        y = imp.h.rope(v, c, s, head_dim=hd)
        return [root.mir("transpose", [y], perm=[0, 2, 1, 3]) if head_major else y]

    return Match("rope", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"source": source, "moved_transpose": head_major and source != x,
                        "head_dim": hd, "cos": cos[0], "sin": sin[0],
                        "tables": (f"{cos[1]}.half", f"{sin[1]}.half")})


# --------------------------------------------------------------------------------------
# llama_decoder_block: the blocks of one pre-norm decoder layer
# --------------------------------------------------------------------------------------


@dataclass
class _Layer:
    """The pieces of one LLaMA decoder layer found around an attention block."""

    g: GraphView
    blocks: list[Match]
    by_value: dict[str, Match]
    extra: set[int] = field(default_factory=set)

    def block(self, name: str, kind: str) -> Match | None:
        m = self.by_value.get(name)
        return m if m is not None and m.kind == kind else None

    def block_on(self, x: str, kind: str) -> Match | None:
        """The block of ``kind`` whose input is ``x``."""
        return next((m for m in self.blocks if m.kind == kind and m.parts.get("x") == x),
                    None)

    def only_user(self, name: str, op: str) -> Node | None:
        users = self.g.consumers.get(name, [])
        if len(users) != 1 or name in self.g.outputs:
            return None
        node = self.g.imp.nodes[users[0]]
        return node if node.op_type == op and users[0] not in self.g.taken else None

    def projection(self, name: str) -> Match | None:
        """``Reshape(x W)`` to heads: the plain linear block behind ``name``."""
        reshape = self.g.node(name, "Reshape")
        lin = self.block(reshape.proto.input[0], "linear") if reshape else None
        if lin is None or lin.parts["bias"] is not None or lin.parts["activation"] != "none":
            return None
        self.extra.add(reshape.index)  # type: ignore[union-attr]
        return lin


def match_llama_layer(g: GraphView, found: dict[int, Match], attn: Match) -> Match | None:
    """``h = x + attn(rope(rms(x) Wq), rope(rms(x) Wk), rms(x) Wv) Wo``,
    ``y = h + swiglu(rms(h))`` with a causal mask, the default scale and equal epsilons:
    ``rlx_hir.llama_decoder_block``."""
    a = attn.parts
    if a["mask"] != "causal" or not a["default_scale"]:
        return None
    layer = _Layer(g, list(found.values()), {m.outputs[0]: m for m in found.values()})
    rq, rk = layer.block(a["q"], "rope"), layer.block(a["k"], "rope")
    if rq is None or rk is None or not (rq.parts["moved_transpose"]
                                        and rk.parts["moved_transpose"]):
        return None
    if not (np.array_equal(rq.parts["cos"], rk.parts["cos"])
            and np.array_equal(rq.parts["sin"], rk.parts["sin"])):
        return None
    v_heads = g.node(a["v"], "Transpose")
    if v_heads is None or v_heads.ints("perm") != [0, 2, 1, 3]:
        return None
    layer.extra.add(v_heads.index)
    lq, lk = layer.projection(rq.parts["source"]), layer.projection(rk.parts["source"])
    lv = layer.projection(v_heads.proto.input[0])
    if lq is None or lk is None or lv is None or not (
            lq.parts["x"] == lk.parts["x"] == lv.parts["x"]):
        return None
    norm1 = layer.block(lq.parts["x"], "rms_norm")
    if norm1 is None:
        return None
    x_in = norm1.parts["x"]
    heads_out = layer.only_user(attn.outputs[0], "Transpose")
    merged = layer.only_user(heads_out.proto.output[0], "Reshape") if heads_out else None
    if heads_out is None or heads_out.ints("perm") != [0, 2, 1, 3] or merged is None:
        return None
    lo = layer.block_on(merged.proto.output[0], "linear")
    if lo is None or lo.parts["bias"] is not None or lo.parts["activation"] != "none":
        return None
    residual1 = layer.only_user(lo.outputs[0], "Add")
    if residual1 is None or _other(residual1, lo.outputs[0]) != x_in:
        return None
    h_name = residual1.proto.output[0]
    norm2 = layer.block_on(h_name, "rms_norm")
    ffn = layer.block_on(norm2.outputs[0], "swiglu") if norm2 else None
    residual2 = layer.only_user(ffn.outputs[0], "Add") if ffn else None
    if residual2 is None or _other(residual2, ffn.outputs[0]) != h_name:  # type: ignore[union-attr]
        return None
    if norm1.parts["eps"] != norm2.parts["eps"]:  # type: ignore[union-attr]
        return None
    x_shape = g.shape(x_in)
    if x_shape is None or len(x_shape) != 3:
        return None
    subs = [attn, rq, rk, lq, lk, lv, lo, norm1, norm2, ffn]
    nodes = set().union(*(m.nodes for m in subs), layer.extra,  # type: ignore[union-attr]
                        {heads_out.index, merged.index, residual1.index, residual2.index})
    if not g.closed(nodes, residual2.index):
        return None
    root = residual2
    linears = [lq, lk, lv, lo]
    swiglu_weights = dict(zip(("up", "gate", "down"), ffn.parts["weights"],  # type: ignore[union-attr]
                              strict=True))

    def emit(imp: GraphImporter) -> list[Value]:
        x = _tensor(imp, root, x_in)
        dtype = np.asarray(root.scalar(0, x)).dtype
        width = norm1.parts["width"]

        def gamma(norm: Match) -> HirValue:
            g_arr = norm.parts["gamma"]
            if g_arr is None:
                return _const_tensor(imp, root, np.ones(width, dtype), None)
            return _const_tensor(imp, root, g_arr.reshape(width).astype(dtype),
                                 norm.parts["gamma_name"])

        zero = root.mir("expand", [np.zeros(1, dtype)], target_shape=[width])
        wq, wk, wv, wo = (_const_tensor(imp, root, m.parts["w"], m.parts["w_name"])
                          for m in linears)
        up, gate, down = (_const_tensor(imp, root, arr, name)
                          for name, arr in (swiglu_weights[k] for k in ("up", "gate", "down")))
        cos_name, sin_name = rq.parts["tables"]
        cos = _const_tensor(imp, root, rq.parts["cos"], cos_name)
        sin = _const_tensor(imp, root, rq.parts["sin"], sin_name)
        return [imp.h.llama_decoder_block(
            x, gamma(norm1), zero, wq, wk, wv, wo, gamma(norm2), zero, gate, up, down, cos,
            sin, num_heads=a["heads"], head_dim=a["head_dim"], num_kv_heads=a["kv_heads"],
            eps=norm1.parts["eps"], mask_kind="causal", rope_style="neox")]

    match = Match("llama_decoder_block", nodes, root.index, [root.proto.output[0]],
                  root.label, emit)
    match.parts["replaces"] = [m.output for m in subs]
    return match


# --------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------


def _gqa_source(g: GraphView, name: str, heads: int, nodes: set[int]) -> str:
    """The ``[B, Hkv, S, hd]`` tensor behind a ``repeat_kv`` expansion (Unsqueeze at 2,
    Expand, Reshape to ``[B, H, S, hd]``), or ``name`` itself."""
    reshape = g.node(name, "Reshape")
    expand = g.node(reshape.proto.input[0], "Expand") if reshape else None
    unsq = g.node(expand.proto.input[0], "Unsqueeze") if expand else None
    if reshape is None or expand is None or unsq is None:
        return name
    axes = unsq.ints("axes") if unsq.version < 13 else (
        None if g.const(unsq.proto.input[1]) is None
        else [int(a) for a in g.const(unsq.proto.input[1]).reshape(-1)])  # type: ignore[union-attr]
    src = unsq.proto.input[0]
    src_shape, out_shape = g.shape(src), g.shape(name)
    target = g.const(expand.proto.input[1])
    if axes != [2] or src_shape is None or out_shape is None or target is None or len(
            src_shape) != 4 or len(out_shape) != 4:
        return name
    kv = src_shape[1]
    if kv is None or heads % kv or list(target.reshape(-1))[1:3] != [kv, heads // kv]:
        return name
    if out_shape[1] != heads or out_shape[3] != src_shape[3]:
        return name
    nodes |= {reshape.index, expand.index, unsq.index}
    return src


def _causal(mask: np.ndarray, s: int, sk: int) -> bool:
    """An additive mask that is 0 where key j <= query i + (Sk - S), very negative else."""
    if mask.ndim < 2 or mask.shape[-2:] != (s, sk) or any(d != 1 for d in mask.shape[:-2]):
        return False
    m = mask.reshape(s, sk).astype(np.float64)
    i = np.arange(s)[:, None] + (sk - s)
    j = np.arange(sk)[None, :]
    keep = j <= i
    return bool(np.all(m[keep] == 0) and np.all(m[~keep] <= -1e4))


def _scores(g: GraphView, name: str, nodes: set[int]) -> tuple[Node, float, str | None] | None:
    """``Q Kᵀ * scale [+ mask]``: (the Q Kᵀ MatMul, scale, mask value name)."""
    mask = None
    add = g.node(name, "Add")
    if add is not None:
        for cand in add.proto.input[:2]:
            if g.node(cand, "Mul", "Div", "MatMul") is not None:
                mask, name = _other(add, cand), cand
                nodes.add(add.index)
                break
        else:
            return None
    scale = 1.0
    scaled = g.node(name, "Mul", "Div")
    if scaled is not None:
        for cand in scaled.proto.input[:2] if scaled.op_type == "Mul" else scaled.proto.input[:1]:
            c = _scalar(g.const(_other(scaled, cand)))
            if c is not None and g.node(cand, "MatMul") is not None:
                scale = c if scaled.op_type == "Mul" else 1.0 / c
                name = cand
                nodes.add(scaled.index)
                break
        else:
            return None
    qk = g.node(name, "MatMul")
    if qk is None:
        return None
    nodes.add(qk.index)
    return qk, scale, mask


def match_attention(g: GraphView, root: Node) -> Match | None:
    if root.op_type != "MatMul":
        return None
    nodes = {root.index}
    probs_name = root.proto.input[0]
    cast = g.node(probs_name, "Cast")
    if cast is not None:
        nodes.add(cast.index)
        probs_name = cast.proto.input[0]
    softmax = g.node(probs_name, "Softmax")
    if softmax is None:
        return None
    nodes.add(softmax.index)
    found = _scores(g, softmax.proto.input[0], nodes)
    if found is None:
        return None
    qk, scale, mask_name = found
    kt = g.node(qk.proto.input[1], "Transpose")
    q_name = qk.proto.input[0]
    q_shape = g.shape(q_name)
    if kt is None or kt.ints("perm") != [0, 1, 3, 2] or q_shape is None or len(q_shape) != 4:
        return None
    b, heads, s, hd = q_shape
    if heads is None or hd is None or softmax.attr("axis", -1) % 4 != 3:
        return None
    nodes.add(kt.index)
    k_name = _gqa_source(g, kt.proto.input[0], heads, nodes)
    v_name = _gqa_source(g, root.proto.input[1], heads, nodes)
    k_shape, v_shape = g.shape(k_name), g.shape(v_name)
    if k_shape is None or v_shape is None or len(k_shape) != 4 or k_shape != v_shape:
        return None
    if k_shape[3] != hd or k_shape[1] is None or heads % k_shape[1]:
        return None
    sk = k_shape[2]
    kind, mask = "none", None
    if mask_name is not None:
        mask = g.const(mask_name)
        if mask is not None and s is not None and sk is not None and _causal(mask, s, sk):
            kind = "causal"
        else:
            m_shape = g.shape(mask_name)
            if None in (b, s, sk) or m_shape is None or len(m_shape) != 4:
                return None
            kind = "bias"
    if not g.closed(nodes, root.index):
        return None
    default = math.isclose(scale, 1.0 / math.sqrt(hd), rel_tol=1e-6)

    def emit(imp: GraphImporter) -> list[Value]:
        q, k, v = (_tensor(imp, root, n) for n in (q_name, k_name, v_name))
        operands = [q, k, v]
        if kind == "bias":
            m = _tensor(imp, root, mask_name)  # type: ignore[arg-type]
            operands.append(root.mir("expand", [m], target_shape=[b, heads, s, sk]))
        if default:
            return [imp.h.attention(*operands, num_heads=heads, head_dim=hd, mask_kind=kind)]
        return [root.mir("attention", operands, num_heads=heads, head_dim=hd, mask_kind=kind,
                         score_scale=scale)]

    return Match("attention", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"q": q_name, "k": k_name, "v": v_name, "heads": heads, "head_dim": hd,
                        "kv_heads": k_shape[1], "mask": kind, "default_scale": default})


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

MATCHERS = (("attention", match_attention), ("swiglu", match_swiglu),
            ("rms_norm", match_rms_norm), ("rope", match_rope), ("linear", match_linear))


def _scope(imp: GraphImporter, nodes: set[int]) -> str:
    """The deepest module scope the nodes share (torch.onnx's ``name_scopes``)."""
    scopes = []
    for i in nodes:
        meta = {p.key: p.value for p in imp.nodes[i].proto.metadata_props}
        raw = meta.get("pkg.torch.onnx.name_scopes")
        if raw is None:
            return ""
        scopes.append([s.strip(" '\"") for s in raw.strip("[]").split(",")][:-1])
    common = scopes[0] if scopes else []
    for s in scopes[1:]:
        k = 0
        while k < min(len(common), len(s)) and common[k] == s[k]:
            k += 1
        common = common[:k]
    return next((c for c in reversed(common) if c), "")


def find_blocks(imp: GraphImporter) -> dict[int, Match]:
    """Block matches keyed by the index of their last node; the blocks of a whole LLaMA
    decoder layer become one ``llama_decoder_block``."""
    g = GraphView(imp)
    found: dict[int, Match] = {}
    for _, matcher in MATCHERS:
        for node in reversed(imp.nodes):
            if node.index in g.taken:
                continue
            match = matcher(g, node)
            if match is None or match.nodes & g.taken:
                continue
            match.scope = _scope(imp, match.nodes)
            g.taken |= match.nodes
            found[match.output] = match
    for attn in [m for m in found.values() if m.kind == "attention"]:
        layer = match_llama_layer(g, found, attn)
        if layer is None:
            continue
        for i in layer.parts["replaces"]:
            del found[i]
        layer.scope = _scope(imp, layer.nodes)
        g.taken |= layer.nodes
        found[layer.output] = layer
    return found
