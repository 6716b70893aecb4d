"""HIR attention blocks: attention, rope."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import MASK_KINDS, ROPE_STYLES, mask_has_operand
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import Check, enum_attr, int_attr, opt
from rlx.ir.types import TensorInfo

MASK = enum_attr("mask", MASK_KINDS, "mask kind", default="none")
WINDOW = int_attr("window", "keys before the query that a sliding window keeps (w + 1 keys "
                  "including the query's own)", when=lambda a: a["mask"] == "sliding_window")


@HIR.op(
    "attention",
    operands=["q", "k", "v", opt("mask", lambda a: mask_has_operand(a["mask"]))],
    attrs=[int_attr("num_heads"), int_attr("head_dim"), MASK, WINDOW],
    label="attention",
)
def attention(c: Check) -> list[TensorInfo]:
    """Scaled dot-product attention, ``softmax(q kᵀ / sqrt(head_dim) + mask) v`` per head.

    Operands: ``q``, ``k``, ``v`` in one layout: ``[B, S, H*hd]`` (packed heads),
    ``[S, H*hd]`` (batch 1), ``[B, H, S, hd]`` (when dim 1 == num_heads) or
    ``[B, S, H, hd]``. K/V may carry fewer heads than Q (GQA, a divisor of ``num_heads``;
    query head h reads KV head ``h // (num_heads / kv_heads)``); ``S_k`` may differ from
    ``S``. ``mask`` is present iff the mask kind is ``custom`` (``[B, S_k]``, 1.0 / true =
    keep, else the score becomes -1e9), ``bias`` (``[B, num_heads, S, S_k]``, added) or
    ``causal_lengths`` (``[B]`` i32 / i64 ``n_b``: the keys filled in row b of a cache
    preallocated to ``S_k``; its queries sit at ``n_b - S .. n_b - 1`` and see the keys up to
    their own, none past ``n_b``; the count is read on the device).
    Attributes: ``num_heads``, ``head_dim``, ``mask`` (``"none"``, ``"causal"``,
    ``"sliding_window"`` with ``window``, ``"custom"``, ``"bias"``, ``"causal_lengths"``).
    Causal and sliding masks treat the queries as the last S of the S_k positions; masked
    scores are -1e9 (a query that sees no key averages them all).
    Result: the shape of ``q``.

    Example::

        %o = "rlx_hir.attention"(%q, %k, %v) {head_dim = 64 : i64, mask = "causal",
              num_heads = 8 : i64}
            : (tensor<1x?x512xf32>, tensor<1x?x128xf32>, tensor<1x?x128xf32>)
            -> tensor<1x?x512xf32> loc("layers.0.attn")
    """
    nh, hd = c.attr("num_heads"), c.attr("head_dim")
    layout = checks.attention_layout(c, nh, hd)
    checks.attention_mask(c, c.attr("mask"), "mask", layout, nh)
    return [c["q"]]


@HIR.op(
    "rope",
    operands=["x", "cos", "sin"],
    attrs=[int_attr("head_dim"), int_attr("n_rot", "leading lanes of each head to rotate"),
           enum_attr("rope_style", ROPE_STYLES, "neox: rotate-half pairs (i, i + n_rot/2); "
                     "gptj: interleaved pairs (2i, 2i + 1)", default="neox")],
    label="rope",
)
def rope(c: Check) -> list[TensorInfo]:
    """Rotary position embedding of every head of ``x``; lanes ``>= n_rot`` pass through.

    Operands: ``x`` ``[B, S, H*hd]`` (or ``[S, H*hd]``, ``[B, S, H, hd]``), ``cos`` and
    ``sin`` ``[T, head_dim / 2]`` with ``T >= S``: row t holds position t, and only the first
    ``n_rot / 2`` columns are read. Attributes: ``head_dim``, ``n_rot`` (even,
    ``<= head_dim``), ``rope_style`` (``"neox"`` default, ``"gptj"``; RLX's HIR RoPE was
    NeoX-only). NeoX: ``y[i] = x[i] c - x[i+r] s``, ``y[i+r] = x[i+r] c + x[i] s`` for
    ``i < r = n_rot / 2``. Result: the shape of ``x``.

    Example::

        %y = "rlx_hir.rope"(%x, %cos, %sin) {head_dim = 64 : i64, n_rot = 32 : i64,
              rope_style = "neox"}
            : (tensor<1x?x512xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<1x?x512xf32>
    """
    hd, n_rot = c.attr("head_dim"), c.attr("n_rot")
    checks.rope_dims(c, hd, n_rot)
    seq = checks.rope_input(c, "x", hd)
    checks.rope_tables(c, "cos", "sin", seq, hd, "x")
    return [c["x"]]
