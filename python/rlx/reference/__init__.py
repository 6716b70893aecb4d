"""A numpy interpreter of HIR / MIR modules over the spec reference in :mod:`rlx.reference.ops`.

``evaluate(module, inputs, params)`` runs the ops of a function in order; each result is
rounded to its declared element type (so f16 / bf16 storage is modelled) but computed in
float64. It reads ops through their schemas and shares no code with the lowering.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from iree.compiler import ir

from rlx.dialects import lookup
from rlx.dialects.builder import HirModule
from rlx.dialects.schema import decode
from rlx.ir.diagnostics import RlxError
from rlx.ir.types import DType, TensorInfo
from rlx.reference import ops


def round_to(x: np.ndarray, dtype: DType) -> np.ndarray:
    """``x`` stored as ``dtype`` (bf16 is returned as float32 holding bf16 values)."""
    x = np.asarray(x)
    if dtype == DType.BF16:
        bits = np.asarray(x, dtype=np.float32).view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return rounded.astype(np.uint32).view(np.float32)
    if dtype.is_int and x.dtype.kind == "f":
        return np.trunc(x).astype(dtype.numpy)
    return x.astype(dtype.numpy)


def _attention(q: Any, k: Any, v: Any, *rest: Any, mask: str | None = None,
               mask_kind: str | None = None, **attrs: Any) -> Any:
    return ops.attention(q, k, v, *rest, mask_kind=mask_kind or mask or "none", **attrs)


def _llama(*operands: Any, mask: str = "causal", **attrs: Any) -> Any:
    return ops.llama_decoder_block(*operands, mask_kind=mask, **attrs)


def _recurrent(name: str) -> Callable[..., Any]:
    def run(*operands: Any, **attrs: Any) -> Any:
        from rlx.reference import recurrent

        return getattr(recurrent, name)(*operands, **attrs)

    return run


def _mtp(*operands: Any, **attrs: Any) -> Any:
    from rlx.reference import recurrent

    return recurrent.qwen35_mtp_head(*operands, **attrs)


def _sampling(name: str) -> Callable[..., Any]:
    def run(*operands: Any, **attrs: Any) -> Any:
        from rlx.reference import sampling

        return getattr(sampling, name)(*operands, **attrs)

    return run


def _dequant(*operands: Any, **attrs: Any) -> Any:
    from rlx.reference import quant

    return quant.dequant_matmul(*operands, **attrs)


def _dequant_rows(w: np.ndarray, *, scheme: str) -> np.ndarray:
    from rlx.reference import quant

    w = np.asarray(w)
    rows = quant.dequantize_gguf(w.reshape(-1, w.shape[-1]), scheme)
    return rows.reshape(*w.shape[:-1], rows.shape[-1])


ADAPTERS: dict[str, Callable[..., Any]] = {
    "linear": ops.linear,
    "linear_fused": ops.linear,
    "shared_linear_pair": ops.shared_linear_pair,
    "swiglu": ops.swiglu,
    "rms_norm": ops.rms_norm,
    "residual_rms_norm": ops.residual_rms_norm,
    "layer_norm": ops.layer_norm,
    "attention": _attention,
    "rope": ops.rope,
    "llama_decoder_block": _llama,
    "depthwise_conv1d_causal": ops.depthwise_conv1d_causal,
    "activation": ops.activation,
    "binary": ops.binary,
    "compare": ops.compare,
    "where": ops.where,
    "cast": ops.cast,
    "matmul": ops.matmul,
    "fused_matmul_bias_act": ops.fused_matmul_bias_act,
    "fused_swiglu": ops.fused_swiglu,
    "fused_residual_rms_norm": ops.fused_residual_rms_norm,
    "reshape": ops.reshape,
    "transpose": ops.transpose,
    "narrow": ops.narrow,
    "barrier": lambda x: np.asarray(x),
    "slice": ops.slice_,
    "pad": ops.pad,
    "concat": ops.concat,
    "expand": ops.expand,
    "gather": ops.gather,
    "write_rows": ops.write_rows,
    "scatter": ops.scatter,
    "dim": ops.dim,
    "iota": ops.iota,
    "reduce": ops.reduce,
    "argmax": ops.argmax,
    "topk": ops.topk,
    "softmax": ops.softmax,
    "cumsum": ops.cumsum,
    "conv": ops.conv,
    "pool": ops.pool,
    "gated_delta_net": _recurrent("gated_delta_net"),
    "lstm": _recurrent("lstm"),
    "gru": _recurrent("gru"),
    "qwen35_mtp_head": _mtp,
    "dequant_matmul": _dequant,
    "dequant": _dequant_rows,
    **{name: _sampling(name) for name in ("repetition_penalty", "top_k_filter", "top_p_filter",
                                          "min_p_filter", "categorical", "mark_tokens")},
}


def evaluate(module: HirModule | ir.Module, inputs: Sequence[np.ndarray] | Mapping[str, Any],
             params: Mapping[str, np.ndarray] | None = None, *, function: str | None = None
             ) -> list[np.ndarray]:
    """Run a function of ``module`` (the first, or ``function``) on numpy inputs."""
    mlir = module.mlir if isinstance(module, HirModule) else module
    params = params or {}
    funcs = [op.operation for op in mlir.body.operations]
    func = funcs[0] if function is None else next(
        f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == function)
    block = func.regions[0].blocks[0]
    args = list(block.arguments)
    if isinstance(inputs, Mapping):
        names = _arg_names(func, len(args))
        inputs = [inputs[n] for n in names]
    env: dict[ir.Value, np.ndarray] = {a: np.asarray(x) for a, x in zip(args, inputs,
                                                                         strict=True)}
    for op_view in block.operations:
        op = op_view.operation
        if op.name == "func.return":
            return [env[v] for v in op.operands]
        results = _run(op, env, params)
        for value, out in zip(op.results, results, strict=True):
            env[value] = round_to(out, TensorInfo.from_mlir(value.type).dtype)
    raise RlxError("error: function has no return")


def _arg_names(func: ir.Operation, n: int) -> list[str]:
    if "arg_attrs" not in func.attributes:
        return [f"arg{i}" for i in range(n)]
    out = []
    for i, a in enumerate(ir.ArrayAttr(func.attributes["arg_attrs"])):
        d = ir.DictAttr(a)
        out.append(ir.StringAttr(d["rlx.name"]).value if "rlx.name" in d else f"arg{i}")
    return out


def _weight(op: ir.Operation, name: str, value: np.ndarray, lead: int) -> np.ndarray:
    """A param's value: the array given, or for a ``lead`` its bytes past the lead."""
    if not lead:
        return value
    shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
    want = lead + math.prod(shape)
    if value.dtype.itemsize != 1 or value.size != want:
        raise RlxError(f"error: weight '{name}': expected {want} bytes (a lead of {lead} "
                       f"and {list(shape)} i8), found {list(value.shape)} {value.dtype}")
    return value.reshape(-1)[lead:].view(np.int8).reshape(shape)


def _run(op: ir.Operation, env: dict[ir.Value, np.ndarray], params: Mapping[str, np.ndarray]
         ) -> list[np.ndarray]:
    schema = lookup(op.name)
    if schema is None:
        raise RlxError(f"error: the reference has no op '{op.name}'")
    attrs = dict(decode(schema, op, check=False).attrs)
    if schema.name == "param":
        name = attrs["name"]
        if name not in params:
            raise RlxError(f"error: the reference needs weight '{name}'")
        return [_weight(op, name, np.asarray(params[name]), attrs.get("lead") or 0)]
    if schema.name == "constant":
        return [np.array(attrs["value"])]
    out = ADAPTERS[schema.name](*[env[v] for v in op.operands], **attrs)
    return list(out) if isinstance(out, tuple) else [out]


__all__ = ["evaluate", "round_to"]
