"""ONNX's own node tests through the importer, compiled for llvm-cpu (one module holding
every case) and run: one case per op that transformer and CNN inference needs. The whole
suite is ``python tools/onnx_conformance.py`` (docs/onnx-coverage.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import onnx_conformance as conformance
from rlx.importers.onnx_ops import ONNX_DTYPES, RUNTIME_DTYPES

PER_OP = 1
OUT_OF_SCOPE = {"test_maxpool_with_argmax_2d_precomputed_pads",
                "test_maxpool_with_argmax_2d_precomputed_strides"}
"""Cases the importer refuses by design (MaxPool's Indices output); the table
lists them as unsupported, and ``test_unsupported_cases_say_why`` checks the reasons."""


def _runtime_inputs(case: conformance.Case) -> bool:
    bound = conformance.shape_arguments(case.model)
    for inp in case.model.graph.input:
        if inp.name in bound:
            continue
        dtype = ONNX_DTYPES.get(inp.type.tensor_type.elem_type)
        if dtype is None or dtype not in RUNTIME_DTYPES:
            return False
    return True


@pytest.fixture(scope="module")
def cases() -> list[conformance.Case]:
    return conformance.collect(set(conformance.TARGET_OPS))


@pytest.fixture(scope="module")
def results(cases: list[conformance.Case]) -> dict[str, conformance.Result]:
    """The first cases of every op whose inputs rlx can hold, and its first case of
    unsigned integers, of 8-bit floats and of the narrow types (int4 / uint4, E2M1) where it
    has them, all in one compile."""
    chosen: dict[str, list[conformance.Case]] = {}
    seen: set[tuple[str, str]] = set()
    for case in cases:
        if case.expanded or case.name in {*conformance.EXPLAINED, *OUT_OF_SCOPE} or (
                not _runtime_inputs(case)):
            continue
        picked = chosen.setdefault(case.op, [])
        kind = next((k for k in ("_uint", "FLOAT8E", "INT4", "FLOAT4E2M1") if k in case.name),
                    None)
        if len(picked) < PER_OP:
            picked.append(case)
        elif kind is not None and (case.op, kind) not in seen:
            picked.append(case)
            seen.add((case.op, kind))
    batch = [c for op in conformance.TARGET_OPS for c in chosen.get(op, [])]
    return {r.case: r for r in conformance._run_op("subset", batch)}


def test_every_listed_op_has_cases(cases: list[conformance.Case]) -> None:
    assert {c.op for c in cases} == set(conformance.TARGET_OPS)


@pytest.mark.parametrize("op", conformance.TARGET_OPS)
def test_node_tests_pass(results: dict[str, conformance.Result], op: str) -> None:
    mine = [r for r in results.values() if r.op == op]
    assert mine, f"no {op} case with inputs rlx supports"
    bad = [f"{r.case}: {r.status}: {r.reason}" for r in mine if r.status != "passed"]
    assert not bad


def test_unsupported_cases_say_why(cases: list[conformance.Case]) -> None:
    by_name = {c.name: c for c in cases}
    picks = ["test_equal_string", "test_identity_opt"]
    results = conformance._run_op("refused", [by_name[n] for n in picks])
    reasons = {r.case: (r.status, r.reason) for r in results}
    assert reasons["test_equal_string"] == (
        "unsupported", "input 'x' is string: rlx has no such element type")
    assert reasons["test_identity_opt"][0] == "unsupported"
    assert "graph input 'opt_in' is not a tensor" in reasons["test_identity_opt"][1]


def test_a_wrong_result_fails() -> None:
    """The comparison catches a difference of one f32 tolerance unit."""
    import numpy as np

    want = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert conformance.compare(want.copy(), want) is None
    off = want.copy()
    off[1, 2] += 1e-4
    assert conformance.compare(off, want) is not None
    assert "shape" in conformance.compare(want.reshape(4, 3), want)
    assert conformance.compare(np.array([1, 2], np.int64), np.array([1, 3], np.int64))
    nan = want.copy()
    nan[0, 0] = np.nan
    assert conformance.compare(nan, want) == "NaN positions differ"
    # a hand-rounded expected output (ONNX's 0.1511 for 0.151056) passes only with ONNX's
    # runner tolerance, and that tolerance still catches a real error
    rounded, exact = np.float32([0.1511]), np.float32([0.151056])
    assert conformance.compare(exact, rounded) is not None
    assert conformance.compare(exact, rounded, conformance.ONNX_RUNNER_TOLERANCE) is None
    assert conformance.compare(exact + 1e-3, rounded,
                               conformance.ONNX_RUNNER_TOLERANCE) is not None
