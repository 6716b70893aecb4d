"""Block matcher of the block family: ``llama_decoder_block``, the blocks of one pre-norm
LLaMA decoder layer found around an attention block."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rlx.dialects.builder import HirValue
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

    def attention_inputs(self, attn: Match
                         ) -> tuple[Match, Match, Match, Match, Match, Match] | None:
        """The RoPE blocks of q and k (one table), the plain q / k / v projections to heads
        of one input, and the RMSNorm that makes it: ``(rq, rk, lq, lk, lv, norm1)``."""
        a = attn.parts
        rq, rk = self.block(a["q"], "rope"), self.block(a["k"], "rope")
        if rq is None or rk is None or not (rq.parts["moved_transpose"]
                                            and rk.parts["moved_transpose"]):
            return None
        if not (np.array_equal(rq.parts["cos"], rk.parts["cos"])
                and np.array_equal(rq.parts["sin"], rk.parts["sin"])):
            return None
        v_heads = self.g.node(a["v"], "Transpose")
        if v_heads is None or v_heads.ints("perm") != [0, 2, 1, 3]:
            return None
        self.extra.add(v_heads.index)
        lq, lk = self.projection(rq.parts["source"]), self.projection(rk.parts["source"])
        lv = self.projection(v_heads.proto.input[0])
        if lq is None or lk is None or lv is None or not (
                lq.parts["x"] == lk.parts["x"] == lv.parts["x"]):
            return None
        norm1 = self.block(lq.parts["x"], "rms_norm")
        if norm1 is None:
            return None
        return rq, rk, lq, lk, lv, norm1

    def attention_output(self, attn: Match, x_in: str) -> tuple[Match, Node] | None:
        """Heads merged back, the plain output projection and the residual add of
        ``x_in``: ``(lo, residual1)``."""
        heads_out = self.only_user(attn.outputs[0], "Transpose")
        merged = self.only_user(heads_out.proto.output[0], "Reshape") if heads_out else None
        if heads_out is None or heads_out.ints("perm") != [0, 2, 1, 3] or merged is None:
            return None
        lo = self.block_on(merged.proto.output[0], "linear")
        if lo is None or lo.parts["bias"] is not None or lo.parts["activation"] != "none":
            return None
        residual1 = self.only_user(lo.outputs[0], "Add")
        if residual1 is None or other_input(residual1, lo.outputs[0]) != x_in:
            return None
        self.extra |= {heads_out.index, merged.index, residual1.index}
        return lo, residual1

    def ffn(self, h_name: str) -> tuple[Match, Match, Node] | None:
        """RMSNorm of ``h_name``, SwiGLU and the residual add of ``h_name``:
        ``(norm2, ffn, residual2)``."""
        norm2 = self.block_on(h_name, "rms_norm")
        ffn = self.block_on(norm2.outputs[0], "swiglu") if norm2 else None
        residual2 = self.only_user(ffn.outputs[0], "Add") if ffn else None
        if norm2 is None or ffn is None or residual2 is None or (
                other_input(residual2, ffn.outputs[0]) != h_name):
            return None
        self.extra.add(residual2.index)
        return norm2, ffn, residual2


def match_llama_layer(g: GraphView, found: dict[int, Match], attn: Match) -> Match | None:
    """``h = x + attn(rope(rms(x) Wq), rope(rms(x) Wk), rms(x) Wv) Wo``,
    ``y = h + swiglu(rms(h))`` with a causal mask, the default scale and equal epsilons:
    ``rlx_hir.llama_decoder_block``."""
    a = attn.parts
    if a["mask"] != "causal" or not a["default_scale"] or a["k_bshd"]:
        return None
    layer = _Layer(g, list(found.values()), {m.outputs[0]: m for m in found.values()})
    inputs = layer.attention_inputs(attn)
    if inputs is None:
        return None
    rq, rk, lq, lk, lv, norm1 = inputs
    x_in = norm1.parts["x"]
    output = layer.attention_output(attn, x_in)
    if output is None:
        return None
    lo, residual1 = output
    ffn_part = layer.ffn(residual1.proto.output[0])
    if ffn_part is None:
        return None
    norm2, ffn, root = ffn_part
    if norm1.parts["eps"] != norm2.parts["eps"]:
        return None
    x_shape = g.shape(x_in)
    if x_shape is None or len(x_shape) != 3:
        return None
    subs = [attn, rq, rk, lq, lk, lv, lo, norm1, norm2, ffn]
    nodes = set().union(*(m.nodes for m in subs), layer.extra)
    if not g.closed(nodes, root.index):
        return None
    emit = _layer_emit(root, x_in, attn, (norm1, norm2), [lq, lk, lv, lo], ffn, rq)
    match = Match("llama_decoder_block", nodes, root.index, [root.proto.output[0]],
                  root.label, emit)
    match.parts["replaces"] = [m.output for m in subs]
    return match


def _layer_emit(root: Node, x_in: str, attn: Match, norms: tuple[Match, Match],
                linears: list[Match], ffn: Match, rope: Match
                ) -> Callable[[GraphImporter], list[Value]]:
    """Building the ``llama_decoder_block`` of a matched layer, at its last node ``root``."""
    a = attn.parts
    norm1, norm2 = norms
    swiglu_weights = dict(zip(("up", "gate", "down"), ffn.parts["weights"], strict=True))

    def emit(imp: GraphImporter) -> list[Value]:
        x = tensor_of(imp, root, x_in)
        dtype = np.asarray(root.scalar(0, x)).dtype
        width = norm1.parts["width"]

        def gamma(norm: Match) -> HirValue:
            g_arr = norm.parts["gamma"]
            if g_arr is None:
                return const_tensor(imp, root, np.ones(width, dtype), None)
            return const_tensor(imp, root, g_arr.reshape(width).astype(dtype),
                                norm.parts["gamma_name"])

        zero = root.mir("expand", [np.zeros(1, dtype)], target_shape=[width])
        wq, wk, wv, wo = (const_tensor(imp, root, m.parts["w"], m.parts["w_name"])
                          for m in linears)
        up, gate, down = (const_tensor(imp, root, arr, name)
                          for name, arr in (swiglu_weights[k] for k in ("up", "gate", "down")))
        cos_name, sin_name = rope.parts["tables"]
        cos = const_tensor(imp, root, rope.parts["cos"], cos_name)
        sin = const_tensor(imp, root, rope.parts["sin"], sin_name)
        return [imp.h.llama_decoder_block(
            x, gamma(norm1), zero, wq, wk, wv, wo, gamma(norm2), zero, gate, up, down, cos,
            sin, num_heads=a["heads"], head_dim=a["head_dim"], num_kv_heads=a["kv_heads"],
            eps=norm1.parts["eps"], mask_kind="causal", rope_style="neox")]

    return emit


__all__ = ["match_llama_layer"]
