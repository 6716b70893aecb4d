"""ONNX normalizations: LayerNormalization (any axis, optional Mean / InvStdDev outputs),
RMSNormalization; over the last axis they are ``rlx_mir.layer_norm`` / ``rms_norm``.
InstanceNormalization, GroupNormalization, MeanVarianceNormalization and LpNormalization
are reductions and elementwise ops (over dynamic spatial dims too)."""

from __future__ import annotations

import math

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.group_norm import group_norm
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


def _channels(node: Node, op: str) -> HirValue:
    """An ``[N, C, D1, ...]`` float input with a static C."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; {op} takes a float tensor")
    if len(x.shape) < 3 or x.shape[1] is None:
        node.fail(f"input {x.type}: expected [N, C, D1, ...] with a static C")
    return x


def _channel_vector(node: Node, i: int, c: int) -> HirValue:
    v = node.tensor(i)
    if list(v.shape) != [c]:
        node.fail(f"input {i} {v.type}: expected [{c}] (the channels)")
    return v


@converter("InstanceNormalization", since=6)
def convert_instance_norm(node: Node) -> list[Value]:
    """Each (sample, channel) normalized over its spatial dims (any of them dynamic), then
    ``scale[c] y + B[c]`` (:func:`rlx.importers.group_norm.group_norm`, a group per
    channel)."""
    x = _channels(node, "InstanceNormalization")
    c = int(x.shape[1])  # type: ignore[arg-type]
    return [group_norm(node.h, x, c, node.attr("epsilon", 1e-5),
                       _channel_vector(node, 1, c), _channel_vector(node, 2, c))]


@converter("GroupNormalization", since=18)
def convert_group_norm(node: Node) -> list[Value]:
    """Channels in ``num_groups`` groups, each (sample, group) normalized over its channels
    and spatial dims (:func:`rlx.importers.group_norm.group_norm`); then a per-channel
    scale and bias (GroupNormalization-21; version 18's are per group, repeated over the
    group's channels)."""
    x = _channels(node, "GroupNormalization")
    c = int(x.shape[1])  # type: ignore[arg-type]
    groups = int(node.attr("num_groups", 0))
    if groups <= 0 or c % groups:
        node.fail(f"num_groups {groups} does not divide the {c} channels")
    if node.attr("stash_type", 1) != 1:
        node.fail(f"stash_type {node.attr('stash_type')}: rlx computes the statistics in "
                  "f32 (stash_type 1)")
    vectors = []
    for i in (1, 2):
        if node.version >= 21:
            vectors.append(_channel_vector(node, i, c))
            continue
        v = node.tensor(i)  # per group: each value repeated over its group's channels
        if list(v.shape) != [groups]:
            node.fail(f"input {i} {v.type}: expected [{groups}] (num_groups)")
        vectors.append(node.reshape(node.mir("expand", [node.reshape(v, [groups, 1])],
                                             target_shape=[groups, c // groups]), [c]))
    return [group_norm(node.h, x, groups, node.attr("epsilon", 1e-5), *vectors)]


@converter("MeanVarianceNormalization", since=9)
def convert_mvn(node: Node) -> list[Value]:
    """ONNX's function body: ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)`` over ``axes``
    (default ``[0, 2, 3]``)."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; MeanVarianceNormalization takes a float tensor")
    axes = normalize_axes(node, node.ints("axes", [0, 2, 3]) or [], len(x.shape))
    mean = node.mir("reduce", [x], kind="mean", axes=axes, keep_dim=True)
    square_mean = node.mir("reduce", [node.mir("binary", [x, x], kind="mul")], kind="mean",
                           axes=axes, keep_dim=True)
    var = node.mir("binary", [square_mean, node.mir("binary", [mean, mean], kind="mul")],
                   kind="sub")
    std = node.mir("binary", [node.mir("activation", [var], kind="sqrt"),
                              node.scalar(1e-9, x)], kind="add")
    return [node.mir("binary", [node.mir("binary", [x, mean], kind="sub"), std],
                     kind="div")]


@converter("LpNormalization")
def convert_lp_norm(node: Node) -> list[Value]:
    """``x / ||x||_p`` along ``axis`` (p 1 or 2); 0 where the norm is 0 (ONNX's reference:
    no 0 / 0)."""
    x = node.tensor(0)
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; LpNormalization takes a float tensor")
    p = node.attr("p", 2)
    if p not in (1, 2):
        node.fail(f"attribute p = {p}: expected 1 or 2")
    axis = normalize_axes(node, [node.attr("axis", -1)], len(x.shape), "axis")
    if p == 1:
        norm = node.mir("reduce", [node.mir("activation", [x], kind="abs")], kind="sum",
                        axes=axis, keep_dim=True)
    else:
        norm = node.mir("activation", [node.mir("reduce", [
            node.mir("binary", [x, x], kind="mul")], kind="sum", axes=axis, keep_dim=True)],
            kind="sqrt")
    zero = node.mir("compare", [norm, node.scalar(0.0, x)], kind="eq")
    return [node.mir("where", [zero, node.scalar(0.0, x),
                               node.mir("binary", [x, norm], kind="div")])]
