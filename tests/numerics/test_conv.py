"""Numerics of the convolution-family MIR ops: conv (padding, stride, dilation, groups) and
pool (max / average over 1-3 spatial dims; ceil mode, dilation, asymmetric padding, with
and without the padding counted)."""

from __future__ import annotations

import pytest
from harness import TARGETS, check_module

import rlx


def convs_and_pools(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("convs")
    img = h.input("img", (None, 4, 9, 10), dtype)
    seq = h.input("seq", (2, 3, 11), dtype)
    vol = h.input("vol", (1, 2, 5, 6, 4), dtype)
    w = h.param("w", (6, 2, 3, 3), dtype)
    outs = [h.mir("conv", [img, w], kernel_size=[3, 3], stride=[2, 1], padding=[1, 2],
                  dilation=[1, 2], groups=2)]
    pools = [
        (img, "max", [3, 2], [2, 3], [1, 2], [1, 0, 1, 1], True, False),
        (img, "avg", [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], True, False),
        (img, "avg", [3, 3], [2, 2], [1, 1], [1, 1, 2, 0], False, True),
        (img, "avg", [2, 3], [1, 2], [2, 1], [0, 1, 1, 0], True, True),
        (seq, "max", [4], [1], [1], [2, 1], False, False),
        (seq, "avg", [3], [2], [1], [1, 1], True, False),
        (vol, "max", [2, 3, 2], [1, 2, 2], [1, 1, 1], [0, 1, 0, 1, 0, 1], False, False),
        (vol, "avg", [3, 2, 2], [2, 2, 1], [1, 1, 1], [1, 0, 0, 1, 1, 1], True, True),
    ]
    for x, kind, k, s, d, p, ceil, include in pools:
        outs.append(h.mir("pool", [x], kind=kind, kernel_size=k, stride=s, dilation=d,
                          padding=p, ceil_mode=ceil, count_include_pad=include))
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_conv_and_pool(target: str, dtype: str) -> None:
    check_module(convs_and_pools(dtype), target, dyn=2)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_max_pool(target: str) -> None:
    h = rlx.HirModule("int_pool")
    x = h.input("x", (1, 2, 7), "i32")
    h.set_outputs([h.mir("pool", [x], kind="max", kernel_size=[3], stride=[2], dilation=[1],
                         padding=[1, 1], ceil_mode=True)])
    check_module(h, target)
