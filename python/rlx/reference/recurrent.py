"""numpy reference of the scans and the Qwen3.5 MTP head, written from the spec, in float64.

``gated_delta_net`` (spec 2.12), ``lstm`` (2.13), ``gru`` (2.14) step through the sequence
one position at a time exactly as the spec's recurrences read; with a carry they return the
final state(s) as extra results (rlx's contract, where RLX overwrites its inputs in place).
``qwen35_mtp_head`` (2.16) composes the primitive references of :mod:`rlx.reference.ops`.
Nothing here is shared with the lowering.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from rlx.reference import ops

F = np.float64


def _f(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- Gated DeltaNet --------------------------------------------------------------------


def gated_delta_net(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray,
                    beta: np.ndarray, state: np.ndarray | None = None, *, state_size: int,
                    carry_state: bool = False, state_in_place: bool | None = None
                    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Spec 2.12, per batch row and head, state ``S[i, j]`` (i key, j value dim)::

        S <- exp(g_t) S;  u = kᵀS;  d = (v - u) beta_t;  S <- S + k dᵀ;  y_t = qᵀS / sqrt(n)

    A carried state of more rows than ``q`` steps its first ``B`` and returns the rest as
    they are; ``state_in_place`` changes no value."""
    q, k, v, g, beta = (_f(a) for a in (q, k, v, g, beta))
    b, s, h, n = q.shape
    assert n == state_size
    if carry_state and _f(state).shape[0] > b:
        whole = _f(state).copy()
        y, whole[:b] = gated_delta_net(q, k, v, g, beta, whole[:b], state_size=n,
                                       carry_state=True)
        return y, whole
    st = _f(state).copy() if carry_state else np.zeros((b, h, n, n))
    y = np.zeros((b, s, h, n))
    for t in range(s):
        st = np.exp(g[:, t])[..., None, None] * st
        u = np.einsum("bhij,bhi->bhj", st, k[:, t])
        d = (v[:, t] - u) * beta[:, t][..., None]
        st = st + k[:, t][..., :, None] * d[..., None, :]
        y[:, t] = np.einsum("bhij,bhi->bhj", st, q[:, t]) / math.sqrt(n)
    return (y, st) if carry_state else y


# -- LSTM / GRU ------------------------------------------------------------------------

Cell = Callable[[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray, list[np.ndarray]],
                list[np.ndarray]]
"""``cell(x_t, states, w_ih, w_hh, biases) -> new states`` (``states[0]`` is h)."""


def _unpack(w: np.ndarray, shapes: list[tuple[int, int]]) -> list[np.ndarray]:
    """Split a packed weight (flat, or rank 2 when the widths agree) into its blocks."""
    flat = _f(w).reshape(-1)
    out, at = [], 0
    for rows, cols in shapes:
        out.append(flat[at:at + rows * cols].reshape(rows, cols))
        at += rows * cols
    assert at == flat.size, f"packed weight holds {flat.size} values, blocks need {at}"
    return out


def _rnn(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, biases: list[np.ndarray],
         init: list[np.ndarray | None], gates: int, hidden_size: int, num_layers: int,
         bidirectional: bool, cell: Cell, lengths: np.ndarray | None = None
         ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The layer / direction / time loops of spec 2.13 (shared with GRU, spec 2.14). With
    ``lengths``, row ``b`` runs steps ``0 .. lengths[b] - 1`` only (either direction): the
    other steps keep its states and output zeros. ``biases`` blocks are ``[1, k]`` rows of
    any width ``k`` (the LSTM's peepholes ride here as a third bias)."""
    x = _f(x)
    batch, seq, features = x.shape
    dirs = 2 if bidirectional else 1
    rows = gates * hidden_size
    widths = [features if layer == 0 else dirs * hidden_size
              for layer in range(num_layers) for _ in range(dirs)]
    wih = _unpack(w_ih, [(rows, w) for w in widths])
    whh = _unpack(w_hh, [(rows, hidden_size)] * len(widths))
    bs = [_unpack(b, [(1, np.size(b) // len(widths))] * len(widths)) for b in biases]
    steps = np.full(batch, seq) if lengths is None else np.asarray(lengths)
    finals: list[list[np.ndarray]] = [[] for _ in init]
    for layer in range(num_layers):
        out = np.zeros((batch, seq, dirs * hidden_size))
        for d in range(dirs):
            idx = layer * dirs + d
            states = [np.zeros((batch, hidden_size)) if s is None else _f(s)[idx]
                      for s in init]
            order = range(seq - 1, -1, -1) if d == 1 else range(seq)
            for t in order:
                new = cell(x[:, t], states, wih[idx], whh[idx], [b[idx][0] for b in bs])
                live = (t < steps)[:, None]
                states = [np.where(live, n, s) for n, s in zip(new, states, strict=True)]
                out[:, t, d * hidden_size:(d + 1) * hidden_size] = np.where(live, new[0], 0.0)
            for f, s in zip(finals, states, strict=True):
                f.append(s)
        x = out
    return x, [np.stack(f) for f in finals]


def _lstm_cell(xt: np.ndarray, states: list[np.ndarray], wih: np.ndarray, whh: np.ndarray,
               biases: list[np.ndarray]) -> list[np.ndarray]:
    h, c = states
    z = xt @ wih.T + h @ whh.T + biases[0]
    i, f, gg, o = np.split(z, 4, axis=-1)
    p_i, p_f, p_o = np.split(biases[1], 3) if len(biases) > 1 else (0.0, 0.0, 0.0)
    c_new = _sigmoid(f + p_f * c) * c + _sigmoid(i + p_i * c) * np.tanh(gg)
    return [_sigmoid(o + p_o * c_new) * np.tanh(c_new), c_new]


def _gru_cell(xt: np.ndarray, states: list[np.ndarray], wih: np.ndarray, whh: np.ndarray,
              biases: list[np.ndarray]) -> list[np.ndarray]:
    (h,) = states
    a = xt @ wih.T + biases[0]
    hh = h @ whh.T + biases[1]
    ar, az, an = np.split(a, 3, axis=-1)
    hr, hz, hn = np.split(hh, 3, axis=-1)
    r, z = _sigmoid(ar + hr), _sigmoid(az + hz)
    n = np.tanh(an + r * hn)
    return [(1.0 - z) * n + z * h]


def _gru_cell_reset_first(xt: np.ndarray, states: list[np.ndarray], wih: np.ndarray,
                          whh: np.ndarray, biases: list[np.ndarray]) -> list[np.ndarray]:
    """ONNX's default GRU (``linear_before_reset = 0``): ``n = tanh(a_n + (r h) W_hnᵀ +
    b_hn)``."""
    (h,) = states
    a = xt @ wih.T + biases[0]
    ar, az, an = np.split(a, 3, axis=-1)
    w_r, w_z, w_n = np.split(whh, 3, axis=0)
    b_r, b_z, b_n = np.split(biases[1], 3, axis=-1)
    r = _sigmoid(ar + h @ w_r.T + b_r)
    z = _sigmoid(az + h @ w_z.T + b_z)
    n = np.tanh(an + (r * h) @ w_n.T + b_n)
    return [(1.0 - z) * n + z * h]


def lstm(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray,
         *rest: np.ndarray, hidden_size: int, num_layers: int = 1,
         bidirectional: bool = False, carry: bool = False, has_peephole: bool | None = None,
         has_lengths: bool | None = None
         ) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spec 2.13: gates i, f, g, o; ``bias = b_ih + b_hh``; then ``h0, c0`` (``carry``),
    ``peephole`` (``[3H]`` blocks p_i, p_f, p_o), ``lengths``; returns ``y`` or
    ``(y, hn, cn)``."""
    more = list(rest)
    h0, c0 = (more.pop(0), more.pop(0)) if carry else (None, None)
    biases = [bias, *([more.pop(0)] if has_peephole else [])]
    lengths = more.pop(0) if has_lengths else None
    y, (hn, cn) = _rnn(x, w_ih, w_hh, biases, [h0, c0], 4, hidden_size, num_layers,
                       bidirectional, _lstm_cell, lengths)
    return (y, hn, cn) if carry else y


def gru(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray,
        b_hh: np.ndarray, *rest: np.ndarray, hidden_size: int,
        num_layers: int = 1, bidirectional: bool = False, carry: bool = False,
        linear_before_reset: bool | None = None, has_lengths: bool | None = None
        ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Spec 2.14: gates r, z, n; ``n = tanh(a_n + r (h W_hnᵀ + b_hn))`` (with
    ``linear_before_reset=False``, ONNX's default: ``n = tanh(a_n + (r h) W_hnᵀ + b_hn)``);
    returns ``y`` or ``(y, hn)``."""
    cell = _gru_cell_reset_first if linear_before_reset is False else _gru_cell
    more = list(rest)
    h0 = more.pop(0) if carry else None
    lengths = more.pop(0) if has_lengths else None
    y, (hn,) = _rnn(x, w_ih, w_hh, [b_ih, b_hh], [h0], 3, hidden_size, num_layers,
                    bidirectional, cell, lengths)
    return (y, hn) if carry else y


# -- Qwen3.5 MTP head ------------------------------------------------------------------


def qwen35_mtp_head(h_pre_norm: np.ndarray, input_ids: np.ndarray, cos: np.ndarray,
                    sin: np.ndarray, last_token_idx: np.ndarray, embed_w: np.ndarray,
                    *weights: np.ndarray, num_heads: int, num_kv_heads: int, head_dim: int,
                    n_rot: int, n_embd: int, n_ff: int, mtp_vocab: int, eps: float,
                    carry_kv: bool | None = None
                    ) -> np.ndarray | tuple[np.ndarray, ...]:
    """Spec 2.16, with the final row pick per batch row (``h2[b, last_token_idx[b]]``);
    with ``carry_kv`` the last two operands are a KV cache of earlier positions (the new
    positions attend to it causally) and the result is ``(logits, hidden, k, v)``."""
    del n_embd, n_ff, mtp_vocab
    past: tuple[np.ndarray, ...] = ()
    if carry_kv:
        *weights, past_k, past_v = weights
        past = (_f(past_k), _f(past_v))
    (hnorm_w, hnorm_b, enorm_w, enorm_b, eh_w, attn_norm_w, attn_norm_b, q_gate_w, k_w, v_w,
     q_norm_w, q_norm_b, k_norm_w, k_norm_b, o_w, post_norm_w, post_norm_b, gate_w, up_w,
     down_w, head_norm_w, head_norm_b, lm_head_w) = (_f(w) for w in weights)
    b, s, _ = np.shape(h_pre_norm)
    nh, nkv, hd = num_heads, num_kv_heads, head_dim
    h = ops.rms_norm(h_pre_norm, hnorm_w, hnorm_b, eps=eps)
    e = ops.rms_norm(ops.gather(embed_w, input_ids, axis=0), enorm_w, enorm_b, eps=eps)
    cur = np.concatenate([e, h], axis=-1) @ eh_w
    x = ops.rms_norm(cur, attn_norm_w, attn_norm_b, eps=eps)
    qg = (x @ q_gate_w).reshape(b, s, nh, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(b, s, nh * hd)
    k = (x @ k_w).reshape(b, s, nkv, hd)
    v = (x @ v_w).reshape(b, s, nkv, hd)
    q = ops.rope(ops.rms_norm(q, q_norm_w, q_norm_b, eps=eps), cos, sin, head_dim=hd,
                 n_rot=n_rot, style="neox")
    k = ops.rope(ops.rms_norm(k, k_norm_w, k_norm_b, eps=eps), cos, sin, head_dim=hd,
                 n_rot=n_rot, style="neox")
    if past:
        k = np.concatenate([past[0].reshape(b, -1, nkv, hd), k], axis=1)
        v = np.concatenate([past[1].reshape(b, -1, nkv, hd), v], axis=1)
    cache = (k.reshape(b, -1, nkv * hd), v.reshape(b, -1, nkv * hd))
    group = nh // nkv
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)  # repeat_kv
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))  # [B, nh, S, hd]
    a = ops.attention(q, k, v, num_heads=nh, head_dim=hd, mask_kind="causal")
    a = a.transpose(0, 2, 1, 3).reshape(b, s, nh * hd) * _sigmoid(gate)
    h1 = cur + a @ o_w
    n2 = ops.rms_norm(h1, post_norm_w, post_norm_b, eps=eps)
    h2 = h1 + ops.swiglu(n2, up_w, gate_w, down_w)
    rows = np.clip(np.trunc(_f(last_token_idx)).astype(np.int64), 0, s - 1)
    last = ops.rms_norm(h2[np.arange(b), rows][:, None, :], head_norm_w, head_norm_b, eps=eps)
    logits = last @ lm_head_w
    return (logits, last, *cache) if carry_kv else logits
