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
  be GQA-expanded (``Unsqueeze -> Expand -> Reshape``), which the block undoes; Kᵀ as
  either torch exporter writes it; a constant causal mask, or torch's ``is_causal`` mask
  built at run time (``Trilu`` of ones over ``[S, S]``), becomes ``mask = "causal"``, any
  other additive mask a ``bias``.
- ``llama_decoder_block``: the blocks above assembled as one pre-norm LLaMA layer (RMSNorm,
  q / k / v projections split into heads, RoPE, causal GQA attention, output projection,
  residual, RMSNorm, SwiGLU, residual).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlx.importers.onnx_blocks.attention import match_attention, match_rope
from rlx.importers.onnx_blocks.block import match_llama_layer
from rlx.importers.onnx_blocks.graph import GraphView, Match
from rlx.importers.onnx_blocks.linear import match_linear, match_swiglu
from rlx.importers.onnx_blocks.norm import match_rms_norm

if TYPE_CHECKING:
    from rlx.importers.onnx import GraphImporter

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


__all__ = ["MATCHERS", "GraphView", "Match", "find_blocks"]
