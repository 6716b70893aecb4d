"""mir-to-linalg for attention: rope, attention (decomposed or IREE's fused op).

Attention works in a head-major view: Q ``[B, Hkv, G, S, hd]`` (the G = H / Hkv query heads
that share a KV head stacked together, so GQA needs no K/V copy), K and V
``[B, Hkv, S_k, hd]``. The decomposed form is ``batch_matmul(Q, Kᵀ)``, one elementwise
generic for scale / softcap / mask, ``linalg.softmax``, ``batch_matmul(P, V)`` (f32
throughout); the fused form is ``iree_linalg_ext.attention`` with an i1 or additive mask.
"""

from __future__ import annotations

import math as pymath

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import decode_attention, prefill_attention, prefill_rows
from rlx.lowering.mir_to_linalg.contraction import untiled_batches
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG
from rlx.lowering.registry import LoweringContext

MASKED = -1e9  # RLX fills masked scores with -1e9 (a fully masked row is uniform, not NaN)


# --------------------------------------------------------------------------------------
# RoPE
# --------------------------------------------------------------------------------------


def _to_bshd(x: ir.Value, head_dim: int) -> ir.Value:
    """``[S, H*hd]`` / ``[B, S, H*hd]`` / ``[B, S, H, hd]`` -> ``[B, S, H, hd]``."""
    ss = emit.sizes(x)
    if emit.rank(x) == 4:
        return x
    heads = emit.static_shape(x)[-1] // head_dim
    if emit.rank(x) == 2:
        return emit.expand(x, [[0, 1], [2, 3]], [1, ss[0], heads, head_dim])
    return emit.expand(x, [[0], [1], [2, 3]], [ss[0], ss[1], heads, head_dim])


@MIR_TO_LINALG.register("rope")
def lower_rope(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """Rotate the first ``n_rot`` lanes of each head in pairs, one generic over
    ``[B, S, H, 2, n_rot/2]`` (NeoX) or ``[B, S, H, n_rot/2, 2]`` (GPT-J)."""
    x, cos, sin = op["x"], op["cos"], op["sin"]
    hd, n_rot, style = op.attrs["head_dim"], op.attrs["n_rot"], op.attrs["style"]
    half = n_rot // 2
    x4 = _to_bshd(x, hd)
    b, s, h, _ = emit.sizes(x4)
    c = emit.extract_slice(cos, [0, 0], [s, half])
    sn = emit.extract_slice(sin, [0, 0], [s, half])
    rot = emit.narrow(x4, 3, 0, n_rot) if n_rot < hd else x4
    neox = style == "neox"
    pair_shape = [b, s, h, 2, half] if neox else [b, s, h, half, 2]
    rot5 = emit.expand(rot, [[0], [1], [2], [3, 4]], pair_shape)
    lane, which = (4, 3) if neox else (3, 4)
    first = emit.amap(5, [0, 1, 2, "0", 4] if neox else [0, 1, 2, 3, "0"])
    second = emit.amap(5, [0, 1, 2, "1", 4] if neox else [0, 1, 2, 3, "1"])
    table = emit.amap(5, [1, lane])
    out_t = emit.elem(x)

    def body(a: ir.Value, bb: ir.Value, cv: ir.Value, sv: ir.Value, _: ir.Value) -> ir.Value:
        a, bb, cv, sv = (emit.to_f32(v) for v in (a, bb, cv, sv))
        is_first = arith.cmpi(arith.CmpIPredicate.eq, emit.loop_index(which), emit.index(0))
        y_first = arith.subf(arith.mulf(a, cv), arith.mulf(bb, sv))
        y_second = arith.addf(arith.mulf(bb, cv), arith.mulf(a, sv))
        return emit.convert(arith.select(is_first, y_first, y_second), out_t)

    init = emit.empty(pair_shape, out_t)
    out5 = emit.generic([rot5, rot5, c, sn], [init], [first, second, table, table,
                                                      emit.identity(5)],
                        [emit.PARALLEL] * 5, body)[0]
    out = emit.collapse(out5, [[0], [1], [2], [3, 4]])
    if n_rot < hd:
        out = emit.concat([out, emit.narrow(x4, 3, n_rot, hd - n_rot)], 3)
    return [emit.reshape(out, emit.sizes(x))]


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------


class _Layout:
    """Reads q/k/v of one attention op into the head-major view and writes the result
    back in q's layout."""

    def __init__(self, q: ir.Value, num_heads: int, head_dim: int, kv_heads: int) -> None:
        self.rank = emit.rank(q)
        self.head_major = self.rank == 4 and emit.static_shape(q)[1] == num_heads
        self.heads, self.kv_heads, self.hd = num_heads, kv_heads, head_dim
        self.group = num_heads // kv_heads

    def _bshd(self, x: ir.Value, heads: int) -> ir.Value:
        """``[B, S, heads, hd]`` from the packed or rank-4 sequence-major layouts."""
        if self.rank == 4:
            return x
        ss = emit.sizes(x)
        if self.rank == 2:
            return emit.expand(x, [[0, 1], [2, 3]], [1, ss[0], heads, self.hd])
        return emit.expand(x, [[0], [1], [2, 3]], [ss[0], ss[1], heads, self.hd])

    def query(self, q: ir.Value) -> ir.Value:
        """``[B, Hkv, G, S, hd]``: heads moved in front of the sequence (the same transpose
        as K and V, which IREE fuses into the producer), then a free split of H."""
        if not self.head_major:
            q = emit.transpose(self._bshd(q, self.heads), [0, 2, 1, 3])
        b, _, s, _ = emit.sizes(q)
        return emit.expand(q, [[0], [1, 2], [3], [4]], [b, self.kv_heads, self.group, s, self.hd])

    def key(self, k: ir.Value) -> ir.Value:
        """``[B, Hkv, S_k, hd]``."""
        if self.head_major:
            return k
        return emit.transpose(self._bshd(k, self.kv_heads), [0, 2, 1, 3])

    def output(self, o5: ir.Value, like: ir.Value) -> ir.Value:
        """``[B, Hkv, G, S, hd]`` back to the layout of ``like`` (q)."""
        bhsd = emit.collapse(o5, [[0], [1, 2], [3], [4]])
        if self.head_major:
            return bhsd
        bshd = emit.transpose(bhsd, [0, 2, 1, 3])
        if self.rank == 4:
            return bshd
        packed = emit.collapse(bshd, [[0], [1], [2, 3]])
        return emit.collapse(packed, [[0, 1], [2]]) if self.rank == 2 else packed


def _kv_heads(k: ir.Value, rank: int, head_major: bool, head_dim: int) -> int:
    shape = emit.static_shape(k)
    if rank == 4:
        return shape[1] if head_major else shape[2]
    return shape[-1] // head_dim


def _keep(kind: str, m: ir.Value, n: ir.Value, offset: ir.Value, window: int) -> ir.Value:
    """Causal / sliding-window predicate; queries are the last S of the S_k positions.
    Signed: with S > S_k the first queries sit before every key and see none (the spec's
    uniform row), where an unsigned compare wrapped their position to one that sees all."""
    pos = arith.addi(m, offset)
    causal = arith.cmpi(arith.CmpIPredicate.sle, n, pos)
    if kind == "causal":
        return causal
    lower = arith.cmpi(arith.CmpIPredicate.sge, arith.addi(n, emit.index(window)), pos)
    return arith.andi(causal, lower)


def _keep_filled(m: ir.Value, n: ir.Value, filled: ir.Value, seq: ir.Value) -> ir.Value:
    """causal_lengths: query ``m`` of a row with ``filled`` keys sits at ``filled - S + m``
    and sees key ``n`` at or before it (signed: a query before the first key sees none)."""
    count = arith.index_cast(emit.index_type(), filled)
    pos = arith.addi(m, arith.subi(count, seq))
    return arith.cmpi(arith.CmpIPredicate.sle, n, pos)


def _grouped_bias(bias: ir.Value, layout: _Layout) -> ir.Value:
    """``[B, H, S, S_k]`` -> ``[B, Hkv, G, S, S_k]`` (query head h = hkv * G + g)."""
    b, _, s, sk = emit.sizes(bias)
    return emit.expand(bias, [[0], [1, 2], [3], [4]],
                       [b, layout.kv_heads, layout.group, s, sk])


def score_scale(op: Decoded) -> float:
    """The factor of ``q kᵀ``: ``score_scale``, by default ``1 / sqrt(head_dim)``."""
    scale = op.attrs.get("score_scale")
    return 1.0 / pymath.sqrt(op.attrs["head_dim"]) if scale is None else scale


def _masked_scores(ctx: LoweringContext, op: Decoded, scores: ir.Value, layout: _Layout,
                   offset: ir.Value) -> ir.Value:
    """scale, softcap and the mask, one generic over ``[B, Hkv, G, S, S_k]`` (f32)."""
    a = op.attrs
    kind = a["mask_kind"]
    scale = score_scale(op)
    cap = a.get("attn_logit_softcap")
    window = a.get("window") or 0
    f32 = emit.f32()
    inputs = [scores]
    maps = [emit.identity(5)]
    if kind == "custom":
        inputs.append(op["mask"])
        maps.append(emit.amap(5, [0, 4]))
    elif kind == "bias":
        inputs.append(_grouped_bias(op["mask"], layout))
        maps.append(emit.identity(5))
    elif kind == "causal_lengths":
        inputs.append(op["mask"])
        maps.append(emit.amap(5, [0]))
    seq = emit.as_value(emit.dim(scores, 3)) if kind == "causal_lengths" else None

    def body(*args: ir.Value) -> ir.Value:
        s = arith.mulf(args[0], emit.scalar(scale, f32))
        if cap is not None:
            c = emit.scalar(cap, f32)
            s = arith.mulf(c, math.tanh(arith.divf(s, c)))
        if kind == "bias":
            return arith.addf(s, emit.to_f32(args[1]))
        if kind == "none":
            return s
        if kind == "causal_lengths":
            keep = _keep_filled(emit.loop_index(3), emit.loop_index(4), args[1], seq)
        elif kind == "custom":
            m = args[1]
            keep = (m if isinstance(m.type, ir.IntegerType) and ir.IntegerType(m.type).width == 1
                    else arith.cmpf(arith.CmpFPredicate.OGE, emit.to_f32(m),
                                    emit.scalar(0.5, f32)))
        else:
            keep = _keep(kind, emit.loop_index(3), emit.loop_index(4), offset, window)
        return arith.select(keep, s, emit.scalar(MASKED, f32))

    init = emit.empty(emit.sizes(scores), f32)
    return emit.generic(inputs, [init], [*maps, emit.identity(5)], [emit.PARALLEL] * 5,
                        body)[0]


@MIR_TO_LINALG.register("attention")
def lower_attention(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    kern = decode_attention.kernel_for(ctx, op, score_scale(op))
    if kern is not None:
        return [decode_attention.dispatch(ctx, kern, op)]
    prefill = prefill_rows.kernel_for(ctx, op, score_scale(op))
    if prefill is not None:
        return [prefill_attention.dispatch(ctx, prefill, op)]
    q, k, v = op["q"], op["k"], op["v"]
    a = op.attrs
    rank = emit.rank(q)
    head_major = rank == 4 and emit.static_shape(q)[1] == a["num_heads"]
    layout = _Layout(q, a["num_heads"], a["head_dim"],
                     _kv_heads(k, rank, head_major, a["head_dim"]))
    if ctx.options.compute_barriers or ctx.options.data_tiling:
        # Correctness barriers: without them IREE 3.13's data tiling (the default
        # DispatchCreation path) miscompiles a projection -> head transpose -> QKᵀ / P·V
        # encoding chain for some shapes (wrong scores; found by tests/fuzz, regression
        # cases in tests/numerics/test_attention.py). On V it also keeps the V projection
        # and P·V data-tiled (cpu anchors, 3.4).
        q, k, v = emit.barrier(q), emit.barrier(k), emit.barrier(v)
    q5, k4, v4 = layout.query(q), layout.key(k), layout.key(v)
    fused = (ctx.options.attention == "fused" and a.get("attn_logit_softcap") is None
             and not _fused_is_wrong(ctx, q5))
    if fused:
        o5, separated = _fused(op, q5, k4, v4, layout), False
    else:
        o5, separated = _decomposed(ctx, op, q5, k4, v4, layout)
    out = layout.output(o5, q)
    if ctx.options.compute_barriers and not separated:
        # Keep IREE from fusing the next matmul's LHS encoding into the attention dispatch
        # (with data tiling that dispatch fails on oversized vectors: cpu anchors, 3.2).
        out = emit.barrier(out)
    return [out]


def _fused_is_wrong(ctx: LoweringContext, q5: ir.Value) -> bool:
    """IREE 3.13's ``iree_linalg_ext.attention`` on f16 / bf16 operands for CUDA computes
    wrong outputs (a LLaMA block of TinyLlama's shape, causal, 16 and 128 queries: max error
    4.2-4.5 against PyTorch's float64 result, bound 0.03-0.04; f32 and the decomposed form
    pass; on an H200, sm_90, 2026-12-04), so 16-bit attention is decomposed there: the same
    speed on that block (0.55 ms at 128 queries either way)."""
    return ctx.options.target == "cuda" and isinstance(emit.elem(q5),
                                                       ir.F16Type | ir.BF16Type)


def _offset(q5: ir.Value, k4: ir.Value) -> ir.Value:
    """``S_k - S`` as an index."""
    return emit.as_value(emit.sub_sizes(emit.dim(k4, 2), emit.dim(q5, 3)))


def _decomposed(ctx: LoweringContext, op: Decoded, q5: ir.Value, k4: ir.Value, v4: ir.Value,
                layout: _Layout) -> tuple[ir.Value, bool]:
    """The decomposed attention; also whether its result already passed a barrier."""
    b, hkv, g, s, hd = emit.sizes(q5)
    sk = emit.dim(k4, 2)
    if ctx.options.data_tiling and not isinstance(b, int):
        return _untiled(ctx, op, q5, k4, v4, layout), False
    q3 = emit.collapse(q5, [[0, 1], [2, 3], [4]])
    if ctx.options.data_tiling and isinstance(g, int) and g % 8 == 0:
        # IREE 3.13 fails to compile the Q pack ("affine.delinearize_index ... statically
        # non-positive") when the head transpose and the [G, S] -> G*S collapse fuse into
        # it and G is a multiple of the data-tiling row tile (8 f32 rows on AVX2 and NEON,
        # 16 on AVX-512): a barrier leaves the pack a plain one. Costs one copy of Q.
        q3 = emit.barrier(q3)
    k3 = emit.collapse(k4, [[0, 1], [2], [3]])
    v3 = emit.collapse(v4, [[0, 1], [2], [3]])
    scores = emit.batch_matmul(q3, k3, transpose_b=True, acc_type=emit.f32())
    s5 = emit.expand(scores, [[0, 1], [2, 3], [4]], [b, hkv, g, s, sk])
    p5 = emit.softmax(_masked_scores(ctx, op, s5, layout, _offset(q5, k4)), 4)
    p3 = emit.collapse(p5, [[0, 1], [2, 3], [4]])
    o3 = emit.convert_tensor(emit.batch_matmul(p3, v3, acc_type=emit.f32()), emit.elem(q5))
    # A barrier between P·V and the head transpose keeps P·V a data-tiled batch matmul
    # (cpu anchors, 3.4). With a dynamic key length IREE 3.13 then fails to compile
    # ("affine.delinearize_index ... non-positive"), so only static shapes get it.
    separated = ctx.options.compute_barriers and all(
        isinstance(n, int) for n in [*emit.sizes(o3), sk])
    if separated:
        o3 = emit.barrier(o3)
    return emit.expand(o3, [[0, 1], [2, 3], [4]], [b, hkv, g, s, hd]), separated


def _untiled(ctx: LoweringContext, op: Decoded, q5: ir.Value, k4: ir.Value, v4: ir.Value,
             layout: _Layout) -> ir.Value:
    """The decomposed attention over a batch of run-time size with data tiling: its two
    contractions keep the batch and the KV heads as two batch dims
    (:func:`.contraction.untiled_batches`), so that IREE does not data-tile them.
    Data-tiled over the collapsed ``[B · Hkv, ...]`` (a dynamic batch), IREE 3.13 computed
    wrong outputs once the key length passed 64 (errors of 0.4-34 where the outputs are
    about 1, and not the same from run to run: an encoder exported with a dynamic batch and
    run on 65 or more tokens; tests/numerics/test_attention.py); untiled they take 2.1 ms
    where the data-tiled ones took 1.8 (12 heads of 64, 128 tokens)."""
    b, hkv, g, s, hd = emit.sizes(q5)
    q4 = emit.collapse(q5, [[0], [1], [2, 3], [4]])
    scores = untiled_batches(q4, emit.transpose(k4, [0, 1, 3, 2]))
    assert scores is not None                                 # b is dynamic
    s5 = emit.expand(scores, [[0], [1], [2, 3], [4]], [b, hkv, g, s, emit.dim(k4, 2)])
    p5 = emit.softmax(_masked_scores(ctx, op, s5, layout, _offset(q5, k4)), 4)
    o4 = untiled_batches(emit.collapse(p5, [[0], [1], [2, 3], [4]]), v4)
    assert o4 is not None
    o4 = emit.convert_tensor(o4, emit.elem(q5))
    return emit.expand(o4, [[0], [1], [2, 3], [4]], [b, hkv, g, s, hd])


def _fused_mask(op: Decoded, q5: ir.Value, k4: ir.Value, layout: _Layout
                ) -> tuple[ir.Value, ir.AffineMap] | None:
    kind = op.attrs["mask_kind"]
    loops = 7  # (b, h, g, m, n, k1, k2): n is the value dim, k1 the head dim, k2 the key
    if kind == "none":
        return None
    if kind == "bias":
        return _grouped_bias(op["mask"], layout), emit.amap(loops, [0, 1, 2, 3, 6])
    if kind == "custom":
        m = op["mask"]
        if emit.elem(m) != emit.i1():
            m = emit.map_elementwise([m], emit.i1(), lambda x: arith.cmpf(
                arith.CmpFPredicate.OGE, emit.to_f32(x), emit.scalar(0.5, emit.f32())))
        return m, emit.amap(loops, [0, 6])
    if kind == "causal_lengths":
        # additive (0 / MASKED, f16's lowest where -1e9 is out of range), not i1: a query
        # that sees no key then averages every key, as the decomposed form, instead of the
        # NaN an all-false i1 row gives
        b, s, sk = emit.dim(q5, 0), emit.dim(q5, 3), emit.dim(k4, 2)
        filled, seq, t = op["mask"], emit.as_value(s), emit.elem(q5)
        low = emit.scalar(MASKED if t == emit.f32() else -65504.0, t)
        zero = emit.scalar(0.0, t)
        init = emit.empty([b, s, sk], t)
        mask = emit.generic([filled], [init], [emit.amap(3, [0]), emit.identity(3)],
                            [emit.PARALLEL] * 3, lambda n, _: arith.select(_keep_filled(
                                emit.loop_index(1), emit.loop_index(2), n, seq), zero, low))[0]
        return mask, emit.amap(loops, [0, 3, 6])
    s, sk = emit.dim(q5, 3), emit.dim(k4, 2)
    offset = _offset(q5, k4)
    window = op.attrs.get("window") or 0
    init = emit.empty([s, sk], emit.i1())
    mask = emit.generic([], [init], [emit.identity(2)], [emit.PARALLEL] * 2, lambda _: _keep(
        kind, emit.loop_index(0), emit.loop_index(1), offset, window))[0]
    return mask, emit.amap(loops, [3, 6])


def _fused(op: Decoded, q5: ir.Value, k4: ir.Value, v4: ir.Value, layout: _Layout
           ) -> ir.Value:
    """``iree_linalg_ext.attention`` (3.13 syntax: the maps are a property; f32 region)."""
    scale = score_scale(op)
    t = emit.elem(q5)
    loops = 7
    maps = [emit.amap(loops, [0, 1, 2, 3, 5]), emit.amap(loops, [0, 1, 6, 5]),
            emit.amap(loops, [0, 1, 6, 4]), emit.amap(loops, [])]
    operands = [q5, k4, v4, emit.scalar(scale, t)]
    mask = _fused_mask(op, q5, k4, layout)
    if mask is not None:
        operands.append(mask[0])
        maps.append(mask[1])
    maps.append(emit.amap(loops, [0, 1, 2, 3, 4]))
    init = emit.empty(emit.sizes(q5), t)
    attn = ir.Operation.create(
        "iree_linalg_ext.attention", results=[init.type], operands=[*operands, init],
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m)
                                                       for m in maps])},
        regions=1)
    block = attn.regions[0].blocks.append(emit.f32())
    with ir.InsertionPoint(block):
        ir.Operation.create("iree_linalg_ext.yield", operands=[block.arguments[0]])
    return attn.result
