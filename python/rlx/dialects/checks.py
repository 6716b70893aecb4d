"""Shape rules shared by HIR blocks and the MIR ops they lower to.

Each helper reads operands from a :class:`~rlx.dialects.schema.Check` by name, raises a
:class:`~rlx.ir.diagnostics.VerifyError` on a violation, and returns what the caller needs
to build the result type.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.dialects.enums import BLOCK_FLOAT_TYPES, FLOAT_TYPES
from rlx.dialects.verifier import Check, DimRef, Expected
from rlx.ir.types import Dim, DType, TensorInfo, dims_compatible, merge_dim

NO_F64 = frozenset({"tanh", "sin", "cos", "tan", "atan", "erf", "gelu", "gelu_approx",
                    "asin", "acos"})
"""Activations IREE 3.13 cannot compute in f64 on llvm-cpu: it lowers them to libm calls
its executables do not link (tanh, sin, cos, tan, atan, asin, acos), or has no f64
``math.erf``."""


def activation_dtype(c: Check, x: str, attr: str) -> None:
    """An f64 ``x`` takes no activation of :data:`NO_F64` (one error naming the op and the
    kind, instead of IREE's link failure)."""
    kind = c.attr(attr)
    if c[x].dtype == DType.F64 and kind in NO_F64:
        c.fail(f"attribute '{attr}'", "an activation IREE computes in f64 (not "
               f"{', '.join(sorted(NO_F64))}); cast the input to f32", f"{kind} of f64")


def float_operands(c: Check, *names: str, types: frozenset = FLOAT_TYPES) -> TensorInfo:
    """All ``names`` are float tensors (of ``types``) of one element type; returns the
    first."""
    for n in names:
        c.dtype(n, types)
    c.same_dtype(*names)
    return c[names[0]]


def weight_kn(c: Check, w: str, k: Expected, why_k: str) -> DimRef:
    """``w`` is ``[K, N]`` with K matching ``k``; returns N."""
    c.rank(w, 2)
    c.dim(w, 0, k, why_k)
    return c.ref(w, 1)


def vector(c: Check, name: str, n: Expected, why: str) -> None:
    """``name`` is a rank-1 ``[n]`` tensor."""
    c.rank(name, 1)
    c.dim(name, 0, n, why)


def linear_like(c: Check, x: str, w: str, bias: str | None = None) -> TensorInfo:
    """``x [..., K] @ w [K, N] (+ bias [N])`` -> ``[..., N]``."""
    names = [x, w] + ([bias] if bias else [])
    t = float_operands(c, *names)
    c.min_rank(x, 2)
    n = weight_kn(c, w, c.ref(x, -1), f"the contraction size K = '{x}' dim -1")
    if bias:
        vector(c, bias, n, f"N = '{w}' dim 1")
    return t.with_shape((*t.shape[:-1], n.size))


def norm_params(c: Check, x: str, *params: str) -> TensorInfo:
    """``x [..., D]`` with rank-1 ``[D]`` parameters (gamma, beta)."""
    t = float_operands(c, x, *params)
    c.min_rank(x, 1)
    for p in params:
        vector(c, p, c.ref(x, -1), f"D = '{x}' dim -1")
    return t


def same_shape(c: Check, a: str, b: str) -> None:
    """``b`` has the shape of ``a``."""
    c.shape(b, c.refs(a), f"the shape of '{a}'")


def positive_eps(c: Check) -> None:
    eps = c.attr("eps")
    if not eps > 0:
        c.fail("attribute 'eps'", "a value > 0", repr(eps))


def rope_dims(c: Check, head_dim: int, n_rot: int) -> None:
    """``head_dim`` > 0 and even; ``n_rot`` even, in ``(0, head_dim]``."""
    if head_dim <= 0 or head_dim % 2:
        c.fail("attribute 'head_dim'", "an even value > 0", str(head_dim))
    if n_rot <= 0 or n_rot % 2 or n_rot > head_dim:
        c.fail("attribute 'n_rot'", f"an even value in 1..{head_dim} (head_dim)", str(n_rot))


def rope_tables(c: Check, cos: str, sin: str, seq: DimRef, head_dim: int, dtype_of: str
                ) -> None:
    """cos/sin tables are ``[T, head_dim / 2]`` with ``T >= S`` (row t = position t)."""
    float_operands(c, dtype_of, cos, sin, types=BLOCK_FLOAT_TYPES)
    for name in (cos, sin):
        c.rank(name, 2)
        c.dim(name, 1, head_dim // 2, "head_dim / 2")
        c.at_least(name, 0, seq, "one row per position of the sequence")
    c.shape(sin, c.refs(cos), f"the shape of '{cos}'")


def rope_input(c: Check, x: str, head_dim: int) -> DimRef:
    """``x`` is ``[S, H*hd]``, ``[B, S, H*hd]`` or ``[B, S, H, hd]``; returns S."""
    t = c.rank(x, 2, 3, 4)
    if t.rank == 4:
        c.dim(x, 3, head_dim, "head_dim")
    else:
        last = t.shape[-1]
        if last is None:
            c.fail(f"operand '{x}' dim -1", "a static width (heads * head_dim)", str(t))
        c.multiple(x, t.rank - 1, head_dim, "whole heads of head_dim lanes")
    return c.ref(x, 0 if t.rank == 2 else 1)


@dataclass(frozen=True)
class AttentionLayout:
    """How q/k/v of an attention op are laid out (spec 2.8)."""

    rank: int
    head_major: bool  # rank 4 [B, H, S, D] (else [B, S, H, D] or packed heads)
    batch: Expected
    seq_q: Expected
    seq_k: Expected
    kv_heads: int


def _packed_heads(c: Check, name: str, head_dim: int) -> int | None:
    last = c[name].shape[-1]
    if last is None:
        c.fail(f"operand '{name}' dim -1", "a static size (heads * head_dim)", str(c[name]))
    if last % head_dim:
        c.fail(f"operand '{name}' dim -1", f"a multiple of head_dim = {head_dim}",
               f"{last} ({c[name]})")
    return last // head_dim


def _static_dims(c: Check, axes: tuple[int, ...], what: str) -> None:
    """q, k and v have static sizes on ``axes`` (the lowering splits them into heads)."""
    for name in ("q", "k", "v"):
        for axis in axes:
            if c[name].shape[axis] is None:
                c.fail(f"operand '{name}' dim {axis}", f"a static size ({what})", str(c[name]))


def attention_layout(c: Check, num_heads: int, head_dim: int) -> AttentionLayout:
    """Verify q/k/v and return their layout. K/V may have fewer heads than Q (GQA):
    query head h reads KV head ``h // (num_heads / kv_heads)``."""
    if num_heads <= 0:
        c.fail("attribute 'num_heads'", "a value > 0", str(num_heads))
    if head_dim <= 0:
        c.fail("attribute 'head_dim'", "a value > 0", str(head_dim))
    float_operands(c, "q", "k", "v", types=BLOCK_FLOAT_TYPES)
    q = c.rank("q", 2, 3, 4)
    c.rank("k", q.rank)
    c.rank("v", q.rank)
    if q.rank == 4:
        head_major = q.shape[1] == num_heads
        h_axis, s_axis = (1, 2) if head_major else (2, 1)
        _static_dims(c, (h_axis, 3), "heads and head_dim")
        c.dim("q", h_axis, num_heads, "num_heads")
        c.dim("q", 3, head_dim, "head_dim")
        kv_heads = c["k"].shape[h_axis]
        if kv_heads is None:
            c.fail(f"operand 'k' dim {h_axis}", "a static head count", str(c["k"]))
        for n in ("k", "v"):
            c.dim(n, 0, c.ref("q", 0), "the batch of 'q'")
            c.dim(n, h_axis, kv_heads, "the KV head count of 'k'")
            c.dim(n, 3, head_dim, "head_dim")
    else:
        head_major = False
        _static_dims(c, (q.rank - 1,), "heads * head_dim")
        c.dim("q", -1, num_heads * head_dim, "num_heads * head_dim")
        kv_heads = _packed_heads(c, "k", head_dim) or 0
        c.dim("v", -1, kv_heads * head_dim, "the width of 'k' (kv_heads * head_dim)")
        s_axis = q.rank - 2
        if q.rank == 3:
            for n in ("k", "v"):
                c.dim(n, 0, c.ref("q", 0), "the batch of 'q'")
    c.dim("v", s_axis, c.ref("k", s_axis), "the key length of 'k'")
    batch: Expected = c.ref("q", 0) if q.rank >= 3 else 1
    seq_q, seq_k = c.ref("q", s_axis), c.ref("k", s_axis)
    if kv_heads <= 0 or num_heads % kv_heads:
        c.fail("operand 'k'", f"a KV head count dividing num_heads = {num_heads}",
               f"{kv_heads} heads ({c['k']})")
    return AttentionLayout(q.rank, head_major, batch, seq_q, seq_k, kv_heads)


def attention_mask(c: Check, kind: str, mask: str, layout: AttentionLayout,
                   num_heads: int, like: str = "q") -> None:
    """The mask operand: custom ``[B, S_k]`` (1 = keep), bias ``[B, H, S, S_k]`` (added),
    causal_lengths ``[B]`` integer (keys filled in each row)."""
    if kind == "sliding_window" and c.attr("window") < 0:
        c.fail("attribute 'window'", "a value >= 0", str(c.attr("window")))
    if not c.has(mask):
        return
    t = c[mask]
    if kind == "custom":
        c.expect(t.dtype.is_float or t.dtype.bits == 1, f"operand '{mask}'",
                 "a float (1.0 = keep) or i1 (true = keep) tensor", str(t))
        c.shape(mask, (layout.batch, layout.seq_k), "[B, S_k]: one keep flag per key")
    elif kind == "causal_lengths":
        c.expect(t.dtype.is_int and t.dtype.bits in (32, 64), f"operand '{mask}'",
                 "an i32 or i64 tensor (the keys filled in each row)", str(t))
        c.shape(mask, (layout.batch,), "[B]: the keys filled in each row")
    else:
        float_operands(c, like, mask)
        c.shape(mask, (layout.batch, num_heads, layout.seq_q, layout.seq_k),
                "[B, num_heads, S, S_k]: an additive bias per score")


def broadcast(c: Check, names: list[str]) -> tuple[Dim, ...]:
    """Numpy broadcasting of the shapes of ``names``: a static 1 stretches; a dynamic dim
    is never stretched (the lowering indexes it as the result's size), so it must equal the
    other operands' sizes on its axis, at run time if need be."""
    shapes = [c[n].shape for n in names]
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for axis in range(rank):
        dim: Dim = 1
        first: DimRef | None = None
        for n, s in zip(names, shapes, strict=True):
            i = axis - (rank - len(s))
            if i < 0 or s[i] == 1:
                continue
            d = s[i]
            if first is None:
                dim, first = d, c.ref(n, i)
                continue
            if not dims_compatible(dim, d):
                c.fail(f"operand '{n}' dim {i}", f"{dim} or 1 (numpy broadcasting with the "
                       "other operands)", f"{d} ({c[n]})")
            dim = merge_dim(dim, d)
            c.dim(n, i, first, "numpy broadcasting; a dynamic dim is not stretched")
        out.append(dim)
    return tuple(out)


def normalize_axis(c: Check, attr: str, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        c.fail(f"attribute '{attr}'", f"an axis in [{-rank}, {rank})", str(axis))
    return axis % rank


def not_float8(c: Check, name: str) -> None:
    """8-bit floats are storage: cast them to compute (no arithmetic on them)."""
    t = c[name]
    if t.dtype.is_float8:
        c.fail(f"operand '{name}'", "a type ops compute in (8-bit floats are storage: cast "
               "to f16, bf16 or f32 first)", f"{t.dtype} ({t})")
