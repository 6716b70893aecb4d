"""numpy reference of every rlx op, written from the spec (``rlx-spec.md``), in float64.

This is the numerics oracle of the tests: it shares no code with the lowering. Functions
are named after the ops and take the operands positionally and the attributes by keyword.
"""

from __future__ import annotations

import math

import numpy as np

F = np.float64
MASKED = -1e9


def _f(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[F])(x)


ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_approx": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                      * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "neg": np.negative, "abs": np.abs, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "atan": np.arctan, "round": np.round, "erf": _erf,
    "softplus": lambda x: np.logaddexp(0.0, x),
    "floor": np.floor, "ceil": np.ceil, "asin": np.arcsin, "acos": np.arccos,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh,
}


def activation(x: np.ndarray, *, kind: str) -> np.ndarray:
    return ACTIVATIONS[kind](_f(x))


def _act(y: np.ndarray, name: str) -> np.ndarray:
    return y if name == "none" else ACTIVATIONS[name](y)


# -- linear family ---------------------------------------------------------------------


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
           activation: str = "none", **_: object) -> np.ndarray:
    y = _f(x) @ _f(w)
    if b is not None:
        y = y + _f(b)
    return _act(y, activation)


def shared_linear_pair(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> tuple[np.ndarray, ...]:
    return _f(x) @ _f(w1), _f(x) @ _f(w2)


def swiglu(x: np.ndarray, up: np.ndarray, gate: np.ndarray, down: np.ndarray) -> np.ndarray:
    """``(silu(x @ gate) * (x @ up)) @ down`` (spec 2.5: silu on the gate only)."""
    x = _f(x)
    g = x @ _f(gate)
    return (g / (1.0 + np.exp(-g)) * (x @ _f(up))) @ _f(down)


# -- norms -----------------------------------------------------------------------------


def rms_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float,
             **_: object) -> np.ndarray:
    """``x / sqrt(mean(x²) + eps) * gamma + beta`` over the last axis (spec 2.7)."""
    x = _f(x)
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * inv * _f(gamma) + _f(beta)


def residual_rms_norm(x: np.ndarray, r: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *,
                      eps: float) -> np.ndarray:
    return rms_norm(_f(x) + _f(r), gamma, beta, eps=eps)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float,
               **_: object) -> np.ndarray:
    x = _f(x)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _f(gamma) + _f(beta)


# -- attention -------------------------------------------------------------------------


def _to_bhsd(x: np.ndarray, heads: int, head_dim: int, layout: str) -> np.ndarray:
    if layout == "packed2":
        x = x[None]
    if layout in ("packed", "packed2"):
        b, s, _ = x.shape
        return x.reshape(b, s, heads, head_dim).transpose(0, 2, 1, 3)
    if layout == "bshd":
        return x.transpose(0, 2, 1, 3)
    return x


def _from_bhsd(o: np.ndarray, layout: str) -> np.ndarray:
    if layout == "bhsd":
        return o
    o = o.transpose(0, 2, 1, 3)
    if layout == "bshd":
        return o
    b, s, h, d = o.shape
    o = o.reshape(b, s, h * d)
    return o[0] if layout == "packed2" else o


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
              num_heads: int, head_dim: int, mask_kind: str = "none", window: int = 0,
              score_scale: float | None = None, attn_logit_softcap: float | None = None
              ) -> np.ndarray:
    """Spec 2.8: per head, ``softmax(q kᵀ / sqrt(hd))`` with the mask kind, times v.

    K/V may have fewer heads (GQA): query head h uses KV head ``h // (H / Hkv)``; queries
    are the last S of the S_k positions for causal / sliding masks, the last S of the
    ``mask[b]`` filled keys for causal_lengths; masked scores are -1e9 (custom masks
    replace, bias masks add)."""
    q, k, v = _f(q), _f(k), _f(v)
    if q.ndim == 4:
        layout = "bhsd" if q.shape[1] == num_heads else "bshd"
        kv_heads = k.shape[1] if layout == "bhsd" else k.shape[2]
    else:
        layout = "packed" if q.ndim == 3 else "packed2"
        kv_heads = k.shape[-1] // head_dim
    qh = _to_bhsd(q, num_heads, head_dim, layout)
    kh = _to_bhsd(k, kv_heads, head_dim, layout)
    vh = _to_bhsd(v, kv_heads, head_dim, layout)
    group = num_heads // kv_heads
    kh = np.repeat(kh, group, axis=1)
    vh = np.repeat(vh, group, axis=1)
    scale = 1.0 / math.sqrt(head_dim) if score_scale is None else score_scale
    scores = np.einsum("bhid,bhjd->bhij", qh, kh) * scale
    if attn_logit_softcap is not None:
        scores = attn_logit_softcap * np.tanh(scores / attn_logit_softcap)
    s, sk = scores.shape[-2:]
    i = np.arange(s)[:, None] + (sk - s)
    j = np.arange(sk)[None, :]
    if mask_kind == "causal":
        scores = np.where(j <= i, scores, MASKED)
    elif mask_kind == "sliding_window":
        keep = (j <= i) & (j >= np.maximum(i - window, 0))
        scores = np.where(keep, scores, MASKED)
    elif mask_kind == "custom":
        m = np.asarray(mask)
        keep = m.astype(bool) if m.dtype == np.bool_ else _f(m) >= 0.5
        if layout == "packed2":
            keep = keep.reshape(1, -1)
        scores = np.where(keep[:, None, None, :], scores, MASKED)
    elif mask_kind == "bias":
        scores = scores + _f(mask)
    elif mask_kind == "causal_lengths":
        # row b's queries are the last S of its n_b filled keys: query i at n_b - S + i
        pos = np.asarray(mask, np.int64).reshape(-1)[:, None, None, None] - s + np.arange(s)[
            None, None, :, None]
        scores = np.where(j[None, None] <= pos, scores, MASKED)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return _from_bhsd(np.einsum("bhij,bhjd->bhid", p, vh), layout)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, *, head_dim: int, n_rot: int,
         style: str = "neox", rope_style: str | None = None) -> np.ndarray:
    """Spec 2.9: rotate pairs of the first n_rot lanes of each head; row t = position t."""
    style = rope_style or style
    x = _f(x)
    shape = x.shape
    if x.ndim == 2:
        x = x[None]
    if x.ndim == 3:
        x = x.reshape(x.shape[0], x.shape[1], -1, head_dim)
    s = x.shape[1]
    r = n_rot // 2
    c = _f(cos)[:s, :r][None, :, None, :]
    sn = _f(sin)[:s, :r][None, :, None, :]
    y = x.copy()
    if style == "neox":
        a, b = x[..., :r], x[..., r:2 * r]
        y[..., :r] = a * c - b * sn
        y[..., r:2 * r] = b * c + a * sn
    else:
        a, b = x[..., 0:2 * r:2], x[..., 1:2 * r:2]
        y[..., 0:2 * r:2] = a * c - b * sn
        y[..., 1:2 * r:2] = b * c + a * sn
    return y.reshape(shape)


def llama_decoder_block(x: np.ndarray, ln1_g: np.ndarray, ln1_b: np.ndarray, q_w: np.ndarray,
                        k_w: np.ndarray, v_w: np.ndarray, o_w: np.ndarray, ln2_g: np.ndarray,
                        ln2_b: np.ndarray, gate_w: np.ndarray, up_w: np.ndarray,
                        down_w: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                        mask: np.ndarray | None = None, *, num_heads: int, head_dim: int,
                        num_kv_heads: int, eps: float, mask_kind: str = "causal",
                        rope_style: str = "neox", window: int = 0) -> np.ndarray:
    """Spec 2.15."""
    del num_kv_heads
    x = _f(x)
    n1 = rms_norm(x, ln1_g, ln1_b, eps=eps)
    q = rope(n1 @ _f(q_w), cos, sin, head_dim=head_dim, n_rot=head_dim, style=rope_style)
    k = rope(n1 @ _f(k_w), cos, sin, head_dim=head_dim, n_rot=head_dim, style=rope_style)
    v = n1 @ _f(v_w)
    a = attention(q, k, v, mask, num_heads=num_heads, head_dim=head_dim, mask_kind=mask_kind,
                  window=window)
    h1 = x + a @ _f(o_w)
    return h1 + swiglu(rms_norm(h1, ln2_g, ln2_b, eps=eps), up_w, gate_w, down_w)


# -- MIR primitives --------------------------------------------------------------------

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum, "pow": np.power, "rem": np.fmod}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def _unsigned(x: np.ndarray) -> np.ndarray:
    """The bits of a signed integer array read as unsigned (numpy's own unsigned type)."""
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "i" else x


def _shift(a: np.ndarray, b: np.ndarray, kind: str) -> np.ndarray:
    """Shifts from the spec: a count outside ``[0, bits)`` shifts every bit out (computed
    in Python's unbounded integers, then wrapped back to the type)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = a.dtype.itemsize * 8
    counts = _unsigned(b).astype(object)
    ua = _unsigned(a).astype(object)
    out = np.empty(a.shape, dtype=object)
    for i in np.ndindex(a.shape):
        n, x = int(counts[i]), int(ua[i])
        if kind == "shl":
            out[i] = (x << n) % (1 << bits) if n < bits else 0
        elif kind == "ushr":
            out[i] = x >> n if n < bits else 0
        else:  # arithmetic: the signed value
            out[i] = (int(a[i]) >> min(n, bits - 1)) % (1 << bits)
    return out.astype(f"u{a.dtype.itemsize}").view(a.dtype)


def binary(a: np.ndarray, b: np.ndarray, *, kind: str) -> np.ndarray:
    if kind in ("shl", "shr", "ushr"):
        return _shift(a, b, kind)
    if kind in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind](a, b)
    if kind in ("udiv", "urem", "umax", "umin"):  # on the bits read as unsigned
        signed = np.asarray(a).dtype
        ua, ub = _unsigned(a), _unsigned(b)
        if kind in ("udiv", "urem"):
            ub = np.where(ub == 0, 1, ub).astype(ub.dtype)  # a divisor of 0 reads as 1
        fn = {"udiv": np.floor_divide, "urem": np.remainder, "umax": np.maximum,
              "umin": np.minimum}[kind]
        return np.asarray(fn(ua, ub)).astype(ua.dtype).view(signed)
    if np.asarray(a).dtype.kind in "iu" and kind == "rem":  # by 0 or -1: 0, no trap
        b = np.where(np.isin(b, (0, -1)), 1, b).astype(np.asarray(a).dtype)
        return np.fmod(a, b)
    if np.asarray(a).dtype.kind in "iu" and kind == "div":
        return np.trunc(np.asarray(a) / np.asarray(b)).astype(np.asarray(a).dtype)
    if np.asarray(a).dtype.kind in "iub":
        return BINARY[kind](a, b)
    return BINARY[kind](_f(a), _f(b))


def compare(a: np.ndarray, b: np.ndarray, *, kind: str) -> np.ndarray:
    if kind.startswith("u"):
        return COMPARE[kind[1:]](_unsigned(a), _unsigned(b))
    return COMPARE[kind](a, b)


def where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c, a, b)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == np.int32:  # sums wrap in i32 (exact in int64 first, then mod 2^32)
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    return _f(a) @ _f(b)


def fused_matmul_bias_act(x: np.ndarray, w: np.ndarray, b: np.ndarray, *,
                          activation: str) -> np.ndarray:
    return linear(x, w, b, activation=activation)


def fused_swiglu(x: np.ndarray, *, gate_first: bool) -> np.ndarray:
    x = _f(x)
    half = x.shape[-1] // 2
    lo, hi = x[..., :half], x[..., half:]
    up, gate = (hi, lo) if gate_first else (lo, hi)
    return up * gate / (1.0 + np.exp(-gate))


def fused_residual_rms_norm(x: np.ndarray, r: np.ndarray, *rest: np.ndarray, eps: float,
                            has_bias: bool) -> np.ndarray:
    s = _f(x) + _f(r)
    if has_bias:
        s = s + _f(rest[0])
        rest = rest[1:]
    return rms_norm(s, rest[0], rest[1], eps=eps)


def reshape(x: np.ndarray, *, new_shape: tuple[int, ...]) -> np.ndarray:
    """An entry ``-2 - k`` is input dim ``k``; one ``-1`` is inferred."""
    return np.reshape(x, [x.shape[-2 - d] if d <= -2 else d for d in new_shape])


def transpose(x: np.ndarray, *, perm: tuple[int, ...]) -> np.ndarray:
    return np.transpose(x, perm)


def narrow(x: np.ndarray, *, axis: int, start: int, len: int) -> np.ndarray:
    first = start if start >= 0 else np.shape(x)[axis] + start
    return np.take(x, np.arange(first, first + len), axis=axis)


def slice_(x: np.ndarray, *, starts: tuple[int, ...], sizes: tuple[int, ...],
           strides: tuple[int, ...]) -> np.ndarray:
    """Element ``i`` of axis ``k`` is ``x[starts[k] + i * strides[k]]``; size ``-1 - j``
    reads up to ``j`` elements before the end of the axis, every ``strides[k]``-th."""
    x = np.asarray(x)
    index = []
    for start, size, stride, dim in zip(starts, sizes, strides, x.shape, strict=True):
        count = len(range(start, dim - (-1 - size), stride)) if size < 0 else size
        index.append(start + np.arange(count) * stride)
    return x[np.ix_(*index)] if index else x


def pad(x: np.ndarray, *, low: tuple[int, ...], high: tuple[int, ...], value: float
        ) -> np.ndarray:
    x = np.asarray(x)
    fill = value if x.dtype.kind == "f" else int(value)
    return np.pad(x, list(zip(low, high, strict=True)), constant_values=fill)


def concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def expand(x: np.ndarray, *, target_shape: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    off = len(target_shape) - x.ndim
    shape = [x.shape[i - off] if t == -1 else t for i, t in enumerate(target_shape)]
    return np.broadcast_to(x, shape)


def dim(x: np.ndarray, *, axis: int) -> np.ndarray:
    return np.asarray(np.shape(x)[axis], dtype=np.int64)


def iota(x: np.ndarray, *, axis: int) -> np.ndarray:
    return np.arange(np.shape(x)[axis], dtype=np.int64)


def gather(table: np.ndarray, idx: np.ndarray, *, axis: int = 0, batch_dims: int = 0
           ) -> np.ndarray:
    table = np.asarray(table)
    axis %= table.ndim
    i = np.trunc(np.asarray(idx)).astype(np.int64) if np.asarray(idx).dtype.kind == "f" \
        else np.asarray(idx).astype(np.int64)
    i = np.clip(i, 0, table.shape[axis] - 1)
    if batch_dims == 0:
        return np.take(table, i, axis=axis)
    out = [gather(table[b], i[b], axis=axis - 1, batch_dims=batch_dims - 1)
           for b in range(table.shape[0])]
    return np.stack(out)


def write_rows(cache: np.ndarray, new: np.ndarray, slot: np.ndarray, pos: np.ndarray
               ) -> np.ndarray:
    """``cache[slot[n], pos[n] + t] = new[n, t]`` for each write in order, the slot and
    each row clamped into the cache (the op's definition, see the schema)."""
    out = np.array(cache, copy=True)
    b, c = out.shape[:2]
    for n in range(new.shape[0]):
        s = min(max(int(slot[n]), 0), b - 1)
        for t in range(new.shape[1]):
            out[s, min(max(int(pos[n]) + t, 0), c - 1)] = new[n, t]
    return out


SCATTER_COMBINE = {"add": np.add, "mul": np.multiply, "max": np.maximum,
                   "min": np.minimum}


def scatter(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
            reduction: str = "none") -> np.ndarray:
    """ScatterND from the spec, in order: each coordinate wrapped once if negative, then
    clamped into its dim; ``none`` replaces, the others combine."""
    out = np.array(data, copy=True)
    k = indices.shape[-1]
    positions = np.asarray(indices, np.int64).reshape(-1, k)
    slices = np.asarray(updates).reshape(positions.shape[0], *out.shape[k:])
    for n in range(positions.shape[0]):
        where = []
        for axis in range(k):
            i, dim = int(positions[n, axis]), out.shape[axis]
            i = i + dim if i < 0 else i
            where.append(min(max(i, 0), dim - 1))
        at = tuple(where)
        if reduction == "none":
            out[at] = slices[n]
        else:
            out[at] = SCATTER_COMBINE[reduction](out[at], slices[n])
    return out


REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def reduce(x: np.ndarray, *, kind: str, axes: tuple[int, ...], keep_dim: bool) -> np.ndarray:
    xa = np.asarray(x)
    data = _f(xa) if xa.dtype.kind == "f" else xa
    return REDUCE[kind](data, axis=tuple(axes), keepdims=keep_dim)


def topk(x: np.ndarray, *, k: int, axis: int, largest: bool) -> tuple[np.ndarray, ...]:
    """The first ``k`` of a stable sort along ``axis`` (ties keep their index order; NaN
    above every number, ``-0`` equal to ``0``): descending for ``largest``, else
    ascending."""
    xa = np.asarray(x)
    wide = xa.astype(np.float64) if xa.dtype.kind == "f" else xa.astype(np.int64)
    moved = np.moveaxis(wide, axis, -1)
    if not largest:
        order = np.argsort(moved, axis=-1, kind="stable")  # NaN sorts last
    elif moved.dtype.kind == "f":
        nan = np.isnan(moved)
        flat = moved.reshape(-1, moved.shape[-1])
        rows = [np.lexsort((-np.where(n, 0.0, r), ~n)) for r, n in
                zip(flat, nan.reshape(flat.shape), strict=True)]  # NaN first, then down
        order = np.asarray(rows, np.int64).reshape(moved.shape)
    else:
        order = np.argsort(~moved, axis=-1, kind="stable")
    index = np.moveaxis(order[..., :k], -1, axis)
    return np.take_along_axis(xa, index, axis=axis), index.astype(np.int32)


def argmax(x: np.ndarray, *, axis: int, keep_dim: bool) -> np.ndarray:
    """numpy's argmax: the first index of the maximum, a NaN counting as the maximum."""
    return np.argmax(np.asarray(x), axis=axis, keepdims=keep_dim).astype(np.int32)


def softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    x = _f(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def cumsum(x: np.ndarray, *, axis: int, exclusive: bool) -> np.ndarray:
    x = np.asarray(x)
    data = _f(x) if x.dtype.kind == "f" else x
    c = np.cumsum(data, axis=axis)
    return c - data if exclusive else c


def _to_e8m0(x: np.ndarray, rounding: str) -> np.ndarray:
    """The power of two 2^(e - 127) for each |x| (spec of ``cast`` to f8E8M0FNU): by value,
    with frexp: |x| = m 2^k, 0.5 <= m < 1, so 2^(k-1) <= |x| < 2^k."""
    import ml_dtypes

    a = np.abs(np.asarray(x, np.float64))
    m, k = np.frexp(a)
    e = (k - 1 + 127).astype(np.int64)  # the power at or below |x|
    fraction = m > 0.5  # |x| is not that power itself
    if rounding == "up":
        e = e + fraction
    elif rounding == "nearest":
        e = e + (m >= 0.75)  # the fraction's top bit: half rounds up
    # below f32's normals (its exponent field 0) the rule reads the fraction's bits: up
    # from any nonzero value, nearest from above 2^-127 (the top bit and another)
    tiny = a < 2.0 ** -126
    low = {"up": a > 0, "down": np.zeros_like(tiny), "nearest": a > 2.0 ** -127}[rounding]
    e = np.where(tiny, low.astype(np.int64), e)
    e = np.minimum(e, 254)
    e = np.where(np.isfinite(a), e, 255)
    return e.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def cast(x: np.ndarray, *, to: str, unsigned: str | None = None, round: str | None = None
         ) -> np.ndarray:
    from rlx.ir.types import DType

    dtype = DType.parse(to)
    x = np.asarray(x)
    if dtype == DType.F8E8M0FNU:
        return _to_e8m0(x.astype(np.float32), round or "up")
    if unsigned in ("source", "both"):
        x = _unsigned(x)
    want = dtype.numpy
    if unsigned in ("result", "both"):
        want = np.dtype(f"u{want.itemsize}")
    if dtype.is_int and x.dtype.kind == "f":
        out = np.trunc(x).astype(want)
    else:
        out = x.astype(want)
    return out.view(dtype.numpy) if out.dtype != dtype.numpy and dtype.is_int else out


def conv(x: np.ndarray, w: np.ndarray, *, kernel_size: tuple[int, int],
         stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
         groups: int) -> np.ndarray:
    """NCHW grouped cross-correlation, symmetric zero padding (i32: exact in int64, then
    wrapped to i32)."""
    if np.asarray(x).dtype == np.int32:
        wide = conv(np.asarray(x).astype(np.float64), np.asarray(w).astype(np.float64),
                    kernel_size=kernel_size, stride=stride, padding=padding,
                    dilation=dilation, groups=groups)
        return np.rint(wide).astype(np.int64).astype(np.int32)  # exact below 2^53
    x, w = _f(x), _f(w)
    n, _, hh, ww = x.shape
    cout, cg, kh, kw = w.shape
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    (sh, sw), (dh, dw) = stride, dilation
    oh = (hh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (ww + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = cout // groups
    out = np.zeros((n, cout, oh, ow))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for u in range(kh):
            for v in range(kw):
                patch = xs[:, :, u * dh: u * dh + sh * (oh - 1) + 1: sh,
                           v * dw: v * dw + sw * (ow - 1) + 1: sw]
                wk = w[g * og:(g + 1) * og, :, u, v]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wk)
    return out


def pool(x: np.ndarray, *, kind: str, kernel_size: tuple[int, ...], stride: tuple[int, ...],
         dilation: tuple[int, ...], padding: tuple[int, ...], ceil_mode: bool,
         count_include_pad: bool) -> np.ndarray:
    """Max / average pooling over the trailing spatial dims (ONNX MaxPool / AveragePool):
    window position ``o*s + u*d - begin`` along each axis; padding never wins a max; the
    average divides by the taps inside the input (or inside the padded input)."""
    xa = np.asarray(x)
    if kind == "umax":
        signed = xa.dtype
        return pool(_unsigned(xa), kind="max", kernel_size=kernel_size, stride=stride,
                    dilation=dilation, padding=padding, ceil_mode=ceil_mode,
                    count_include_pad=count_include_pad).view(signed)
    data = _f(xa) if kind == "avg" else xa
    n = len(kernel_size)
    sizes = xa.shape[2:]
    outs = []
    for i in range(n):
        begin, end = padding[i], padding[n + i]
        span = sizes[i] + begin + end - (kernel_size[i] - 1) * dilation[i] - 1
        if ceil_mode:
            o = -(-span // stride[i]) + 1
            o -= 1 if (o - 1) * stride[i] >= sizes[i] + begin else 0
        else:
            o = span // stride[i] + 1
        outs.append(o)
    out = np.zeros((*xa.shape[:2], *outs), dtype=F if kind == "avg" else xa.dtype)
    for pos in np.ndindex(*outs):
        taps = [pos[i] * stride[i] - padding[i] + np.arange(kernel_size[i]) * dilation[i]
                for i in range(n)]
        inside = [t[(t >= 0) & (t < sizes[i])] for i, t in enumerate(taps)]
        window = data[(slice(None), slice(None), *np.ix_(*inside))]
        if kind == "max":
            out[(slice(None), slice(None), *pos)] = window.max(axis=tuple(range(2, 2 + n)))
            continue
        if count_include_pad:
            lo = [-padding[i] for i in range(n)]
            hi = [sizes[i] + padding[n + i] for i in range(n)]
            count = math.prod(int(((t >= lo[i]) & (t < hi[i])).sum())
                              for i, t in enumerate(taps))
        else:
            count = math.prod(len(t) for t in inside)
        out[(slice(None), slice(None), *pos)] = window.sum(axis=tuple(range(2, 2 + n))) / count
    return out


def depthwise_conv1d_causal(x: np.ndarray, w: np.ndarray, pad: np.ndarray, *,
                            kernel_size: int, carry: bool = False
                            ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Spec 2.10: ``y[b, t, c] = Σ_j w[c, 0, 0, j] P[b, t + j, c]``, P = [pad | x]; with
    ``carry`` also ``P``'s last ``kernel_size - 1`` frames."""
    p = np.concatenate([_f(pad), _f(x)], axis=1)
    s = x.shape[1]
    wk = _f(w)[:, 0, 0, :]
    y = sum(p[:, j:j + s, :] * wk[:, j] for j in range(kernel_size))
    return (y, p[:, p.shape[1] - (kernel_size - 1):]) if carry else y
