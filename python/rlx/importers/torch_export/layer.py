"""The ``llama_decoder_block`` matcher: the blocks of one pre-norm LLaMA decoder layer (as
HF's ``LlamaDecoderLayer`` exports) found around a causal attention block."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from torch.fx import Node

from rlx.dialects.builder import HirValue
from rlx.importers.torch_export.blocks import Match, Matcher, other

if TYPE_CHECKING:
    from rlx.importers.torch_export.importer import ProgramImporter

SHAPE_OPS = ("reshape", "view", "_unsafe_view", "transpose", "contiguous", "clone")


class _Layer:
    def __init__(self, m: Matcher, found: dict[Node, Match]) -> None:
        self.m = m
        self.g = m.g
        self.found = found
        self.extra: set[Node] = set()

    def block(self, node: object, kind: str) -> Match | None:
        found = self.found.get(node) if isinstance(node, Node) else None
        return found if found is not None and found.kind == kind else None

    def block_on(self, x: object, kind: str) -> Match | None:
        return next((b for b in self.found.values() if b.kind == kind and b.parts.get("x")
                     is x), None)

    def only_user(self, node: Node, *ops: str) -> Node | None:
        users = self.g.users[node]
        if len(users) != 1 or node in self.g.output_nodes:
            return None
        return self.m.free(users[0], *ops)

    def projection(self, heads: object) -> Match | None:
        """``view(x W, [B, S, H, hd])``: the plain linear block behind it."""
        view = self.m.free(heads, "view", "reshape", "_unsafe_view")
        lin = self.block(view.args[0], "linear") if view is not None else None
        if lin is None or lin.parts["bias"] is not None or lin.parts["activation"] != "none":
            return None
        self.extra.add(view)  # type: ignore[arg-type]
        return lin

    def inputs(self, a: dict) -> tuple[Match, Match, Match, Match, Match, Match] | None:
        """(rope q, rope k, linear q, k, v, the RMSNorm before them)."""
        rq, rk = self.block(a["q"], "rope"), self.block(a["k"], "rope")
        if rq is None or rk is None or not (rq.parts["moved"] and rk.parts["moved"]):
            return None
        if not (np.array_equal(rq.parts["cos"], rk.parts["cos"])
                and np.array_equal(rq.parts["sin"], rk.parts["sin"])):
            return None
        v_heads = self.m.free(a["v"], "transpose")
        if v_heads is None or sorted(int(d) % 4 for d in v_heads.args[1:3]) != [1, 2]:
            return None
        self.extra.add(v_heads)
        lq, lk = self.projection(rq.parts["source"]), self.projection(rk.parts["source"])
        lv = self.projection(v_heads.args[0])
        if lq is None or lk is None or lv is None or not (
                lq.parts["x"] is lk.parts["x"] is lv.parts["x"]):
            return None
        norm1 = self.block(lq.parts["x"], "rms_norm")
        return None if norm1 is None else (rq, rk, lq, lk, lv, norm1)

    def output(self, attn: Match, x_in: object) -> tuple[Match, Node] | None:
        """Heads merged back (one transpose of dims 1, 2, reshapes), the plain output
        projection and the residual add of ``x_in``."""
        node, chain, transposes = attn.root, [], 0
        lo = None
        while lo is None:
            nxt = self.only_user(node, *SHAPE_OPS)
            if nxt is None:
                return None
            if self.g.op(nxt, "transpose") is not None:
                transposes += 1
                if sorted(int(d) % 4 for d in nxt.args[1:3]) != [1, 2]:
                    return None
            chain.append(nxt)
            node = nxt
            lo = self.block_on(node, "linear")
        shape = self.g.shape(node)
        if transposes != 1 or shape is None or len(shape) != 3:
            return None
        if lo.parts["bias"] is not None or lo.parts["activation"] != "none":
            return None
        residual = self.only_user(lo.root, "add")
        if residual is None or other(residual, lo.root) is not x_in or self.g.arg(
                residual, 2, "alpha", 1) != 1:
            return None
        self.extra |= {*chain, residual}
        return lo, residual

    def ffn(self, residual: Node) -> tuple[Match, Match, Node] | None:
        """RMSNorm of the residual (through pass-through ops), SwiGLU, the second residual
        add: ``(norm2, ffn, root)``."""
        h: Node = residual
        passed: list[Node] = []
        norm2 = self.block_on(h, "rms_norm")
        while norm2 is None:
            users = self.g.users[h]
            if len(users) != 1 or not self.g.passes_through(users[0]):
                return None
            h = users[0]
            passed.append(h)
            norm2 = self.block_on(h, "rms_norm")
        ffn = self.block_on(norm2.root, "swiglu")
        root = self.only_user(ffn.root, "add") if ffn is not None else None
        if ffn is None or root is None or other(root, ffn.root) is not h:
            return None
        self.extra |= {*passed, root}
        return norm2, ffn, root


def match_llama_layer(m: Matcher, found: dict[Node, Match], attn: Match) -> Match | None:
    """``h = x + attn(rope(rms(x) Wq), rope(rms(x) Wk), rms(x) Wv) Wo``,
    ``y = h + swiglu(rms(h))`` with a causal mask, the default scale and equal epsilons."""
    a = attn.parts
    if a["mask"] != "causal" or not a["default_scale"]:
        return None
    layer = _Layer(m, found)
    inputs = layer.inputs(a)
    if inputs is None:
        return None
    rq, rk, lq, lk, lv, norm1 = inputs
    x_in = norm1.parts["x"]
    out = layer.output(attn, x_in)
    ffn_part = layer.ffn(out[1]) if out is not None else None
    if out is None or ffn_part is None:
        return None
    norm2, ffn, root = ffn_part
    shape = m.g.shape(x_in)
    if norm1.parts["eps"] != norm2.parts["eps"] or shape is None or len(shape) != 3:
        return None
    subs = [attn, rq, rk, lq, lk, lv, out[0], norm1, norm2, ffn]
    nodes = set().union(*(s.nodes for s in subs), layer.extra)
    if not m.g.closed(nodes, root):
        return None

    def emit(imp: ProgramImporter) -> HirValue:
        def t(w: np.ndarray, name: str) -> HirValue:
            return imp.weight_tensor(np.ascontiguousarray(w.T), f"{name}.T", root)

        def gamma(norm: Match) -> HirValue:
            g = norm.parts["gamma"]
            width = norm.parts["width"]
            if g is None:
                return imp.weight_tensor(np.ones(width, np.float32), "ones", root)
            return imp.materialize(g.reshape(width), norm.parts["gamma_src"], None, root)

        wq, wk, wv, wo = (t(b.parts["w"], b.parts["w_name"]) for b in (lq, lk, lv, out[0]))
        up, gate, down = (t(w, name) for w, name, _ in ffn.parts["weights"])
        zero = imp.weight_tensor(np.zeros(norm1.parts["width"], np.float32), "zeros", root)
        cos = imp.weight_tensor(rq.parts["cos"], "rope.cos", root)
        sin = imp.weight_tensor(rq.parts["sin"], "rope.sin", root)
        return imp.h.llama_decoder_block(
            imp.value(x_in), gamma(norm1), zero, wq, wk, wv, wo, gamma(norm2), zero, gate,
            up, down, cos, sin, num_heads=a["heads"], head_dim=a["head_dim"],
            num_kv_heads=a["kv_heads"], eps=norm1.parts["eps"], mask_kind="causal",
            rope_style="neox")

    match = Match("llama_decoder_block", nodes, root, [x_in], emit)  # type: ignore[list-item]
    match.parts["replaces"] = [s.root for s in subs]
    return match


__all__ = ["match_llama_layer"]
