"""MIR convolution and pooling: conv (NCHW, grouped), pool (max / average, 1-3 spatial dims)."""

from __future__ import annotations

from rlx.dialects import checks
from rlx.dialects.enums import FLOAT_TYPES, WORD_TYPES
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, bool_attr, enum_attr, int_attr, ints_attr
from rlx.ir.types import Dim, DType, TensorInfo

CONV_TYPES = FLOAT_TYPES | {DType.I32}
"""conv's element types: floats (16-bit ones accumulate in f32), and i32 (the integer
convolution of ONNX ``QLinearConv`` / ``ConvInteger``; sums wrap as i32's do)."""


def _pair(c: Check, name: str, minimum: int) -> tuple[int, int]:
    v = tuple(c.attr(name))
    if len(v) != 2 or any(x < minimum for x in v):
        c.fail(f"attribute '{name}'", f"2 values >= {minimum} ([h, w])", str(list(v)))
    return v[0], v[1]


@MIR.op("conv", operands=["x", "w"],
        attrs=[ints_attr("kernel_size"), ints_attr("stride"), ints_attr("padding"),
               ints_attr("dilation"), int_attr("groups", default=1)])
def conv(c: Check) -> list[TensorInfo]:
    """2-D grouped convolution, NCHW, PyTorch cross-correlation, no bias (``Op::Conv``);
    float or i32 (rlx's: sums wrap as i32's do).

    Operands ``x [N, C_in, H, W]``, ``w [C_out, C_in / groups, kh, kw]``; ``padding`` is
    symmetric ``[ph, pw]``. Result ``[N, C_out, H_out, W_out]`` with
    ``H_out = (H + 2 ph - dh (kh - 1) - 1) / sh + 1``.

    Example::

        %y = "rlx_mir.conv"(%x, %w) {dilation = array<i64: 1, 1>, groups = 16 : i64,
              kernel_size = array<i64: 1, 4>, padding = array<i64: 0, 0>,
              stride = array<i64: 1, 1>}
            : (tensor<2x16x1x11xf32>, tensor<16x1x1x4xf32>) -> tensor<2x16x1x8xf32>
    """
    x = checks.float_operands(c, "x", "w", types=CONV_TYPES)
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

    def out(axis: int, k: int, s: int, p: int, d: int) -> Dim:
        size = x.shape[axis]
        if size is None:
            c.at_least("x", axis, d * (k - 1) + 1 - 2 * p,
                       f"a spatial size that fits the kernel ({k}, dilation {d})")
            return None
        span = size + 2 * p - d * (k - 1) - 1
        if span < 0:
            c.fail("operand 'x'", f"a spatial size that fits the kernel ({k}, dilation {d})",
                   str(x))
        return span // s + 1

    h = out(2, kh, sh, ph, dh)
    w = out(3, kw, sw, pw, dw)
    return [x.with_shape((x.shape[0], cout, h, w))]


POOL_KINDS = ("max", "avg", "umax")
"""``umax``: the max of integers read as unsigned (ONNX MaxPool of uint tensors)."""


def pool_out_size(size: int, k: int, s: int, d: int, begin: int, end: int,
                  ceil_mode: bool) -> int | None:
    """Windows along one axis (ONNX / PyTorch rule: in ceil mode the last window must start
    inside the input or its begin padding); None when the kernel does not fit."""
    span = size + begin + end - ((k - 1) * d + 1)
    if span < 0:
        return None
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= size + begin else out


@MIR.op("pool", operands=["x"],
        attrs=[enum_attr("kind", POOL_KINDS), ints_attr("kernel_size"), ints_attr("stride"),
               ints_attr("dilation"), ints_attr("padding", "begin pads, then end pads"),
               bool_attr("ceil_mode", "round the window count up", default=False),
               bool_attr("count_include_pad", "avg: divide by the window size inside the "
                         "padded input (else only the input elements)", default=False)])
def pool(c: Check) -> list[TensorInfo]:
    """Max or average pooling over the spatial dims of ``x [N, C, *spatial]`` (1-3 dims).

    Per spatial axis: ``kernel_size``, ``stride``, ``dilation``; ``padding`` holds the
    begin pads of every axis, then the end pads (ONNX ``pads``). Padding never wins a max;
    ``avg`` divides by the count of window elements inside the input, or inside the padded
    input with ``count_include_pad``. ``ceil_mode`` rounds the window count up (the last
    window must start inside the input or its begin padding). Spatial dims may be dynamic.

    Example::

        %y = "rlx_mir.pool"(%x) {ceil_mode = false, count_include_pad = false,
              dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 3>, kind = "max",
              padding = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>}
            : (tensor<?x8x16x16xf32>) -> tensor<?x8x8x8xf32>
    """
    x = c["x"]
    n = x.rank - 2
    if n not in (1, 2, 3):
        c.fail("operand 'x'", "rank 3, 4 or 5 ([N, C, 1-3 spatial dims])", str(x))
    kernel, stride, dilation = (list(c.attr(a)) for a in ("kernel_size", "stride",
                                                            "dilation"))
    padding = list(c.attr("padding"))
    for name, values, count, least in (("kernel_size", kernel, n, 1), ("stride", stride, n, 1),
                                       ("dilation", dilation, n, 1),
                                       ("padding", padding, 2 * n, 0)):
        if len(values) != count or min(values) < least:
            c.fail(f"attribute '{name}'", f"{count} values >= {least}", str(values))
    if c.attr("kind") == "avg":
        checks.float_operands(c, "x")
    if c.attr("kind") == "umax":
        c.dtype("x", WORD_TYPES)
    shape: list[Dim] = list(x.shape[:2])
    for i in range(n):
        span = (kernel[i] - 1) * dilation[i] + 1
        if padding[i] >= span or padding[n + i] >= span:
            c.fail("attribute 'padding'", "pads smaller than the (dilated) kernel",
                   str(padding))
        size = x.shape[2 + i]
        fits = (f"fits the kernel ({kernel[i]}, dilation {dilation[i]}, pads {padding[i]} "
                f"+ {padding[n + i]})")
        if size is None:
            c.at_least("x", 2 + i, span - padding[i] - padding[n + i], f"a size that {fits}")
            shape.append(None)
            continue
        out = pool_out_size(size, kernel[i], stride[i], dilation[i], padding[i],
                            padding[n + i], c.attr("ceil_mode"))
        if out is None:
            c.fail("operand 'x'", f"spatial dim {2 + i} that {fits}", str(x))
        shape.append(out)
    return [x.with_shape(shape)]
