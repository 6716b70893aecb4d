"""Random valid HIR modules: printed and parsed back identically, lowered, compiled for
llvm-cpu, run, and matched against the numpy reference.

CI runs the deterministic ``ci`` profile; a campaign: ``RLX_FUZZ_PROFILE=long .venv/bin/python
-m pytest -q tests/fuzz`` (see docs/reliability.md). Failures found are kept below as
regression cases (``@example``).
"""

from __future__ import annotations

from hypothesis import given, settings
from strategies import Program, concrete_inputs, examples, programs
from tests.numerics.harness import make_params

import rlx
from rlx import reference
from rlx.reference.tolerance import assert_close


@settings(max_examples=examples(40))
@given(programs(max_steps=6))
def test_print_parse_lower(p: Program) -> None:
    text = str(p.h)
    again = rlx.HirModule.parse(text, "fuzz.hir")
    assert str(again) == text
    rlx.compile(again, emit="linalg")


@settings(max_examples=examples(8))
@given(programs(max_steps=4))
def test_compiled_matches_reference(p: Program) -> None:
    import numpy as np

    inputs = concrete_inputs(p, seed=len(p.h))
    params = make_params(p.h, np.random.default_rng(1))
    got = rlx.runtime.load(rlx.compile(p.h), params=params).main(**inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    want = reference.evaluate(p.h, inputs, params)
    for i, (g, w, out) in enumerate(zip(got, want, p.h.outputs, strict=True)):
        assert_close(g, w, out.dtype, f"output #{i}\n{p.h}")
