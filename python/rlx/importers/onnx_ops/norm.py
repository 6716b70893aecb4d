"""ONNX normalizations: LayerNormalization (any axis, optional Mean / InvStdDev outputs),
RMSNormalization; over the last axis they are ``rlx_mir.layer_norm`` / ``rms_norm``."""

from __future__ import annotations

import math

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.registry import Node, Value, converter, normalize_axes
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import DType


def norm_vector(node: Node, i: int, x: HirValue, axis: int, fill: float) -> HirValue:
    """Scale / bias input ``i`` as a ``[prod(x.shape[axis:])]`` vector (``fill`` when
    absent), broadcast to the normalized dims first."""
    dims = list(x.shape[axis:])
    width = math.prod(dims)  # type: ignore[arg-type]
    if not node.has(i):
        return node.mir("expand", [node.scalar(fill, x).reshape(1)], target_shape=[width])
    v = node.tensor(i)
    if list(v.shape) != dims:
        v = node.mir("expand", [v], target_shape=dims)
    return node.reshape(v, [width])


def _normalized(node: Node, op: str) -> tuple[HirValue, int, Value]:
    """(x, axis, x viewed as ``[*x.shape[:axis], D]``)."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; {op} takes a float tensor")
    rank = len(x.shape)
    axis = normalize_axes(node, [node.attr("axis", -1)], rank, "axis")[0]
    tail = x.shape[axis:]
    if any(d is None for d in tail):
        node.fail(f"input {x.type}: the normalized dims must be static")
    dims = [*x.shape[:axis], math.prod(tail)]  # type: ignore[arg-type]
    return x, axis, reshape_to(node, x, dims) if axis != rank - 1 else x


@converter("LayerNormalization", since=17)
def convert_layer_norm(node: Node) -> list[Value]:
    x, axis, flat = _normalized(node, "LayerNormalization")
    eps = node.attr("epsilon", 1e-5)
    gamma = norm_vector(node, 1, x, axis, 1.0)
    beta = norm_vector(node, 2, x, axis, 0.0)
    y = node.mir("layer_norm", [flat, gamma, beta], axis=-1, eps=eps)
    outs: list[Value] = [reshape_to(node, y, list(x.shape)) if flat is not x else y]
    wanted = [bool(name) for name in node.proto.output[1:3]]
    if any(wanted):
        mean, inv = _statistics(node, x, axis, eps)
        outs += [mean, inv][:len(wanted)]
    return outs


def _statistics(node: Node, x: HirValue, axis: int, eps: float) -> tuple[HirValue, HirValue]:
    """Mean and ``1 / sqrt(var + eps)`` over ``axis..``, kept dims, in the stash type."""
    stash = node.attr("stash_type", 1)
    if stash != 1:
        node.fail(f"stash_type {stash}: rlx computes the statistics in f32 (stash_type 1)")
    xs = node.cast(x, DType.F32)
    axes = list(range(axis, len(x.shape)))
    mean = node.mir("reduce", [xs], kind="mean", axes=axes, keep_dim=True)
    centered = node.mir("binary", [xs, mean], kind="sub")
    var = node.mir("reduce", [node.mir("binary", [centered, centered], kind="mul")],
                   kind="mean", axes=axes, keep_dim=True)
    shifted = node.mir("binary", [var, np.asarray(eps, np.float32)], kind="add")
    return mean, node.mir("activation", [shifted], kind="rsqrt")


@converter("RMSNormalization", since=23)
def convert_rms_norm(node: Node) -> list[Value]:
    x, axis, flat = _normalized(node, "RMSNormalization")
    gamma = norm_vector(node, 1, x, axis, 1.0)
    beta = norm_vector(node, 2, x, axis, 0.0)
    y = node.mir("rms_norm", [flat, gamma, beta], axis=-1, eps=node.attr("epsilon", 1e-5))
    return [reshape_to(node, y, list(x.shape)) if flat is not x else y]
