"""``rlx.HirModule``: the Python builder of HIR modules (RLX's ``HirModule`` in Python naming).

Every builder call checks the op against its schema before creating it, infers the result
shape (an explicit ``out_shape`` is checked against the inferred one) and returns
:class:`HirValue` handles. ``str(module)`` gives the text format; ``HirModule.parse`` reads
it back through MLIR's parser and re-checks every op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from rlx.dialects import FUSION_POLICY_ATTR, HIR, MIR, fusion_policy, lookup, verify_module
from rlx.dialects.enums import FUSION_POLICIES
from rlx.dialects.schema import OpSchema, create, decode, validate, with_defaults
from rlx.ir.context import new_context
from rlx.ir.diagnostics import BuildError, VerifyError
from rlx.ir.locations import label_loc, label_of, relabel
from rlx.ir.text import parse_file, parse_module, print_module
from rlx.ir.types import DType, Shape, TensorInfo

ShapeLike = Sequence[int | str | None]


class HirValue:
    """A tensor value of a :class:`HirModule` (a function input or an op result)."""

    __slots__ = ("_module", "value")

    def __init__(self, module: HirModule, value: ir.Value) -> None:
        self._module = module
        self.value = value

    @property
    def module(self) -> HirModule:
        return self._module

    @property
    def type(self) -> TensorInfo:
        return TensorInfo.from_mlir(self.value.type)

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def op(self) -> ir.Operation | None:
        """The defining op (None for a function input)."""
        owner = self.value.owner
        if isinstance(owner, ir.Block):
            return None
        return owner.operation if isinstance(owner, ir.OpView) else owner

    @property
    def label(self) -> str | None:
        op = self.op
        return label_of(op.location) if op is not None else None

    def __repr__(self) -> str:
        op = self.op
        src = op.name if op is not None else "input"
        return f"HirValue({self.type} from {src})"


def _dims(shape: ShapeLike) -> tuple[int | None, ...]:
    """``None``, ``"?"`` or a symbol name (``"batch"``) is a dynamic dim."""
    out: list[int | None] = []
    for d in shape:
        if d is None or isinstance(d, str):
            out.append(None)
        elif isinstance(d, int | np.integer) and d >= 0:
            out.append(int(d))
        else:
            raise BuildError(f"shape {list(shape)}: dims are sizes >= 0, or None / a name "
                             f"for a dynamic dim; found {d!r}")
    return tuple(out)


class HirModule:
    """A HIR module under construction (one function, ``main`` by default).

    Args:
        name: the module's name (``module @name``).
        fusion_policy: ``"direct"`` (default: fused MIR ops), ``"fusable"`` (primitive
            chains) or ``"for_autodiff"``.
    """

    def __init__(self, name: str = "main", fusion_policy: str = "direct",
                 *, function: str = "main") -> None:
        self._ctx = new_context()
        with self._ctx, ir.Location.unknown():
            self._module = ir.Module.create()
            self._module.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        self.fusion_policy = fusion_policy
        self._nodes: list[ir.Value | ir.Operation] = []
        self._func = self._new_function(function)

    # -- construction helpers ----------------------------------------------------------
    def _new_function(self, name: str) -> ir.Operation:
        if not name.isidentifier():
            raise BuildError(f"function name: expected an identifier, found {name!r}")
        with self._ctx, ir.Location.unknown(), ir.InsertionPoint(self._module.body):
            ftype = ir.FunctionType.get([], [])
            func_op = ir.Operation.create(
                "func.func", regions=1,
                attributes={"sym_name": ir.StringAttr.get(name),
                            "function_type": ir.TypeAttr.get(ftype)})
            block = func_op.regions[0].blocks.append()
            with ir.InsertionPoint(block):
                ir.Operation.create("func.return")
        return func_op

    @classmethod
    def _wrap(cls, module: ir.Module) -> HirModule:
        self = cls.__new__(cls)
        self._ctx = module.context
        self._module = module
        self._nodes = []
        funcs = [op.operation for op in module.body.operations]
        self._func = funcs[0] if funcs else self._new_function("main")
        for func_op in funcs:
            block = func_op.regions[0].blocks[0]
            self._nodes.extend(block.arguments)
            self._nodes.extend(op.operation for op in block.operations
                               if op.operation.name != "func.return")
        return self

    @property
    def _block(self) -> ir.Block:
        return self._func.regions[0].blocks[0]

    @property
    def _terminator(self) -> ir.Operation:
        ops = list(self._block.operations)
        return ops[-1].operation

    def _update_signature(self) -> None:
        block = self._block
        inputs = [a.type for a in block.arguments]
        outputs = [v.type for v in self._terminator.operands]
        with self._ctx:
            self._func.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(inputs, outputs))

    def _check_value(self, v: HirValue, what: str) -> ir.Value:
        if not isinstance(v, HirValue):
            raise BuildError(f"{what}: expected a HirValue of this module, found "
                             f"{type(v).__name__}")
        if v.module is not self:
            raise BuildError(f"{what}: the value belongs to another HirModule")
        return v.value

    def _emit(
        self,
        schema: OpSchema,
        operands: Sequence[HirValue | None],
        attrs: dict[str, Any],
        *,
        out_shape: ShapeLike | TensorInfo | None = None,
        label: str | None = None,
        default_label: bool = True,
    ) -> list[HirValue]:
        unknown = set(attrs) - {a.name for a in schema.attrs}
        if unknown:
            known = ", ".join(a.name for a in schema.attrs) or "none"
            raise BuildError(f"{schema.full_name}: unknown attribute(s) "
                             f"{', '.join(sorted(unknown))} (known: {known})")
        present = [o for o in operands if o is not None]
        ir_operands = [self._check_value(o, f"{schema.full_name} operand #{i}")
                       for i, o in enumerate(present)]
        if label is None and default_label:
            label = schema.default_label(with_defaults(schema, attrs))
        results: list[TensorInfo] | None = None
        if isinstance(out_shape, TensorInfo):
            results = [out_shape]
        elif out_shape is not None:
            types = [TensorInfo.from_mlir(v.type) for v in ir_operands]
            inferred = validate(schema, types, with_defaults(schema, attrs), label=label)
            want = inferred[0].with_shape(_dims(out_shape))
            if not want.compatible(inferred[0]):
                raise VerifyError(schema.full_name, "out_shape", f"a shape compatible with "
                                  f"the inferred {inferred[0]}", str(want), label=label)
            results = [want, *inferred[1:]]
        with self._ctx:
            op = create(schema, ir_operands, attrs, loc=label_loc(label), label=label,
                        ip=ir.InsertionPoint(self._terminator), results=results)
        self._nodes.append(op)
        return [HirValue(self, r) for r in op.results]

    def _hir(self, name: str, operands: Sequence[HirValue | None], attrs: dict[str, Any],
             out_shape: ShapeLike | None = None, label: str | None = None) -> HirValue:
        return self._emit(HIR.ops[name], operands, attrs, out_shape=out_shape, label=label)[0]

    # -- functions ---------------------------------------------------------------------
    @property
    def function_names(self) -> list[str]:
        return [ir.StringAttr(op.operation.attributes["sym_name"]).value
                for op in self._module.body.operations]

    def function(self, name: str) -> HirModule:
        """Build into function ``name`` from now on (created on first use). Weights with
        the same name are shared by all functions: a model's ``prefill`` and ``decode``
        entry points read one set of parameters."""
        for op in self._module.body.operations:
            op = op.operation
            if ir.StringAttr(op.attributes["sym_name"]).value == name:
                self._func = op
                return self
        self._func = self._new_function(name)
        return self

    # -- module properties -------------------------------------------------------------
    @property
    def name(self) -> str:
        return ir.StringAttr(self._module.operation.attributes["sym_name"]).value

    @property
    def fusion_policy(self) -> str:
        return fusion_policy(self._module)

    @fusion_policy.setter
    def fusion_policy(self, policy: str) -> None:
        if policy not in FUSION_POLICIES:
            raise BuildError(f"fusion policy: expected one of {', '.join(FUSION_POLICIES)}, "
                             f"found {policy!r}")
        with self._ctx:
            self._module.operation.attributes[FUSION_POLICY_ATTR] = ir.StringAttr.get(policy)

    def with_fusion_policy(self, policy: str) -> HirModule:
        self.fusion_policy = policy
        return self

    @property
    def mlir(self) -> ir.Module:
        """The underlying MLIR module (shared, not copied)."""
        return self._module

    @property
    def context(self) -> ir.Context:
        return self._ctx

    def __len__(self) -> int:
        """Number of nodes (inputs and ops, as RLX counts them)."""
        return len(self._nodes)

    @property
    def inputs(self) -> list[HirValue]:
        return [HirValue(self, a) for a in self._block.arguments]

    @property
    def outputs(self) -> list[HirValue]:
        return [HirValue(self, v) for v in self._terminator.operands]

    @property
    def ops(self) -> list[ir.Operation]:
        """The ops of the current function in creation order (no terminator)."""
        return [n for n in self._nodes if isinstance(n, ir.Operation)]

    # -- leaves ------------------------------------------------------------------------
    def input(self, name: str, shape: ShapeLike, dtype: DType | str = "f32") -> HirValue:
        """A function input (``HirOp::Input``); ``None`` / a name in ``shape`` is dynamic."""
        t = TensorInfo(_dims(shape), DType.parse(dtype))
        if name in self.input_names:
            raise BuildError(f"input {name!r} is defined twice")
        names = [*self.input_names, name]
        with self._ctx:
            arg = self._block.add_argument(t.mlir(), ir.Location.unknown())
            self._func.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [ir.DictAttr.get({"rlx.name": ir.StringAttr.get(n)}) for n in names])
        self._update_signature()
        self._nodes.append(arg)
        return HirValue(self, arg)

    def input_batch_seq(self, name: str, hidden: int, dtype: DType | str = "f32") -> HirValue:
        """A ``[?batch, ?seq, hidden]`` input (RLX's ``input_batch_seq``)."""
        return self.input(name, ("batch", "seq", hidden), dtype)

    @property
    def input_names(self) -> list[str]:
        """The user's input names (``rlx.name``; ``argN`` where none was given)."""
        if "arg_attrs" not in self._func.attributes:
            return [f"arg{i}" for i in range(len(self._block.arguments))]
        names = []
        for i, a in enumerate(ir.ArrayAttr(self._func.attributes["arg_attrs"])):
            d = ir.DictAttr(a)
            names.append(ir.StringAttr(d["rlx.name"]).value if "rlx.name" in d else f"arg{i}")
        return names

    def param(self, name: str, shape: ShapeLike, dtype: DType | str = "f32") -> HirValue:
        """A weight bound at load time (``HirOp::Param``)."""
        t = TensorInfo(_dims(shape), DType.parse(dtype))
        return self._emit(HIR.ops["param"], [], {"name": name}, out_shape=t,
                          default_label=False)[0]

    def constant(self, data: np.ndarray | Sequence[float], dtype: DType | str | None = None
                 ) -> HirValue:
        """Small inline data (``HirOp::Constant``)."""
        arr = np.asarray(data)
        dt = DType.parse(dtype) if dtype is not None else DType.parse(arr.dtype)
        arr = np.asarray(arr.astype(dt.numpy), order="C")  # keeps 0-d arrays 0-d
        with self._ctx:
            t = TensorInfo(tuple(arr.shape), dt).mlir()
            attr = ir.DenseElementsAttr.get(arr, type=t)
        return self._emit(HIR.ops["constant"], [], {"value": attr}, default_label=False)[0]

    # -- blocks ------------------------------------------------------------------------
    def linear(self, x: HirValue, weight: HirValue, bias: HirValue | None = None,
               activation: str | None = None, out_shape: ShapeLike | None = None) -> HirValue:
        """``act(x @ weight + bias)``; weight ``[K, N]``."""
        return self._hir("linear", [x, weight, bias],
                         {"activation": activation or "none", "has_bias": bias is not None},
                         out_shape)

    def linear_fused(self, x: HirValue, weight: HirValue, bias: HirValue,
                     activation: str | None = None, out_shape: ShapeLike | None = None
                     ) -> HirValue:
        """Linear that always lowers to ``rlx_mir.fused_matmul_bias_act``."""
        return self._hir("linear_fused", [x, weight, bias],
                         {"activation": activation or "none"}, out_shape)

    def shared_linear_pair(self, x: HirValue, w_first: HirValue, w_second: HirValue,
                           out_shape: ShapeLike | None = None) -> tuple[HirValue, HirValue]:
        """``(x @ w_first, x @ w_second)`` from one op."""
        first, second = self._emit(HIR.ops["shared_linear_pair"], [x, w_first, w_second], {},
                                   out_shape=out_shape)
        return first, second

    def swiglu_ffn(self, x: HirValue, up_w: HirValue, gate_w: HirValue, down_w: HirValue,
                   out_shape: ShapeLike | None = None) -> HirValue:
        """``(silu(x @ gate_w) * (x @ up_w)) @ down_w``."""
        return self._hir("swiglu", [x, up_w, gate_w, down_w], {}, out_shape)

    def residual_rms_norm(self, x: HirValue, residual: HirValue, gamma: HirValue,
                          beta: HirValue, eps: float = 1e-6,
                          out_shape: ShapeLike | None = None) -> HirValue:
        return self._hir("residual_rms_norm", [x, residual, gamma, beta], {"eps": eps},
                         out_shape)

    def rms_norm(self, x: HirValue, gamma: HirValue, beta: HirValue, eps: float = 1e-6,
                 out_shape: ShapeLike | None = None) -> HirValue:
        return self._hir("rms_norm", [x, gamma, beta], {"eps": eps}, out_shape)

    def attention(self, q: HirValue, k: HirValue, v: HirValue, mask: HirValue | None = None,
                  *, num_heads: int, head_dim: int, mask_kind: str = "none",
                  window: int | None = None, out_shape: ShapeLike | None = None) -> HirValue:
        """Scaled dot-product attention; ``mask`` only for ``custom`` / ``bias`` masks."""
        return self._hir("attention", [q, k, v, mask],
                         {"num_heads": num_heads, "head_dim": head_dim, "mask": mask_kind,
                          "window": window}, out_shape)

    def rope(self, x: HirValue, cos: HirValue, sin: HirValue, head_dim: int,
             n_rot: int | None = None, rope_style: str = "neox",
             out_shape: ShapeLike | None = None) -> HirValue:
        """Rotary embedding; ``n_rot`` defaults to ``head_dim`` (full rotation)."""
        return self._hir("rope", [x, cos, sin],
                         {"head_dim": head_dim, "n_rot": head_dim if n_rot is None else n_rot,
                          "rope_style": rope_style}, out_shape)

    def depthwise_conv1d_causal(self, input: HirValue, weight: HirValue, left_pad: HirValue,
                                kernel_size: int, out_shape: ShapeLike | None = None
                                ) -> HirValue:
        return self._hir("depthwise_conv1d_causal", [input, weight, left_pad],
                         {"kernel_size": kernel_size}, out_shape)

    def dequant_matmul(self, x: HirValue, w: HirValue, scale: HirValue | None = None,
                       zp: HirValue | None = None, *, scheme: str,
                       block_size: int | None = None, out_shape: ShapeLike | None = None
                       ) -> HirValue:
        """Matmul with quantized weights; legacy schemes also take ``scale`` and ``zp``."""
        return self._hir("dequant_matmul", [x, w, scale, zp],
                         {"scheme": scheme, "block_size": block_size}, out_shape)

    def gated_delta_net(self, q: HirValue, k: HirValue, v: HirValue, g: HirValue,
                        beta: HirValue, state_size: int, out_shape: ShapeLike | None = None
                        ) -> HirValue:
        """Gated DeltaNet scan from a zero state."""
        return self._hir("gated_delta_net", [q, k, v, g, beta],
                         {"state_size": state_size, "carry_state": False}, out_shape)

    def gated_delta_net_carry(self, q: HirValue, k: HirValue, v: HirValue, g: HirValue,
                              beta: HirValue, state: HirValue, state_size: int,
                              out_shape: ShapeLike | None = None
                              ) -> tuple[HirValue, HirValue]:
        """Gated DeltaNet scan from ``state``; returns ``(y, final_state)``."""
        y, final = self._emit(HIR.ops["gated_delta_net"], [q, k, v, g, beta, state],
                              {"state_size": state_size, "carry_state": True},
                              out_shape=out_shape)
        return y, final

    def lstm(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, bias: HirValue,
             hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
             out_shape: ShapeLike | None = None) -> HirValue:
        return self._hir("lstm", [x, w_ih, w_hh, bias],
                         {"hidden_size": hidden_size, "num_layers": num_layers,
                          "bidirectional": bidirectional, "carry": False}, out_shape)

    def lstm_carry(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, bias: HirValue,
                   h0: HirValue, c0: HirValue, hidden_size: int, num_layers: int = 1,
                   bidirectional: bool = False, out_shape: ShapeLike | None = None
                   ) -> tuple[HirValue, HirValue, HirValue]:
        """LSTM from ``(h0, c0)``; returns ``(y, hn, cn)``."""
        y, hn, cn = self._emit(HIR.ops["lstm"], [x, w_ih, w_hh, bias, h0, c0],
                               {"hidden_size": hidden_size, "num_layers": num_layers,
                                "bidirectional": bidirectional, "carry": True},
                               out_shape=out_shape)
        return y, hn, cn

    def gru(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, b_ih: HirValue,
            b_hh: HirValue, hidden_size: int, num_layers: int = 1,
            bidirectional: bool = False, out_shape: ShapeLike | None = None) -> HirValue:
        return self._hir("gru", [x, w_ih, w_hh, b_ih, b_hh],
                         {"hidden_size": hidden_size, "num_layers": num_layers,
                          "bidirectional": bidirectional, "carry": False}, out_shape)

    def gru_carry(self, x: HirValue, w_ih: HirValue, w_hh: HirValue, b_ih: HirValue,
                  b_hh: HirValue, h0: HirValue, hidden_size: int, num_layers: int = 1,
                  bidirectional: bool = False, out_shape: ShapeLike | None = None
                  ) -> tuple[HirValue, HirValue]:
        """GRU from ``h0``; returns ``(y, hn)`` (RLX has no builder for this)."""
        y, hn = self._emit(HIR.ops["gru"], [x, w_ih, w_hh, b_ih, b_hh, h0],
                           {"hidden_size": hidden_size, "num_layers": num_layers,
                            "bidirectional": bidirectional, "carry": True},
                           out_shape=out_shape)
        return y, hn

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

    # -- labels --------------------------------------------------------------------------
    def named(self, name: str, build: Callable[[HirModule], HirValue]) -> HirValue:
        """Build with ``build(self)`` and label the op of the returned value ``name``."""
        value = build(self)
        op = value.op
        if op is None:
            raise BuildError(f"named({name!r}): the block returned a function input, not an op")
        with self._ctx:
            op.location = relabel(op.location, name)
        return value

    def label_nodes_since(self, start: int, name: str) -> None:
        """Label every op created at or after node ``start`` that has no label, or only its
        op's default label, ``name`` (what importers do per source node). Inputs, params
        and constants keep their names."""
        if not name:
            return
        with self._ctx:
            for node in self._nodes[start:]:
                if not isinstance(node, ir.Operation) or node.name.endswith(
                        (".param", ".constant")):
                    continue
                current = label_of(node.location)
                if current is None or current == _default_label(node):
                    node.location = relabel(node.location, name)

    # -- outputs, text, verification -----------------------------------------------------
    def set_outputs(self, outputs: Iterable[HirValue]) -> None:
        """Make ``outputs`` the function results (replaces earlier outputs)."""
        values = [self._check_value(v, f"output #{i}") for i, v in enumerate(outputs)]
        old = self._terminator
        with self._ctx, ir.Location.unknown():
            ir.Operation.create("func.return", operands=values, ip=ir.InsertionPoint(old))
        old.erase()
        self._update_signature()

    def verify(self) -> None:
        """Re-check every op against its schema and the module against MLIR's verifier."""
        verify_module(self._module, "hir")
        with self._ctx:
            if not self._module.operation.verify():
                raise BuildError("module does not verify")

    def __str__(self) -> str:
        return print_module(self._module)

    def __repr__(self) -> str:
        return f"HirModule(@{self.name}, {len(self)} nodes, policy={self.fusion_policy})"

    @classmethod
    def parse(cls, text: str, source: str = "<string>") -> HirModule:
        """Read HIR text through MLIR's parser; every op is checked against its schema."""
        module = parse_module(text, source)
        verify_module(module, "hir")
        return cls._wrap(module)

    @classmethod
    def load(cls, path: str | Path) -> HirModule:
        module = parse_file(path)
        verify_module(module, "hir")
        return cls._wrap(module)

    def lower_to_mir(self, fusion_policy: str | None = None) -> MirModule:
        """A new MIR module (``hir-to-mir`` with this module's, or the given, policy);
        this module is left as it is."""
        from rlx.lowering import LoweringOptions, lower_hir_to_mir

        module = parse_module(str(self), f"{self.name}.hir")
        if fusion_policy is not None:
            with module.context:
                module.operation.attributes[FUSION_POLICY_ATTR] = ir.StringAttr.get(
                    fusion_policy)
        lower_hir_to_mir(module, LoweringOptions())
        return MirModule(module)

    def lower_for_autodiff(self) -> MirModule:
        """``lower_to_mir`` with the ``for_autodiff`` policy (primitive chains)."""
        return self.lower_to_mir("for_autodiff")

    @classmethod
    def wrap_mir_graph(cls, mir: MirModule | ir.Module | str) -> HirModule:
        """A HIR module whose ops are the given MIR module's ops (escape-hatch nodes),
        with the ``direct`` policy."""
        if isinstance(mir, MirModule):
            mir = mir.mlir
        text = mir if isinstance(mir, str) else print_module(mir)
        module = parse_module(text)
        verify_module(module, "mir")
        self = cls._wrap(module)
        self.fusion_policy = "direct"
        return self

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


class MirModule:
    """A module at the MIR stage (what ``HirModule.lower_to_mir`` returns)."""

    def __init__(self, module: ir.Module) -> None:
        self._module = module

    @property
    def mlir(self) -> ir.Module:
        return self._module

    @property
    def ops(self) -> list[ir.Operation]:
        func = self._module.body.operations[0].operation
        return [op.operation for op in func.regions[0].blocks[0].operations
                if op.operation.name != "func.return"]

    def __len__(self) -> int:
        """Nodes as RLX counts them: function inputs plus ops."""
        func = self._module.body.operations[0].operation
        return len(func.regions[0].blocks[0].arguments) + len(self.ops)

    def verify(self) -> None:
        verify_module(self._module, "mir")

    def __str__(self) -> str:
        return print_module(self._module)

    @classmethod
    def parse(cls, text: str, source: str = "<string>") -> MirModule:
        module = parse_module(text, source)
        verify_module(module, "mir")
        return cls(module)


def _default_label(op: ir.Operation) -> str | None:
    schema = lookup(op.name)
    if schema is None:
        return None
    return schema.default_label(decode(schema, op, check=False).attrs)


def load_hir(path: str | Path) -> HirModule:
    """Read a ``.hir`` file (MLIR text) and check every op against its schema."""
    return HirModule.load(path)


__all__ = ["HirModule", "HirValue", "MirModule", "load_hir"]
