"""mir-to-linalg for scans: gated_delta_net, lstm, gru.

A Gated DeltaNet on llvm-cpu is one dispatch of a hand-written kernel that walks the
sequence inside (:mod:`.gdn_kernel`; static heads and state size). Every other
scan is an ``scf.for`` over the sequence (``tensor.dim`` when S is dynamic) whose
``iter_args`` are the carried state and the output being filled with
``tensor.insert_slice`` (both pinned to the device so that IREE updates them in place,
see ``loops.for_loop``); the per-step work is linalg on ``[B, ...]`` tensors, and the IR
does not grow with the sequence length. Work that does not depend on the previous step is
hoisted before the loop: LSTM / GRU project every step's input with one matmul
(``x W_ihᵀ``) per layer and direction, so the loop only does ``h W_hhᵀ`` and one generic for
the gates (biases included); GDN computes ``exp(g)`` and ``k·q`` once. Layers and
directions are Python loops (static counts); the reverse direction walks
``t = S-1 .. 0`` and writes at ``t``. With per-row ``lengths`` one more generic a step
keeps a row's states where ``t >= lengths[b]`` and writes zeros there (so the reverse
direction starts at each row's last step); LSTM peepholes are three more ``[H]`` inputs of
the gate generic. Everything runs in f32 (16-bit operands are widened once, results
rounded once).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.dialects.hir.recurrent import linear_before_reset
from rlx.dialects.schema import Decoded
from rlx.lowering import emit, loops
from rlx.lowering.mir_to_linalg import gdn_kernel
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

P, R = emit.PARALLEL, emit.REDUCTION


def _f32(v: ir.Value) -> ir.Value:
    return emit.convert_tensor(v, emit.f32())


def _time(t: ir.Value, last: emit.Size, reverse: bool) -> ir.Value:
    """The position step ``t`` works on: ``t``, or ``S-1-t`` walking backwards."""
    return arith.subi(emit.as_value(last), t) if reverse else t


# --------------------------------------------------------------------------------------
# Gated DeltaNet
# --------------------------------------------------------------------------------------


def _gdn_step(state: ir.Value, k: ir.Value, q: ir.Value, v: ir.Value, decay: ir.Value,
              beta: ir.Value, kq: ir.Value, scale: ir.Value, split: bool = False
              ) -> tuple[ir.Value, ir.Value]:
    """One step on the state ``S [B, H, n, n]``; ``k, q, v`` ``[B, 1, H, n]``,
    ``decay = exp(g)``, ``beta``, ``kq = (k·q) scale`` ``[B, 1, H]``, ``scale = 1/sqrt(n)``.

    Spec 2.12 reads ``S' = e S + k ⊗ d`` with ``d = (v - kᵀ(e S)) beta`` and
    ``y = qᵀS' scale``. Expanding ``qᵀS' = e qᵀS + (q·k) d`` lets one reduction read the old
    state once for both ``kᵀS`` and ``qᵀS``; then ``d`` and ``y`` are per-column, and ``S'``
    one elementwise pass (IREE fuses the three into one dispatch a step). ``split`` (LLVMGPU
    targets): the two reads as two reductions; with a dynamic batch (rlx-serve's batched
    Qwen3.5 prefill) IREE 3.13's CUDA codegen fails to bufferize the two-result one; a
    static batch compiled either way. Returns ``(S', y [B, H, n])``."""
    f32 = emit.f32()
    b, h, n = emit.dim(state, 0), emit.dim(state, 1), emit.dim(state, 2)
    # reduction loops (b, h, j, i): S[b, h, i, j], vectors read at i, results at j
    vec_i = emit.amap(4, [0, "0", 1, 3])
    out_j = emit.amap(4, [0, 1, 2])

    def reads(sv: ir.Value, kv: ir.Value, qv: ir.Value, ka: ir.Value, qa: ir.Value
              ) -> list[ir.Value]:
        return [arith.addf(ka, arith.mulf(sv, kv)), arith.addf(qa, arith.mulf(sv, qv))]

    zeros = [emit.filled([b, h, n], f32, 0.0) for _ in range(2)]
    if split:
        def read(sv: ir.Value, xv: ir.Value, acc: ir.Value) -> ir.Value:
            return arith.addf(acc, arith.mulf(sv, xv))

        ks, qs = (emit.generic([state, x], [z], [emit.amap(4, [0, 1, 3, 2]), vec_i, out_j],
                               [P, P, P, R], read)[0] for x, z in zip((k, q), zeros,
                                                                        strict=True))
    else:
        ks, qs = emit.generic([state, k, q], zeros,
                              [emit.amap(4, [0, 1, 3, 2]), vec_i, vec_i, out_j, out_j],
                              [P, P, P, R], reads)

    def column(vv: ir.Value, ka: ir.Value, qa: ir.Value, e: ir.Value, bt: ir.Value,
               kqv: ir.Value, *_: ir.Value) -> list[ir.Value]:
        d = arith.mulf(arith.subf(vv, arith.mulf(e, ka)), bt)
        return [d, arith.addf(arith.mulf(arith.mulf(e, qa), scale), arith.mulf(kqv, d))]

    head = emit.amap(3, [0, "0", 1])
    ident = emit.identity(3)
    d, y = emit.generic([v, ks, qs, decay, beta, kq], [emit.empty([b, h, n], f32)] * 2,
                        [emit.amap(3, [0, "0", 1, 2]), ident, ident, head, head, head, ident,
                         ident], [P, P, P], column)

    def update(sv: ir.Value, kv: ir.Value, dv: ir.Value, e: ir.Value, _: ir.Value
               ) -> ir.Value:
        return arith.addf(arith.mulf(e, sv), arith.mulf(kv, dv))

    # elementwise loops (b, h, i, j)
    new = emit.generic([state, k, d, decay], [emit.empty([b, h, n, n], f32)],
                       [emit.identity(4), emit.amap(4, [0, "0", 1, 2]), emit.amap(4, [0, 1, 3]),
                        emit.amap(4, [0, "0", 1]), emit.identity(4)], [P] * 4, update)[0]
    return new, y


def _scaled_dot(ctx: LoweringContext, k: ir.Value, q: ir.Value, scale: ir.Value,
                sizes: list[emit.Size]) -> ir.Value:
    """``(k·q) scale`` over the last dim of ``[B, S, H, n]``. On llvm-cpu the scale is in the
    reduction's body: a plain mul-add body is a contraction to IREE, which data-tiles it as a
    matvec and runs ~100x slower (5 ms for 128 x 16 heads). On CUDA / ROCm that body fails
    IREE 3.13's reduction vector distribution ("'func.func' op failed to distribute", heads
    of 64 and 128, static or dynamic rows; checked on an H200): the sum is a plain mul-add
    there, scaled after it."""
    f32 = emit.f32()
    after = ctx.options.llvmgpu

    def body(kv: ir.Value, qv: ir.Value, acc: ir.Value) -> ir.Value:
        kq = arith.mulf(kv, qv)
        return arith.addf(acc, kq if after else arith.mulf(kq, scale))

    dot = emit.generic([k, q], [emit.filled(sizes, f32, 0.0)],
                       [emit.identity(4), emit.identity(4), emit.amap(4, [0, 1, 2])],
                       [P, P, P, R], body)[0]
    return emit.map_elementwise([dot], f32, lambda x: arith.mulf(x, scale)) if after else dot


@MIR_TO_LINALG.register("gated_delta_net")
def lower_gated_delta_net(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``exp(g)`` for every step, then on llvm-cpu (static heads and a state size the
    kernel takes) one dispatch of :mod:`.gdn_kernel`'s scan; else ``(k·q) / sqrt(n)``
    for every step too and an ``scf.for`` with iter_args ``(S [B, H, n, n], y [B, S, H,
    n])``. Zero initial state without ``carry_state``, else ``state``, returned as the
    final state."""
    n = op.attrs["state_size"]
    out_t = emit.elem(op["q"])
    f32 = emit.f32()
    k, q, v = _f32(op["k"]), _f32(op["q"]), _f32(op["v"])
    b, s, h, _ = emit.sizes(k)
    decay = emit.map_elementwise([op["g"]], f32, lambda x: math.exp(emit.to_f32(x)))
    beta = _f32(op["beta"])
    whole = _f32(op["state"]) if op.has("state") else None
    kern = gdn_kernel.kernel_for(ctx, whole, k)
    if kern is not None:         # one dispatch walks every step, the state in its buffer
        start = emit.filled([b, h, n, n], f32, 0.0) if whole is None else whole
        final, y = gdn_kernel.dispatch(ctx, kern, start, (k, q, v), (decay, beta))
        out = [emit.convert_tensor(y, out_t)]
        return out if whole is None else [*out, emit.convert_tensor(final, emit.elem(
            op["state"]))]
    # a state of more rows than q (B' > B, or either dynamic): its first B rows are stepped
    more = whole is not None and (emit.static_shape(whole)[0] != emit.static_shape(k)[0]
                                  or None in (emit.static_shape(whole)[0], b))
    scale = emit.scalar(1.0 / pymath.sqrt(n), f32)
    kq = _scaled_dot(ctx, k, q, scale, [b, s, h])
    state = (emit.filled([b, h, n, n], f32, 0.0) if whole is None else
             emit.extract_slice(whole, [0, 0, 0, 0], [b, h, n, n]) if more else whole)

    def step(t: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
        st, y = carried
        kt, qt, vt = (emit.extract_slice(x, [0, t, 0, 0], [b, 1, h, n]) for x in (k, q, v))
        et, bt, kqt = (emit.extract_slice(x, [0, t, 0], [b, 1, h]) for x in (decay, beta, kq))
        new, yt = _gdn_step(st, kt, qt, vt, et, bt, kqt, scale,
                            ctx.options.llvmgpu)
        yt = emit.expand(yt, [[0, 1], [2], [3]], [b, 1, h, n])
        return [new, emit.insert_slice(yt, y, [0, t, 0, 0])]

    final, y = loops.for_loop(s, [state, emit.empty([b, s, h, n], f32)], step,
                                branch=ctx.options.target == "llvm-cpu")
    out = [emit.convert_tensor(y, out_t)]
    if whole is not None:
        if more:
            final = emit.insert_slice(final, whole, [0, 0, 0, 0])
        out.append(emit.convert_tensor(final, emit.elem(op["state"])))
    return out


# --------------------------------------------------------------------------------------
# LSTM / GRU: packed weights, input projection, one loop per layer and direction
# --------------------------------------------------------------------------------------


class _Packed:
    """Per-(layer, direction) views of the packed PyTorch weights (spec 2.13)."""

    def __init__(self, op: Decoded, gates: int) -> None:
        a = op.attrs
        self.hidden = a["hidden_size"]
        self.layers = a["num_layers"]
        self.dirs = 2 if a["bidirectional"] else 1
        self.rows = gates * self.hidden
        self.features = emit.static_shape(op["x"])[2]

    def width(self, layer: int) -> int:
        return self.features if layer == 0 else self.dirs * self.hidden

    def _offset(self, index: int) -> int:
        """Element offset of block ``index`` (layer-major, then direction) of ``w_ih``."""
        return sum(self.rows * self.width(i // self.dirs) for i in range(index))

    def weight(self, w: ir.Value, index: int, width: int, offset: int) -> ir.Value:
        """Block ``[rows, width]`` of a flat or ``[L*D*rows, width]`` packed weight."""
        if emit.rank(w) == 2:
            return _f32(emit.extract_slice(w, [index * self.rows, 0], [self.rows, width]))
        flat = emit.extract_slice(w, [offset], [self.rows * width])
        return _f32(emit.expand(flat, [[0, 1]], [self.rows, width]))

    def w_ih(self, w: ir.Value, layer: int, d: int) -> ir.Value:
        index = layer * self.dirs + d
        return self.weight(w, index, self.width(layer), self._offset(index))

    def w_hh(self, w: ir.Value, layer: int, d: int) -> ir.Value:
        index = layer * self.dirs + d
        return self.weight(w, index, self.hidden, index * self.rows * self.hidden)

    def bias(self, bias: ir.Value, layer: int, d: int, rows: int | None = None) -> ir.Value:
        """Block ``[rows]`` (default: the gate rows) of a flat or ``[L*D, rows]`` packed
        bias."""
        index = layer * self.dirs + d
        rows = self.rows if rows is None else rows
        if emit.rank(bias) == 2:
            row = emit.extract_slice(bias, [index, 0], [1, rows])
            return _f32(emit.collapse(row, [[0, 1]]))
        return _f32(emit.extract_slice(bias, [index * rows], [rows]))


def _project(x: ir.Value, w: ir.Value) -> ir.Value:
    """Every step's input term at once: ``x [B, S, in] @ wᵀ`` -> ``[B, S, rows]`` (the
    biases are added in the step's gate generic: added here, IREE sinks the add into the
    loop as one more dispatch a step)."""
    b, s, _ = emit.sizes(x)
    rows = emit.static_shape(w)[0]
    x2 = emit.collapse(x, [[0, 1], [2]])
    mm = emit.matmul(x2, emit.transpose(w, [1, 0]))
    return emit.expand(mm, [[0, 1], [2]], [b, s, rows])


def _initial(state: ir.Value | None, index: int, b: emit.Size, hidden: int) -> ir.Value:
    """``state[index]`` (``[L*D, B, H]``) as ``[B, H]``, or zeros."""
    if state is None:
        return emit.filled([b, hidden], emit.f32(), 0.0)
    row = emit.extract_slice(state, [index, 0, 0], [1, b, hidden])
    return _f32(emit.collapse(row, [[0, 1], [2]]))


def _settled(end: ir.Value) -> ir.Value:
    """A loop's final state copied out of the buffer the loop carried it in (``+ 0.0``, which
    does not fold). On Vulkan, IREE 3.13 returned stale final states of a stacked scan from
    the second call of a module on (2 layers, e.g. a prefill of 7 steps, then 3: every layer's
    ``hn`` off by ~1; ``y`` right; llvm-cpu right); with the copy, each call's states are
    right. Found by test_recurrent's ONNX-form GRU variants; a dispatch per layer and
    direction of a scan that returns its states, none otherwise (dead code)."""
    return emit.copy(end)


def _stack(finals: list[ir.Value], like: ir.Value) -> ir.Value:
    """``[B, H]`` final states -> ``[L*D, B, H]`` in ``like``'s element type."""
    rows = [emit.expand(f, [[0, 1], [2]], [1, *emit.sizes(f)]) for f in finals]
    return emit.convert_tensor(emit.concat(rows, 0), emit.elem(like))


def _gates(v: ir.Value, gates: int, hidden: int) -> list[ir.Value]:
    """The ``G`` gate blocks of a packed ``[..., G*H]`` value as separate tensors (``[B, H]``
    from ``[B, G*H]`` or a ``[B, 1, G*H]`` step slice, ``[H]`` from a bias). One input per
    gate with an identity map lets IREE vectorize the gate generic; reading one packed
    operand through per-gate maps compiled to scalar code (measured: 104 us vs 9 us a step
    for ``[8, 4*512]``)."""
    ss = emit.sizes(v)
    r = len(ss)
    out = []
    for g in range(gates):
        offsets: emit.Sizes = [0] * r
        offsets[-1] = g * hidden
        part = emit.extract_slice(v, offsets, [*ss[:-1], hidden])
        out.append(emit.collapse(part, [[0, 1], [2]]) if r == 3 else part)
    return out


Cell = Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]
"""One step's state update: ``cell(xs, states) -> new states``; ``xs`` the gates of the
projected input (``[B, H]`` each), ``states[0]`` the hidden state. The cell does its own
recurrent matmul(s) with the ``W_hhᵀ`` its maker was given."""


def _hidden_gates(h: ir.Value, whh_t: ir.Value, gates: int, hidden: int) -> list[ir.Value]:
    """The gates of ``h W_hhᵀ`` (``[B, H]`` each)."""
    return _gates(emit.matmul(h, whh_t), gates, hidden)


def _cell_outputs(state: ir.Value, n: int) -> list[ir.Value]:
    return [emit.empty(emit.sizes(state), emit.f32()) for _ in range(n)]


def _masked(new: list[ir.Value], old: list[ir.Value], lengths: ir.Value, tt: ir.Value
            ) -> list[ir.Value]:
    """With per-row ``lengths``: the states after step ``tt`` where ``tt < lengths[b]``,
    the row's states before it elsewhere; then the step's output row (``h'``, or zeros).
    Only selects: a length outside ``[0, S]`` reads nothing out of bounds (every step of
    the row runs, or none)."""
    n = len(new)
    at = arith.index_cast(emit.elem(lengths), tt)
    zero = emit.scalar(0.0, emit.f32())
    ident, row = emit.identity(2), emit.amap(2, [0])

    def body(*a: ir.Value) -> list[ir.Value]:
        live = arith.cmpi(arith.CmpIPredicate.slt, at, a[2 * n])
        kept = [arith.select(live, a[i], a[n + i]) for i in range(n)]
        return [*kept, arith.select(live, a[0], zero)]

    outs = [emit.empty(emit.sizes(v), emit.f32()) for v in [*new, new[0]]]
    return emit.generic([*new, *old, lengths], outs, [ident] * (2 * n) + [row] +
                        [ident] * (n + 1), [P, P], body)


def _scan(op: Decoded, gates: int, make_cell: Callable[[int, int, ir.Value], Cell],
          states: tuple[str, ...]) -> list[ir.Value]:
    """The layer / direction loops shared by LSTM (states h, c) and GRU (state h);
    ``make_cell(layer, direction, W_hhᵀ)`` builds its loop-invariant values before the
    loop."""
    pk = _Packed(op, gates)
    hid, dirs = pk.hidden, pk.dirs
    out_t = emit.elem(op["x"])
    x = _f32(op["x"])
    b, s, _ = emit.sizes(x)
    last = emit.sub_sizes(s, 1)
    given = {name: op[name] if op.has(name) else None for name in states}
    lengths = op["lengths"] if op.has("lengths") else None
    finals: dict[str, list[ir.Value]] = {name: [] for name in states}
    for layer in range(pk.layers):
        xws = [_project(x, pk.w_ih(op["w_ih"], layer, d)) for d in range(dirs)]
        ys = []
        for d, xw in enumerate(xws):
            index = layer * dirs + d
            whh_t = emit.transpose(pk.w_hh(op["w_hh"], layer, d), [1, 0])
            cell = make_cell(layer, d, whh_t)
            init = [_initial(given[name], index, b, hid) for name in states]

            def step(t: ir.Value, carried: list[ir.Value], xw: ir.Value = xw,
                     cell: Cell = cell, d: int = d) -> list[ir.Value]:
                *st, out = carried
                tt = _time(t, last, d == 1)
                xt = emit.extract_slice(xw, [0, tt, 0], [b, 1, gates * hid])
                new = cell(_gates(xt, gates, hid), st)
                h_out = new[0]
                if lengths is not None:
                    *new, h_out = _masked(new, st, lengths, tt)
                row = emit.expand(h_out, [[0, 1], [2]], [b, 1, hid])
                return [*new, emit.insert_slice(row, out, [0, tt, 0])]

            # each direction fills an output of its own, starting blank: a value with
            # contents carried in would be selected at every step (loops.for_loop); the
            # states' select fuses into the step's gate generic
            *ends, y = loops.for_loop(s, [*init, emit.empty([b, s, hid], emit.f32())], step)
            ys.append(y)
            for name, end in zip(states, ends, strict=True):
                finals[name].append(_settled(end))
        x = emit.concat(ys, 2)
    out = [emit.convert_tensor(x, out_t)]
    return out + [_stack(finals[name], op[name]) for name in states if op.has(name)]


def _gate_bias(pk: _Packed, bias: ir.Value, layer: int, d: int) -> list[ir.Value]:
    """The ``[H]`` bias of each gate of (layer, direction)."""
    return _gates(pk.bias(bias, layer, d), pk.rows // pk.hidden, pk.hidden)


@MIR_TO_LINALG.register("lstm")
def lower_lstm(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Per layer and direction: ``xw = x W_ihᵀ`` before an ``scf.for`` carrying
    ``(h, c, y)``; each step is ``h W_hhᵀ`` and one generic for the gates (i, f, g, o,
    ``z = xw + hh + bias``, the peephole terms when given) with two results (h', c')."""
    pk = _Packed(op, 4)
    ident, row = emit.identity(2), emit.amap(2, [1])
    peep = op.has("peephole")

    def body(*a: ir.Value) -> list[ir.Value]:
        z = [arith.addf(arith.addf(a[g], a[4 + g]), a[8 + g]) for g in range(4)]
        c = a[12]
        if peep:  # p_i c and p_f c on the previous cell state
            z[0] = arith.addf(z[0], arith.mulf(a[13], c))
            z[1] = arith.addf(z[1], arith.mulf(a[14], c))
        i, f = emit.sigmoid(z[0]), emit.sigmoid(z[1])
        c_new = arith.addf(arith.mulf(f, c), arith.mulf(i, math.tanh(z[2])))
        o = emit.sigmoid(arith.addf(z[3], arith.mulf(a[15], c_new)) if peep else z[3])
        return [arith.mulf(o, math.tanh(c_new)), c_new]

    def make_cell(layer: int, d: int, whh_t: ir.Value) -> Cell:
        bias = _gate_bias(pk, op["bias"], layer, d)
        holes = _gates(pk.bias(op["peephole"], layer, d, 3 * pk.hidden), 3, pk.hidden) \
            if peep else []

        def cell(xs: list[ir.Value], st: list[ir.Value]) -> list[ir.Value]:
            hs = _hidden_gates(st[0], whh_t, 4, pk.hidden)
            return emit.generic([*xs, *hs, *bias, st[1], *holes], _cell_outputs(st[1], 2),
                                [ident] * 8 + [row] * 4 + [ident] + [row] * len(holes) +
                                [ident] * 2, [P, P], body)

        return cell

    return _scan(op, 4, make_cell, ("h0", "c0"))


@MIR_TO_LINALG.register("gru")
def lower_gru(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Per layer and direction: ``xw = x W_ihᵀ`` before an ``scf.for`` carrying
    ``(h, y)``. PyTorch's form: each step is ``h W_hhᵀ`` and one generic for the gates (r,
    z, n) with both biases (the reset gate multiplies ``h W_hnᵀ + b_hn``). With
    ``linear_before_reset = false`` the reset gate scales ``h`` before its matmul, so a step
    is ``h W_hrzᵀ``, a generic for ``r h`` and ``z``, ``(r h) W_hnᵀ``, and a generic for
    ``n`` and ``h'``."""
    pk = _Packed(op, 3)
    hid = pk.hidden
    ident, row = emit.identity(2), emit.amap(2, [1])
    one = emit.scalar(1.0, emit.f32())

    def after(*a: ir.Value) -> ir.Value:
        (xr, xz, xn), (hr, hz, hn), (ir_, iz, in_), (br, bz, bn), hv = (
            a[0:3], a[3:6], a[6:9], a[9:12], a[12])
        r = emit.sigmoid(arith.addf(arith.addf(xr, ir_), arith.addf(hr, br)))
        z = emit.sigmoid(arith.addf(arith.addf(xz, iz), arith.addf(hz, bz)))
        nn = math.tanh(arith.addf(arith.addf(xn, in_), arith.mulf(r, arith.addf(hn, bn))))
        return arith.addf(arith.mulf(arith.subf(one, z), nn), arith.mulf(z, hv))

    def reset(xr: ir.Value, xz: ir.Value, hr: ir.Value, hz: ir.Value, ir_: ir.Value,
              iz: ir.Value, br: ir.Value, bz: ir.Value, hv: ir.Value, *_: ir.Value
              ) -> list[ir.Value]:
        r = emit.sigmoid(arith.addf(arith.addf(xr, ir_), arith.addf(hr, br)))
        z = emit.sigmoid(arith.addf(arith.addf(xz, iz), arith.addf(hz, bz)))
        return [arith.mulf(r, hv), z]

    def update(xn: ir.Value, hn: ir.Value, in_: ir.Value, bn: ir.Value, z: ir.Value,
               hv: ir.Value, _: ir.Value) -> ir.Value:
        nn = math.tanh(arith.addf(arith.addf(xn, in_), arith.addf(hn, bn)))
        return arith.addf(arith.mulf(arith.subf(one, z), nn), arith.mulf(z, hv))

    def make_cell(layer: int, d: int, whh_t: ir.Value) -> Cell:
        b_ih = _gate_bias(pk, op["b_ih"], layer, d)
        b_hh = _gate_bias(pk, op["b_hh"], layer, d)
        if linear_before_reset(op.attrs):
            def cell(xs: list[ir.Value], st: list[ir.Value]) -> list[ir.Value]:
                hs = _hidden_gates(st[0], whh_t, 3, hid)
                return emit.generic([*xs, *hs, *b_ih, *b_hh, st[0]], _cell_outputs(st[0], 1),
                                    [ident] * 6 + [row] * 6 + [ident] * 2, [P, P], after)
            return cell
        w_rz = emit.extract_slice(whh_t, [0, 0], [hid, 2 * hid])
        w_n = emit.extract_slice(whh_t, [0, 2 * hid], [hid, hid])

        def cell_reset_first(xs: list[ir.Value], st: list[ir.Value]) -> list[ir.Value]:
            hr, hz = _hidden_gates(st[0], w_rz, 2, hid)
            rh, z = emit.generic([xs[0], xs[1], hr, hz, b_ih[0], b_ih[1], b_hh[0], b_hh[1],
                                  st[0]], _cell_outputs(st[0], 2),
                                 [ident] * 4 + [row] * 4 + [ident] * 3, [P, P], reset)
            hn = emit.matmul(rh, w_n)
            return emit.generic([xs[2], hn, b_ih[2], b_hh[2], z, st[0]],
                                _cell_outputs(st[0], 1),
                                [ident] * 2 + [row] * 2 + [ident] * 3, [P, P], update)

        return cell_reset_first

    return _scan(op, 3, make_cell, ("h0",))
