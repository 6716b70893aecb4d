"""The window token helpers (``HirModule.window_token_gather_bsn`` / ``_scatter_bsn``,
RLX's ``hir::window``, spec 2.18) on IREE, against the Qwen2.5-VL window reorder written in
numpy (``x.reshape(n / m, m, E)[idx]``), and as each other's inverse."""

from __future__ import annotations

import numpy as np
import pytest
from harness import DEVICE, TARGETS

import rlx
from rlx.reference.tolerance import assert_close

N_POS, E, MERGE = 16, 8, 4  # 16 tokens in groups of 4 (a 2x2 spatial merge)


def window_module() -> rlx.HirModule:
    h = rlx.HirModule("window")
    x = h.input("x", (1, N_POS, E))
    inv = h.input("inv_window_idx", (N_POS // MERGE,))
    perm = h.input("perm", (N_POS,), "i32")
    back = h.input("back", (N_POS,), "i32")
    grouped = h.window_token_gather_bsn(x, inv, 1, N_POS, E, MERGE)
    tokens = h.window_token_gather_bsn(x, perm, 1, N_POS, E, 1)
    h.set_outputs([grouped, h.window_token_scatter_bsn(tokens, back, 1, N_POS, E)])
    return h


@pytest.mark.parametrize("target", TARGETS)
def test_window_gather_and_scatter(target: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, N_POS, E)).astype(np.float32)
    inv = rng.permutation(N_POS // MERGE)
    perm = rng.permutation(N_POS)
    prog = rlx.runtime.load(rlx.compile(window_module(), target), DEVICE[target])
    grouped, restored = prog.main(x=x, inv_window_idx=inv.astype(np.float32),
                                  perm=perm.astype(np.int32),
                                  back=np.argsort(perm).astype(np.int32))
    want = x[0].reshape(N_POS // MERGE, MERGE, E)[inv].reshape(1, N_POS, E)
    assert_close(grouped, want, "f32", "groups of merge_sq tokens reordered")
    assert_close(restored, x, "f32", "scatter with the inverse permutation undoes gather")
