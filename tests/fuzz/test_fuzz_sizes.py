"""Mismatched dynamic sizes fed to random modules (the run-time size checks' campaign).

A random module (``strategies.programs``) with dynamic batch and / or sequence dims is
compiled once; then each of several draws gives every input its own concrete sizes, from
agreeing ones to sizes that disagree between inputs (a mask a row short, a sequence longer
than the RoPE table, two activations of different lengths). The oracle is the op schemas
applied at those concrete sizes, op by op through the module (what the verifier would say
had the sizes been static): where it refuses them, the call must be a RunError and return
nothing; where it accepts them, the call must succeed and match the numpy reference.

CI runs the deterministic ``ci`` profile; a campaign: ``RLX_FUZZ_PROFILE=long
.venv/bin/python -m pytest -q tests/fuzz/test_fuzz_sizes.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from strategies import Program, examples, programs
from tests.numerics.harness import make_params

import rlx
from rlx import reference
from rlx.dialects import lookup
from rlx.dialects.schema import decode, validate
from rlx.ir.diagnostics import VerifyError
from rlx.ir.types import TensorInfo
from rlx.reference.tolerance import assert_close

Shapes = dict[str, tuple[int, ...]]


def static_verdict(h: rlx.HirModule, shapes: Shapes) -> VerifyError | None:
    """Run every op's schema on the concrete ``shapes`` of the inputs, in order; the first
    VerifyError, or None when every op accepts them."""
    types: dict[object, TensorInfo] = {}
    for name, value in zip(h.input_names, h.inputs, strict=True):
        types[value.value] = TensorInfo(shapes[name], value.dtype)
    for op in h.ops:
        schema = lookup(op.name)
        assert schema is not None, op.name
        decoded = decode(schema, op, check=False)
        operands = [types[v] for v in op.operands]
        declared = [TensorInfo.from_mlir(r.type) for r in op.results]
        try:
            results = validate(schema, operands, decoded.attrs, declared=declared)
        except VerifyError as e:
            return e
        for r, t in zip(op.results, results, strict=True):
            types[r] = t
    return None


@st.composite
def input_shapes(draw: st.DrawFn, p: Program) -> Shapes:
    """Concrete sizes for every input: the module's static dims as they are, a drawn size
    for each symbolic dim (batch, sequence), and sometimes one input's dim moved off it."""
    size = {"batch": draw(st.integers(1, 3)), "seq": draw(st.integers(1, 20))}
    shapes: Shapes = {}
    for name, (shape, _) in p.inputs.items():
        dims = []
        for axis, d in enumerate(shape):
            if d is not None:
                dims.append(d)
                continue
            symbol = "batch" if axis == 0 else "seq"
            dims.append(size[symbol])
        shapes[name] = tuple(dims)
    dynamic = [(n, a) for n, (s, _) in p.inputs.items() for a, d in enumerate(s) if d is None]
    if dynamic and draw(st.booleans()):
        name, axis = draw(st.sampled_from(dynamic))
        moved = list(shapes[name])
        moved[axis] = draw(st.integers(1, 24).filter(lambda n: n != moved[axis]))
        shapes[name] = tuple(moved)
    return shapes


def _feeds(p: Program, shapes: Shapes, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    np_dtype = np.float16 if p.dtype == "f16" else np.float32
    out = {}
    for name, (_, keep_flags) in p.inputs.items():
        data = rng.random(shapes[name]) < 0.7 if keep_flags else rng.standard_normal(
            shapes[name])
        out[name] = data.astype(np_dtype)
    return out


@settings(max_examples=examples(5))
@given(programs(max_steps=4, min_inputs=2), st.data())
def test_mismatched_dynamic_sizes_fail_or_match(p: Program, data: st.DataObject) -> None:
    assume(any(d is None for shape, _ in p.inputs.values() for d in shape))
    params = make_params(p.h, np.random.default_rng(1))
    prog = rlx.runtime.load(rlx.compile(p.h), params=params)
    for trial in range(4):
        shapes = data.draw(input_shapes(p), label=f"shapes #{trial}")
        feeds = _feeds(p, shapes, trial)
        refused = static_verdict(p.h, shapes)
        event("refused: a RunError" if refused is not None else "accepted: computed")
        if refused is not None:
            got = None
            with pytest.raises(rlx.RunError, match="found another size at run time"):
                got = prog.main(**feeds)
            assert got is None
            continue
        got = prog.main(**feeds)
        got = list(got) if isinstance(got, tuple) else [got]
        want = reference.evaluate(p.h, feeds, params)
        for i, (g, w, out) in enumerate(zip(got, want, p.h.outputs, strict=True)):
            assert_close(g, w, out.dtype, f"output #{i} at {shapes}\n{p.h}")
