"""ATen ops that pick or place elements, and the activations written as a few MIR ops:
argmax / argmin, topk, scatter / scatter_add / scatter_reduce / index_put (``rlx_mir.scatter``,
clamped into the tensor), pad (constant, reflect, replicate, circular), pixel_shuffle and
pixel_unshuffle (dynamic sizes too); group_norm and instance_norm; elu, selu, celu, leaky_relu,
prelu, mish."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.group_norm import group_norm
from rlx.importers.padding import pad_index
from rlx.importers.torch_export.convert import Op, Value, converter
from rlx.ir.types import DType

# -- activations -------------------------------------------------------------------------


def _k(op: Op, v: float, like: HirValue) -> HirValue:
    return op.h.constant(op.scalar(v, like.dtype), like.dtype)


def _negative(op: Op, x: HirValue) -> HirValue:
    return op.mir("compare", [x, _k(op, 0.0, x)], kind="lt")


def _exp_minus_one(op: Op, x: HirValue, alpha: float) -> HirValue:
    e = op.mir("binary", [op.mir("activation", [x], kind="exp"), _k(op, 1.0, x)], kind="sub")
    return op.mir("binary", [e, _k(op, alpha, x)], kind="mul")


@converter("elu", "selu", "celu")
def convert_elu(op: Op) -> Value:
    """``elu``: ``alpha (exp(x) - 1)`` below 0 (times ``scale``); ``selu``: elu with
    SELU's constants; ``celu``: ``alpha (exp(x / alpha) - 1)`` below 0."""
    x = op.cast(op.tensor(0), op.out_dtype())
    name = op.name
    if name == "selu":
        alpha, scale = 1.6732632423543772, 1.0507009873554805
    else:
        alpha, scale = float(op.arg(1, "alpha", 1.0)), 1.0
        if name == "elu" and (op.arg(2, "scale", 1.0) != 1 or op.arg(3, "input_scale", 1.0)
                              != 1):
            op.fail("elu with scale / input_scale other than 1 is not supported")
    inner = op.mir("binary", [x, _k(op, 1.0 / alpha, x)], kind="mul") if name == "celu" else x
    y = op.mir("where", [_negative(op, x), _exp_minus_one(op, inner, alpha), x])
    return y if scale == 1.0 else op.mir("binary", [y, _k(op, scale, x)], kind="mul")


@converter("leaky_relu", "prelu")
def convert_leaky_relu(op: Op) -> Value:
    """``slope x`` below 0: a number (``leaky_relu``) or a per-channel weight (``prelu``,
    channel dim 1)."""
    x = op.cast(op.tensor(0), op.out_dtype())
    if op.name == "leaky_relu":
        slope: Any = _k(op, float(op.arg(1, "negative_slope", 0.01)), x)
    else:
        w = op.tensor(1, "weight")
        n = w.shape[0] if w.shape else 1
        slope = op.mir("reshape", [w], new_shape=[n, *[1] * (len(x.shape) - 2)]) if (
            len(x.shape) > 2 and n != 1) else op.mir("reshape", [w], new_shape=[n])
        slope = op.cast(slope, x.dtype)
    return op.mir("where", [_negative(op, x), op.mir("binary", [x, slope], kind="mul"), x])


@converter("mish")
def convert_mish(op: Op) -> Value:
    x = op.cast(op.tensor(0), op.out_dtype())
    t = op.mir("activation", [op.mir("activation", [x], kind="softplus")], kind="tanh")
    return op.mir("binary", [x, t], kind="mul")


@converter("group_norm", "instance_norm")
def convert_group_norm(op: Op) -> Value:
    """``F.group_norm`` / ``F.instance_norm`` (inference: no running statistics used or
    updated) through :func:`rlx.importers.group_norm.group_norm`, over any spatial size."""
    x = op.tensor(0, "input")
    if len(x.shape) < 3 or x.shape[1] is None or not x.dtype.is_float:
        op.fail(f"input {x.type}: expected a float [N, C, D1, ...] with a static C")
    c = int(x.shape[1])
    if op.name == "group_norm":
        groups, eps = int(op.arg(1, "num_groups")), float(op.arg(4, "eps", 1e-5))
        w, b = op.arg(2, "weight", None), op.arg(3, "bias", None)
        if c % groups:
            op.fail(f"num_groups {groups} does not divide the {c} channels")
    else:
        if op.arg(5, "use_input_stats", True) is False:
            op.fail("instance_norm with running statistics (use_input_stats=False)")
        groups, eps = c, float(op.arg(7, "eps", 1e-5))
        w, b = op.arg(1, "weight", None), op.arg(2, "bias", None)
    vectors = [None if v is None else op.as_tensor(v, op.raw(k, name)) for v, k, name in
               ((w, 2 if op.name == "group_norm" else 1, "weight"),
                (b, 3 if op.name == "group_norm" else 2, "bias"))]
    return group_norm(op.h, x, groups, eps, *vectors)


# -- picking -----------------------------------------------------------------------------


@converter("argmax", "argmin")
def convert_argmax(op: Op) -> Value:
    """The first maximum (argmin: of ``-x``, or ``~x`` for integers) along ``dim``, as
    int64; no ``dim`` reads the flattened tensor."""
    x = op.tensor(0)
    dim, keep = op.arg(1, "dim", None), bool(op.arg(2, "keepdim", False))
    if dim is None:
        if keep:
            op.fail("argmax over all dims with keepdim=True is not supported")
        x = op.mir("reshape", [x], new_shape=[-1])
        dim = 0
    if op.name == "argmin":
        x = (op.mir("activation", [x], kind="neg") if x.dtype.is_float else
             op.mir("binary", [x, _k(op, -1, x)], kind="xor"))
    index = op.mir("argmax", [x], axis=int(dim) % len(x.shape), keep_dim=keep)
    return op.cast(index, DType.I64)


@converter("topk")
def convert_topk(op: Op) -> list[Value]:
    """``torch.topk``: ``rlx_mir.topk`` (sorted; equal values in index order), indices as
    int64."""
    x = op.tensor(0)
    k = int(op.arg(1, "k"))
    axis = int(op.arg(2, "dim", -1)) % len(x.shape)
    if not op.arg(4, "sorted", True):
        op.fail("topk with sorted=False is not supported (rlx returns them sorted)")
    values, indices = op.h.mir_multi("topk", [x], k=k, axis=axis,
                                     largest=bool(op.arg(3, "largest", True)))
    return [values, op.cast(indices, DType.I64)]


# -- placing -----------------------------------------------------------------------------


def _positions(op: Op, index: HirValue, dim: int) -> HirValue:
    """``[*index.shape, rank]``: each element's own coordinates, ``index`` in place of
    ``dim``'s (torch.scatter's positions)."""
    rank = len(index.shape)
    index = op.cast(index, DType.I64)
    zeros = op.mir("binary", [index, op.h.constant(np.asarray(0, np.int64), DType.I64)],
                   kind="mul")
    coords = []
    for a in range(rank):
        c = index
        if a != dim:
            line = op.mir("iota", [index], axis=a)
            shape = [-1 if k == a else 1 for k in range(rank)]
            c = op.mir("binary", [zeros, op.mir("reshape", [line], new_shape=shape)],
                       kind="add")
        coords.append(op.mir("reshape", [c], new_shape=[*[-2 - k for k in range(rank)], 1]))
    return op.mir("concat", coords, axis=rank) if rank > 1 else coords[0]


@converter("scatter", "scatter_add", "scatter_reduce")
def convert_scatter(op: Op) -> Value:
    """``out[..., index[i, j], ...] = src[i, j]`` along ``dim`` (``scatter_add``: added;
    ``scatter_reduce``: sum / prod / amax / amin with ``include_self``); a scalar ``src``
    is broadcast to the index's shape."""
    x = op.tensor(0)
    dim = int(op.arg(1, "dim")) % len(x.shape)
    index = op.tensor(2, "index")
    src = op.arg(3, "src", None)
    if not isinstance(src, HirValue):
        value = op.arg(3, "value", src)
        if not isinstance(value, bool | int | float):
            op.fail(f"scatter source {value!r}: expected a tensor or a number")
        zeros = op.mir("binary", [op.cast(index, x.dtype), _k(op, 0, x)], kind="mul")
        src = op.mir("binary", [zeros, _k(op, value, x)], kind="add")
    reduction = {"scatter": "none", "scatter_add": "add"}.get(op.name)
    if reduction is None:
        kinds = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
        chosen = op.arg(4, "reduce")
        if chosen not in kinds or not op.arg(5, "include_self", True):
            op.fail(f"scatter_reduce with reduce={chosen!r}, include_self="
                    f"{op.arg(5, 'include_self', True)}: rlx takes sum / prod / amax / amin "
                    "including self")
        reduction = kinds[chosen]
    elif op.raw(4, "reduce", None) is not None:
        op.fail("scatter with reduce= is not supported (use scatter_reduce)")
    return op.mir("scatter", [x, _positions(op, index, dim), op.cast(src, x.dtype)],
                  reduction=reduction)


@converter("index_put")
def convert_index_put(op: Op) -> Value:
    """``x[i0, i1, ...] = values`` for index tensors on the leading dims (a ``None`` for a
    dim taken whole is supported in front of one index, ``x[:, pos] = v``; ``accumulate``
    adds)."""
    x = op.tensor(0)
    indices = op.arg(1, "indices")
    values = op.cast(op.tensor(2, "values"), x.dtype)
    reduction = "add" if op.arg(3, "accumulate", False) else "none"
    lead = 0
    while lead < len(indices) and indices[lead] is None:
        lead += 1
    picks = indices[lead:]
    if not picks or any(not isinstance(p, HirValue) for p in picks) or any(
            len(p.shape) != 1 for p in picks) or lead > 1:
        op.fail("index_put with other than 1-D index tensors (after at most one leading ':') "
                "is not supported")
    if lead == 1:  # x[:, idx] = v: move the indexed dim first
        perm = [1, 0, *range(2, len(x.shape))]
        y = _index_put_leading(op, op.mir("transpose", [x], perm=perm), picks,
                                      op.mir("transpose", [values], perm=perm)
                                      if len(values.shape) == len(x.shape) else values,
                                      reduction)
        return op.mir("transpose", [y], perm=perm)
    return _index_put_leading(op, x, picks, values, reduction)


def _index_put_leading(op: Op, x: HirValue, picks: list[HirValue], values: HirValue,
                              reduction: str) -> HirValue:
    """``x[p0, p1, ...] = values``: positions ``[N, len(picks)]``, updates ``[N,
    *x.shape[len(picks):]]`` (values broadcast to it)."""
    cols = [op.mir("reshape", [op.cast(p, DType.I64)], new_shape=[-2, 1]) for p in picks]
    positions = op.mir("concat", cols, axis=1) if len(cols) > 1 else cols[0]
    rest = [d if d is not None else -1 for d in x.shape[len(picks):]]
    if len(values.shape) != 1 + len(rest) or values.shape[0] != positions.shape[0]:
        n = positions.shape[0] if positions.shape[0] is not None else -1
        if n == -1 and -1 in rest:
            op.fail("index_put with values to broadcast over two dynamic sizes")
        values = op.mir("expand", [values], target_shape=[n, *rest])
    return op.mir("scatter", [x, positions, values], reduction=reduction)


TORCH_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@converter("pad", "constant_pad_nd")
def convert_pad(op: Op) -> Value:
    """``F.pad``: pairs from the last dim backwards; constant (negative widths crop), or
    reflect / replicate / circular through :func:`rlx.importers.padding.pad_index`."""
    x = op.tensor(0)
    rank = len(x.shape)
    pads = [int(p) for p in op.arg(1, "pad")]
    mode = op.arg(2, "mode", "constant") if op.name == "pad" else "constant"
    value = op.arg(3 if op.name == "pad" else 2, "value", None) or 0.0
    if len(pads) % 2 or len(pads) > 2 * rank:
        op.fail(f"pad {pads}: expected pairs for at most {rank} dims")
    low, high = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        low[rank - 1 - i], high[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    if mode == "constant":
        if any(p < 0 for p in low + high):
            op.fail("negative constant pads (crops) are not supported")
        return op.mir("pad", [x], low=low, high=high, value=float(value))
    if mode not in TORCH_PAD_MODES or any(p < 0 for p in low + high):
        op.fail(f"pad mode {mode!r} with widths {pads}: expected constant, reflect, "
                "replicate or circular with widths >= 0")
    y, dims = x, op.dims(x)
    for axis in range(rank):
        if low[axis] or high[axis]:
            index = pad_index(op.h, op.sizes, dims[axis], low[axis], high[axis],
                              TORCH_PAD_MODES[mode], op.fail)
            dims[axis] = dims[axis] + low[axis] + high[axis]
            y = op.importer.known(op.mir("gather", [y, index], axis=axis), dims)
    return y


@converter("pixel_shuffle")
def convert_pixel_shuffle(op: Op) -> Value:
    """``[N, C r^2, H, W]`` to ``[N, C, H r, W r]`` (ONNX's DepthToSpace CRD); ``N``, ``H`` and
    ``W`` may be dynamic: the merged sizes ``H r`` and ``W r`` are made one reshape each (a
    reshape infers one size besides the dims it copies)."""
    x = op.tensor(0)
    r = int(op.arg(1, "upscale_factor"))
    if len(x.shape) != 4 or x.shape[1] is None or x.shape[1] % (r * r):
        op.fail(f"input {x.type}: expected [N, C r^2, H, W] with a static C")
    n, c, h, w = op.dims(x)
    c = int(c) // (r * r)
    t = op.mir("reshape", [x], new_shape=[_copy(x, 0), c, r, r, _copy(x, 2), _copy(x, 3)])
    t = op.mir("transpose", [t], perm=[0, 1, 4, 2, 5, 3])            # [N, C, H, r, W, r]
    t = op.mir("reshape", [t], new_shape=[_copy(t, 0), c, -1, _copy(t, 4), r])
    y = op.mir("reshape", [t], new_shape=[_copy(t, 0), c, _copy(t, 2), -1])
    return op.importer.known(y, [n, c, h * r, w * r])


@converter("pixel_unshuffle")
def convert_pixel_unshuffle(op: Op) -> Value:
    """``[N, C, H, W]`` to ``[N, C r^2, H / r, W / r]`` (ONNX's SpaceToDepth in CRD order):
    ``H`` and ``W`` split one reshape each, each inferring ``H / r`` (``rlx_mir.reshape``
    checks at run time that ``r`` divides a dynamic ``H``: an error naming the op, else)."""
    x = op.tensor(0)
    r = int(op.arg(1, "downscale_factor"))
    if len(x.shape) != 4 or x.shape[1] is None:
        op.fail(f"input {x.type}: expected [N, C, H, W] with a static C")
    n, c, h, w = op.dims(x)
    c = int(c)
    t = op.mir("reshape", [x], new_shape=[_copy(x, 0), c, -1, r, _copy(x, 3)])
    t = op.mir("reshape", [t], new_shape=[_copy(t, 0), c, _copy(t, 2), r, -1, r])
    t = op.mir("transpose", [t], perm=[0, 1, 3, 5, 2, 4])            # [N, C, r, r, H/r, W/r]
    y = op.mir("reshape", [t], new_shape=[_copy(t, 0), c * r * r, _copy(t, 4), _copy(t, 5)])
    return op.importer.known(y, [n, c * r * r, h // r, w // r])


def _copy(x: HirValue, k: int) -> int:
    """``new_shape``'s entry for dim ``k`` of ``x``: its size if static, else a copy."""
    size = x.shape[k]
    return int(size) if size is not None else -2 - k
