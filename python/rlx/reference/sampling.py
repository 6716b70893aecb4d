"""numpy reference of the sampling ops, written from their definitions (sorting, where the
lowering searches bitwise): rows are the leading axes of ``x [..., V]``."""

from __future__ import annotations

import numpy as np

U32 = np.uint32
GOLDEN, COUNTER_OFFSET = 0x9E3779B9, 0x7F4A7C15
MIX = (0x85EBCA6B, 0xC2B2AE35)


def _mix(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's fmix32 on uint32 arrays (wrapping)."""
    h = h.astype(np.uint64)
    for shift, mult in ((16, MIX[0]), (13, MIX[1])):
        h = ((h ^ (h >> shift)) * mult) & 0xFFFFFFFF
    return (h ^ (h >> 16)).astype(U32)


def uniform_hash(seed: np.ndarray, counter: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``u`` in ``[2^-24, 1 - 2^-24]`` for (seed, counter, index) (broadcast, int32 or
    uint32): ``a = mix(counter * GOLDEN + OFFSET)``, ``key = mix(seed ^ a)``,
    ``h = mix(mix(index * GOLDEN + key) ^ key)``, ``u = (h >> 9) * 2^-23 + 2^-24``."""
    def u32(v: np.ndarray) -> np.ndarray:
        return np.asarray(v).astype(np.int64).astype(np.uint64) & 0xFFFFFFFF

    a = _mix((u32(counter) * GOLDEN + COUNTER_OFFSET) & 0xFFFFFFFF)
    key = _mix(u32(seed) ^ a.astype(np.uint64))
    inner = _mix((u32(index) * GOLDEN + key.astype(np.uint64)) & 0xFFFFFFFF)
    h = _mix(inner.astype(np.uint64) ^ key.astype(np.uint64))
    return (h >> 9).astype(np.float64) * 2.0 ** -23 + 2.0 ** -24


def repetition_penalty(x: np.ndarray, seen: np.ndarray, penalty: np.ndarray) -> np.ndarray:
    p = np.asarray(penalty, np.float64)[..., None]
    x = np.asarray(x, np.float64)
    return np.where(np.asarray(seen) != 0, np.where(x < 0, x * p, x / p), x)


def _rows(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    x = np.asarray(x, np.float64)
    return x.reshape(-1, x.shape[-1]), x.shape


def top_k_filter(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Keep ``x >= `` the row's ``k``-th largest value."""
    rows, shape = _rows(x)
    ks = np.asarray(k).reshape(-1)
    out = rows.copy()
    for r, kk in enumerate(ks):
        if 0 < kk < rows.shape[1]:
            kth = np.sort(rows[r])[::-1][kk - 1]
            out[r, rows[r] < kth] = -np.inf
    return out.reshape(shape)


def top_p_filter(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Keep the tokens whose mass above them (descending order) is below ``p``, and every
    token tied with the last one kept."""
    rows, shape = _rows(x)
    ps = np.asarray(p, np.float64).reshape(-1)
    out = rows.copy()
    for r, pp in enumerate(ps):
        if pp >= 1:
            continue
        probs = np.exp(rows[r] - rows[r].max())
        probs /= probs.sum()
        order = np.argsort(-rows[r], kind="stable")
        above = np.concatenate([[0.0], np.cumsum(probs[order])[:-1]])
        last = rows[r][order][above < pp].min()
        out[r, rows[r] < last] = -np.inf
    return out.reshape(shape)


def min_p_filter(x: np.ndarray, min_p: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    m = np.asarray(min_p, np.float64)[..., None]
    probs = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.where((m > 0) & (probs < m), -np.inf, x)


def categorical(x: np.ndarray, seed: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """The Gumbel-max draw: the first index of the largest ``x - log(max(-log(u), 2^-25))``."""
    x = np.asarray(x, np.float64)
    index = np.arange(x.shape[-1])
    u = uniform_hash(np.asarray(seed)[..., None], np.asarray(counter)[..., None], index)
    e = np.maximum(-np.log(u), 2.0 ** -25)
    return np.argmax(x - np.log(e), axis=-1).astype(np.int32)


def mark_tokens(mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
    out = np.array(mask, copy=True)
    v = out.shape[-1]
    flat, idx = out.reshape(-1, v), np.asarray(ids).reshape(-1, np.asarray(ids).shape[-1])
    for r in range(flat.shape[0]):
        hit = idx[r][(idx[r] >= 0) & (idx[r] < v)]
        flat[r, hit] = 1
    return flat.reshape(out.shape)
