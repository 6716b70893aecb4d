"""The NaN / Inf localizer (rlx.check_numerics, rlx-run --check-numerics) on models with an
injected NaN or Inf: it names the first op, by label and position, and tells a culprit from
a propagator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 8)).astype(np.float32)
WEIGHTS = {"g": np.ones(8, np.float32), "b": np.zeros(8, np.float32)}


def model() -> rlx.HirModule:
    """norm -> log (NaN for a non-positive normalized value) -> exp of the sum (Inf when
    large) -> a division."""
    h = rlx.HirModule("m")
    x = h.input("x", (2, 8))
    n = h.named("norm", lambda h: h.rms_norm(x, h.param("g", (8,)), h.param("b", (8,)), 1e-6))
    lg = h.named("Log_3", lambda h: h.mir("activation", [n], kind="log"))
    s = h.named("Add_4", lambda h: h.mir("binary", [lg, x], kind="add"))
    e = h.named("Exp_5", lambda h: h.mir("activation", [s], kind="exp"))
    h.set_outputs([h.named("Div_6", lambda h: h.mir("binary", [e, x], kind="div"))])
    return h


def test_clean_run_reports_nothing() -> None:
    assert rlx.check_numerics(model(), {"x": np.abs(X) + 1}, WEIGHTS) is None


def test_log_of_negative_is_the_culprit() -> None:
    f = rlx.check_numerics(model(), {"x": X}, WEIGHTS)
    assert f is not None
    assert (f.op_name, f.label, f.kind, f.culprit) == ("rlx_mir.activation", "Log_3", "NaN", True)
    assert f.source == "m.hir:6:10"
    assert "floor it" in str(f)
    row, col = f.index
    assert X[row, col] <= 0
    assert np.all(X.reshape(-1)[: row * 8 + col] > 0)


def test_overflow_is_located() -> None:
    x = np.full((2, 8), 100.0, np.float32)
    f = rlx.check_numerics(model(), {"x": x}, WEIGHTS)
    assert f is not None
    assert (f.label, f.kind, f.culprit) == ("Exp_5", "Inf", True)


def test_propagated_input_nan_points_at_the_input() -> None:
    x = np.abs(X) + 1
    x[1, 3] = np.nan
    f = rlx.check_numerics(model(), [x], WEIGHTS)
    assert f is not None
    assert (f.label, f.culprit) == ("norm", False)
    assert "function input 'x'" in str(f)


def test_bad_weight_is_named() -> None:
    f = rlx.check_numerics(model(), {"x": np.abs(X) + 1}, {**WEIGHTS, "b": np.full(8, np.inf,
                                                                                   np.float32)})
    assert f is not None
    assert f.weight == "b"
    assert "the weight 'b' holds Inf" in str(f)


def test_inside_a_block_the_block_label_is_reported() -> None:
    """A NaN produced inside a HIR block is reported at the MIR op, with the block's label."""
    h = rlx.HirModule("blk")
    x = h.input("x", (1, 4, 16))
    w = h.param("w", (16, 16))
    y = h.named("layers.0.mlp", lambda h: h.linear(x, w, activation="sqrt"))
    h.set_outputs([y])
    f = rlx.check_numerics(h, {"x": RNG.standard_normal((1, 4, 16)).astype(np.float32)},
                           {"w": np.eye(16, dtype=np.float32)})
    assert f is not None
    assert (f.op_name, f.label) == ("rlx_mir.activation", "layers.0.mlp")
    assert "clamp it" in str(f)


@pytest.mark.parametrize("case", ["nan", "clean"])
def test_rlx_run_check_numerics(case: str, tmp_path: Path) -> None:
    src = tmp_path / "m.hir"
    src.write_text(str(model()))
    x = tmp_path / "x.npy"
    np.save(x, X if case == "nan" else np.abs(X) + 1)
    w = tmp_path / "w.irpa"
    rlx.runtime.save_params(WEIGHTS, w)
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.run", str(src), "--check-numerics",
                           "--input", f"x={x}", "--params", str(w)], capture_output=True,
                          text=True)
    if case == "nan":
        assert proc.returncode == 1
        assert proc.stderr.startswith(f'{src}:6:10: error: NaN first appears in result #0 of '
                                      "'rlx_mir.activation' \"Log_3\"")
    else:
        assert proc.returncode == 0, proc.stderr
        assert "no NaN or Inf" in proc.stdout
