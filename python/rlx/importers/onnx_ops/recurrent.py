"""ONNX recurrent ops: LSTM and GRU (one layer; forward, reverse or bidirectional) as
``rlx_mir.lstm`` / ``gru``, the weights repacked at import time into rlx's gate order.

ONNX packs gates ``i, o, f, c`` (LSTM) and ``z, r, h`` (GRU) per direction, with the input
and recurrence biases apart; rlx packs ``i, f, g, o`` and ``r, z, n`` (PyTorch's order)
and adds the LSTM biases. ``sequence_lens`` is the scans' ``lengths`` operand, LSTM
peepholes (``P``, reordered to ``i, f, o``) their ``peephole`` operand. What rlx's scans
do not compute is refused: clipping, ``input_forget``, other activations. A ``reverse``
scan is the forward scan of the time-reversed sequence (each row reversed within its own
length when ``sequence_lens`` is given). GRU's ``linear_before_reset`` (0 by default in
ONNX, 1 from torch) is the attribute of the same name on ``rlx_mir.gru``.
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.ir.types import DType

LSTM_ORDER = (0, 2, 3, 1)
"""ONNX ``i, o, f, c`` -> rlx ``i, f, g, o``."""
GRU_ORDER = (1, 0, 2)
"""ONNX ``z, r, h`` -> rlx ``r, z, n``."""


def _gates(w: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Reorder the gate blocks along axis 0 of one direction's ``[G*H, ...]``."""
    return np.concatenate([np.split(w, len(order), axis=0)[g] for g in order], axis=0)


def _refuse(node: Node, gates: int) -> tuple[int, bool]:
    """(hidden size, bidirectional) after refusing what rlx does not compute."""
    direction = node.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        node.fail(f"direction '{direction}': ONNX defines forward, reverse and bidirectional")
    if node.attr("clip") is not None:
        node.fail("cell clipping is not supported")
    if node.attr("input_forget", 0):
        node.fail("input_forget = 1 is not supported")
    if node.attr("activations") is not None:
        default = ["Sigmoid", "Tanh", "Tanh"] * (2 if direction == "bidirectional" else 1)
        acts = [a.decode() if isinstance(a, bytes) else a for a in node.attr("activations")]
        if acts != default:
            node.fail(f"activations {acts}: rlx computes the default {default[:3]}")
    hidden = node.attr("hidden_size")
    if hidden is None:
        w = node.static(1, "W")
        hidden = w.shape[1] // gates
    return int(hidden), direction == "bidirectional"


def _lengths(node: Node) -> HirValue | None:
    """``sequence_lens`` (``[B]`` int32), or None."""
    return node.tensor(4) if node.has(4) else None


def _batch_first(node: Node, x: HirValue) -> HirValue:
    x = x if node.attr("layout", 0) else node.mir("transpose", [x], perm=[1, 0, 2])
    if node.attr("direction", "forward") == "reverse":
        return _backwards(node, x, _lengths(node))
    return x


def _backwards(node: Node, v: HirValue, lengths: HirValue | None) -> HirValue:
    """``v [B, S, ...]`` with its steps in reverse order: a ``reverse`` scan is the forward
    scan of the reversed sequence, its outputs reversed back (the final state is the one
    after step 0 either way). With ``lengths``, row ``b`` reverses its first
    ``lengths[b]`` steps and keeps the rest in place (a gather per row, its indices
    clamped by the gather: a length past ``S`` reads no row out of bounds)."""
    steps = node.dims_of(v)[1]
    at = node.sizes.iota(steps, DType.I64, node.fail)
    one = node.as_tensor(node.scalar(1, DType.I64))
    if lengths is None:
        last = node.mir("binary", [node.sizes.scalar(steps, DType.I64, node.fail), one],
                        kind="sub")
        return node.known(node.mir("gather", [v, node.mir("binary", [last, at], kind="sub")],
                                   axis=1, batch_dims=0), node.dims_of(v))
    rows = node.mir("reshape", [node.cast(lengths, DType.I64)], new_shape=[-1, 1])
    back = node.mir("binary", [node.mir("binary", [rows, one], kind="sub"), at], kind="sub")
    inside = node.mir("compare", [at, rows], kind="lt")
    index = node.mir("where", [inside, back, at])
    return node.known(node.mir("gather", [v, index], axis=1, batch_dims=1), node.dims_of(v))


def _outputs(node: Node, y: HirValue, states: list[HirValue], dirs: int, hidden: int
             ) -> list[Value]:
    """rlx's ``[B, S, dirs*H]`` as ONNX's ``Y [S, dirs, B, H]`` (layout 1: ``[B, S, dirs,
    H]``), then the final states ``[dirs, B, H]`` (layout 1: ``[B, dirs, H]``)."""
    if node.attr("direction", "forward") == "reverse":
        y = _backwards(node, y, _lengths(node))
    dims = node.dims_of(y)
    split = node.known(node.mir("reshape", [y], new_shape=[
        -2 if y.shape[0] is None else y.shape[0], -3 if y.shape[1] is None else y.shape[1],
        dirs, hidden]), [dims[0], dims[1], dirs, hidden])
    layout = node.attr("layout", 0)
    out: list[Value] = [split if layout else node.mir("transpose", [split], perm=[1, 2, 0, 3])]
    for s in states:
        out.append(node.mir("transpose", [s], perm=[1, 0, 2]) if layout else s)
    return out


def _initial(node: Node, i: int, dirs: int, batch: object, hidden: int, x: HirValue
             ) -> HirValue:
    """Initial state input ``i`` (``[dirs, B, H]``; layout 1: ``[B, dirs, H]``), or
    zeros."""
    if node.has(i):
        s = node.tensor(i)
        return node.mir("transpose", [s], perm=[1, 0, 2]) if node.attr("layout", 0) else s
    zero = np.zeros((), np.asarray(node.scalar(0, x)).dtype)
    return node.sizes.full(zero, [dirs, batch, hidden], node.fail)  # type: ignore[list-item]


def _weights(node: Node, gates: int, order: tuple[int, ...], hidden: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(W, R, B) per direction with rlx's gate order; B is ``[dirs, 2*G*H]``."""
    w, r = node.static(1, "W"), node.static(2, "R")
    dirs = w.shape[0]
    b = node.static(3, "B") if node.has(3) else np.zeros((dirs, 2 * gates * hidden), w.dtype)
    w = np.stack([_gates(w[d], order) for d in range(dirs)])
    r = np.stack([_gates(r[d], order) for d in range(dirs)])
    b = np.stack([np.concatenate([_gates(half, order) for half in np.split(b[d], 2)])
                  for d in range(dirs)])
    return w, r, b


def _optional(node: Node) -> tuple[list[HirValue], dict[str, bool]]:
    """The scan's optional trailing operands and their presence attributes: LSTM
    peepholes (``P [dirs, 3H]``, ONNX's ``i, o, f`` as rlx's ``i, f, o``), then
    ``sequence_lens`` as ``lengths``."""
    operands, attrs = [], {}
    if node.op_type == "LSTM" and node.has(7):
        p = node.static(7, "P")
        dirs, hidden = p.shape[0], p.shape[1] // 3
        p = np.ascontiguousarray(p.reshape(dirs, 3, hidden)[:, [0, 2, 1]])
        operands.append(node.as_tensor(p.reshape(dirs, 3 * hidden), f"{node.proto.input[7]}.rlx"))
        attrs["has_peephole"] = True
    lengths = _lengths(node)
    if lengths is not None:
        operands.append(lengths)
        attrs["has_lengths"] = True
    return operands, attrs


@converter("LSTM", const_inputs=(1, 2, 3, 7), since=7)
def convert_lstm(node: Node) -> list[Value]:
    hidden, bidirectional = _refuse(node, 4)
    dirs = 2 if bidirectional else 1
    x = _batch_first(node, node.tensor(0))
    w, r, b = _weights(node, 4, LSTM_ORDER, hidden)
    bias = b[:, :4 * hidden] + b[:, 4 * hidden:]
    batch = node.dims_of(x)[0]
    h0 = _initial(node, 5, dirs, batch, hidden, x)
    c0 = _initial(node, 6, dirs, batch, hidden, x)
    name = node.proto.input[1]
    extra, attrs = _optional(node)
    y, hn, cn = node.h.mir_multi("lstm", [x, node.as_tensor(w.reshape(dirs * 4 * hidden, -1),
                                                      f"{name}.rlx"),
                                    node.as_tensor(r.reshape(dirs * 4 * hidden, hidden),
                                                   f"{node.proto.input[2]}.rlx"),
                                    node.as_tensor(bias.reshape(-1), f"{name}.bias"),
                                    h0, c0, *extra],
                           hidden_size=hidden, num_layers=1, bidirectional=bidirectional,
                           carry=True, **attrs)
    return _outputs(node, y, [hn, cn], dirs, hidden)


@converter("GRU", const_inputs=(1, 2, 3), since=7)
def convert_gru(node: Node) -> list[Value]:
    hidden, bidirectional = _refuse(node, 3)
    dirs = 2 if bidirectional else 1
    x = _batch_first(node, node.tensor(0))
    w, r, b = _weights(node, 3, GRU_ORDER, hidden)
    batch = node.dims_of(x)[0]
    h0 = _initial(node, 5, dirs, batch, hidden, x)
    name = node.proto.input[1]
    extra, attrs = _optional(node)
    y, hn = node.h.mir_multi("gru", [x, node.as_tensor(w.reshape(dirs * 3 * hidden, -1),
                                                  f"{name}.rlx"),
                                node.as_tensor(r.reshape(dirs * 3 * hidden, hidden),
                                               f"{node.proto.input[2]}.rlx"),
                                node.as_tensor(np.ascontiguousarray(b[:, :3 * hidden]
                                                                    ).reshape(-1),
                                               f"{name}.b_ih"),
                                node.as_tensor(np.ascontiguousarray(b[:, 3 * hidden:]
                                                                    ).reshape(-1),
                                               f"{name}.b_hh"), h0, *extra],
                       hidden_size=hidden, num_layers=1, bidirectional=bidirectional,
                       carry=True,
                       linear_before_reset=bool(node.attr("linear_before_reset", 0)), **attrs)
    return _outputs(node, y, [hn], dirs, hidden)
