"""Numerics of the sampling MIR ops on IREE against two oracles that share no code with the
lowering: HF transformers' logits processors (``RepetitionPenaltyLogitsProcessor``,
``TopKLogitsWarper``, ``TopPLogitsWarper``, ``MinPLogitsWarper``) and the numpy reference
(``rlx.reference.sampling``: sorting where the lowering searches bitwise; the draw's hash).

Filters: the same tokens removed (``-inf``) and the kept logits within the f32 tolerance,
on random logits with a different setting per row, off-values included. ``categorical``:
the same tokens as the numpy reference, and over 20000 draws (one per counter, fixed seed:
it cannot flake) counts that pass a chi-square test against ``softmax(x)``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from harness import DEVICE, TARGETS, require
from transformers import generation as hf

import rlx
from rlx import runtime
from rlx.reference import sampling as ref
from rlx.reference.tolerance import assert_close

ROWS, VOCAB = 12, 96
K = np.array([1, 2, 5, 17, 40, 95, 96, 0, -1, 500, 3, 64], np.int32)
P = np.array([0.05, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0, 0.7, 0.6, 0.0001, 0.999], np.float32)
MIN_P = np.array([0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 0.9, 1.0, 0.02, 0.3, 0.07, -1.0], np.float32)
PENALTY = np.array([1.0, 1.1, 1.5, 2.0, 0.8, 1.3, 1.2, 3.0, 1.05, 1.0, 1.7, 0.5], np.float32)


def filters_module() -> rlx.HirModule:
    h = rlx.HirModule("filters")
    x = h.input("x", (ROWS, VOCAB))
    seen = h.input("seen", (ROWS, VOCAB))
    k, p = h.input("k", (ROWS,), "i32"), h.input("p", (ROWS,))
    min_p, penalty = h.input("min_p", (ROWS,)), h.input("penalty", (ROWS,))
    h.set_outputs([h.mir("top_k_filter", [x, k]), h.mir("top_p_filter", [x, p]),
                   h.mir("min_p_filter", [x, min_p]),
                   h.mir("repetition_penalty", [x, seen, penalty])])
    return h


@functools.cache
def program(name: str, target: str) -> runtime.Program:
    module = {"filters": filters_module, "draws": draws_module}[name]()
    return runtime.load(rlx.compile(module, target), DEVICE[target])


def logits(seed: int, rows: int = ROWS, vocab: int = VOCAB) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, vocab)) * 3).astype(np.float32)


def assert_filtered(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """The same removed (-inf) tokens and the kept logits within the f32 tolerance."""
    removed = np.isneginf(want)
    np.testing.assert_array_equal(np.isneginf(got), removed, err_msg=f"{what}: removed tokens")
    assert_close(np.where(removed, 0, got), np.where(removed, 0, want), "f32", what)


def hf_rows(x: np.ndarray, make: object, values: np.ndarray, active: np.ndarray) -> np.ndarray:
    """HF's processor row by row (``make(value)``); rows where it is off stay as they are."""
    out = x.astype(np.float32).copy()
    ids = torch.zeros((1, 1), dtype=torch.long)
    for r, value in enumerate(values):
        if active[r]:
            out[r] = make(value)(ids, torch.from_numpy(x[r:r + 1].copy())).numpy()[0]
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", [0, 1])
def test_filters_match_hf_processors(target: str, seed: int) -> None:
    require(target)
    x = logits(seed)
    rng = np.random.default_rng(seed + 10)
    seen = (rng.random((ROWS, VOCAB)) < 0.2).astype(np.float32)
    got = program("filters", target).main(x=x, seen=seen, k=K, p=P, min_p=MIN_P,
                                          penalty=PENALTY)
    top_k = hf_rows(x, lambda k: hf.TopKLogitsWarper(int(k)), K, (K > 0) & (K < VOCAB))
    top_p = hf_rows(x, lambda p: hf.TopPLogitsWarper(float(p)), P, P < 1)
    min_p = hf_rows(x, lambda m: hf.MinPLogitsWarper(float(m)), MIN_P, MIN_P > 0)
    penalized = x.copy()
    for r in range(ROWS):
        ids = torch.from_numpy(np.flatnonzero(seen[r]))[None]
        processor = hf.RepetitionPenaltyLogitsProcessor(float(PENALTY[r]))
        penalized[r] = processor(ids, torch.from_numpy(x[r:r + 1].copy())).numpy()[0]
    for out, hf_out, numpy_out, name in (
            (got[0], top_k, ref.top_k_filter(x, K), "top_k"),
            (got[1], top_p, ref.top_p_filter(x, P), "top_p"),
            (got[2], min_p, ref.min_p_filter(x, MIN_P), "min_p"),
            (got[3], penalized, ref.repetition_penalty(x, seen, PENALTY), "repetition_penalty")):
        assert_filtered(out, hf_out, f"{name} vs HF")
        assert_filtered(out, numpy_out, f"{name} vs the numpy reference")
    assert (np.isfinite(got[0]).sum(axis=1)[:7] == [1, 2, 5, 17, 40, 95, 96]).all()


def test_top_k_and_top_p_keep_ties() -> None:
    """Ties with the last kept value stay (HF's top-k does the same; its top-p keeps or
    drops tied tokens by its sort order, so the reference defines that case)."""
    x = np.zeros((ROWS, VOCAB), np.float32)
    x[:, :3] = [5.0, 4.0, 4.0]
    got = program("filters", "llvm-cpu").main(
        x=x, seen=np.zeros_like(x), k=np.full(ROWS, 2, np.int32),
        p=np.full(ROWS, 0.95, np.float32), min_p=np.zeros(ROWS, np.float32),
        penalty=np.ones(ROWS, np.float32))
    np.testing.assert_array_equal(np.isfinite(got[0][0]), np.arange(VOCAB) < 3)
    assert_filtered(got[1], ref.top_p_filter(x, np.full(ROWS, 0.95)), "top_p with ties")


DRAWS = 20000


def draws_module() -> rlx.HirModule:
    h = rlx.HirModule("draws")
    x = h.input("x", (None, 8))
    seed, counter = h.input("seed", (None,), "i32"), h.input("counter", (None,), "i32")
    mask, ids = h.input("mask", (None, 8)), h.input("ids", (None, 2), "i32")
    h.set_outputs([h.mir("categorical", [x, seed, counter]), h.mir("mark_tokens", [mask, ids])])
    return h


def draw(target: str, x: np.ndarray, seed: int) -> np.ndarray:
    n = x.shape[0]
    out = program("draws", target).main(
        x=x, seed=np.full(n, seed, np.int32), counter=np.arange(n, dtype=np.int32),
        mask=np.zeros((n, 8), np.float32), ids=np.zeros((n, 2), np.int32))
    return out[0]


CHI2_CRITICAL = {7: 24.32, 5: 20.52}
"""Chi-square critical values at alpha = 0.001 by degrees of freedom."""


@pytest.mark.parametrize("target", TARGETS)
def test_categorical_follows_softmax(target: str) -> None:
    require(target)
    row = np.array([1.5, 0.2, -0.7, 2.3, 0.0, -2.0, 1.0, 0.4], np.float32)
    tokens = draw(target, np.tile(row, (DRAWS, 1)), seed=1234)
    counts = np.bincount(tokens, minlength=8)
    want = np.exp(row - row.max()) / np.exp(row - row.max()).sum() * DRAWS
    chi2 = float(((counts - want) ** 2 / want).sum())
    assert chi2 < CHI2_CRITICAL[7], f"chi-square {chi2:.2f} for counts {counts}, expected {want}"
    filtered = row.copy()
    filtered[[1, 5]] = -np.inf
    tokens = draw(target, np.tile(filtered, (DRAWS, 1)), seed=99)
    counts = np.bincount(tokens, minlength=8)
    assert counts[1] == counts[5] == 0
    keep = np.isfinite(filtered)
    probs = np.exp(filtered[keep] - filtered.max())
    want = probs / probs.sum() * DRAWS
    chi2 = float(((counts[keep] - want) ** 2 / want).sum())
    assert chi2 < CHI2_CRITICAL[5], f"chi-square {chi2:.2f} with -inf logits"


def test_categorical_matches_the_reference_draw() -> None:
    """The same tokens as the numpy reference of the hash and the Gumbel-max draw; the same
    seed gives the same tokens, another seed others."""
    x = logits(3, rows=4000, vocab=8)
    got = draw("llvm-cpu", x, seed=7)
    want = ref.categorical(x, np.full(4000, 7), np.arange(4000))
    assert (got == want).mean() > 0.999, f"{(got != want).sum()} of 4000 draws differ"
    np.testing.assert_array_equal(draw("llvm-cpu", x, seed=7), got)
    assert (draw("llvm-cpu", x, seed=8) != got).mean() > 0.3


def test_mark_tokens() -> None:
    n = 3
    mask = np.zeros((n, 8), np.float32)
    mask[0, 7] = 1
    ids = np.array([[2, 5], [0, 0], [-1, 9]], np.int32)
    out = program("draws", "llvm-cpu").main(
        x=np.zeros((n, 8), np.float32), seed=np.zeros(n, np.int32),
        counter=np.zeros(n, np.int32), mask=mask, ids=ids)
    np.testing.assert_array_equal(out[1], ref.mark_tokens(mask, ids))
    assert out[1].sum() == 4  # [2, 5, 7], [0], nothing for ids outside the vocabulary
