"""``rlx.HirModule``: the Python builder of HIR modules (RLX's ``HirModule`` in Python naming).

Every builder call checks the op against its schema before creating it, infers the result
shape (an explicit ``out_shape`` is checked against the inferred one) and returns
:class:`HirValue` handles. ``str(module)`` gives the text format; ``HirModule.parse`` reads
it back through MLIR's parser and re-checks every op.

This module holds the op API (one method per HIR block, the escape hatch to MIR ops, the
window helpers); the module machinery (functions, op creation, labels, text, parsing) is
:mod:`rlx.dialects.hir_module` and the MIR stage :mod:`rlx.dialects.mir_module`; all their
public names are importable from here.

``h.lower_to_mir()`` runs ``rlx.lowering.lower_to_mir(h)``. The dialects never import the
lowering (a lower floor never imports a higher one, DESIGN.md section 4), so the method goes
through a hook that ``rlx.lowering`` installs when it is imported
(:func:`rlx.dialects.mir_module.install_mir_lowering`). ``import rlx`` imports it, so users
always have it; without it, ``lower_to_mir`` raises a :class:`~rlx.ir.diagnostics.LoweringError`
that says so.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from iree.compiler import ir

from rlx.dialects import HIR, MIR, param_lead
from rlx.dialects.enums import WORD_TYPES
from rlx.dialects.hir_module import (
    NARROW_ATTR,
    UNSIGNED_ATTR,
    HirModuleCore,
    HirValue,
    ShapeLike,
    check_narrow,
    to_dims,
)
from rlx.dialects.mir_module import MirModule
from rlx.dialects.schema import OpSchema
from rlx.ir.diagnostics import BuildError, VerifyError
from rlx.ir.locations import source_of
from rlx.ir.types import DType, TensorInfo

_Method = TypeVar("_Method", bound=Callable[..., Any])


def _schema_summary(schema: OpSchema) -> str:
    """Operands and attributes of ``schema`` as lines (conditional ones say so)."""
    operands = ", ".join(o.name + ("?" if o.when else "") + ("..." if o.variadic else "")
                         for o in schema.operands)
    lines = [f"Operands of ``{schema.full_name}``: {operands or 'none'}."]
    for a in schema.attrs:
        kind = f"one of {', '.join(a.choices)}" if a.choices else a.kind.value
        extra = f", default {a.default!r}" if a.has_default else ""
        extra += ", optional" if a.optional or a.when else ""
        lines.append(f"Attribute ``{a.name}`` ({kind}{extra})" + (f": {a.doc}" if a.doc else ""))
    return "\n".join(lines)


def _present(values: list[HirValue | None]) -> list[HirValue]:
    """The operands given (an optional operand left out is None)."""
    return [v for v in values if v is not None]


def _extras(peephole: HirValue | None, lengths: HirValue | None) -> dict[str, bool]:
    """The presence attributes of a scan's optional ``peephole`` / ``lengths`` operands
    (absent when not given, so that text without them is unchanged)."""
    out = {}
    if peephole is not None:
        out["has_peephole"] = True
    if lengths is not None:
        out["has_lengths"] = True
    return out


def builds(op: str) -> Callable[[_Method], _Method]:
    """Give a builder method the documentation of the HIR op it builds: its own docstring
    (the Python arguments), then the op's operands and attributes (from the schema) and the
    op's docstring with its IR example, so ``help(h.rms_norm)`` shows all of it."""
    schema = HIR.ops[op]

    def attach(method: _Method) -> _Method:
        own = inspect.cleandoc(method.__doc__ or "")
        method.__doc__ = "\n\n".join(
            [own, f"Builds ``{schema.full_name}``.", _schema_summary(schema),
             inspect.cleandoc(schema.infer.__doc__ or "")])
        return method

    return attach


class HirModule(HirModuleCore):
    """A HIR module under construction (one function, ``main`` by default).

    Args:
        name: the module's name (``module @name``).
        fusion_policy: ``"direct"`` (default: fused MIR ops), ``"fusable"`` (primitive
            chains) or ``"for_autodiff"``.
    """

    # -- leaves ------------------------------------------------------------------------
    def input(self, name: str, shape: ShapeLike, dtype: DType | str = "f32", *,
              unsigned: bool = False, narrow: str | None = None) -> HirValue:
        """A function input (``HirOp::Input``); ``None`` / a name in ``shape`` is dynamic.
        ``unsigned``: an integer input whose callers pass numpy's unsigned type of its
        width (``rlx.unsigned``; the module computes on the same bits, its ops say how).
        ``narrow``: an input of a type narrower than a byte (``"int4"``, ``"uint4"``,
        ``"int2"``, ``"uint2"``, ``"float4_e2m1fn"``) whose callers pass ml_dtypes' arrays;
        ``dtype`` is what holds its values (i8; f8E4M3FN for E2M1: ``rlx.narrow``)."""
        t = TensorInfo(to_dims(shape), DType.parse(dtype))
        if name in self.input_names:
            raise BuildError(f"input {name!r} is defined twice")
        if unsigned and t.dtype not in WORD_TYPES:
            raise BuildError(f"input {name!r}: unsigned needs an integer type of 8 to 64 "
                             f"bits, found {t.dtype}")
        if narrow is not None:
            check_narrow(narrow, t.dtype, f"input {name!r}")
        earlier = self._arg_attrs()
        with self._ctx:
            arg = self._block.add_argument(t.mlir(), ir.Location.unknown())
            entry = {"rlx.name": ir.StringAttr.get(name)}
            if unsigned:
                entry[UNSIGNED_ATTR] = ir.UnitAttr.get()
            if narrow is not None:
                entry[NARROW_ATTR] = ir.StringAttr.get(narrow)
            self._func.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [*earlier, ir.DictAttr.get(entry)])
        self._update_signature()
        self._nodes.append(arg)
        return HirValue(self, arg)

    def input_batch_seq(self, name: str, hidden: int, dtype: DType | str = "f32") -> HirValue:
        """A ``[?batch, ?seq, hidden]`` input (RLX's ``input_batch_seq``)."""
        return self.input(name, ("batch", "seq", hidden), dtype)

    @builds("param")
    def param(self, name: str, shape: ShapeLike, dtype: DType | str = "f32", lead: int = 0
              ) -> HirValue:
        """A weight bound at load time (``HirOp::Param``); ``lead``: bytes before an i8
        weight's data that its parameter entry begins with (``rlx_hir.param``)."""
        t = TensorInfo(to_dims(shape), DType.parse(dtype))
        first = self._weights.get(name)
        if first is not None:
            was_t, was_lead = TensorInfo.from_mlir(first.results[0].type), param_lead(first)
            if (was_t, was_lead) != (t, lead):
                what, want, got = (("type", str(was_t), str(t)) if was_t != t else
                                   ("lead", f"lead {was_lead}", f"lead {lead}"))
                where = source_of(first.location)
                raise VerifyError("rlx_hir.param", f"weight '{name}'",
                                  f"{want} (its {what} where it is first declared"
                                  f"{', ' + where if where else ''})", got)
        attrs: dict[str, Any] = {"name": name, **({"lead": lead} if lead else {})}
        value = self._emit(HIR.ops["param"], [], attrs, out_shape=t, default_label=False)[0]
        self._weights.setdefault(name, value.value.owner.operation)
        return value

    @builds("constant")
    def constant(self, data: np.ndarray | Sequence[float], dtype: DType | str | None = None
                 ) -> HirValue:
        """Small inline data (``HirOp::Constant``)."""
        arr = np.asarray(data)
        dt = DType.parse(dtype) if dtype is not None else DType.parse(arr.dtype)
        arr = np.asarray(arr.astype(dt.numpy), order="C")  # keeps 0-d arrays 0-d
        if dt.is_float8:  # its bytes, typed by the attribute (as bf16 is carried)
            arr = arr.view(np.uint8)
        with self._ctx:
            t = TensorInfo(tuple(arr.shape), dt).mlir()
            attr = ir.DenseElementsAttr.get(arr, type=t)
        return self._emit(HIR.ops["constant"], [], {"value": attr}, default_label=False)[0]

    # -- blocks ------------------------------------------------------------------------
    @builds("linear")
    def linear(self, x: HirValue, weight: HirValue, bias: HirValue | None = None,
               activation: str | None = None, out_shape: ShapeLike | None = None) -> HirValue:
        """``act(x @ weight + bias)``; weight ``[K, N]``."""
        return self._hir("linear", [x, weight, bias],
                         {"activation": activation or "none", "has_bias": bias is not None},
                         out_shape)

    @builds("linear_fused")
    def linear_fused(self, x: HirValue, weight: HirValue, bias: HirValue,
                     activation: str | None = None, out_shape: ShapeLike | None = None
                     ) -> HirValue:
        """Linear that always lowers to ``rlx_mir.fused_matmul_bias_act``."""
        return self._hir("linear_fused", [x, weight, bias],
                         {"activation": activation or "none"}, out_shape)

    @builds("shared_linear_pair")
    def shared_linear_pair(self, x: HirValue, w_first: HirValue, w_second: HirValue,
                           out_shape: ShapeLike | None = None) -> tuple[HirValue, HirValue]:
        """``(x @ w_first, x @ w_second)`` from one op."""
        first, second = self._emit(HIR.ops["shared_linear_pair"], [x, w_first, w_second], {},
                                   out_shape=out_shape)
        return first, second

    @builds("swiglu")
    def swiglu_ffn(self, x: HirValue, up_w: HirValue, gate_w: HirValue, down_w: HirValue,
                   out_shape: ShapeLike | None = None) -> HirValue:
        """``(silu(x @ gate_w) * (x @ up_w)) @ down_w``."""
        return self._hir("swiglu", [x, up_w, gate_w, down_w], {}, out_shape)

    @builds("residual_rms_norm")
    def residual_rms_norm(self, x: HirValue, residual: HirValue, gamma: HirValue,
                          beta: HirValue | None = None, eps: float = 1e-6,
                          out_shape: ShapeLike | None = None) -> HirValue:
        """``rms_norm(x + residual) * gamma + beta``; without ``beta`` (LLaMA-style) the
        op gets a zero constant (``dense<0.0>``) as its beta operand."""
        return self._hir("residual_rms_norm", [x, residual, gamma, self._beta(beta, gamma)],
                         {"eps": eps}, out_shape)

    @builds("rms_norm")
    def rms_norm(self, x: HirValue, gamma: HirValue, beta: HirValue | None = None,
                 eps: float = 1e-6, out_shape: ShapeLike | None = None) -> HirValue:
        """``x / sqrt(mean(x²) + eps) * gamma + beta`` over the last axis; without
        ``beta`` (LLaMA-style) the op gets a zero constant (``dense<0.0>``) as its beta
        operand: ``h.rms_norm(x, h.param("norm.w", (64,)), eps=1e-5)``."""
        return self._hir("rms_norm", [x, gamma, self._beta(beta, gamma)], {"eps": eps},
                         out_shape)

    def _beta(self, beta: HirValue | None, gamma: HirValue) -> HirValue:
        """``beta``, or a splat zero constant shaped like ``gamma`` (a norm's additive
        parameter the math does not need)."""
        if beta is not None:
            return beta
        t = gamma.type
        if t.rank != 1 or t.shape[0] is None or not t.dtype.is_float:
            return gamma  # the op's verifier names what is wrong with gamma
        with self._ctx, ir.Location.unknown():
            zero = ir.DenseElementsAttr.get_splat(
                t.mlir(), ir.FloatAttr.get(t.mlir().element_type, 0.0))
        return self._emit(HIR.ops["constant"], [], {"value": zero}, default_label=False)[0]

    @builds("attention")
    def attention(self, q: HirValue, k: HirValue, v: HirValue, mask: HirValue | None = None,
                  *, num_heads: int, head_dim: int, mask_kind: str = "none",
                  window: int | None = None, out_shape: ShapeLike | None = None) -> HirValue:
        """Scaled dot-product attention; ``mask`` only for ``custom`` / ``bias`` masks."""
        return self._hir("attention", [q, k, v, mask],
                         {"num_heads": num_heads, "head_dim": head_dim, "mask": mask_kind,
                          "window": window}, out_shape)

    @builds("rope")
    def rope(self, x: HirValue, cos: HirValue, sin: HirValue, head_dim: int,
             n_rot: int | None = None, rope_style: str = "neox",
             out_shape: ShapeLike | None = None) -> HirValue:
        """Rotary embedding; ``n_rot`` defaults to ``head_dim`` (full rotation)."""
        return self._hir("rope", [x, cos, sin],
                         {"head_dim": head_dim, "n_rot": head_dim if n_rot is None else n_rot,
                          "rope_style": rope_style}, out_shape)

    @builds("depthwise_conv1d_causal")
    def depthwise_conv1d_causal(self, input: HirValue, weight: HirValue, left_pad: HirValue,
                                kernel_size: int, out_shape: ShapeLike | None = None
                                ) -> HirValue:
        """Causal depthwise 1-D convolution over the sequence axis, the first
        ``kernel_size - 1`` steps padded from ``left_pad``."""
        return self._hir("depthwise_conv1d_causal", [input, weight, left_pad],
                         {"kernel_size": kernel_size}, out_shape)

    @builds("depthwise_conv1d_causal")
    def depthwise_conv1d_causal_carry(self, input: HirValue, weight: HirValue,
                                      left_pad: HirValue, kernel_size: int
                                      ) -> tuple[HirValue, HirValue]:
        """Causal conv that also returns its last ``kernel_size - 1`` frames (the next
        chunk's ``left_pad``); returns ``(y, final_frames)``."""
        y, final = self._emit(HIR.ops["depthwise_conv1d_causal"], [input, weight, left_pad],
                              {"kernel_size": kernel_size, "carry": True})
        return y, final

    @builds("dequant_matmul")
    def dequant_matmul(self, x: HirValue, w: HirValue, scale: HirValue | None = None,
                       zp: HirValue | None = None, *, scheme: str,
                       block_size: int | None = None, out_shape: ShapeLike | None = None
                       ) -> HirValue:
        """Matmul with quantized weights; legacy schemes also take ``scale`` and ``zp``."""
        return self._hir("dequant_matmul", [x, w, scale, zp],
                         {"scheme": scheme, "block_size": block_size}, out_shape)

    @builds("gated_delta_net")
    def gated_delta_net(self, q: HirValue, k: HirValue, v: HirValue, g: HirValue,
                        beta: HirValue, state_size: int, out_shape: ShapeLike | None = None
                        ) -> HirValue:
        """Gated DeltaNet scan from a zero state."""
        return self._hir("gated_delta_net", [q, k, v, g, beta],
                         {"state_size": state_size, "carry_state": False}, out_shape)

    @builds("gated_delta_net")
    def gated_delta_net_carry(self, q: HirValue, k: HirValue, v: HirValue, g: HirValue,
                              beta: HirValue, state: HirValue, state_size: int,
                              out_shape: ShapeLike | None = None, *,
                              state_in_place: bool = False
                              ) -> tuple[HirValue, HirValue]:
        """Gated DeltaNet scan from ``state``; returns ``(y, final_state)``. With
        ``state_in_place`` the final state may be computed in ``state``'s buffer (the
        caller must not read ``state`` afterwards)."""
        attrs: dict[str, object] = {"state_size": state_size, "carry_state": True}
        if state_in_place:
            attrs["state_in_place"] = True
        y, final = self._emit(HIR.ops["gated_delta_net"], [q, k, v, g, beta, state],
                              attrs, out_shape=out_shape)
        return y, final

    @builds("lstm")
    def lstm(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, bias: HirValue,
             hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
             out_shape: ShapeLike | None = None, peephole: HirValue | None = None,
             lengths: HirValue | None = None) -> HirValue:
        """LSTM over the sequence from a zero state; returns the output sequence.
        ``peephole``: ``[3H]`` blocks (p_i, p_f, p_o) per layer and direction;
        ``lengths [B]``: each row's sequence length (steps past it keep the states and
        output zeros)."""
        return self._hir("lstm", _present([x, w_ih, w_hh, bias, peephole, lengths]),
                         {"hidden_size": hidden_size, "num_layers": num_layers,
                          "bidirectional": bidirectional, "carry": False,
                          **_extras(peephole, lengths)}, out_shape)

    @builds("lstm")
    def lstm_carry(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, bias: HirValue,
                   h0: HirValue, c0: HirValue, hidden_size: int, num_layers: int = 1,
                   bidirectional: bool = False, out_shape: ShapeLike | None = None,
                   peephole: HirValue | None = None, lengths: HirValue | None = None
                   ) -> tuple[HirValue, HirValue, HirValue]:
        """LSTM from ``(h0, c0)``; returns ``(y, hn, cn)`` (``peephole`` and ``lengths``
        as :meth:`lstm`)."""
        y, hn, cn = self._emit(HIR.ops["lstm"],
                               _present([x, w_ih, w_hh, bias, h0, c0, peephole, lengths]),
                               {"hidden_size": hidden_size, "num_layers": num_layers,
                                "bidirectional": bidirectional, "carry": True,
                                **_extras(peephole, lengths)},
                               out_shape=out_shape)
        return y, hn, cn

    @builds("gru")
    def gru(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, b_ih: HirValue,
            b_hh: HirValue, hidden_size: int, num_layers: int = 1,
            bidirectional: bool = False, out_shape: ShapeLike | None = None,
            linear_before_reset: bool | None = None, lengths: HirValue | None = None
            ) -> HirValue:
        """GRU over the sequence from a zero state; returns the output sequence.
        ``linear_before_reset=False`` is ONNX's default GRU (the reset gate scales ``h``
        before its matmul); None (absent) and True are PyTorch's. ``lengths`` as
        :meth:`lstm`."""
        return self._hir("gru", _present([x, w_ih, w_hh, b_ih, b_hh, lengths]),
                         {"hidden_size": hidden_size, "num_layers": num_layers,
                          "bidirectional": bidirectional, "carry": False,
                          "linear_before_reset": linear_before_reset,
                          **_extras(None, lengths)}, out_shape)

    @builds("gru")
    def gru_carry(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, b_ih: HirValue,
                  b_hh: HirValue, h0: HirValue, hidden_size: int, num_layers: int = 1,
                  bidirectional: bool = False, out_shape: ShapeLike | None = None,
                  linear_before_reset: bool | None = None, lengths: HirValue | None = None
                  ) -> tuple[HirValue, HirValue]:
        """GRU from ``h0``; returns ``(y, hn)`` (RLX has no builder for this)."""
        y, hn = self._emit(HIR.ops["gru"], _present([x, w_ih, w_hh, b_ih, b_hh, h0, lengths]),
                           {"hidden_size": hidden_size, "num_layers": num_layers,
                            "bidirectional": bidirectional, "carry": True,
                            "linear_before_reset": linear_before_reset,
                            **_extras(None, lengths)},
                           out_shape=out_shape)
        return y, hn

    @builds("llama_decoder_block")
    def llama_decoder_block(
        self, x: HirValue, ln1_g: HirValue, ln1_b: HirValue, q_w: HirValue, k_w: HirValue,
        v_w: HirValue, o_w: HirValue, ln2_g: HirValue, ln2_b: HirValue, gate_w: HirValue,
        up_w: HirValue, down_w: HirValue, cos: HirValue, sin: HirValue,
        mask: HirValue | None = None, *, num_heads: int, head_dim: int, num_kv_heads: int,
        eps: float = 1e-5, mask_kind: str = "causal", rope_style: str = "neox",
        window: int | None = None, out_shape: ShapeLike | None = None,
        label: str = "llama_decoder_block",
    ) -> HirValue:
        """LLaMA pre-norm decoder layer (GQA attention with RoPE + SwiGLU FFN)."""
        return self._hir(
            "llama_decoder_block",
            [x, ln1_g, ln1_b, q_w, k_w, v_w, o_w, ln2_g, ln2_b, gate_w, up_w, down_w, cos, sin,
             mask],
            {"num_heads": num_heads, "head_dim": head_dim, "num_kv_heads": num_kv_heads,
             "eps": eps, "mask": mask_kind, "window": window, "rope_style": rope_style},
            out_shape, label)

    @builds("llama_decoder_block")
    def transformer_block(
        self, x: HirValue, ln1_g: HirValue, ln1_b: HirValue, q_w: HirValue, k_w: HirValue,
        v_w: HirValue, o_w: HirValue, ln2_g: HirValue, ln2_b: HirValue, gate_w: HirValue,
        up_w: HirValue, down_w: HirValue, cos: HirValue, sin: HirValue,
        mask: HirValue | None = None, *, num_heads: int, head_dim: int, num_kv_heads: int,
        eps: float = 1e-5, mask_kind: str = "causal", window: int | None = None,
        out_shape: ShapeLike | None = None,
    ) -> HirValue:
        """Alias of :meth:`llama_decoder_block` with NeoX RoPE, labelled
        ``transformer_block``."""
        return self.llama_decoder_block(
            x, ln1_g, ln1_b, q_w, k_w, v_w, o_w, ln2_g, ln2_b, gate_w, up_w, down_w, cos, sin,
            mask, num_heads=num_heads, head_dim=head_dim, num_kv_heads=num_kv_heads, eps=eps,
            mask_kind=mask_kind, rope_style="neox", window=window, out_shape=out_shape,
            label="transformer_block")

    @builds("qwen35_mtp_head")
    def qwen35_mtp_head(self, *operands: HirValue, num_heads: int, num_kv_heads: int,
                        head_dim: int, n_rot: int, n_embd: int, n_ff: int, mtp_vocab: int,
                        eps: float = 1e-6, out_shape: ShapeLike | None = None) -> HirValue:
        """Qwen3.5 MTP draft head; the 29 operands in the order of
        ``rlx.dialects.hir.block.MTP_OPERANDS`` (``h_pre_norm, input_ids, cos, sin,
        last_token_idx, embed_w, ..., lm_head_w``)."""
        return self._hir("qwen35_mtp_head", list(operands),
                         {"num_heads": num_heads, "num_kv_heads": num_kv_heads,
                          "head_dim": head_dim, "n_rot": n_rot, "n_embd": n_embd,
                          "n_ff": n_ff, "mtp_vocab": mtp_vocab, "eps": eps}, out_shape)

    @builds("qwen35_mtp_head")
    def qwen35_mtp_head_carry(self, *operands: HirValue, num_heads: int, num_kv_heads: int,
                              head_dim: int, n_rot: int, n_embd: int, n_ff: int,
                              mtp_vocab: int, eps: float = 1e-6
                              ) -> tuple[HirValue, HirValue, HirValue, HirValue]:
        """The MTP head over a KV cache: the 29 operands then ``past_k``, ``past_v``;
        returns ``(logits, hidden, k_cache, v_cache)``."""
        out = self._emit(HIR.ops["qwen35_mtp_head"], list(operands),
                         {"num_heads": num_heads, "num_kv_heads": num_kv_heads,
                          "head_dim": head_dim, "n_rot": n_rot, "n_embd": n_embd,
                          "n_ff": n_ff, "mtp_vocab": mtp_vocab, "eps": eps,
                          "carry_kv": True})
        return out[0], out[1], out[2], out[3]

    # -- escape hatch ------------------------------------------------------------------
    def mir(self, op: str, inputs: Sequence[HirValue], out_shape: ShapeLike | None = None,
            **attrs: Any) -> HirValue:
        """Embed one MIR op (``HirOp::Mir``): ``h.mir("softmax", [x], axis=-1)``.

        Ops with several results return the first; use :meth:`mir_multi` for all.
        """
        return self.mir_multi(op, inputs, out_shape, **attrs)[0]

    def mir_multi(self, op: str, inputs: Sequence[HirValue],
                  out_shape: ShapeLike | None = None, **attrs: Any) -> list[HirValue]:
        name = op.removeprefix(f"{MIR.name}.")
        schema = MIR.ops.get(name)
        if schema is None:
            raise BuildError(f"unknown MIR op {op!r} (known: {', '.join(sorted(MIR.ops))})")
        return self._emit(schema, list(inputs), attrs, out_shape=out_shape,
                          default_label=False)

    # -- window helpers (RLX's ``hir::window``, spec 2.18) -------------------------------
    def _window_rows(self, helper: str, x: HirValue, idx: HirValue, shape: tuple[int, int, int],
                     group: int, idx_name: str) -> int:
        """Rows of the ``[B * n / group, E * group]`` view of ``x [B, n, E]``; checks that
        ``x`` has ``shape`` and ``idx`` one index per row."""
        batch, n, embd = shape
        if group <= 0 or n % group:
            raise BuildError(f"{helper}: merge_sq: expected a positive divisor of n_pos = {n}, "
                             f"found {group}")
        if x.type.rank != 3 or not all(d is None or d == s for d, s in zip(x.shape, shape,
                                                                         strict=True)):
            raise BuildError(f"{helper}: x: expected shape [{batch}, {n}, {embd}] "
                             f"([B, n_pos, E] as given), found {x.type}")
        rows = batch * n // group
        if idx.type.rank != 1 or idx.shape[0] not in (None, rows):
            raise BuildError(f"{helper}: {idx_name}: expected shape [{rows}] (one index per "
                             f"row of B * n / {group} = {rows}; batch rows are flattened "
                             f"together, so B = 1 is the meaningful case), found {idx.type}")
        return rows

    def window_token_gather_bsn(self, x: HirValue, inv_window_idx: HirValue, batch: int,
                                n_pos: int, embd: int, merge_sq: int) -> HirValue:
        """Qwen2-VL window reorder (RLX's ``window_token_gather_bsn``): ``x [B, n_pos, E]``
        viewed as rows of ``merge_sq`` consecutive tokens, ``[B*n_pos/merge_sq,
        E*merge_sq]``; output row ``w`` is input row ``inv_window_idx[w]`` (f32-encoded or
        integer indices); the result is ``[B, n_pos, E]`` again. Built from MIR
        ``reshape`` + ``gather`` (axis 0)."""
        rows = self._window_rows("window_token_gather_bsn", x, inv_window_idx,
                                 (batch, n_pos, embd), merge_sq, "inv_window_idx")
        flat = self.mir("reshape", [x], new_shape=[rows, embd * merge_sq])
        picked = self.mir("gather", [flat, inv_window_idx], axis=0)
        return self.mir("reshape", [picked], new_shape=[batch, n_pos, embd])

    def window_token_scatter_bsn(self, x: HirValue, window_idx: HirValue, batch: int,
                                 n_out: int, embd: int) -> HirValue:
        """The way back after the patch merger (RLX's ``window_token_scatter_bsn``), also a
        row gather: ``out[i] = x[window_idx[i]]`` over the ``[B*n_out, E]`` rows of
        ``x [B, n_out, E]``; the result is ``[B, n_out, E]``."""
        rows = self._window_rows("window_token_scatter_bsn", x, window_idx,
                                 (batch, n_out, embd), 1, "window_idx")
        flat = self.mir("reshape", [x], new_shape=[rows, embd])
        picked = self.mir("gather", [flat, window_idx], axis=0)
        return self.mir("reshape", [picked], new_shape=[batch, n_out, embd])


def load_hir(path: str | Path) -> HirModule:
    """Read a ``.hir`` file (MLIR text) and check every op against its schema."""
    return HirModule.load(path)


__all__ = ["HirModule", "HirValue", "MirModule", "ShapeLike", "load_hir"]
