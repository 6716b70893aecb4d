"""ONNX's Attention op (opset 23): ``rlx_mir.attention`` over ``[B, H, S, hd]``; and
its RotaryEmbedding (written out as elementwise ops, see :func:`convert_rotary_embedding`).

Scale, softcap (before the mask, as ONNX orders them), GQA (query head h reads KV head
``h // (H / Hkv)``), a float or bool ``attn_mask`` (an additive bias; false / padded keys
get -1e9, RLX's masked score), ``is_causal`` (bottom-right aligned with a past cache,
top-left without, as ONNX defines it), ``past_key`` / ``past_value`` (concatenated before
the new keys; ``present_*`` are the results). Not supported: a value head size different
from the query's, ``nonpad_kv_seqlen``, sliding windows, the ``qk_matmul_output`` output.
A fully masked row averages the values (RLX's -1e9 fill) where ONNX returns zeros.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.registry import Node, Value, converter, np_dtype
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import DType

MASKED = -1e9


def _heads(node: Node, x: HirValue, heads: int | None) -> HirValue:
    """``[B, S, H*hd]`` -> ``[B, H, S, hd]`` (3-D inputs name their head counts)."""
    if len(x.shape) == 4:
        return x
    if heads is None or x.shape[2] is None or x.shape[2] % heads:
        node.fail(f"a 3-D input {x.type} needs q_num_heads / kv_num_heads dividing its "
                  "width")
    split = reshape_to(node, x, [x.shape[0], x.shape[1], heads, x.shape[2] // heads])
    return node.mir("transpose", [split], perm=[0, 2, 1, 3])


def _masked(dtype: DType) -> float:
    """-1e9, or the lowest finite value of a narrower float type."""
    import ml_dtypes  # (numpy's finfo knows no bfloat16)

    return max(MASKED, float(ml_dtypes.finfo(np_dtype(dtype)).min))


def _additive(node: Node, mask: HirValue, dtype: DType) -> HirValue:
    """A bool mask (true = attend) as 0 / -1e9; a float mask as it is."""
    if mask.dtype == DType.I1:
        zero, masked = node.scalar(0.0, dtype), node.scalar(_masked(dtype), dtype)
        return node.mir("where", [mask, zero, masked])
    return node.cast(mask, dtype)


def _refuse_unsupported(node: Node) -> None:
    """Fail on what rlx attention cannot express: sliding windows, an external cache, the
    ``qk_matmul_output`` output."""
    for attr in ("left_window_size", "right_window_size"):
        if node.attr(attr, -1) != -1:
            node.fail(f"{attr} (sliding windows) is not supported")
    if node.has(6):
        node.fail("nonpad_kv_seqlen (an external cache) is not supported")
    if len(node.proto.output) > 3 and node.proto.output[3]:
        node.fail("the qk_matmul_output output is not supported")


@converter("Attention", since=23)
def convert_attention(node: Node) -> list[Value]:
    _refuse_unsupported(node)
    q3 = node.tensor(0)
    q = _heads(node, q3, node.attr("q_num_heads"))
    k = _heads(node, node.tensor(1), node.attr("kv_num_heads"))
    v = _heads(node, node.tensor(2), node.attr("kv_num_heads"))
    if node.has(4) != node.has(5):
        node.fail("past_key and past_value come together")
    past = 0
    if node.has(4):
        past_k, past_v = node.tensor(4), node.tensor(5)
        past = past_k.shape[2]
        k = node.mir("concat", [past_k, k], axis=2)
        v = node.mir("concat", [past_v, v], axis=2)
    b, heads, s, hd = q.shape
    sk = k.shape[2]
    if v.shape[3] != hd:
        node.fail(f"value heads of size {v.shape[3]} differ from query heads ({hd}); rlx "
                  "attention has one head size")
    if heads is None or hd is None:
        node.fail(f"query {q.type}: static head count and size needed")
    causal = bool(node.attr("is_causal", 0))
    bias = None
    if node.has(3):
        bias = _additive(node, node.tensor(3), q.dtype)
        width = bias.shape[-1]
        if sk is None or width is None:
            node.fail("a mask over a dynamic key length")
        if width < sk:  # ONNX pads a short mask with masked keys
            low = [0] * len(bias.shape)
            bias = node.mir("pad", [bias], low=low, high=[*low[:-1], sk - width],
                            value=_masked(q.dtype))
    if causal and (bias is not None or (past == 0 and s != sk)):
        if None in (s, sk, past):
            node.fail("a causal mask over dynamic lengths")
        i, j = np.arange(s)[:, None], np.arange(sk)[None, :]  # type: ignore[arg-type]
        tri = np.where(j <= i + past, 0.0, _masked(q.dtype)).astype(np_dtype(q.dtype))
        bias = tri if bias is None else node.mir("binary", [bias, tri], kind="add")
        causal = False
    operands: list[Value] = [q, k, v]
    kind = "causal" if causal else "none"
    if bias is not None:
        if None in (b, s, sk):
            node.fail("a mask with dynamic batch or lengths")
        operands.append(node.mir("expand", [bias], target_shape=[b, heads, s, sk]))
        kind = "bias"
    scale = node.attr("scale")
    softcap = node.attr("softcap", 0.0)
    y = node.mir("attention", operands, num_heads=heads, head_dim=hd, mask_kind=kind,
                 score_scale=1.0 / math.sqrt(hd) if scale is None else scale,
                 attn_logit_softcap=softcap if softcap > 0 else None)
    if len(q3.shape) == 3:
        y = reshape_to(node, node.mir("transpose", [y], perm=[0, 2, 1, 3]),
                       [b, s, heads * hd])
    return [y, k, v]


def _last(node: Node, x: HirValue, start: int, size: int, step: int = 1) -> HirValue:
    """``x[..., start : start + size * step : step]`` (the last dim static)."""
    rank = len(x.shape)
    return node.mir("slice", [x], starts=[0] * (rank - 1) + [start],
                    sizes=[-1] * (rank - 1) + [size], strides=[1] * (rank - 1) + [step])


@converter("RotaryEmbedding", since=23)
def convert_rotary_embedding(node: Node) -> list[Value]:
    """ONNX's RoPE, as its specification computes it: the first ``rotary_embedding_dim``
    of each head rotated (halves, or interleaved pairs) by ``cos`` / ``sin`` rows picked by
    ``position_ids`` (``[B, S]``; without them the caches are ``[B, S, R / 2]``), the rest
    passed through. A 3-D input is ``[B, S, H * D]`` (``num_heads`` given), a 4-D one ``[B,
    H, S, D]``. Elementwise ops, exact to the formula; positions outside the cache read its
    nearest row (``rlx_mir.gather`` clamps)."""
    x = node.tensor(0)
    dims = node.dims(0)
    rank = len(x.shape)
    if rank == 3:
        heads = int(node.attr("num_heads", 0))
        hidden = x.shape[2]
        if heads <= 0 or hidden is None or hidden % heads:
            node.fail(f"input {x.type}: a 3-D input needs num_heads dividing its last dim")
        head = hidden // heads
        x4 = node.as_tensor(reshape_to(node, x, [dims[0], dims[1], heads, head]))
    elif rank == 4 and x.shape[3] is not None:
        head, x4 = int(x.shape[3]), x
    else:
        node.fail(f"input {x.type}: expected [B, S, H * D] or [B, H, S, D] with D static")
    rot = int(node.attr("rotary_embedding_dim", 0)) or head
    if rot % 2 or rot > head:
        node.fail(f"rotary_embedding_dim {rot}: expected an even size up to the head's {head}")
    cos, sin = node.tensor(1), node.tensor(2)
    if node.has(3):
        ids = node.tensor(3)
        cos, sin = (node.mir("gather", [t, ids], axis=0) for t in (cos, sin))
    if len(cos.shape) != 3 or cos.shape[2] != rot // 2:
        node.fail(f"cos_cache {cos.type}: expected [B, S, {rot // 2}] (after position_ids)")
    b_s = node.dims_of(cos)[:2]
    axis = 2 if rank == 3 else 1  # where the heads' axis goes in the caches
    where = [*b_s[:axis], 1, *b_s[axis:]] if axis == 2 else [b_s[0], 1, b_s[1]]
    cos, sin = (node.as_tensor(reshape_to(node, node.cast(t, x.dtype), [*where, rot // 2]))
                for t in (cos, sin))
    half = rot // 2
    if node.attr("interleaved", 0):
        x1, x2 = _last(node, x4, 0, half, 2), _last(node, x4, 1, half, 2)
    else:
        x1, x2 = _last(node, x4, 0, half), _last(node, x4, half, half)

    def mul(a: HirValue, b: HirValue) -> HirValue:
        return node.mir("binary", [a, b], kind="mul")

    real = node.mir("binary", [mul(cos, x1), mul(sin, x2)], kind="sub")
    imag = node.mir("binary", [mul(sin, x1), mul(cos, x2)], kind="add")
    lead = node.dims_of(x4)[:3]
    if node.attr("interleaved", 0):
        pairs = [node.as_tensor(reshape_to(node, v, [*lead, half, 1])) for v in (real, imag)]
        rotated = node.as_tensor(reshape_to(node, node.mir("concat", pairs, axis=4),
                                            [*lead, rot]))
    else:
        rotated = node.mir("concat", [real, imag], axis=3)
    if rot < head:
        rotated = node.mir("concat", [rotated, _last(node, x4, rot, head - rot)], axis=3)
    rotated = node.known(rotated, [*lead, head])
    return [reshape_to(node, rotated, dims) if rank == 3 else rotated]
