"""HIR recurrent / scan blocks: gated_delta_net, lstm, gru.

RLX overwrites the carried state (``state``, ``h0``/``c0``) in place; rlx returns the
final state as extra results instead, so decode steps chain: step t's state feeds step t+1.
"""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import BLOCK_FLOAT_TYPES
from rlx.dialects.hir.dialect import HIR
from rlx.dialects.schema import Attr, AttrValues, Check, Operand, bool_attr, int_attr, opt
from rlx.ir.types import DType, TensorInfo


def _carry_state(a: AttrValues) -> bool:
    return bool(a["carry_state"])


def carry(a: AttrValues) -> bool:
    return bool(a["carry"])


GDN_OPERANDS = ["q", "k", "v", "g", "beta", opt("state", _carry_state)]
GDN_RESULTS = ["y", Operand("final_state", when=_carry_state)]
GDN_ATTRS = [int_attr("state_size", "n: the key / value head dim (square n x n state)"),
             bool_attr("carry_state", "take an initial state and return the final one",
                       default=False),
             bool_attr("state_in_place", "the final state may be computed in the initial "
                       "state's buffer (the caller gives that buffer up: a decode step's "
                       "state, passed in and returned); carry_state only", optional=True)]


def gdn_results(c: Check) -> list[TensorInfo]:
    """Shared rule of HIR and MIR ``gated_delta_net``."""
    n = c.positive("state_size")
    t = checks.float_operands(c, "q", "k", "v", "g", "beta", types=BLOCK_FLOAT_TYPES)
    c.rank("q", 4)
    c.dim("q", 3, n, "state_size")
    for name in ("k", "v"):
        checks.same_shape(c, "q", name)
    for name in ("g", "beta"):
        c.shape(name, c.refs("q")[:3], "[B, S, H]: one value per head and step")
    b, _, h, _ = t.shape
    state = t.with_shape((b, h, n, n))
    if c.attrs.get("state_in_place") and not c.attr("carry_state"):
        c.fail("attribute 'state_in_place'", "only with carry_state = true",
               "carry_state = false")
    if c.has("state"):
        checks.float_operands(c, "q", "state", types=BLOCK_FLOAT_TYPES)
        c.rank("state", 4)
        c.at_least("state", 0, c.ref("q", 0), "[B', H, state_size, state_size], B' >= B: "
                   "row b < B is q's row b")
        for axis, want in ((1, c.ref("q", 2)), (2, n), (3, n)):
            c.dim("state", axis, want, "[B', H, state_size, state_size]")
        return [t, state.with_shape(c["state"].shape)]
    return [t]


@HIR.op("gated_delta_net", operands=GDN_OPERANDS, attrs=GDN_ATTRS, results=GDN_RESULTS,
        label=lambda a: "gated_delta_net_carry" if a["carry_state"] else "gated_delta_net")
def gated_delta_net(c: Check) -> list[TensorInfo]:
    """Gated DeltaNet scan (Qwen3.5 linear attention), one n x n state per batch and head.

    Operands: ``q``, ``k``, ``v`` ``[B, S, H, n]`` (q and k L2-normalized by the caller, not
    pre-scaled), ``g`` ``[B, S, H]`` (log decay), ``beta`` ``[B, S, H]``, and ``state``
    ``[B', H, n, n]`` iff ``carry_state`` (``B' >= B``: rows ``b < B`` are stepped by
    row ``b`` of the inputs, rows from ``B`` on are returned as they are: a batched
    server's first ``B`` slots; else the state starts at zero; with
    ``state_in_place`` the final state may reuse ``state``'s buffer, a lowering's licence
    that changes no value: the caller does not read ``state`` after the op). Per step:
    ``S = exp(g) S; S += k ⊗ (beta (v - kᵀS)); y = qᵀS / sqrt(n)``. Results: ``y``
    ``[B, S, H, n]`` and, iff ``carry_state``, ``final_state`` ``[B', H, n, n]``.

    Example::

        %y, %s = "rlx_hir.gated_delta_net"(%q, %k, %v, %g, %beta, %s0)
              {carry_state = true, state_size = 128 : i64}
            : (tensor<1x?x16x128xf32>, tensor<1x?x16x128xf32>, tensor<1x?x16x128xf32>,
               tensor<1x?x16xf32>, tensor<1x?x16xf32>, tensor<1x16x128x128xf32>)
            -> (tensor<1x?x16x128xf32>, tensor<1x16x128x128xf32>)
    """
    return gdn_results(c)


def rnn_attrs() -> list[Attr]:
    return [int_attr("hidden_size"), int_attr("num_layers", default=1),
            bool_attr("bidirectional", default=False),
            bool_attr("carry", "take initial states and return the final ones", default=False),
            bool_attr("has_lengths", "a lengths operand [B]: row b is a sequence of "
                      "lengths[b] steps (absent: every row has S)", optional=True)]


def lstm_attrs() -> list[Attr]:
    """``rnn_attrs`` plus ``has_peephole``: a peephole operand (ONNX's ``P``)."""
    return [*rnn_attrs(),
            bool_attr("has_peephole", "a peephole operand: the cell state feeds the i, f "
                      "and o gates (absent: no peepholes)", optional=True)]


def has_lengths(a: AttrValues) -> bool:
    return bool(a.get("has_lengths"))


def has_peephole(a: AttrValues) -> bool:
    return bool(a.get("has_peephole"))


LSTM_OPERANDS = ["x", "w_ih", "w_hh", "bias", opt("h0", carry), opt("c0", carry),
                 opt("peephole", has_peephole), opt("lengths", has_lengths)]
GRU_OPERANDS = ["x", "w_ih", "w_hh", "b_ih", "b_hh", opt("h0", carry),
                opt("lengths", has_lengths)]


def gru_attrs() -> list[Attr]:
    """``rnn_attrs`` plus ``linear_before_reset``: absent or true is PyTorch's and RLX's GRU
    (the reset gate scales ``h W_hnᵀ + b_hn``); false is ONNX's default form, where it
    scales ``h`` before the matmul: ``n = tanh(a_n + (r h) W_hnᵀ + b_hn)``."""
    return [*rnn_attrs(),
            bool_attr("linear_before_reset", "false: the reset gate scales h before its "
                      "matmul (ONNX's default); absent or true: after (PyTorch)",
                      optional=True)]


def linear_before_reset(a: AttrValues) -> bool:
    """The GRU form of ``a`` (absent means PyTorch's, true)."""
    return a.get("linear_before_reset") is not False


def _packed(c: Check, name: str, blocks: list[tuple[int, int]], what: str) -> None:
    """A packed weight: the concatenation of ``[rows, cols]`` blocks (layer-major, then
    direction), flat (rank 1) or rank 2 when every block has the same width."""
    total = sum(r * w for r, w in blocks)
    t = c.rank(name, 1, 2)
    if t.rank == 2:
        widths = {w for _, w in blocks}
        if len(widths) != 1:
            c.fail(f"operand '{name}'", f"rank 1 (flat: {what} blocks differ in width "
                   f"{sorted(widths)})", str(t))
        c.dim(name, 1, widths.pop(), f"the width of each {what} block")
    c.numel(name, total, f"{len(blocks)} {what} blocks, layer-major then direction")


def rnn_results(c: Check, gates: int, biases: tuple[str, ...],
                states: tuple[str, ...]) -> list[TensorInfo]:
    """Shared rule of LSTM (4 gates) and GRU (3 gates), HIR and MIR."""
    hidden = c.positive("hidden_size")
    layers = c.positive("num_layers")
    dirs = 2 if c.attr("bidirectional") else 1
    present = [s for s in states if c.has(s)]
    x = checks.float_operands(c, "x", "w_ih", "w_hh", *biases, *present, types=BLOCK_FLOAT_TYPES)
    c.rank("x", 3)
    feat = x.shape[2]
    if feat is None:
        c.fail("operand 'x' dim 2", "a static input size", str(x))
    rows = gates * hidden
    ih = [(rows, feat if layer == 0 else dirs * hidden)
          for layer in range(layers) for _ in range(dirs)]
    _packed(c, "w_ih", ih, f"[{gates}*hidden, input]")
    _packed(c, "w_hh", [(rows, hidden)] * (layers * dirs), f"[{gates}*hidden, hidden]")
    for b in biases:
        _packed(c, b, [(1, rows)] * (layers * dirs), f"[{gates}*hidden]")
    batch, seq = x.shape[0], x.shape[1]
    state = x.with_shape((layers * dirs, batch, hidden))
    for s in present:
        c.shape(s, (layers * dirs, c.ref("x", 0), hidden),
                "[num_layers * directions, B, hidden]")
    if c.has("peephole"):
        _packed(c, "peephole", [(1, 3 * hidden)] * (layers * dirs), "[3*hidden] (i, f, o)")
    if c.has("lengths"):
        c.dtype("lengths", (DType.I32, DType.I64))
        c.rank("lengths", 1)
        c.dim("lengths", 0, c.ref("x", 0), "one length per batch row of x")
    y = x.with_shape((batch, seq, dirs * hidden))
    return [y] + [state] * len(present)


@HIR.op("lstm", operands=LSTM_OPERANDS, attrs=lstm_attrs(),
        results=["y", Operand("hn", when=carry), Operand("cn", when=carry)], label="lstm")
def lstm(c: Check) -> list[TensorInfo]:
    """Multi-layer, optionally bidirectional LSTM with PyTorch-packed weights (batch first).

    Operands: ``x [B, S, I]``; ``w_ih``: the ``[4H, in_l]`` blocks of every (layer,
    direction), layer-major (``in_0 = I``, ``in_l = D*H``), flat or ``[L*D*4H, I]`` when all
    widths agree; ``w_hh``: ``[4H, H]`` blocks; ``bias``: ``b_ih + b_hh`` pre-summed,
    ``[4H]`` blocks; ``h0``, ``c0`` ``[L*D, B, H]`` iff ``carry``. Gate order i, f, g, o.
    Iff ``has_peephole``: ``peephole``, ``[3H]`` blocks ``(p_i, p_f, p_o)`` (ONNX's ``P``):
    ``i = σ(z_i + p_i c)``, ``f = σ(z_f + p_f c)`` with the previous cell state,
    ``o = σ(z_o + p_o c')`` with the new one. Iff ``has_lengths``: ``lengths [B]`` (i32 or
    i64): row ``b`` is a sequence of ``lengths[b]`` steps (ONNX's ``sequence_lens``, a
    packed sequence in PyTorch): steps ``t >= lengths[b]`` keep the row's states and
    output zeros, so the forward direction ends at step ``lengths[b] - 1`` and the reverse
    one starts there (as ``gru``).
    Results: ``y [B, S, D*H]`` (the last layer; the reverse direction is time-aligned) and,
    iff ``carry``, the final ``hn``, ``cn`` ``[L*D, B, H]``.

    Example::

        %y = "rlx_hir.lstm"(%x, %wih, %whh, %b) {bidirectional = false, carry = false,
              hidden_size = 64 : i64, num_layers = 1 : i64}
            : (tensor<2x?x32xf32>, tensor<256x32xf32>, tensor<256x64xf32>, tensor<256xf32>)
            -> tensor<2x?x64xf32>
    """
    return rnn_results(c, 4, ("bias",), ("h0", "c0"))


@HIR.op("gru", operands=GRU_OPERANDS, attrs=gru_attrs(),
        results=["y", Operand("hn", when=carry)], label="gru")
def gru(c: Check) -> list[TensorInfo]:
    """Multi-layer, optionally bidirectional GRU with PyTorch-packed weights (batch first).

    Operands as ``lstm`` with ``3H`` gate rows (order r, z, n) and separate ``b_ih``,
    ``b_hh`` (the reset gate multiplies the hidden term after its bias):
    ``n = tanh(a_n + r * (h W_hnᵀ + b_hn))``, ``h = (1 - z) n + z h``; with
    ``linear_before_reset = false`` (ONNX's default GRU) ``n = tanh(a_n + (r * h) W_hnᵀ +
    b_hn)``. ``h0 [L*D, B, H]`` iff ``carry``; ``lengths [B]`` iff ``has_lengths`` (as
    ``lstm``). Results: ``y [B, S, D*H]`` and, iff ``carry``, the final ``hn``.

    Example::

        %y, %hn = "rlx_hir.gru"(%x, %wih, %whh, %bih, %bhh, %h0) {bidirectional = false,
              carry = true, hidden_size = 64 : i64, num_layers = 1 : i64}
            : (tensor<2x?x32xf32>, tensor<192x32xf32>, tensor<192x64xf32>, tensor<192xf32>,
               tensor<192xf32>, tensor<1x2x64xf32>) -> (tensor<2x?x64xf32>, tensor<1x2x64xf32>)
    """
    return rnn_results(c, 3, ("b_ih", "b_hh"), ("h0",))
