"""Block matchers of the attention family: ``attention`` (GQA-expanded K / V undone, a
constant causal mask recognized) and rotate-half ``rope``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from onnx import TensorProto

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, same
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
            cos_name, sin_name = other_input(mul_cos, x), other_input(mul_sin, rot_name)
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
        v = tensor_of(imp, root, source)
        if head_major and source == x:  # [B, H, S, hd] -> [B, S, H, hd]
            v = root.mir("transpose", [v], perm=[0, 2, 1, 3])
        c = const_tensor(imp, root, cos[0], f"{cos[1]}.half")
        s = const_tensor(imp, root, sin[0], f"{sin[1]}.half")
        y = imp.h.rope(v, c, s, head_dim=hd)
        return [root.mir("transpose", [y], perm=[0, 2, 1, 3]) if head_major else y]

    return Match("rope", nodes, root.index, [root.proto.output[0]], root.label, emit,
                 parts={"like": x, "source": source, "moved_transpose": head_major and source != x,
                        "head_dim": hd, "cos": cos[0], "sin": sin[0],
                        "tables": (f"{cos[1]}.half", f"{sin[1]}.half")})



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
                mask, name = other_input(add, cand), cand
                nodes.add(add.index)
                break
        else:
            return None
    scale = 1.0
    scaled = g.node(name, "Mul", "Div")
    if scaled is not None:
        for cand in scaled.proto.input[:2] if scaled.op_type == "Mul" else scaled.proto.input[:1]:
            c = scalar(g.const(other_input(scaled, cand)))
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


def _built_causal(g: GraphView, mask_name: str, seqs: tuple[SymDim | None, SymDim | None],
                  nodes: set[int]) -> bool:
    """torch's ``is_causal`` mask built at run time over a dynamic sequence:
    ``Where(Trilu(Expand(1, [S, S]), upper=0) == 0, -inf, 0)`` where Q and K have that
    same length ``S`` (so top-left and bottom-right alignment agree): its nodes join the
    match."""
    where = g.node(mask_name, "Where")
    eq = g.node(where.proto.input[0], "Equal") if where is not None else None
    if where is None or eq is None:
        return False
    masked, kept = (scalar(g.const(n)) for n in where.proto.input[1:3])
    if masked is None or kept != 0.0 or masked > -1e4:
        return False
    trilu = next((g.node(n, "Trilu") for n in eq.proto.input[:2]
                  if scalar(g.const(other_input(eq, n))) == 0.0), None)
    if trilu is None or trilu.attr("upper", 1) or (
            len(trilu.proto.input) > 1 and trilu.proto.input[1]
            and scalar(g.const(trilu.proto.input[1])) != 0.0):
        return False
    expand = g.node(trilu.proto.input[0], "Expand")
    if expand is None or scalar(g.const(expand.proto.input[0])) != 1.0:
        return False
    m_dims = g.imp.inferred.get(mask_name)
    if m_dims is None or len(m_dims) != 2 or m_dims[0] is None:
        return False
    if any(d is None or not same(d, m_dims[0]) for d in (m_dims[1], *seqs)):
        return False
    nodes |= {where.index, eq.index, trilu.index, expand.index}
    return True


def _mask_kind(g: GraphView, mask_name: str | None, static: tuple[int | None, int | None],
               seqs: tuple[SymDim | None, SymDim | None], nodes: set[int]) -> str | None:
    """The ``mask`` of the attention block: ``none`` without a mask, ``causal`` for a
    constant causal one or torch's ``is_causal`` mask built at run time, else ``bias`` (a
    rank-4 additive mask, broadcast to ``[B, H, S, Sk]`` when imported); None: a mask the
    block cannot take."""
    if mask_name is None:
        return "none"
    mask = g.const(mask_name)
    s, sk = static
    if mask is not None and s is not None and sk is not None and _causal(mask, s, sk):
        return "causal"
    if mask is None and _built_causal(g, mask_name, seqs, nodes):
        return "causal"
    m_shape = g.shape(mask_name)
    if m_shape is None or len(m_shape) != 4:
        return None
    return "bias"


def _bias(imp: GraphImporter, root: Node, mask: str, q: str, k: tuple[str, int], heads: int
          ) -> HirValue:
    """The additive mask broadcast to ``[B, H, S, Sk]`` (sizes of Q and of K's sequence
    axis ``k[1]``, dynamic ones taken at run time)."""
    m = tensor_of(imp, root, mask)
    q_dims = imp.dims_of(q, imp.values[q])
    k_dims = imp.dims_of(k[0], imp.values[k[0]])
    target = [q_dims[0], heads, q_dims[2], k_dims[k[1]]]
    return imp.sizes.broadcast(m, imp.dims_of(mask, m), target, root.fail)


def _nan_guard(g: GraphView, name: str, nodes: set[int]) -> str:
    """``Where(IsNaN(p), 0, p)`` (torch.onnx's SDPA zeroes fully masked rows): p."""
    where = g.node(name, "Where")
    if where is None:
        return name
    cond, zero, p = where.proto.input[:3]
    isnan = g.node(cond, "IsNaN")
    if isnan is None or isnan.proto.input[0] != p or scalar(g.const(zero)) != 0.0:
        return name
    nodes |= {where.index, isnan.index}
    return p


def _prescaled(g: GraphView, name: str, nodes: set[int]) -> tuple[str, float]:
    """``x * c`` with a scalar constant ``c`` (torch.onnx scales Q and Kᵀ by sqrt(scale)
    each): (x, c); else (name, 1)."""
    mul = g.node(name, "Mul")
    if mul is None:
        return name, 1.0
    for cand in mul.proto.input[:2]:
        c = scalar(g.const(other_input(mul, cand)))
        if c is not None:
            nodes.add(mul.index)
            return cand, c
    return name, 1.0


def _shape_entries(g: GraphView, name: str, of: str, rank: int) -> list[int | str] | None:
    """A shape vector built as ``Concat`` of constants and step-1 ``Slice``s of
    ``Shape(of)``: its entries, an ``int`` for a constant, ``"d<k>"`` for dim k of
    ``of``; None for anything else."""
    cat = g.node(name, "Concat")
    if cat is None:
        return None
    out: list[int | str] = []
    for part in cat.proto.input:
        sl = g.node(part, "Slice")
        shape = g.node(sl.proto.input[0], "Shape") if sl is not None else None
        c = g.const(part) if shape is None else None
        if c is not None:
            out += [int(v) for v in c.reshape(-1)]
            continue
        if sl is None or shape is None or shape.proto.input[0] != of or len(
                sl.proto.input) not in (3, 4) or shape.attr("start", 0) or shape.attr(
                "end") is not None:
            return None
        start, end = (scalar(g.const(n)) for n in sl.proto.input[1:3])
        axes = g.const(sl.proto.input[3]) if len(sl.proto.input) == 4 else None
        if start is None or end is None or (axes is not None and axes.reshape(-1).tolist()
                                            != [0]):
            return None
        lo, hi = (int(max(min(v + rank if v < 0 else v, rank), 0)) for v in (start, end))
        out += [f"d{k}" for k in range(lo, hi)]
    return out


def _static_kt_shapes(g: GraphView, k: str, inner: str, outer: str) -> bool:
    """The same Kᵀ reshapes with constant targets (an export with static sizes):
    ``[-1 or B H, S, hd]`` then ``[B, H, hd, S]`` of a ``[B, H, S, hd]`` K."""
    shape, first, second = g.shape(k), g.const(inner), g.const(outer)
    if shape is None or len(shape) != 4 or None in shape or first is None or second is None:
        return False
    b, h, s, hd = shape
    return first.reshape(-1).tolist() in ([-1, s, hd], [b * h, s, hd]) and \
        second.reshape(-1).tolist() == [b, h, hd, s]


def _transposed_k(g: GraphView, name: str, nodes: set[int]) -> tuple[str, bool] | None:
    """Kᵀ of a ``[B, H, S, hd]`` K: ``Transpose(perm [0, 1, 3, 2])``, torch.onnx's
    ``Reshape(Transpose(Reshape(K, [-1, S, hd]), [0, 2, 1]), [B, H, hd, S])`` whose shapes
    are slices of ``Shape(K)``, or the TorchScript exporter's ``Transpose(perm
    [0, 2, 3, 1])`` of a ``[B, S, H, hd]`` K: (K, whether K is ``[B, S, H, hd]``)."""
    kt = g.node(name, "Transpose")
    if kt is not None and kt.ints("perm") in ([0, 1, 3, 2], [0, 2, 3, 1]):
        nodes.add(kt.index)
        return kt.proto.input[0], kt.ints("perm") == [0, 2, 3, 1]
    outer = g.node(name, "Reshape")
    tr = g.node(outer.proto.input[0], "Transpose") if outer is not None else None
    inner = g.node(tr.proto.input[0], "Reshape") if tr is not None else None
    if outer is None or tr is None or inner is None or tr.ints("perm") != [0, 2, 1]:
        return None
    k = inner.proto.input[0]
    if _shape_entries(g, inner.proto.input[1], k, 4) != [-1, "d2", "d3"] or _shape_entries(
            g, outer.proto.input[1], k, 4) != ["d0", "d1", "d3", "d2"]:
        if not _static_kt_shapes(g, k, inner.proto.input[1], outer.proto.input[1]):
            return None
    nodes |= {outer.index, tr.index, inner.index}
    return k, False


def _seq_dim(g: GraphView, name: str, axis: int) -> SymDim | None:
    """Dim ``axis`` of ``name`` as the model's annotations and shape inference know it."""
    dims = g.imp.inferred.get(name)
    return dims[axis] if dims is not None and len(dims) == 4 else None


BLOCK_ELEM_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)
"""ONNX element types the attention block takes (``BLOCK_FLOAT_TYPES``)."""


def match_attention(g: GraphView, root: Node) -> Match | None:
    if root.op_type != "MatMul":
        return None
    nodes = {root.index}
    probs_name = root.proto.input[0]
    cast = g.node(probs_name, "Cast")
    if cast is not None:
        nodes.add(cast.index)
        probs_name = cast.proto.input[0]
    probs_name = _nan_guard(g, probs_name, nodes)
    softmax = g.node(probs_name, "Softmax")
    if softmax is None:
        return None
    nodes.add(softmax.index)
    found = _scores(g, softmax.proto.input[0], nodes)
    if found is None:
        return None
    qk, scale, mask_name = found
    q_name, q_scale = _prescaled(g, qk.proto.input[0], nodes)
    kt_name, k_scale = _prescaled(g, qk.proto.input[1], nodes)
    scale *= q_scale * k_scale
    k_t = _transposed_k(g, kt_name, nodes)
    q_shape = g.shape(q_name)
    if k_t is None or q_shape is None or len(q_shape) != 4:
        return None
    heads, hd = q_shape[1], q_shape[3]
    if heads is None or hd is None or softmax.attr("axis", -1) % 4 != 3:
        return None
    if g.imp.elem_types.get(q_name) not in (None, *BLOCK_ELEM_TYPES):
        return None  # f64: the loose ops compute in f64, the attention block in f32
    k_name, k_bshd = k_t
    k_name = k_name if k_bshd else _gqa_source(g, k_name, heads, nodes)
    v_name = _gqa_source(g, root.proto.input[1], heads, nodes)
    k_shape, v_shape = g.shape(k_name), g.shape(v_name)
    if k_shape is not None and k_bshd and len(k_shape) == 4:
        k_shape = (k_shape[0], k_shape[2], k_shape[1], k_shape[3])
    if k_shape is None or v_shape is None or len(k_shape) != 4 or k_shape != v_shape:
        return None
    if k_shape[3] != hd or k_shape[1] is None or heads % k_shape[1]:
        return None
    seqs = (_seq_dim(g, q_name, 2), _seq_dim(g, k_name, 1 if k_bshd else 2))
    kind = _mask_kind(g, mask_name, (q_shape[2], k_shape[2]), seqs, nodes)
    if kind is None or not g.closed(nodes, root.index):
        return None
    default = math.isclose(scale, 1.0 / math.sqrt(hd), rel_tol=1e-6)
    return Match("attention", nodes, root.index, [root.proto.output[0]], root.label,
                 _attention_emit(root, (q_name, k_name, v_name), k_bshd, mask_name, kind,
                                 heads, hd, None if default else scale),
                 parts={"q": q_name, "k": k_name, "v": v_name, "heads": heads, "head_dim": hd,
                        "kv_heads": k_shape[1], "mask": kind, "default_scale": default,
                        "k_bshd": k_bshd})


def _attention_emit(root: Node, qkv: tuple[str, str, str], k_bshd: bool,
                    mask_name: str | None, kind: str, heads: int, hd: int,
                    scale: float | None) -> Callable[[GraphImporter], list[Value]]:
    """The attention block's builder; ``scale`` None: the default ``1 / sqrt(hd)``."""
    q_name, k_name, _ = qkv

    def emit(imp: GraphImporter) -> list[Value]:
        q, k, v = (tensor_of(imp, root, n) for n in qkv)
        if k_bshd:
            k = root.mir("transpose", [k], perm=[0, 2, 1, 3])
        operands = [q, k, v]
        if kind == "bias":
            operands.append(_bias(imp, root, mask_name, q_name,  # type: ignore[arg-type]
                                  (k_name, 1 if k_bshd else 2), heads))
        if scale is None:
            return [imp.h.attention(*operands, num_heads=heads, head_dim=hd, mask_kind=kind)]
        return [root.mir("attention", operands, num_heads=heads, head_dim=hd, mask_kind=kind,
                         score_scale=scale)]

    return emit


__all__ = ["match_attention", "match_rope"]
