"""The one tolerance table of the numerics tests, per element type.

An output passes when ``max|got - want| <= atol + rtol * max|want|``, with ``want`` the
float64 reference. f32 leaves room for different summation orders; f16 / bf16 for one
rounding of every stored intermediate; f64 (llvm-cpu only) for summation orders in f64,
and fails a result computed in f32 (relative error near 1e-7).
"""

from __future__ import annotations

import numpy as np

from rlx.ir.dtypes import FLOAT8S
from rlx.ir.types import DType

TOLERANCES: dict[DType, tuple[float, float]] = {
    DType.F32: (2e-5, 2e-5),
    DType.F16: (6e-3, 6e-3),
    DType.BF16: (4e-2, 4e-2),
    DType.F64: (1e-10, 1e-10),
    # 8-bit floats are storage: a cast to one rounds once, exactly (NaN and inf compared by
    # position)
    **dict.fromkeys(FLOAT8S, (0.0, 0.0)),
}


def max_error(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max abs error, max abs reference value)."""
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(g - w), initial=0.0)), float(np.max(np.abs(w), initial=0.0))


def assert_close(got: np.ndarray, want: np.ndarray, dtype: DType | str, what: str = "") -> None:
    dtype = DType.parse(dtype)
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != reference {want.shape}"
    if dtype not in TOLERANCES:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol, atol = TOLERANCES[dtype]
    err, scale = max_error(got, want)
    bound = atol + rtol * scale
    assert np.all(np.isfinite(got)) == np.all(np.isfinite(want)), f"{what}: non-finite values"
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g} (ref max {scale:.3g}, {dtype})"
