"""Hypothesis strategies: random valid HIR modules and random mutations of HIR text.

A module is a random program over ``[B, S, E]`` activations: each step picks a block
(linear, SwiGLU, (residual) RMSNorm, attention with a random mask kind and GQA, RoPE, the
LLaMA block, elementwise / reduction / data-movement MIR ops through the escape hatch) and
applies it to values already built, sometimes under a random label. Shapes, dtypes, dynamic
dims and the fusion policy are drawn too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import rlx
from rlx.dialects.enums import FUSION_POLICIES

settings.register_profile(
    "ci", max_examples=120, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "long", max_examples=int(os.environ.get("RLX_FUZZ_EXAMPLES", "2000")), deadline=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("RLX_FUZZ_PROFILE", "ci"))
LONG = os.environ.get("RLX_FUZZ_PROFILE") == "long"


def examples(ci: int) -> int:
    """``ci`` examples in CI (compiles are slow), the campaign size with the long profile."""
    return settings().max_examples if LONG else ci

SAFE_ACTIVATIONS = ("gelu", "gelu_approx", "silu", "relu", "sigmoid", "tanh", "neg", "abs",
                    "sin", "cos", "atan")
LABELS = ("embed", "layers.0.attn", "layers.1.ffn", "Softmax_7", "MatMul_12", "blk/3:norm")


@dataclass
class Program:
    """A HIR module under construction and what the fuzzer knows about its values."""

    h: rlx.HirModule
    dtype: str
    batch: int | None
    seq: int | None
    width: int
    values: list[rlx.HirValue] = field(default_factory=list)
    n_params: int = 0
    inputs: dict[str, tuple[tuple[int | None, ...], bool]] = field(default_factory=dict)

    def input(self, name: str, shape: tuple[int | None, ...], keep_flags: bool = False
              ) -> rlx.HirValue:
        """A function input (a mask input is made only once per program)."""
        if name in self.inputs:
            return next(v for n, v in zip(self.h.input_names, self.h.inputs, strict=True)
                        if n == name)
        self.inputs[name] = (shape, keep_flags)
        return self.h.input(name, shape, self.dtype)

    def param(self, shape: tuple[int, ...]) -> rlx.HirValue:
        self.n_params += 1
        return self.h.param(f"p{self.n_params}", shape, self.dtype)

    @property
    def act_shape(self) -> tuple[int | None, ...]:
        return (self.batch, self.seq, self.width)


Step = Callable[[st.DataObject, Program], rlx.HirValue]


def _pick(data: st.DataObject, p: Program) -> rlx.HirValue:
    return data.draw(st.sampled_from(p.values), label="operand")


def step_linear(data: st.DataObject, p: Program) -> rlx.HirValue:
    x = _pick(data, p)
    bias = data.draw(st.booleans())
    act = data.draw(st.sampled_from(("none", *SAFE_ACTIVATIONS[:5])))
    w = p.param((p.width, p.width))
    b = p.param((p.width,)) if bias else None
    if data.draw(st.booleans()):
        return p.h.linear(x, w, b, act)
    if b is None:
        b = p.param((p.width,))
    return p.h.linear_fused(x, w, b, act)


def step_swiglu(data: st.DataObject, p: Program) -> rlx.HirValue:
    f = data.draw(st.sampled_from((8, 16, 24)))
    return p.h.swiglu_ffn(_pick(data, p), p.param((p.width, f)), p.param((p.width, f)),
                          p.param((f, p.width)))


def step_norm(data: st.DataObject, p: Program) -> rlx.HirValue:
    g, b = p.param((p.width,)), p.param((p.width,))
    eps = data.draw(st.sampled_from((1e-6, 1e-5, 0.5)))
    if data.draw(st.booleans()):
        return p.h.rms_norm(_pick(data, p), g, b, eps)
    return p.h.residual_rms_norm(_pick(data, p), _pick(data, p), g, b, eps)


def _heads(data: st.DataObject, p: Program) -> tuple[int, int, int]:
    hd = data.draw(st.sampled_from([d for d in (4, 8) if p.width % d == 0]))
    nh = p.width // hd
    nkv = data.draw(st.sampled_from([k for k in range(1, nh + 1) if nh % k == 0]))
    return nh, nkv, hd


def step_attention(data: st.DataObject, p: Program) -> rlx.HirValue:
    nh, nkv, hd = _heads(data, p)
    q = p.h.linear(_pick(data, p), p.param((p.width, nh * hd)))
    k = p.h.linear(_pick(data, p), p.param((p.width, nkv * hd)))
    v = p.h.linear(_pick(data, p), p.param((p.width, nkv * hd)))
    kind = data.draw(st.sampled_from(("none", "causal", "sliding_window", "custom", "bias")))
    mask = None
    if kind == "custom":
        mask = p.input("mask", (p.batch, p.seq), keep_flags=True)
    elif kind == "bias":
        mask = p.input(f"bias{nh}", (p.batch, nh, p.seq, p.seq))
    window = data.draw(st.integers(0, 3)) if kind == "sliding_window" else None
    return p.h.attention(q, k, v, mask, num_heads=nh, head_dim=hd, mask_kind=kind,
                         window=window)


def step_rope(data: st.DataObject, p: Program) -> rlx.HirValue:
    hd = data.draw(st.sampled_from([d for d in (4, 8) if p.width % d == 0]))
    n_rot = data.draw(st.sampled_from(list(range(2, hd + 1, 2))))
    table = (p.seq if p.seq is not None else 16, hd // 2)
    style = data.draw(st.sampled_from(("neox", "gptj")))
    return p.h.rope(_pick(data, p), p.param(table), p.param(table), hd, n_rot, style)


def step_block(data: st.DataObject, p: Program) -> rlx.HirValue:
    nh, nkv, hd = _heads(data, p)
    e, f = p.width, data.draw(st.sampled_from((8, 16)))
    ws = [p.param(s) for s in [(e,), (e,), (e, nh * hd), (e, nkv * hd), (e, nkv * hd),
                               (nh * hd, e), (e,), (e,), (e, f), (e, f), (f, e)]]
    t = (p.seq if p.seq is not None else 16, hd // 2)
    return p.h.llama_decoder_block(_pick(data, p), *ws, p.param(t), p.param(t), num_heads=nh,
                                   head_dim=hd, num_kv_heads=nkv, eps=1e-5,
                                   rope_style=data.draw(st.sampled_from(("neox", "gptj"))))


def step_elementwise(data: st.DataObject, p: Program) -> rlx.HirValue:
    if data.draw(st.booleans()):
        kind = data.draw(st.sampled_from(SAFE_ACTIVATIONS))
        return p.h.mir("activation", [_pick(data, p)], kind=kind)
    kind = data.draw(st.sampled_from(("add", "sub", "mul", "max", "min")))
    rhs = _pick(data, p) if data.draw(st.booleans()) else p.param((p.width,))
    return p.h.mir("binary", [_pick(data, p), rhs], kind=kind)


def step_shape(data: st.DataObject, p: Program) -> rlx.HirValue:
    """A round trip through another layout (the value keeps its [B, S, E] shape)."""
    x = _pick(data, p)
    which = data.draw(st.sampled_from(("transpose", "reshape", "narrow_concat", "softmax",
                                       "reduce")))
    lead = [-1 if d is None else d for d in (p.batch, p.seq)]
    if which == "transpose" or lead.count(-1) > 1:
        t = p.h.mir("transpose", [x], perm=[0, 2, 1])
        return p.h.mir("transpose", [t], perm=[0, 2, 1])
    if which == "reshape":
        r = p.h.mir("reshape", [x], new_shape=[*lead, 2, p.width // 2])
        return p.h.mir("reshape", [r], new_shape=[*lead, p.width])
    if which == "narrow_concat":
        cut = data.draw(st.integers(1, p.width - 1))
        a = p.h.mir("narrow", [x], axis=2, start=0, len=cut)
        b = p.h.mir("narrow", [x], axis=2, start=cut, len=p.width - cut)
        return p.h.mir("concat", [b, a], axis=2)
    if which == "softmax":
        return p.h.mir("softmax", [x], axis=-1)
    kind = data.draw(st.sampled_from(("sum", "mean", "max", "min")))
    r = p.h.mir("reduce", [x], kind=kind, axes=[-1], keep_dim=True)
    return p.h.mir("binary", [x, r], kind="sub")


STEPS: dict[str, Step] = {
    "linear": step_linear, "swiglu": step_swiglu, "norm": step_norm,
    "attention": step_attention, "rope": step_rope, "block": step_block,
    "elementwise": step_elementwise, "shape": step_shape,
}


@st.composite
def programs(draw: st.DrawFn, max_steps: int = 5, min_inputs: int = 1) -> Program:
    dtype = draw(st.sampled_from(("f32", "f32", "f16")))
    batch = draw(st.sampled_from((1, 2, None)))
    seq = draw(st.sampled_from((3, 5, None)))
    width = draw(st.sampled_from((8, 16)))
    policy = draw(st.sampled_from(FUSION_POLICIES))
    p = Program(rlx.HirModule("fuzz", policy), dtype, batch, seq, width)
    n_inputs = draw(st.integers(min_inputs, 2))
    p.values = [p.input(f"x{i}", p.act_shape) for i in range(n_inputs)]
    data = draw(st.data())
    for _ in range(draw(st.integers(1, max_steps))):
        name = draw(st.sampled_from(sorted(STEPS)))
        start = len(p.h)
        value = STEPS[name](data, p)
        if draw(st.booleans()):
            p.h.label_nodes_since(start, draw(st.sampled_from(LABELS)))
        p.values.append(value)
    outputs = [p.values[-1], *draw(st.lists(st.sampled_from(p.values[n_inputs:]),
                                            max_size=2, unique_by=id))]
    p.h.set_outputs(outputs)
    return p


def concrete_inputs(p: Program, seed: int, dyn: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    np_dtype = np.float16 if p.dtype == "f16" else np.float32
    out = {}
    for name, (shape, keep_flags) in p.inputs.items():
        concrete = tuple(dyn if d is None else d for d in shape)
        if keep_flags:
            out[name] = (rng.random(concrete) < 0.7).astype(np_dtype)
        else:
            out[name] = rng.standard_normal(concrete).astype(np_dtype)
    return out


# --------------------------------------------------------------------------------------

GARBAGE = ('"', "(", ")", "{", "}", "<", ">", ":", "%", "@", "x", "?", "loc(", "\x00", "é",
           "-1", "9999999999999999999999", "tensor<", "!", "#", "//", "\n")


@st.composite
def mutations(draw: st.DrawFn, text: str) -> str:
    """One random edit of valid text: truncation, a byte or token replaced or deleted,
    two lines swapped, an attribute value, type or op name changed."""
    if not text:
        return draw(st.sampled_from(GARBAGE))
    kind = draw(st.sampled_from(("truncate", "insert", "delete", "swap_lines", "attr",
                                 "type", "opname", "operands")))
    n = len(text)
    if kind == "truncate":
        return text[:draw(st.integers(0, n - 1))]
    if kind == "insert":
        at = draw(st.integers(0, n))
        return text[:at] + draw(st.sampled_from(GARBAGE)) + text[at:]
    if kind == "delete":
        at = draw(st.integers(0, n - 1))
        return text[:at] + text[at + draw(st.integers(1, 8)):]
    lines = text.splitlines(keepends=True)
    if kind == "swap_lines" and len(lines) > 2:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    replacements = {
        "attr": [("= 1.0", "= -1.0"), ("eps = ", "eps = 0.0 * "), ('"causal"', '"future"'),
                 ("true", "7 : i64"), ("num_heads = ", "num_heads = 3 + "), (" : i64", " : f32"),
                 ('"silu"', '"swish"'), ("axis = ", "axis = 99 + ")],
        "type": [("xf32>", "xf16>"), ("x16x", "x17x"), ("tensor<", "tensor<3x"),
                 ("xf32>", "xi8>"), ("?x", "")],
        "opname": [("rlx_hir.linear", "rlx_hir.lienar"), ("rlx_mir.", "rlx_hir."),
                   ("rlx_hir.", "rlx_mir."), ('"rlx_hir.rms_norm"', '"arith.addf"')],
        "operands": [("(%arg0, %", "(%"), ("%0, %1", "%1, %0"), ("(%arg0", "(%arg0, %arg0")],
    }
    old, new = draw(st.sampled_from(replacements.get(kind, replacements["attr"])))
    if old not in text:
        return text[: n // 2]
    count = text.count(old)
    k = draw(st.integers(0, count - 1))
    at = -1
    for _ in range(k + 1):
        at = text.index(old, at + 1)
    return text[:at] + new + text[at + len(old):]
