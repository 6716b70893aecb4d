"""mir-to-linalg for convolution: conv (NCHW, grouped) as one contraction generic."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, tensor

from rlx.dialects.schema import Decoded
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG
from rlx.lowering.mir_to_linalg.contraction import accumulator
from rlx.lowering.registry import LoweringContext


def _pad(x: ir.Value, ph: int, pw: int) -> ir.Value:
    if ph == 0 and pw == 0:
        return x
    pads = [0, 0, ph, pw]
    out = [None if d is None else d + 2 * p for d, p in zip(emit.static_shape(x), pads,
                                                               strict=True)]
    result = ir.RankedTensorType.get([emit.DYN if o is None else o for o in out], emit.elem(x))
    pad = tensor.PadOp(result, x, [], [], pads, pads)
    block = pad.regions[0].blocks.append(*[emit.index_type()] * 4)
    with ir.InsertionPoint(block):
        tensor.YieldOp(emit.scalar(0.0, emit.elem(x)))
    return pad.result


@MIR_TO_LINALG.register("conv")
def lower_conv(ctx: LoweringContext, op: Decoded) -> list[ir.Value]:
    """``y[n, g, o, i, j] = Σ x[n, g, c, i*sh + u*dh, j*sw + v*dw] * w[g, o, c, u, v]`` over
    the grouped views ``x [N, G, C/G, H, W]``, ``w [G, O/G, C/G, kh, kw]``."""
    a = op.attrs
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (a["kernel_size"], a["stride"], a["padding"],
                                              a["dilation"])
    groups = a["groups"]
    x = _pad(op["x"], ph, pw)
    w = op["w"]
    n, _, hp, wp = emit.sizes(x)
    cout = emit.static_shape(w)[0]
    cg, og = emit.static_shape(w)[1], cout // groups
    oh = _out(hp, kh, sh, dh)
    ow = _out(wp, kw, sw, dw)
    x5 = emit.expand(x, [[0], [1, 2], [3], [4]], [n, groups, cg, hp, wp])
    w5 = emit.expand(w, [[0, 1], [2], [3], [4]], [groups, og, cg, kh, kw])
    t = emit.elem(x)
    acc_t = accumulator(t)
    init = emit.filled([n, groups, og, oh, ow], acc_t, 0.0)
    # loops: n, g, o, i, j | c, u, v
    d = emit.d
    maps = [emit.amap(8, [d(0), d(1), d(5), d(3) * sh + d(6) * dh, d(4) * sw + d(7) * dw]),
            emit.amap(8, [1, 2, 5, 6, 7]), emit.amap(8, [0, 1, 2, 3, 4])]
    iters = [emit.PARALLEL] * 5 + [emit.REDUCTION] * 3
    y5 = emit.generic([x5, w5], [init], maps, iters, lambda xv, wv, acc: arith.addf(
        acc, arith.mulf(emit.convert(xv, acc_t), emit.convert(wv, acc_t))))[0]
    y = emit.collapse(y5, [[0], [1, 2], [3], [4]])
    return [emit.convert_tensor(y, t)]


def _out(size: emit.Size, k: int, s: int, d: int) -> emit.Size:
    if isinstance(size, int):
        return (size - d * (k - 1) - 1) // s + 1
    span = emit.sub_sizes(size, d * (k - 1) + 1)
    return arith.addi(arith.divui(emit.as_value(span), emit.index(s)), emit.index(1))
