"""MIR attention ops: attention, rope."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import MASK_KINDS, ROPE_STYLES, mask_has_operand
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, enum_attr, float_attr, int_attr, opt
from rlx.ir.types import TensorInfo


@MIR.op(
    "attention",
    operands=["q", "k", "v", opt("mask", lambda a: mask_has_operand(a["mask_kind"]))],
    attrs=[int_attr("num_heads"), int_attr("head_dim"),
           enum_attr("mask_kind", MASK_KINDS, default="none"),
           int_attr("window", when=lambda a: a["mask_kind"] == "sliding_window"),
           float_attr("score_scale", "scale of q kᵀ (default 1 / sqrt(head_dim))",
                      optional=True),
           float_attr("attn_logit_softcap", "c: scores become c * tanh(s / c)",
                      optional=True)],
)
def attention(c: Check) -> list[TensorInfo]:
    """Scaled dot-product attention (``Op::Attention``); layouts, GQA and masks as
    ``rlx_hir.attention``, plus an optional ``score_scale`` and ``attn_logit_softcap``.

    Example::

        %o = "rlx_mir.attention"(%q, %k, %v) {head_dim = 64 : i64, mask_kind = "causal",
              num_heads = 8 : i64}
            : (tensor<1x?x512xf32>, tensor<1x?x128xf32>, tensor<1x?x128xf32>)
            -> tensor<1x?x512xf32>
    """
    nh, hd = c.attr("num_heads"), c.attr("head_dim")
    layout = checks.attention_layout(c, nh, hd)
    checks.attention_mask(c, c.attr("mask_kind"), "mask", layout, nh)
    cap = c.attrs.get("attn_logit_softcap")
    if cap is not None and not cap > 0:
        c.fail("attribute 'attn_logit_softcap'", "a value > 0", repr(cap))
    return [c["q"]]


@MIR.op("rope", operands=["x", "cos", "sin"],
        attrs=[int_attr("head_dim"), int_attr("n_rot"),
               enum_attr("style", ROPE_STYLES, default="neox")])
def rope(c: Check) -> list[TensorInfo]:
    """Rotary embedding (``Op::Rope``); as ``rlx_hir.rope`` with the style in ``style``.

    Example::

        %y = "rlx_mir.rope"(%x, %cos, %sin) {head_dim = 64 : i64, n_rot = 64 : i64,
              style = "gptj"}
            : (tensor<1x?x512xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<1x?x512xf32>
    """
    hd, n_rot = c.attr("head_dim"), c.attr("n_rot")
    checks.rope_dims(c, hd, n_rot)
    seq = checks.rope_input(c, "x", hd)
    checks.rope_tables(c, "cos", "sin", seq, hd, "x")
    return [c["x"]]
