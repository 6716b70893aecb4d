"""MIR convolution: conv (NCHW, grouped)."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, int_attr, ints_attr
from rlx.ir.types import Dim, TensorInfo


def _pair(c: Check, name: str, minimum: int) -> tuple[int, int]:
    v = tuple(c.attr(name))
    if len(v) != 2 or any(x < minimum for x in v):
        c.fail(f"attribute '{name}'", f"2 values >= {minimum} ([h, w])", str(list(v)))
    return v[0], v[1]


@MIR.op("conv", operands=["x", "w"],
        attrs=[ints_attr("kernel_size"), ints_attr("stride"), ints_attr("padding"),
               ints_attr("dilation"), int_attr("groups", default=1)])
def conv(c: Check) -> list[TensorInfo]:
    """2-D grouped convolution, NCHW, PyTorch cross-correlation, no bias (``Op::Conv``).

    Operands ``x [N, C_in, H, W]``, ``w [C_out, C_in / groups, kh, kw]``; ``padding`` is
    symmetric ``[ph, pw]``. Result ``[N, C_out, H_out, W_out]`` with
    ``H_out = (H + 2 ph - dh (kh - 1) - 1) / sh + 1``.

    Example::

        %y = "rlx_mir.conv"(%x, %w) {dilation = array<i64: 1, 1>, groups = 16 : i64,
              kernel_size = array<i64: 1, 4>, padding = array<i64: 0, 0>,
              stride = array<i64: 1, 1>}
            : (tensor<2x16x1x11xf32>, tensor<16x1x1x4xf32>) -> tensor<2x16x1x8xf32>
    """
    x = checks.float_operands(c, "x", "w")
    c.rank("x", 4)
    c.rank("w", 4)
    kh, kw = _pair(c, "kernel_size", 1)
    sh, sw = _pair(c, "stride", 1)
    ph, pw = _pair(c, "padding", 0)
    dh, dw = _pair(c, "dilation", 1)
    groups = c.positive("groups")
    cin, cout = x.shape[1], c["w"].shape[0]
    if cin is None or cin % groups:
        c.fail("operand 'x' dim 1", f"a static channel count divisible by groups = {groups}",
               str(x))
    if cout is None or cout % groups:
        c.fail("operand 'w' dim 0", f"a static count divisible by groups = {groups}",
               str(c["w"]))
    c.shape("w", (cout, cin // groups, kh, kw), "[C_out, C_in / groups, kh, kw]")

    def out(size: Dim, k: int, s: int, p: int, d: int) -> Dim:
        if size is None:
            return None
        span = size + 2 * p - d * (k - 1) - 1
        if span < 0:
            c.fail("operand 'x'", f"a spatial size that fits the kernel ({k}, dilation {d})",
                   str(x))
        return span // s + 1

    h = out(x.shape[2], kh, sh, ph, dh)
    w = out(x.shape[3], kw, sw, pw, dw)
    return [x.with_shape((x.shape[0], cout, h, w))]
