"""Recognizing ATen subgraphs of an exported program as HIR blocks.

Each matcher starts at the node that produces a block's result and walks back through
producers (seeing through pass-through ops); a match covers nodes whose every result is
used only inside the match, and takes its weights from the program's parameters. Matches
are tried largest first, a node belongs to at most one, and the block is built at its last
node, labelled with the module path its nodes share.

- ``attention``: ``aten.scaled_dot_product_attention`` over ``[B, H, S, hd]``; K / V
  GQA-expanded by HF's ``repeat_kv`` (unsqueeze, expand, reshape) are taken unexpanded;
  ``is_causal``, or a mask computed from sizes alone that is causal at two probed sizes,
  is ``mask = "causal"``; a mask that keeps the non-zero keys of one input ``[B, S_k]``
  (BERT's ``attention_mask``, however HF expands it) is ``custom``; any other a ``bias``.
- ``linear``: ``aten.linear`` with a weight [and bias] [``-> relu / gelu / silu /
  sigmoid / tanh``].
- ``swiglu``: ``linear(silu(linear(x, Wg)) * linear(x, Wu), Wd)``.
- ``rms_norm``: ``x * rsqrt(mean(x², -1) + eps)`` [``* gamma``] (or ``/ sqrt``), and
  ``aten.rms_norm``.
- ``rope``: rotate-half RoPE ``x cos + cat(-x2, x1) sin`` whose cos / sin are weights or
  computed from sizes alone (HF's rotary embedding of ``arange(seq)``), imported as tables
  of the longest sequence the program allows.
- ``llama_decoder_block``: those blocks assembled as one pre-norm LLaMA layer
  (:mod:`rlx.importers.torch_export.layer`).

These matchers read ATen, not ONNX: ``aten.linear`` and ``scaled_dot_product_attention``
are already whole blocks in an exported program, so they share the HIR builders and the
block vocabulary with :mod:`rlx.importers.onnx_blocks`, not the ONNX graph patterns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.fx import Node

from rlx.dialects.builder import HirValue
from rlx.importers.dims import same
from rlx.importers.torch_export.program import ProgramView

if TYPE_CHECKING:
    from rlx.importers.torch_export.importer import ProgramImporter


@dataclass
class Match:
    """A subgraph to import as one block, built at ``root``."""

    kind: str
    nodes: set[Node]
    root: Node
    inputs: list[Node]
    emit: Callable[[ProgramImporter], HirValue]
    parts: dict[str, Any] = field(default_factory=dict)


class Matcher:
    """The program and the nodes already taken by a match."""

    def __init__(self, imp: ProgramImporter) -> None:
        self.imp = imp
        self.g = imp.g
        self.taken: set[Node] = set()

    def free(self, node: object, *ops: str) -> Node | None:
        n = self.g.op(node, *ops)
        return n if n is not None and n not in self.taken else None

    def weight(self, node: object) -> np.ndarray | None:
        return self.g.weight(node) if isinstance(node, Node) else None  # type: ignore[arg-type]


def other(node: Node, one: object) -> object:
    a, b = node.args[0], node.args[1]
    return b if a is one else a


def _plain_add(g: ProgramView, node: Node | None) -> bool:
    return node is not None and g.arg(node, 2, "alpha", 1) == 1


# -- linear, swiglu ------------------------------------------------------------------------

ACTIVATIONS = {"relu": "relu", "relu_": "relu", "silu": "silu", "silu_": "silu",
               "sigmoid": "sigmoid", "tanh": "tanh", "gelu": "gelu"}


def _linear_weights(m: Matcher, lin: Node) -> tuple[np.ndarray, str, np.ndarray | None] | None:
    w = m.weight(lin.args[1])
    b_node = m.g.arg(lin, 2, "bias")
    b = m.weight(b_node) if b_node is not None else None
    if w is None or w.ndim != 2 or w.dtype.kind != "f" or (b_node is not None and b is None):
        return None
    return w, m.g.weight_name(lin.args[1]), b  # type: ignore[arg-type]


def match_linear(m: Matcher, root: Node) -> Match | None:
    act, lin = "none", root
    name = m.g.op(root, *ACTIVATIONS)
    if name is not None:
        act = ACTIVATIONS[str(root.target.overloadpacket.__name__)]  # type: ignore[union-attr]
        if act == "gelu" and root.kwargs.get("approximate", "none") == "tanh":
            act = "gelu_approx"
        lin = m.free(root.args[0], "linear")  # type: ignore[assignment]
    if m.g.op(lin, "linear") is None or lin in m.taken:
        return None
    found = _linear_weights(m, lin)
    if found is None:
        return None
    w, w_name, b = found
    nodes = {root, lin}
    if not m.g.closed(nodes, root):
        return None
    x, b_src = lin.args[0], m.g.arg(lin, 2, "bias")

    def emit(imp: ProgramImporter) -> HirValue:
        wt = imp.weight_tensor(np.ascontiguousarray(w.T), f"{w_name}.T", root)
        bias = None if b is None else imp.materialize(b, b_src, None, root)
        return imp.h.linear(imp.value(x), wt, bias, activation=None if act == "none" else act)

    return Match("linear", nodes, root, [x], emit,  # type: ignore[list-item]
                 parts={"x": x, "w": w, "w_name": w_name, "bias": b, "activation": act})


def match_swiglu(m: Matcher, root: Node) -> Match | None:
    down = m.g.op(root, "linear")
    prod = m.free(root.args[0], "mul") if down is not None else None
    if prod is None or m.g.arg(root, 2, "bias") is not None:
        return None
    for gate_side, up_side in ((prod.args[0], prod.args[1]), (prod.args[1], prod.args[0])):
        silu = m.free(gate_side, "silu", "silu_")
        gate, up = (m.free(silu.args[0], "linear") if silu is not None else None,
                    m.free(up_side, "linear"))
        if gate is None or up is None or gate.args[0] is not up.args[0]:
            continue
        weights = [_linear_weights(m, n) for n in (up, gate, root)]
        if any(w is None or w[2] is not None or m.g.arg(n, 2, "bias") is not None
               for w, n in zip(weights, (up, gate, root), strict=True)):
            continue
        nodes = {root, prod, silu, gate, up}
        if not m.g.closed(nodes, root):  # type: ignore[arg-type]
            continue
        x = up.args[0]

        def emit(imp: ProgramImporter, x: Any = x, weights: list = weights) -> HirValue:
            u, gt, d = (imp.weight_tensor(np.ascontiguousarray(w.T), f"{name}.T", root)
                        for w, name, _ in weights)
            return imp.h.swiglu_ffn(imp.value(x), u, gt, d)

        return Match("swiglu", nodes, root, [x], emit,  # type: ignore[arg-type]
                     parts={"x": x, "weights": weights})
    return None


# -- rms_norm ------------------------------------------------------------------------------


def _mean_square(m: Matcher, node: object, nodes: set[Node]) -> tuple[Node, float] | None:
    """``mean(x², -1, keepdim) + eps``: (x, eps)."""
    add = m.free(node, "add")
    mean = m.free(add.args[0], "mean") if add is not None else None
    eps = add.args[1] if add is not None else None
    if mean is None or not isinstance(eps, float | int) or eps <= 0 or not _plain_add(m.g, add):
        return None
    sq = m.free(mean.args[0], "pow", "mul")
    if sq is None or len(mean.args) < 3 or not mean.args[2]:
        return None
    x = sq.args[0]
    if (sq.args[1] != 2) if m.g.op(sq, "pow") else (sq.args[1] is not x):
        return None
    rank = len(m.g.dims(x))  # type: ignore[arg-type]
    if [int(d) % rank for d in mean.args[1]] != [rank - 1]:  # type: ignore[union-attr]
        return None
    nodes |= {add, mean, sq}
    return x, float(eps)  # type: ignore[return-value]


def _rms_core(m: Matcher, node: object, nodes: set[Node]) -> tuple[Node, float] | None:
    """``x * rsqrt(ms)``, ``x * reciprocal(sqrt(ms))`` or ``x / sqrt(ms)``."""
    div = m.free(node, "div")
    if div is not None:
        sqrt = m.free(div.args[1], "sqrt")
        found = _mean_square(m, sqrt.args[0], nodes) if sqrt is not None else None
        if found is None or found[0] is not div.args[0]:
            return None
        nodes |= {div, sqrt}  # type: ignore[arg-type]
        return found
    mul = m.free(node, "mul")
    for cand in mul.args[:2] if mul is not None else ():
        inv = m.free(cand, "rsqrt")
        inner = inv.args[0] if inv is not None else None
        if inv is None and (rec := m.free(cand, "reciprocal")) is not None:
            inv = m.free(rec.args[0], "sqrt")
            inner = inv.args[0] if inv is not None else None
            nodes.add(rec)
        found = _mean_square(m, inner, nodes) if inv is not None else None
        if found is not None and found[0] is other(mul, cand):  # type: ignore[arg-type]
            nodes |= {mul, inv}  # type: ignore[arg-type]
            return found
    return None


def match_rms_norm(m: Matcher, root: Node) -> Match | None:
    nodes: set[Node] = {root}
    gamma_src: object = None
    found = None
    if m.g.op(root, "rms_norm") is not None:
        shape = m.g.arg(root, 1, "normalized_shape")
        eps = m.g.arg(root, 3, "eps")
        if len(shape) != 1 or eps is None:
            return None
        found, gamma_src = (root.args[0], float(eps)), m.g.arg(root, 2, "weight")
    elif m.g.op(root, "mul") is not None:
        for cand in root.args[:2]:
            w = m.weight(other(root, cand))
            if w is not None and w.ndim == 1:
                found = _rms_core(m, m.g.through(cand, nodes), nodes)
                if found is not None:
                    gamma_src = other(root, cand)
                    break
        if found is None:
            found = _rms_core(m, root, nodes)
    if found is None or not m.g.closed(nodes, root):
        return None
    x, eps = found
    d = m.g.shape(x)[-1]  # type: ignore[index, arg-type]
    gamma = m.weight(gamma_src)
    if d is None or (gamma_src is not None and (gamma is None or gamma.size != d)):
        return None

    def emit(imp: ProgramImporter) -> HirValue:
        xv = imp.value(x)
        g_value = imp.materialize(gamma.reshape(d), gamma_src, None, root) \
            if gamma is not None else imp.weight_tensor(np.ones(d, np.float32), "ones", root)
        return imp.h.rms_norm(xv, g_value, eps=eps)

    return Match("rms_norm", nodes, root, [x], emit,
                 parts={"x": x, "gamma": gamma, "gamma_src": gamma_src, "eps": eps, "width": d})


# -- rope ----------------------------------------------------------------------------------


def _rotate_half(m: Matcher, node: object, nodes: set[Node]) -> Node | None:
    """``cat([-x[..., h:], x[..., :h]], -1)``: x."""
    cat = m.free(node, "cat")
    if cat is None or len(cat.args[0]) != 2:  # type: ignore[arg-type]
        return None
    neg = m.free(cat.args[0][0], "neg")  # type: ignore[index]
    hi = m.free(neg.args[0], "slice") if neg is not None else None
    lo = m.free(cat.args[0][1], "slice")  # type: ignore[index]
    if hi is None or lo is None or hi.args[0] is not lo.args[0]:
        return None
    x = lo.args[0]
    shape = m.g.shape(x)  # type: ignore[arg-type]
    hd = shape[-1] if shape else None
    if hd is None or hd % 2 or int(m.g.arg(cat, 1, "dim", 0)) % len(shape) != len(shape) - 1:
        return None
    for s, (start, end) in ((hi, (hd // 2, hd)), (lo, (0, hd // 2))):
        if int(s.args[1]) % len(shape) != len(shape) - 1 or m.g.arg(s, 4, "step", 1) != 1:
            return None
        if (s.args[2], min(int(s.args[3]), hd)) != (start, end):  # type: ignore[call-overload]
            return None
    nodes |= {cat, neg, hi, lo}
    return x  # type: ignore[return-value]


def rope_table(imp: ProgramImporter, node: object, hd: int) -> np.ndarray | None:
    """cos / sin ``[1.., T, hd]`` (halves equal) as ``[T, hd / 2]``: a weight, or computed
    from sizes alone and folded at the longest sequence (dynamic only along T)."""
    if not isinstance(node, Node):
        return None
    arr = imp.g.weight(node)
    if arr is None and imp.probe.size_only(node):
        folded = imp.probe.fold(node)
        if folded is None or any(a != folded[0].dim() - 2 for a in folded[1]):
            return None
        arr = folded[0].numpy()
    if arr is None or arr.ndim < 2 or arr.shape[-1] != hd or any(d != 1 for d in
                                                                   arr.shape[:-2]):
        return None
    t = arr.reshape(arr.shape[-2], hd)
    if not np.array_equal(t[:, :hd // 2], t[:, hd // 2:]):
        return None
    return np.ascontiguousarray(t[:, :hd // 2])


def match_rope(m: Matcher, root: Node) -> Match | None:
    if m.g.op(root, "add") is None or not _plain_add(m.g, root):
        return None
    for cos_side, sin_side in ((root.args[0], root.args[1]), (root.args[1], root.args[0])):
        mul_cos, mul_sin = m.free(cos_side, "mul"), m.free(sin_side, "mul")
        for rot in mul_sin.args[:2] if mul_cos is not None and mul_sin is not None else ():
            nodes = {root, mul_cos, mul_sin}
            x = _rotate_half(m, rot, nodes)  # type: ignore[arg-type]
            if x is None or x not in mul_cos.args[:2]:  # type: ignore[union-attr]
                continue
            shape = m.g.shape(x)
            hd = shape[-1]  # type: ignore[index]
            cos = rope_table(m.imp, other(mul_cos, x), hd)  # type: ignore[arg-type]
            sin = rope_table(m.imp, other(mul_sin, rot), hd)  # type: ignore[arg-type]
            if cos is None or sin is None or len(shape) not in (3, 4):  # type: ignore[arg-type]
                continue
            head_major = len(shape) == 4  # type: ignore[arg-type]
            tr = m.free(x, "transpose")
            source: Node = x
            if head_major and tr is not None and sorted(int(a) % 4 for a in tr.args[1:3]) == [
                    1, 2] and m.g.closed(nodes | {tr}, root):  # type: ignore[operator]
                nodes.add(tr)
                source = tr.args[0]  # type: ignore[assignment]
            if not m.g.closed(nodes, root):  # type: ignore[arg-type]
                continue
            return _rope_match(root, nodes, (x, source), head_major, hd, (cos, sin))  # type: ignore[arg-type]
    return None


def _rope_match(root: Node, nodes: set[Node], xs: tuple[Node, Node], head_major: bool,
                hd: int, tables: tuple[np.ndarray, np.ndarray]) -> Match:
    x, source = xs

    def emit(imp: ProgramImporter) -> HirValue:
        v = imp.value(source)
        if head_major and source is x:  # [B, H, S, hd] -> [B, S, H, hd]
            v = imp.h.mir("transpose", [v], perm=[0, 2, 1, 3])
        c = imp.weight_tensor(tables[0], "rope.cos", root)
        s = imp.weight_tensor(tables[1], "rope.sin", root)
        y = imp.h.rope(v, c, s, head_dim=hd)
        return imp.h.mir("transpose", [y], perm=[0, 2, 1, 3]) if head_major else y

    return Match("rope", nodes, root, [source], emit,
                 parts={"x": x, "source": source, "moved": source is not x, "head_dim": hd,
                        "cos": tables[0], "sin": tables[1]})


# -- attention -----------------------------------------------------------------------------


def _gqa_source(m: Matcher, node: object, heads: int, nodes: set[Node]) -> object:
    """The ``[B, Hkv, S, hd]`` tensor behind HF's ``repeat_kv``, or ``node``."""
    reshape = m.free(node, "reshape", "view", "_unsafe_view")
    expand = m.free(m.g.through(reshape.args[0], nodes), "expand") if reshape else None
    unsq = m.free(expand.args[0], "unsqueeze") if expand else None
    if reshape is None or expand is None or unsq is None or int(unsq.args[1]) != 2:
        return node
    src_shape = m.g.shape(unsq.args[0])  # type: ignore[arg-type]
    if src_shape is None or len(src_shape) != 4 or src_shape[1] is None:
        return node
    kv = src_shape[1]
    if heads % kv or m.g.shape(reshape) is None or m.g.shape(reshape)[1] != heads:  # type: ignore[index]
        return node
    nodes |= {reshape, expand, unsq}
    return unsq.args[0]


def attention_of(imp: ProgramImporter, root: Node, m: Matcher | None = None) -> Match | str:
    """The attention block of an SDPA node, or why rlx cannot import it."""
    m = m or Matcher(imp)
    g = m.g
    q, k, v = root.args[:3]
    mask = g.arg(root, 3, "attn_mask")
    if g.arg(root, 4, "dropout_p", 0.0):
        return "dropout_p > 0 (export the model in eval mode)"
    q_shape = g.shape(q)  # type: ignore[arg-type]
    if q_shape is None or len(q_shape) != 4 or None in (q_shape[1], q_shape[3]):
        return f"q must be [B, H, S, head_dim] with static H and head_dim, found {q_shape}"
    heads, hd = int(q_shape[1]), int(q_shape[3])  # type: ignore[arg-type]
    nodes = {root}
    k_src, v_src = (_gqa_source(m, t, heads, nodes) for t in (k, v))
    k_shape, v_shape = g.shape(k_src), g.shape(v_src)  # type: ignore[arg-type]
    if k_shape is None or len(k_shape) != 4 or k_shape[1] is None or heads % k_shape[1] \
            or v_shape is None or len(v_shape) != 4 or v_shape[1] != k_shape[1]:
        return f"k and v must be [B, H_kv, S_k, head_dim] with H_kv dividing {heads}"
    kind, mask_src = _mask_kind(m, root, (q, k_src), mask)  # type: ignore[arg-type]
    if kind.startswith("error:"):
        return kind.removeprefix("error: ")
    scale = root.kwargs.get("scale")
    default = scale is None or math.isclose(scale, 1.0 / math.sqrt(hd), rel_tol=1e-6)
    inputs = [q, k_src, v_src] + ([mask_src] if mask_src is not None else [])

    def emit(imp: ProgramImporter) -> HirValue:
        operands = [imp.value(n) for n in (q, k_src, v_src)]
        if kind == "custom":
            operands.append(_keep_flags(imp, mask_src))  # type: ignore[arg-type]
        elif kind == "bias":
            operands.append(_bias(imp, root, mask_src, heads))  # type: ignore[arg-type]
        if default:
            return imp.h.attention(*operands, num_heads=heads, head_dim=hd, mask_kind=kind)
        return imp.h.mir("attention", operands, num_heads=heads, head_dim=hd,
                         mask_kind=kind, score_scale=float(scale))  # type: ignore[arg-type]

    return Match("attention", nodes, root, inputs, emit,  # type: ignore[arg-type]
                 parts={"q": q, "k": k_src, "v": v_src, "heads": heads, "head_dim": hd,
                        "kv_heads": k_shape[1], "mask": kind, "default_scale": default})


def _mask_kind(m: Matcher, root: Node, qk: tuple[Node, Node], mask: object
               ) -> tuple[str, Node | None]:
    q, k = qk
    same_len = same(m.g.dims(q)[2], m.g.dims(k)[2])
    if m.g.arg(root, 5, "is_causal", False):
        if mask is not None or not same_len:
            return "error: is_causal with a mask, or with queries and keys of different "\
                "lengths (torch aligns that mask top-left, rlx bottom-right)", None
        return "causal", None
    if mask is None:
        return "none", None
    if not isinstance(mask, Node):
        return f"error: attn_mask {mask!r}", None
    if m.imp.probe.is_causal(mask, q, k):
        return "causal", None
    src = m.imp.probe.padding_source(mask, q, k)
    if src is not None:
        return "custom", src
    return "bias", mask


def _keep_flags(imp: ProgramImporter, src: Node) -> HirValue:
    flags = imp.value(src)
    if flags.dtype.bits == 1:
        return flags
    zero = imp.h.constant(np.zeros((), imp.np_dtype(flags.dtype)), flags.dtype)
    return imp.h.mir("compare", [flags, zero], kind="ne")


def _bias(imp: ProgramImporter, root: Node, mask: Node, heads: int) -> HirValue:
    """An SDPA mask as the additive ``[B, H, S, S_k]`` bias (a bool one: 0 where kept, the
    lowest float elsewhere)."""
    t = imp.value(mask)
    if not isinstance(t, HirValue):
        t = imp.materialize(t, mask, mask.name, root)
    if t.dtype.bits == 1:
        low = np.finfo(np.float32).min
        t = imp.h.mir("where", [t, imp.h.constant(np.zeros((), np.float32), "f32"),
                                imp.h.constant(np.asarray(low, np.float32), "f32")])
    q_dims = imp.g.dims(root)
    target = [q_dims[0], heads, q_dims[2], imp.g.dims(root.args[1])[2]]  # type: ignore[arg-type]
    return imp.sizes.broadcast(t, imp.g.dims(mask)[-len(t.shape):], target,
                               lambda msg: imp.fail(root, msg))


def match_attention(m: Matcher, root: Node) -> Match | None:
    if m.g.op(root, "scaled_dot_product_attention") is None:
        return None
    found = attention_of(m.imp, root, m)
    if isinstance(found, str) or not m.g.closed(found.nodes, root):
        return None
    return found


MATCHERS = (("attention", match_attention), ("swiglu", match_swiglu),
            ("rms_norm", match_rms_norm), ("rope", match_rope), ("linear", match_linear))


def find_blocks(imp: ProgramImporter) -> dict[Node, Match]:
    """Block matches keyed by their root; the blocks of a whole LLaMA decoder layer become
    one ``llama_decoder_block``."""
    from rlx.importers.torch_export.layer import match_llama_layer

    m = Matcher(imp)
    found: dict[Node, Match] = {}
    for _, matcher in MATCHERS:
        for node in reversed(imp.g.nodes):
            if node.op != "call_function" or node in m.taken:
                continue
            match = matcher(m, node)
            if match is None or match.nodes & m.taken:
                continue
            m.taken |= match.nodes
            found[match.root] = match
    for attn in [x for x in found.values() if x.kind == "attention"]:
        layer = match_llama_layer(m, found, attn)
        if layer is None:
            continue
        for root in layer.parts["replaces"]:
            del found[root]
        m.taken |= layer.nodes
        found[layer.root] = layer
    return found


__all__ = ["MATCHERS", "Match", "Matcher", "attention_of", "find_blocks", "rope_table"]
