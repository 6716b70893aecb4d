"""Scans on IREE against outside oracles: ``lstm`` / ``gru`` against PyTorch ``nn.LSTM`` /
``nn.GRU`` with the same packed weights (1 and 2 layers, uni- and bidirectional, with and
without initial state, final states too), ONNX's default GRU form
(``linear_before_reset = false``) against a step loop in torch written from ONNX's GRU
equations, ``gated_delta_net`` against the recurrent
pure-torch rule of HF transformers' Qwen3-Next; chained decode steps equal one long scan;
the vmfb does not grow with the sequence length; the sequence length is dynamic.

One compiled module holds every variant of a family (one compile per target)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from harness import DEVICE, TARGETS

import rlx
from rlx.ir.text import parse_module, walk_ops
from rlx.lowering import LoweringOptions, lower_hir_to_mir, lower_mir_to_linalg
from rlx.reference.tolerance import assert_close

B, FEAT, HID = 2, 6, 5
RNN_VARIANTS = [  # (num_layers, bidirectional, carry)
    (1, False, False), (1, True, True), (2, False, True), (2, True, False), (2, True, True)]
RESET_FIRST = [(1, True, True), (2, False, True)]
"""GRU variants with ``linear_before_reset = false`` (ONNX's default form)."""


def variants(kind: str) -> list[tuple[int, bool, bool, bool]]:
    """``(num_layers, bidirectional, carry, reset_first)`` of every variant of ``kind``."""
    out = [(*v, False) for v in RNN_VARIANTS]
    return out + [(*v, True) for v in RESET_FIRST] if kind == "gru" else out


# --------------------------------------------------------------------------------------
# LSTM / GRU against torch.nn
# --------------------------------------------------------------------------------------


class ResetFirstGRU(torch.nn.GRU):
    """nn.GRU's weights, ONNX's ``linear_before_reset = 0`` equations (ONNX Operators, GRU):
    ``r = σ(x W_rᵀ + h R_rᵀ + Wb_r + Rb_r)``, ``z`` alike,
    ``n = tanh(x W_nᵀ + (r ⊙ h) R_nᵀ + Rb_n + Wb_n)``, ``h' = (1 - z) ⊙ n + z ⊙ h``; a plain
    step loop, layer by layer, the reverse direction walking back."""

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None  # type: ignore[override]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, seq, _ = x.shape
        dirs, hid = 2 if self.bidirectional else 1, self.hidden_size
        if h0 is None:
            h0 = torch.zeros(self.num_layers * dirs, batch, hid)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                sfx = f"l{layer}{'_reverse' if d else ''}"
                w_r, w_z, w_n = getattr(self, f"weight_hh_{sfx}").chunk(3)
                b_r, b_z, b_n = getattr(self, f"bias_hh_{sfx}").chunk(3)
                a = x @ getattr(self, f"weight_ih_{sfx}").T + getattr(self, f"bias_ih_{sfx}")
                h, ys = h0[layer * dirs + d], [torch.empty(0)] * seq
                for t in range(seq - 1, -1, -1) if d else range(seq):
                    ar, az, an = a[:, t].chunk(3, dim=-1)
                    r = torch.sigmoid(ar + h @ w_r.T + b_r)
                    z = torch.sigmoid(az + h @ w_z.T + b_z)
                    n = torch.tanh(an + (r * h) @ w_n.T + b_n)
                    h = ys[t] = (1 - z) * n + z * h
                outs.append(torch.stack(ys, dim=1))
                finals.append(h)
            x = torch.cat(outs, dim=-1)
        return x, torch.stack(finals)


def torch_rnn(kind: str, layers: int, bidirectional: bool, seed: int,
              reset_first: bool = False) -> torch.nn.Module:
    torch.manual_seed(seed)
    cls = (torch.nn.LSTM if kind == "lstm" else ResetFirstGRU if reset_first
           else torch.nn.GRU)
    return cls(FEAT, HID, num_layers=layers, bidirectional=bidirectional,
               batch_first=True).eval()


def packed_weights(kind: str, mod: torch.nn.Module, prefix: str) -> dict[str, np.ndarray]:
    """torch's ``weight_ih_l{k}{_reverse}`` ... packed layer-major, then direction: ``w_ih``
    rank 2 when every block has the input width (one layer), else flat; ``w_hh`` rank 2;
    LSTM ``bias = b_ih + b_hh`` (pre-summed, flat), GRU ``b_ih``, ``b_hh`` (``[L*D, 3H]``)."""
    dirs = 2 if mod.bidirectional else 1
    suffixes = [f"l{k}{'_reverse' if d else ''}" for k in range(mod.num_layers)
                for d in range(dirs)]

    def get(name: str) -> list[np.ndarray]:
        return [getattr(mod, f"{name}_{s}").detach().numpy() for s in suffixes]

    w_ih = get("weight_ih")
    out = {f"{prefix}_w_ih": (np.concatenate(w_ih) if mod.num_layers == 1
                              else np.concatenate([w.reshape(-1) for w in w_ih])),
           f"{prefix}_w_hh": np.concatenate(get("weight_hh"))}
    b_ih, b_hh = get("bias_ih"), get("bias_hh")
    if kind == "lstm":
        out[f"{prefix}_bias"] = np.concatenate([a + b for a, b in zip(b_ih, b_hh, strict=True)])
    else:
        out[f"{prefix}_b_ih"], out[f"{prefix}_b_hh"] = np.stack(b_ih), np.stack(b_hh)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def rnn_module(kind: str) -> rlx.HirModule:
    """Every variant of ``variants(kind)`` over one ``x [B, ?, FEAT]``; outputs in order
    ``y`` (+ ``hn`` (+ ``cn``) with carry) per variant."""
    h = rlx.HirModule(f"{kind}_variants")
    x = h.input("x", (B, None, FEAT))
    outs = []
    gates = 4 if kind == "lstm" else 3
    for i, (layers, bidi, carry, reset_first) in enumerate(variants(kind)):
        dirs = 2 if bidi else 1
        n = layers * dirs
        ih_numel = sum(gates * HID * (FEAT if k == 0 else dirs * HID)
                       for k in range(layers) for _ in range(dirs))
        w_ih = h.param(f"v{i}_w_ih", (n * gates * HID, FEAT) if layers == 1 else (ih_numel,))
        w_hh = h.param(f"v{i}_w_hh", (n * gates * HID, HID))
        kw = dict(hidden_size=HID, num_layers=layers, bidirectional=bidi)
        if kind == "lstm":
            bias = h.param(f"v{i}_bias", (n * gates * HID,))
            if carry:
                h0, c0 = h.input(f"v{i}_h0", (n, B, HID)), h.input(f"v{i}_c0", (n, B, HID))
                outs += h.lstm_carry(x, w_ih, w_hh, bias, h0, c0, **kw)
            else:
                outs.append(h.lstm(x, w_ih, w_hh, bias, **kw))
            continue
        b_ih, b_hh = h.param(f"v{i}_b_ih", (n, gates * HID)), h.param(f"v{i}_b_hh",
                                                                       (n, gates * HID))
        kw["linear_before_reset"] = False if reset_first else None
        if carry:
            outs += h.gru_carry(x, w_ih, w_hh, b_ih, b_hh, h.input(f"v{i}_h0", (n, B, HID)),
                                **kw)
        else:
            outs.append(h.gru(x, w_ih, w_hh, b_ih, b_hh, **kw))
    h.set_outputs(outs)
    return h


class RnnCase:
    """The torch modules of every variant and the compiled rlx module holding them all."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind = kind
        self.state_names = ["h0", "c0"] if kind == "lstm" else ["h0"]
        self.variants = variants(kind)
        self.mods = [torch_rnn(kind, layers, bidi, seed=10 + i, reset_first=reset_first)
                     for i, (layers, bidi, _, reset_first) in enumerate(self.variants)]
        weights: dict[str, np.ndarray] = {}
        for i, mod in enumerate(self.mods):
            weights |= packed_weights(kind, mod, f"v{i}")
        vmfb = rlx.compile(rnn_module(kind), target)
        self.prog = rlx.runtime.load(vmfb, DEVICE[target], weights)

    def states(self, rng: np.random.Generator, zero: bool = False) -> dict[str, np.ndarray]:
        """Initial states of the carry variants, by input name (``v1_h0``, ...)."""
        out = {}
        for i, (layers, bidi, carry, _) in enumerate(self.variants):
            if not carry:
                continue
            shape = (layers * (2 if bidi else 1), B, HID)
            for n in self.state_names:
                out[f"v{i}_{n}"] = (np.zeros(shape, np.float32) if zero else
                                    rng.standard_normal(shape).astype(np.float32))
        return out

    def run(self, x: np.ndarray, states: dict[str, np.ndarray]
            ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """``y`` per variant, and the final states named as the inputs they feed."""
        flat = list(self.prog.main(x=x, **states))
        ys, finals = [], {}
        for i, (_, _, carry, _) in enumerate(self.variants):
            ys.append(flat.pop(0))
            for n in self.state_names if carry else []:
                finals[f"v{i}_{n}"] = flat.pop(0)
        return ys, finals

    def torch(self, x: np.ndarray, states: dict[str, np.ndarray]
              ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """The same through torch.nn."""
        xt = torch.from_numpy(x)
        ys, finals = [], {}
        with torch.no_grad():
            for i, (mod, (_, _, carry, _)) in enumerate(zip(self.mods, self.variants,
                                                            strict=True)):
                if not carry:
                    ys.append(mod(xt)[0].numpy())
                    continue
                init = [torch.from_numpy(states[f"v{i}_{n}"]) for n in self.state_names]
                y, fin = mod(xt, tuple(init) if self.kind == "lstm" else init[0])
                fin = fin if self.kind == "lstm" else (fin,)
                ys.append(y.numpy())
                finals |= {f"v{i}_{n}": f.numpy()
                           for n, f in zip(self.state_names, fin, strict=True)}
        return ys, finals


@functools.cache
def rnn_case(kind: str, target: str) -> RnnCase:
    return RnnCase(kind, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_matches_torch(kind: str, target: str) -> None:
    """Every variant, y and the final states, at two sequence lengths of one module."""
    case = rnn_case(kind, target)
    rng = np.random.default_rng(0)
    for seq in (7, 1):
        x = rng.standard_normal((B, seq, FEAT)).astype(np.float32)
        states = case.states(rng)
        ys, finals = case.run(x, states)
        want_ys, want_finals = case.torch(x, states)
        for i, (g, w) in enumerate(zip(ys, want_ys, strict=True)):
            assert_close(g, w, "f32", f"{kind} {case.variants[i]} S={seq} y")
        assert finals.keys() == want_finals.keys()
        for n, g in finals.items():
            assert_close(g, want_finals[n], "f32", f"{kind} S={seq} final {n}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_states_computed_in_the_module(kind: str, target: str) -> None:
    """Initial states computed inside the module (as torch.onnx exports an LSTM's zero
    state: from the input's shape), with a dynamic batch, against torch. IREE 3.13 read such
    a state at the wrong offset of the allocation it shares with the input projection
    (0.1-0.7 off from the first step, bidirectional and stacked alike): the scan reads a
    given initial state as a captured value at step 0 instead."""
    layers, bidi = 2, True
    dirs = 2 if bidi else 1
    mod = torch_rnn(kind, layers, bidi, seed=3)
    h = rlx.HirModule(f"{kind}_computed")
    x = h.input("x", (None, None, FEAT))
    gates = 4 if kind == "lstm" else 3
    names = ["h0", "c0"] if kind == "lstm" else ["h0"]
    half = h.constant(np.full((), 0.5, np.float32))
    states = [h.mir("binary", [h.input(n, (layers * dirs, None, HID)), half], kind="mul")
              for n in names]
    ih = sum(gates * HID * (FEAT if k == 0 else dirs * HID) for k in range(layers)
             for _ in range(dirs))
    w_ih, w_hh = h.param("p_w_ih", (ih,)), h.param("p_w_hh", (layers * dirs * gates * HID, HID))
    kw = dict(hidden_size=HID, num_layers=layers, bidirectional=bidi)
    if kind == "lstm":
        y, _, _ = h.lstm_carry(x, w_ih, w_hh, h.param("p_bias", (layers * dirs * gates * HID,)),
                               *states, **kw)
    else:
        y, _ = h.gru_carry(x, w_ih, w_hh, h.param("p_b_ih", (layers * dirs, gates * HID)),
                           h.param("p_b_hh", (layers * dirs, gates * HID)), *states, **kw)
    h.set_outputs([y])
    prog = rlx.runtime.load(rlx.compile(h, target), DEVICE[target],
                            packed_weights(kind, mod, "p"))
    rng = np.random.default_rng(5)
    for batch, seq in ((2, 5), (3, 1)):
        xs = rng.standard_normal((batch, seq, FEAT)).astype(np.float32)
        init = {n: rng.standard_normal((layers * dirs, batch, HID)).astype(np.float32)
                for n in names}
        with torch.no_grad():
            t_init = [torch.from_numpy(0.5 * v) for v in init.values()]
            want = mod(torch.from_numpy(xs), tuple(t_init) if kind == "lstm" else t_init[0])
        assert_close(prog.main(x=xs, **init), want[0].numpy(), "f32", f"{kind} B={batch}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_chained_steps_equal_one_scan(kind: str, target: str) -> None:
    """Feeding the final states of one call into the next (prefill 4 steps, then 2, then
    one decode step) gives the outputs and final states of one call over all 7 steps
    (unidirectional variants; a backward direction does not chain over chunks). On Vulkan
    this caught stale final states from a module's second call (see ``_settled`` in the
    scan lowering)."""
    case = rnn_case(kind, target)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((B, 7, FEAT)).astype(np.float32)
    states = case.states(rng)
    whole_ys, whole_finals = case.run(x, states)
    pieces: list[list[np.ndarray]] = [[] for _ in case.variants]
    for lo, hi in ((0, 4), (4, 6), (6, 7)):
        ys, states = case.run(np.ascontiguousarray(x[:, lo:hi]), states)
        for i, y in enumerate(ys):
            pieces[i].append(y)
    chained = [i for i, (_, bidi, carry, _) in enumerate(case.variants) if carry and not bidi]
    assert chained
    for i in chained:
        assert_close(np.concatenate(pieces[i], axis=1), whole_ys[i], "f32", f"{kind} v{i} y")
        for n in case.state_names:
            assert_close(states[f"v{i}_{n}"], whole_finals[f"v{i}_{n}"], "f32",
                         f"{kind} v{i} final {n}")


def torch_peephole_lstm(mod: torch.nn.LSTM, peep: torch.Tensor, x: torch.Tensor,
                        h0: torch.Tensor, c0: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer of ``mod`` (either direction) with peepholes ``peep [D, 3H]`` (p_i, p_f,
    p_o), ONNX's LSTM equations: ``i = σ(x W_iᵀ + h R_iᵀ + p_i ⊙ c + b_i)``, ``f`` alike
    with ``p_f``, ``c' = f ⊙ c + i ⊙ tanh(g)``, ``o = σ(... + p_o ⊙ c')``,
    ``h' = o ⊙ tanh(c')``; a plain step loop."""
    seq = x.shape[1]
    outs, hs, cs = [], [], []
    for d in range(2 if mod.bidirectional else 1):
        sfx = f"l0{'_reverse' if d else ''}"
        w_ih, w_hh = getattr(mod, f"weight_ih_{sfx}"), getattr(mod, f"weight_hh_{sfx}")
        bias = getattr(mod, f"bias_ih_{sfx}") + getattr(mod, f"bias_hh_{sfx}")
        p_i, p_f, p_o = peep[d].chunk(3)
        h, c, ys = h0[d], c0[d], [torch.empty(0)] * seq
        for t in range(seq - 1, -1, -1) if d else range(seq):
            zi, zf, zg, zo = (x[:, t] @ w_ih.T + h @ w_hh.T + bias).chunk(4, dim=-1)
            i, f = torch.sigmoid(zi + p_i * c), torch.sigmoid(zf + p_f * c)
            c = f * c + i * torch.tanh(zg)
            h = ys[t] = torch.sigmoid(zo + p_o * c) * torch.tanh(c)
        outs.append(torch.stack(ys, dim=1))
        hs.append(h)
        cs.append(c)
    return torch.cat(outs, dim=-1), torch.stack(hs), torch.stack(cs)


def ragged_module() -> rlx.HirModule:
    """Per-row ``lengths`` (2-layer bidirectional LSTM, bidirectional GRU, both with
    states) and a bidirectional peephole LSTM, over ``x [?, ?, FEAT]``."""
    h = rlx.HirModule("ragged")
    x = h.input("x", (None, None, FEAT))
    lengths = h.input("lengths", (None,), "i64")
    outs = []
    for kind, layers in (("lstm", 2), ("gru", 1)):
        n, gates = 2 * layers, 4 if kind == "lstm" else 3
        ih = sum(gates * HID * (FEAT if k == 0 else 2 * HID) for k in range(layers)
                 for _ in range(2))
        w_ih = h.param(f"{kind}_w_ih", (n * gates * HID, FEAT) if layers == 1 else (ih,))
        w_hh = h.param(f"{kind}_w_hh", (n * gates * HID, HID))
        kw = dict(hidden_size=HID, num_layers=layers, bidirectional=True, lengths=lengths)
        h0 = h.input(f"{kind}_h0", (n, None, HID))
        if kind == "lstm":
            outs += h.lstm_carry(x, w_ih, w_hh, h.param("lstm_bias", (n * gates * HID,)), h0,
                                 h.input("lstm_c0", (n, None, HID)), **kw)
        else:
            outs += h.gru_carry(x, w_ih, w_hh, h.param("gru_b_ih", (n, gates * HID)),
                                h.param("gru_b_hh", (n, gates * HID)), h0, **kw)
    outs += h.lstm_carry(x, h.param("peep_w_ih", (8 * HID, FEAT)),
                         h.param("peep_w_hh", (8 * HID, HID)), h.param("peep_bias", (8 * HID,)),
                         h.input("peep_h0", (2, None, HID)), h.input("peep_c0", (2, None, HID)),
                         hidden_size=HID, bidirectional=True,
                         peephole=h.param("peep_p", (2, 3 * HID)))
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
def test_rnn_lengths_and_peepholes(target: str) -> None:
    """``lengths``: rows of different lengths against torch's packed sequences
    (``pack_padded_sequence``: the reverse direction starts at each row's last step, the
    padding outputs zeros, the final states are each row's own); a peephole LSTM against a
    torch step loop written from ONNX's LSTM equations; batch and length dynamic."""
    mods = {"lstm": torch_rnn("lstm", 2, True, seed=21), "gru": torch_rnn("gru", 1, True,
                                                                         seed=22)}
    peep_mod = torch_rnn("lstm", 1, True, seed=23)
    peep = torch.randn(2, 3 * HID, generator=torch.Generator().manual_seed(24))
    weights = packed_weights("lstm", mods["lstm"], "lstm") | packed_weights(
        "gru", mods["gru"], "gru") | packed_weights("lstm", peep_mod, "peep")
    weights["peep_p"] = peep.numpy()
    prog = rlx.runtime.load(rlx.compile(ragged_module(), target), DEVICE[target], weights)
    rng = np.random.default_rng(6)
    pack = torch.nn.utils.rnn
    for lengths in (np.array([5, 2, 4]), np.array([1, 3])):
        batch, seq = len(lengths), int(lengths.max())
        x = rng.standard_normal((batch, seq, FEAT)).astype(np.float32)
        init = {f"{k}_{n}": rng.standard_normal((layers, batch, HID)).astype(np.float32)
                for k, layers in (("lstm", 4), ("gru", 2), ("peep", 2))
                for n in (("h0", "c0") if k != "gru" else ("h0",))}
        got = list(prog.main(x=x, lengths=lengths.astype(np.int64), **init))
        want = []
        with torch.no_grad():
            t = {k: torch.from_numpy(v) for k, v in init.items()}
            packed = pack.pack_padded_sequence(torch.from_numpy(x), torch.from_numpy(lengths),
                                               batch_first=True, enforce_sorted=False)
            for kind, mod in mods.items():
                state = (t["lstm_h0"], t["lstm_c0"]) if kind == "lstm" else t["gru_h0"]
                y, fin = mod(packed, state)
                y = pack.pad_packed_sequence(y, batch_first=True, total_length=seq)[0]
                want += [y, *(fin if kind == "lstm" else (fin,))]
            want += torch_peephole_lstm(peep_mod, peep, torch.from_numpy(x), t["peep_h0"],
                                        t["peep_c0"])
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w.numpy(), "f32", f"lengths {list(lengths)} output {i}")


# --------------------------------------------------------------------------------------
# Gated DeltaNet against HF transformers' Qwen3-Next recurrent rule
# --------------------------------------------------------------------------------------

GB, GH, GN = 2, 3, 8  # batch, heads, state size


def gdn_module() -> rlx.HirModule:
    """Both variants over the same dynamic-length inputs: ``y`` (zero state), then
    ``y, final_state`` from ``state``."""
    h = rlx.HirModule("gdn_variants")
    q, k, v = (h.input(n, (GB, None, GH, GN)) for n in "qkv")
    g, beta = h.input("g", (GB, None, GH)), h.input("beta", (GB, None, GH))
    state = h.input("state", (GB, GH, GN, GN))
    y0 = h.gated_delta_net(q, k, v, g, beta, GN)
    y1, final = h.gated_delta_net_carry(q, k, v, g, beta, state, GN)
    h.set_outputs([y0, y1, final])
    return h


def gdn_inputs(rng: np.random.Generator, seq: int,
               dims: tuple[int, int, int] = (GB, GH, GN)) -> dict[str, np.ndarray]:
    """q, k L2-normalized per head (the op's contract), ``g = -softplus(·)`` log decays,
    ``beta = sigmoid(·)``, a random initial state; ``dims``: batch, heads, state size."""
    b, h, n = dims
    def unit(shape: tuple[int, ...]) -> np.ndarray:
        x = rng.standard_normal(shape)
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    shape = (b, seq, h, n)
    a = rng.standard_normal((b, seq, h))
    out = {"q": unit(shape), "k": unit(shape), "v": rng.standard_normal(shape),
           "g": -np.log1p(np.exp(a)), "beta": 1 / (1 + np.exp(-rng.standard_normal(a.shape))),
           "state": rng.standard_normal((b, h, n, n)) * 0.5}
    return {name: x.astype(np.float32) for name, x in out.items()}


def hf_gdn(x: dict[str, np.ndarray], carry: bool) -> tuple[np.ndarray, np.ndarray]:
    """``torch_recurrent_gated_delta_rule`` of transformers' Qwen3-Next (the pure-torch
    reference HF falls back to without fla). Its layout is the op's: q/k/v
    ``[B, S, H, n]``, g/beta ``[B, S, H]``, state ``[B, H, n_k, n_v]``. q and k are passed
    already normalized with ``use_qk_l2norm_in_kernel=False``; it scales q by
    ``1/sqrt(n)`` itself, as the op does, so nothing is transformed."""
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        torch_recurrent_gated_delta_rule,
    )

    t = {n: torch.from_numpy(a) for n, a in x.items()}
    y, final = torch_recurrent_gated_delta_rule(
        t["q"], t["k"], t["v"], t["g"], t["beta"],
        initial_state=t["state"] if carry else None, output_final_state=True,
        use_qk_l2norm_in_kernel=False)
    return y.numpy(), final.numpy()


def assert_matches_hf(x: dict[str, np.ndarray], outs: tuple[Any, Any, Any], what: str
                      ) -> None:
    """``outs`` = ``gdn_module``'s ``(y (zero state), y, final_state)`` for inputs ``x``,
    against HF's rule."""
    want0, _ = hf_gdn(x, carry=False)
    want1, want_final = hf_gdn(x, carry=True)
    assert_close(outs[0], want0, "f32", f"{what} y (zero state)")
    assert_close(outs[1], want1, "f32", f"{what} y (carried state)")
    assert_close(outs[2], want_final, "f32", f"{what} final_state")


@functools.cache
def gdn_program(target: str) -> rlx.runtime.Program:
    return rlx.runtime.load(rlx.compile(gdn_module(), target), DEVICE[target])


@pytest.mark.parametrize("target", TARGETS)
def test_gated_delta_net_matches_qwen3_next(target: str) -> None:
    prog = gdn_program(target)
    rng = np.random.default_rng(2)
    for seq in (9, 1):
        x = gdn_inputs(rng, seq)
        assert_matches_hf(x, prog.main(**x), f"gdn S={seq}")


def test_gated_delta_net_split_state_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step CUDA and ROCm take (``kᵀS`` and ``qᵀS`` as two reductions, ``k·q`` scaled
    after its sum; ``registry.LLVMGPU_TARGETS``), which no CPU or Vulkan test would
    otherwise run: on llvm-cpu against Qwen3-Next's reference, zero and carried state."""
    from rlx.lowering import registry

    one = rlx.compile(gdn_module(), "llvm-cpu", emit="linalg")
    monkeypatch.setattr(registry, "LLVMGPU_TARGETS", ("llvm-cpu",))
    assert rlx.compile(gdn_module(), "llvm-cpu", emit="linalg") != one
    prog = rlx.runtime.load(rlx.compile(gdn_module(), "llvm-cpu"), DEVICE["llvm-cpu"])
    x = gdn_inputs(np.random.default_rng(5), 5)
    assert_matches_hf(x, prog.main(**x), "split reads:")


def test_gated_delta_net_decode_steps_chain() -> None:
    """Prefill 3 steps, then 3 single-token decode steps, each fed the previous final
    state: the same outputs and final state as one call over the 6 steps."""
    prog = gdn_program("llvm-cpu")
    x = gdn_inputs(np.random.default_rng(3), 6)
    _, y_whole, final_whole = prog.main(**x)
    state = x["state"]
    ys = []
    for lo, hi in ((0, 3), (3, 4), (4, 5), (5, 6)):
        part = {n: np.ascontiguousarray(a[:, lo:hi]) for n, a in x.items() if n != "state"}
        _, y, state = prog.main(**part, state=state)
        ys.append(y)
    assert_close(np.concatenate(ys, axis=1), y_whole, "f32", "chained y")
    assert_close(state, final_whole, "f32", "chained final_state")


def gdn_step_module(b: int, h: int, n: int, extra: int = 0, in_place: bool = True
                    ) -> rlx.HirModule:
    """One decode step of ``b`` rows on a state of ``b + extra`` (``state_in_place``:
    llvm-cpu's gdn_kernel dispatch)."""
    m = rlx.HirModule(f"gdn_step_{b}x{h}x{n}_{extra}_{int(in_place)}")
    q, k, v = (m.input(name, (b, 1, h, n)) for name in "qkv")
    g, beta = m.input("g", (b, 1, h)), m.input("beta", (b, 1, h))
    y, final = m.gated_delta_net_carry(q, k, v, g, beta, m.input("state", (b + extra, h, n, n)),
                                       n, state_in_place=in_place)
    m.set_outputs([y, final])
    return m


@pytest.mark.parametrize("target", TARGETS)
def test_gated_delta_net_in_place_step_matches_qwen3_next(target: str) -> None:
    """The decode step (llvm-cpu's hand-written scan kernel, checked to be the one compiled,
    with or without ``state_in_place``; the linalg step elsewhere) against HF's rule, over
    chained steps that each take the previous final state, at Qwen3.5's n = 128 and at 32;
    and a state of more rows than the step (a batched server's first slots): its other rows
    come back unchanged, in place and in the linalg form."""
    for b, h, n, extra, in_place in ((3, 2, 32, 0, True), (2, 2, 128, 0, True),
                                     (2, 2, 32, 3, True), (2, 2, 32, 3, False)):
        module = gdn_step_module(b, h, n, extra, in_place)
        if target == "llvm-cpu":
            assert f"rlx_gdn_scan_{b}x{h}x{n}_s1" in rlx.compile(module, emit="linalg")
        prog = rlx.runtime.load(rlx.compile(module, target), DEVICE[target])
        rng = np.random.default_rng(n + extra)
        state = gdn_inputs(rng, 1, (b + extra, h, n))["state"]
        want_state = state
        for step in range(3):
            x = {**gdn_inputs(rng, 1, (b, h, n)), "state": state}
            y, state = prog.main(**x)
            want_y, want_rows = hf_gdn({**x, "state": want_state[:b]}, carry=True)
            want_state = np.concatenate([want_rows, want_state[b:]])
            what = f"step {step} ({b}x{h}x{n} of {b + extra} rows, in place {in_place})"
            assert_close(y, want_y, "f32", f"{what} y")
            assert_close(state, want_state, "f32", f"{what} state")
            np.testing.assert_array_equal(np.asarray(state)[b:], want_state[b:], what)
            state = np.asarray(state)


def gdn_scan_module(b: int, h: int, n: int) -> rlx.HirModule:
    """``gdn_module`` at a size llvm-cpu's scan kernel takes (``n`` a multiple of 16)."""
    m = rlx.HirModule(f"gdn_scan_{b}x{h}x{n}")
    q, k, v = (m.input(name, (b, None, h, n)) for name in "qkv")
    g, beta = m.input("g", (b, None, h)), m.input("beta", (b, None, h))
    y0 = m.gated_delta_net(q, k, v, g, beta, n)
    y1, final = m.gated_delta_net_carry(q, k, v, g, beta, m.input("state", (b, h, n, n)), n)
    m.set_outputs([y0, y1, final])
    return m


@pytest.mark.parametrize("dims", [(2, 3, 32), (1, 2, 128)])
def test_gated_delta_net_scan_kernel_matches_qwen3_next(dims: tuple[int, int, int]) -> None:
    """llvm-cpu's scan kernel (one dispatch over a dynamic number of steps, checked to be
    the one compiled) against HF's rule from the zero state and a carried one, at lengths
    0, 1, 9 and 40 from one module; and a prompt in chunks (each fed the last final state)
    gives bit for bit the whole prompt's outputs and state: every step is the same
    arithmetic in the same order wherever the call boundaries fall."""
    b, h, n = dims
    module = gdn_scan_module(b, h, n)
    assert f"rlx_gdn_scan_{b}x{h}x{n}_dyn" in rlx.compile(module, emit="linalg")
    prog = rlx.runtime.load(rlx.compile(module, "llvm-cpu"), DEVICE["llvm-cpu"])
    rng = np.random.default_rng(n)
    for seq in (9, 1, 0, 40):
        x = gdn_inputs(rng, seq, dims)
        assert_matches_hf(x, prog.main(**x), f"scan S={seq}")
    _, y_whole, final_whole = prog.main(**x)
    state, ys = x["state"], []
    for lo, hi in ((0, 17), (17, 18), (18, 40)):
        part = {name: np.ascontiguousarray(a[:, lo:hi]) for name, a in x.items()
                if name != "state"}
        _, y, state = prog.main(**part, state=state)
        ys.append(np.asarray(y))
        state = np.asarray(state)
    np.testing.assert_array_equal(np.concatenate(ys, axis=1), np.asarray(y_whole))
    np.testing.assert_array_equal(state, np.asarray(final_whole))


def test_gated_delta_net_scan_kernel_dynamic_batch() -> None:
    """The scan kernel with the batch and the state's rows known only at run time
    (rlx-serve's batched prefill): one module at batches 3, 1 and 2, on states of as many
    rows and of more (whose other rows come back as they were), lengths 7, 5 and 0."""
    h, n = 2, 32
    m = rlx.HirModule("gdn_scan_dynamic_batch")
    q, k, v = (m.input(name, (None, None, h, n)) for name in "qkv")
    g, beta = m.input("g", (None, None, h)), m.input("beta", (None, None, h))
    y0 = m.gated_delta_net(q, k, v, g, beta, n)
    y1, final = m.gated_delta_net_carry(q, k, v, g, beta, m.input("state", (None, h, n, n)), n)
    m.set_outputs([y0, y1, final])
    assert f"rlx_gdn_scan_dx{h}x{n}_dyn" in rlx.compile(m, emit="linalg")
    prog = rlx.runtime.load(rlx.compile(m, "llvm-cpu"), DEVICE["llvm-cpu"])
    rng = np.random.default_rng(11)
    for batch, extra, seq in ((3, 0, 7), (1, 2, 5), (2, 1, 0)):
        x = gdn_inputs(rng, seq, (batch, h, n))
        state = gdn_inputs(rng, 1, (batch + extra, h, n))["state"]
        got = prog.main(**{**x, "state": state})
        what = f"batch {batch} of {batch + extra} state rows, S={seq}"
        assert_matches_hf({**x, "state": state[:batch]}, (got[0], got[1], np.asarray(got[2])[
            :batch]), what)
        np.testing.assert_array_equal(np.asarray(got[2])[batch:], state[batch:], what)


# --------------------------------------------------------------------------------------
# Loops stay loops
# --------------------------------------------------------------------------------------


def scans_module(seq: int) -> rlx.HirModule:
    """A GDN, a 2-layer bidirectional LSTM and a GRU over a static sequence length."""
    h = rlx.HirModule(f"scans_{seq}")
    q = h.input("q", (1, seq, 4, 16))
    g = h.input("g", (1, seq, 4))
    x = h.input("x", (2, seq, 8))
    y_gdn = h.gated_delta_net(q, q, q, g, g, 16)
    wih = h.param("wih", (4 * 16 * 8 * 2 + 4 * 16 * 32 * 2,))
    y_lstm = h.lstm(x, wih, h.param("whh", (2 * 2 * 64, 16)), h.param("b", (256,)), 16, 2, True)
    y_gru = h.gru(x, h.param("gih", (48, 8)), h.param("ghh", (48, 16)), h.param("bih", (48,)),
                  h.param("bhh", (48,)), 16)
    h.set_outputs([y_gdn, y_lstm, y_gru])
    return h


def linalg_ops(h: rlx.HirModule) -> list[str]:
    module = parse_module(str(h), f"{h.name}.hir")
    lower_hir_to_mir(module, LoweringOptions())
    lower_mir_to_linalg(module, LoweringOptions())
    return [op.name for op in walk_ops(module.operation)]


def test_scans_are_loops_whatever_the_sequence_length() -> None:
    """The lowered IR of S = 16 and S = 256 has the same ops (one scf.for per scan, layer
    and direction: 1 + 4 + 1), and the llvm-cpu vmfbs are the same size within 10% (an
    unrolled scan would grow 16x)."""
    short, long = linalg_ops(scans_module(16)), linalg_ops(scans_module(256))
    assert short == long
    assert short.count("scf.for") == 6
    sizes = [len(rlx.compile(scans_module(s), "llvm-cpu")) for s in (16, 256)]
    assert abs(sizes[1] - sizes[0]) <= 0.1 * sizes[0], sizes


def test_state_of_the_wrong_shape_is_refused_before_the_call() -> None:
    x = gdn_inputs(np.random.default_rng(4), 4)
    x["state"] = np.ascontiguousarray(x["state"][..., :4])
    with pytest.raises(rlx.RunError, match=r"input 'state': expected float32 \[2, 3, 8, 8\], "
                                           r"found float32 \[2, 3, 8, 4\]"):
        gdn_program("llvm-cpu").main(**x)


def test_f16_scans_against_the_spec_reference() -> None:
    """16-bit operands: the scans run in f32 inside and round their results once, against
    the float64 numpy reference of spec 2.12-2.14 (rlx.reference.recurrent)."""
    from harness import check_module

    h = rlx.HirModule("scans_f16")
    q = h.input("q", (1, None, 2, 8), "f16")
    g = h.input("g", (1, None, 2), "f16")
    s0 = h.input("s0", (1, 2, 8, 8), "f16")
    x = h.input("x", (2, None, 4), "f16")
    y_gdn, fin = h.gated_delta_net_carry(q, q, q, g, g, s0, 8)
    y_lstm, hn, cn = h.lstm_carry(x, h.param("wih", (32, 4), "f16"), h.param("whh", (32, 8), "f16"),
                                  h.param("b", (32,), "f16"), h.input("h0", (1, 2, 8), "f16"),
                                  h.input("c0", (1, 2, 8), "f16"), 8)
    y_gru = h.gru(x, h.param("gih", (24, 4), "f16"), h.param("ghh", (24, 8), "f16"),
                  h.param("gbi", (24,), "f16"), h.param("gbh", (24,), "f16"), 8)
    h.set_outputs([y_gdn, fin, y_lstm, hn, cn, y_gru])
    rng = np.random.default_rng(6)
    unit = rng.standard_normal((1, 5, 2, 8))
    unit /= np.linalg.norm(unit, axis=-1, keepdims=True)
    check_module(h, "llvm-cpu", dyn=5, inputs={
        "q": unit.astype(np.float16), "g": -np.abs(rng.standard_normal((1, 5, 2))).astype(
            np.float16)})
