"""The builder reads like numpy: arithmetic on values, op docs on every builder method,
operands the math does not need left out, and one type per weight name."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import rlx
from rlx.dialects import HIR
from rlx.dialects.builder import HirModule
from rlx.ir.locations import label_of
from rlx.reference import evaluate


def _ops(h: rlx.HirModule) -> list[tuple[str, str | None, str | None]]:
    """(op name, kind attribute, label) of each op that arithmetic built."""
    out = []
    for op in h.ops:
        if op.name in ("rlx_mir.binary", "rlx_mir.activation"):
            kind = str(op.attributes["kind"]).strip('"')
            out.append((op.name, kind, label_of(op.location)))
    return out


def test_operators_build_binary_ops_with_numpy_broadcasting() -> None:
    h = rlx.HirModule("arith")
    x, b = h.input("x", (None, 4)), h.input("b", (4,))
    h.set_outputs([x + b, x - b, x * b, x / b, -x, 2 - x, 1.5 * x, np.ones(4, "f4") / x])
    assert _ops(h) == [
        ("rlx_mir.binary", "add", None), ("rlx_mir.binary", "sub", None),
        ("rlx_mir.binary", "mul", None), ("rlx_mir.binary", "div", None),
        ("rlx_mir.activation", "neg", None), ("rlx_mir.binary", "sub", None),
        ("rlx_mir.binary", "mul", None), ("rlx_mir.binary", "div", None)]
    xs = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    bs = np.array([0.5, -1, 2, 4], np.float32)
    got = evaluate(h, {"x": xs, "b": bs}, {})
    want = [xs + bs, xs - bs, xs * bs, xs / bs, -xs, 2 - xs, 1.5 * xs, 1 / xs]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert [v.shape for v in h.outputs] == [(None, 4)] * 8


def test_operators_take_the_label_of_the_enclosing_named_block() -> None:
    h = rlx.HirModule("res")
    x = h.input("x", (None, 64))
    up, gate = h.param("up", (64, 128)), h.param("gate", (64, 128))
    down = h.param("down", (128, 64))
    y = h.named("ffn", lambda h: x + h.swiglu_ffn(x, up, gate, down) * 0.5)
    z = y - x
    assert [(kind, label) for _, kind, label in _ops(h)] == [
        ("mul", "ffn"), ("add", "ffn"), ("sub", None)]
    assert y.label == "ffn"
    assert z.label is None
    swiglu = next(op for op in h.ops if op.name == "rlx_hir.swiglu")
    assert label_of(swiglu.location) == "swiglu_ffn"  # blocks keep their own label


def test_operators_never_promote_types() -> None:
    h = rlx.HirModule("types")
    x, i = h.input("x", (3,)), h.input("i", (3,), "i32")
    with pytest.raises(rlx.VerifyError, match=r"'rlx_mir.binary': operand 'rhs': expected "
                                              r"element type f32 \(as 'lhs'\), found i32"):
        _ = x + i
    with pytest.raises(rlx.BuildError, match=r"0.5 is not exactly a i32 \(no type "
                                             r"promotion"):
        _ = i * 0.5
    with pytest.raises(rlx.BuildError, match="expected a HirValue, a number or a numeric "
                                             "array, found str"):
        _ = x + "1"
    assert (i + 2).dtype == rlx.DType.I32
    assert (-i).dtype == rlx.DType.I32  # 0 - i for integers (activation neg is float-only)
    other = rlx.HirModule("other").input("y", (3,))
    with pytest.raises(rlx.BuildError, match="belongs to another HirModule"):
        _ = x + other


def test_every_builder_method_carries_its_op_docs() -> None:
    """``help(h.rms_norm)`` shows the method's own words, the op's operands and attributes
    (from the schema) and the op's docstring with its IR example, for every HIR op."""
    covered = set()
    for name, method in inspect.getmembers(HirModule, inspect.isfunction):
        doc = inspect.getdoc(method) or ""
        m = re.search(r"Builds ``rlx_hir\.(\w+)``", doc)
        if m is None:
            continue
        schema = HIR.ops[m.group(1)]
        covered.add(schema.name)
        assert doc.split("\n\n")[0].strip(), f"{name}: no summary of its own"
        assert f"Operands of ``{schema.full_name}``: " in doc, name
        for attr in schema.attrs:
            assert f"Attribute ``{attr.name}``" in doc, (name, attr.name)
        assert inspect.cleandoc(schema.infer.__doc__ or "") in doc, name
        assert "Example::" in doc, name
    assert covered == set(HIR.ops)
    text = inspect.getdoc(rlx.HirModule("m").rms_norm) or ""
    assert "Attribute ``eps`` (float, default 1e-06)" in text
    assert '"rlx_hir.rms_norm"(%x, %g, %b)' in text


WITH_BETA = (
    'module @norm attributes {rlx.fusion_policy = "direct"} {\n'
    '  func.func @main(%arg0: tensor<?x8xf32> {rlx.name = "x"}, %arg1: tensor<?x8xf32> '
    '{rlx.name = "r"}) -> (tensor<?x8xf32>, tensor<?x8xf32>) {\n'
    '    %0 = "rlx_hir.param"() {name = "g"} : () -> tensor<8xf32>\n'
    '    %1 = "rlx_hir.param"() {name = "b"} : () -> tensor<8xf32>\n'
    '    %2 = "rlx_hir.rms_norm"(%arg0, %0, %1) {eps = 9.99999974E-6 : f32} : '
    '(tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc("rms_norm")\n'
    '    %3 = "rlx_hir.residual_rms_norm"(%arg0, %arg1, %0, %1) {eps = 9.99999997E-7 : f32} '
    ': (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32> '
    'loc("residual_rms_norm")\n'
    '    return %2, %3 : tensor<?x8xf32>, tensor<?x8xf32>\n'
    '  }\n'
    '}\n'
)
"""The text an rlx without optional beta printed for this module."""


def test_rms_norm_without_beta() -> None:
    """LLaMA-style norms need no beta: the op gets a splat zero constant; modules that give
    one print as before."""
    h = rlx.HirModule("norm")
    x, g = h.input("x", (None, 8)), h.param("g", (8,))
    r = h.input("r", (None, 8))
    h.set_outputs([h.rms_norm(x, g, eps=1e-5), h.residual_rms_norm(x, r, g, eps=1e-5)])
    text = str(h)
    assert text.count('"rlx_hir.constant"() {value = dense<0.000000e+00> : tensor<8xf32>}') == 2
    xs = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    rs = np.full((2, 8), 0.25, np.float32)
    gs = np.arange(1, 9, dtype=np.float32)
    norm, res = evaluate(h, {"x": xs, "r": rs}, {"g": gs})

    def rms(v: np.ndarray) -> np.ndarray:
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-5) * gs

    np.testing.assert_allclose(norm, rms(xs), rtol=1e-6)
    np.testing.assert_allclose(res, rms(xs + rs), rtol=1e-6)
    given = rlx.HirModule("norm")
    x, g, b = given.input("x", (None, 8)), given.param("g", (8,)), given.param("b", (8,))
    r = given.input("r", (None, 8))
    given.set_outputs([given.rms_norm(x, g, b, 1e-5),
                       given.residual_rms_norm(x, r, g, b, eps=1e-6)])
    assert str(given) == WITH_BETA  # the text an rlx without optional beta printed


def test_one_type_per_weight_name() -> None:
    """The builder refuses a weight name declared again with another type (the same type is
    the same weight, read twice); ``rlx-opt`` refuses it in a .hir, naming both places."""
    h = rlx.HirModule("w")
    h.param("w", (64, 256))
    h.param("w", (64, 256))
    with pytest.raises(rlx.VerifyError, match=re.escape(
            "error: 'rlx_hir.param': weight 'w': expected tensor<64x256xf32> (its type where "
            "it is first declared), found tensor<256x64xf32>")):
        h.param("w", (256, 64))
    decode = h.function("decode")
    with pytest.raises(rlx.VerifyError, match="weight 'w'"):
        decode.param("w", (64, 256), "f16")  # functions share weights: one type


def test_a_weights_lead() -> None:
    """``lead`` (bytes before an i8 weight's data in its parameter entry) is part of the
    weight: declared again with another lead is refused like another type; a lead on a
    non-i8 or rank-0 weight or below 0 is one error naming the attribute; lead 0 is no
    attribute."""
    h = rlx.HirModule("w")
    h.param("q", (4, 34), "i8", lead=32)
    h.param("q", (4, 34), "i8", lead=32)
    with pytest.raises(rlx.VerifyError, match=re.escape(
            "weight 'q': expected lead 32 (its lead where it is first declared), found "
            "lead 0")):
        h.param("q", (4, 34), "i8")
    assert "lead" not in str(h.param("p", (4, 34), "i8", lead=0).op.attributes)
    for shape, dtype, lead, found in (((4, 8), "f32", 32, "tensor<4x8xf32>"),
                                      ((), "i8", 32, "tensor<i8>"),
                                      ((4, 8), "i8", -1, "-1")):
        with pytest.raises(rlx.VerifyError, match=re.escape(
                "attribute 'lead': expected ") + ".*" + re.escape(f"found {found}")):
            h.param(f"bad{lead}{dtype}", shape, dtype, lead=lead)
