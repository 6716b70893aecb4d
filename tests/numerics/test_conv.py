"""Numerics of the convolution family: the MIR ops conv (padding, stride, dilation, groups)
and pool (max / average over 1-3 spatial dims; ceil mode, dilation, asymmetric padding, with
and without the padding counted) against the numpy reference, and the HIR block
``depthwise_conv1d_causal`` on IREE against ``torch.nn.functional.conv1d`` (groups = C, the
history ``left_pad`` prepended on the time axis), streamed in chunks too: a chunk whose
``left_pad`` holds the previous chunk's last K-1 frames continues the long convolution."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from harness import DEVICE, TARGETS, check_module

import rlx
from rlx.reference.tolerance import assert_close


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


@pytest.mark.parametrize("target", TARGETS)
def test_average_pool_over_dynamic_sizes(target: str) -> None:
    """avg pooling over a dynamic height and width, with and without padding, counting
    the padding or not, ceil mode: the window counts are computed at run time (an average
    that came out as the window's sum where no padding applied was caught here), at two
    sizes from one compile."""
    h = rlx.HirModule("dyn_avg")
    x = h.input("x", (None, 2, None, None))
    outs = []
    for pads in ([0, 0, 0, 0], [1, 0, 0, 1]):
        for include in (True, False):
            for ceil in (False, True):
                outs.append(h.mir("pool", [x], kind="avg", kernel_size=[2, 3],
                                  stride=[2, 2], dilation=[1, 1], padding=pads,
                                  ceil_mode=ceil, count_include_pad=include))
    h.set_outputs(outs)
    check_module(h, target, dyn=[7, 6])


@pytest.mark.parametrize("target", TARGETS)
def test_integer_conv(target: str) -> None:
    """i32 convolutions (strided and padded, grouped, depthwise): the sums exact, against
    torch's int64 convolution written out as a float64 one (exact at these sizes), and a
    sum past 2^31 wrapping as i32's do (against the reference)."""
    h = rlx.HirModule("int_conv")
    x = h.input("x", (None, 4, 7, 6), "i32")
    w1, w2, w3 = (h.input(n, s, "i32") for n, s in (("w1", (6, 4, 3, 3)), ("w2", (4, 2, 2, 3)),
                                                    ("w3", (4, 1, 3, 3))))
    h.set_outputs([
        h.mir("conv", [x, w1], kernel_size=[3, 3], stride=[2, 1], padding=[1, 1],
              dilation=[1, 1], groups=1),
        h.mir("conv", [x, w2], kernel_size=[2, 3], stride=[1, 1], padding=[0, 1],
              dilation=[2, 1], groups=2),
        h.mir("conv", [x, w3], kernel_size=[3, 3], stride=[1, 1], padding=[1, 1],
              dilation=[1, 1], groups=4),
        # an unpadded conv of computed operands, ConvInteger's (x - zero point) form
        h.mir("conv", [h.mir("binary", [h.mir("cast", [h.input("xb", (None, 4, 7, 6), "i8")],
                                              to="i32", unsigned="source"),
                                        h.constant(np.asarray(120, np.int32), "i32")],
                             kind="sub"),
                       h.mir("binary", [h.mir("cast", [h.input("wb", (6, 4, 3, 3), "i8")],
                                              to="i32"),
                                        h.constant(np.asarray(2, np.int32), "i32")],
                             kind="sub")], kernel_size=[3, 3], stride=[1, 1],
              padding=[0, 0], dilation=[1, 1], groups=1)])
    rng = np.random.default_rng(4)
    inputs = {"x": rng.integers(-128, 256, (2, 4, 7, 6)).astype(np.int32),
              "w1": rng.integers(-128, 128, (6, 4, 3, 3)).astype(np.int32),
              "w2": rng.integers(-128, 128, (4, 2, 2, 3)).astype(np.int32),
              "w3": rng.integers(-128, 128, (4, 1, 3, 3)).astype(np.int32),
              "xb": rng.integers(-128, 128, (2, 4, 7, 6)).astype(np.int8),
              "wb": rng.integers(-128, 128, (6, 4, 3, 3)).astype(np.int8)}
    got = check_module(h, target, inputs=inputs)
    want = F.conv2d(torch.from_numpy(inputs["x"]).double(),
                    torch.from_numpy(inputs["w3"]).double(), padding=1, groups=4)
    np.testing.assert_array_equal(got[2], want.numpy().astype(np.int32))
    big = rlx.HirModule("wrap")
    bx, bw = big.input("x", (1, 1, 3, 3), "i32"), big.input("w", (1, 1, 3, 3), "i32")
    big.set_outputs([big.mir("conv", [bx, bw], kernel_size=[3, 3], stride=[1, 1],
                             padding=[0, 0], dilation=[1, 1], groups=1)])
    full = np.full((1, 1, 3, 3), 1 << 15, np.int32)  # 9 * 2^30 wraps
    out = check_module(big, target, inputs={"x": full, "w": full})
    assert out[0].item() == np.int32(np.int64(9 << 30) - (1 << 32) * 2)


B, S, C, K = 2, 12, 16, 4
CHUNKS = ((0, 5), (5, 12))


def conv_module() -> rlx.HirModule:
    """One convolution over the whole sequence and one per chunk, sharing the weight."""
    h = rlx.HirModule("dwconv")
    w = h.param("w", (C, 1, 1, K))
    outs = []
    for name, seq in [("full", S), *[(f"chunk{i}", hi - lo) for i, (lo, hi) in
                                     enumerate(CHUNKS)]]:
        x = h.input(f"x_{name}", (B, seq, C))
        pad = h.input(f"pad_{name}", (B, K - 1, C))
        outs.append(h.depthwise_conv1d_causal(x, w, pad, kernel_size=K))
    h.set_outputs(outs)
    return h


def torch_conv(x: np.ndarray, w: np.ndarray, pad: np.ndarray) -> np.ndarray:
    """``conv1d`` over ``[B, C, K-1+S]`` (history first) with the ``[C, 1, K]`` kernel,
    one group per channel: ``y[t]`` sees frames ``t-K+1 .. t``, ``w[:, K-1]`` the current
    one."""
    seq = torch.from_numpy(np.concatenate([pad, x], axis=1)).transpose(1, 2)
    y = F.conv1d(seq, torch.from_numpy(w[:, :, 0, :]), groups=x.shape[2])
    return y.transpose(1, 2).numpy()


@pytest.mark.parametrize("target", TARGETS)
def test_depthwise_conv1d_causal_matches_torch(target: str) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((C, 1, 1, K)).astype(np.float32)
    x = rng.standard_normal((B, S, C)).astype(np.float32)
    history = rng.standard_normal((B, K - 1, C)).astype(np.float32)
    feeds = {"x_full": x, "pad_full": history}
    zero = np.zeros((B, K - 1, C), np.float32)
    for i, (lo, hi) in enumerate(CHUNKS):
        feeds[f"x_chunk{i}"] = np.ascontiguousarray(x[:, lo:hi])
        feeds[f"pad_chunk{i}"] = zero if lo == 0 else np.ascontiguousarray(x[:, lo - K + 1:lo])
    prog = rlx.runtime.load(rlx.compile(conv_module(), target), DEVICE[target], {"w": w})
    full, *chunks = prog.main(**feeds)
    assert_close(full, torch_conv(x, w, history), "f32", "with history")
    zero_padded = F.conv1d(F.pad(torch.from_numpy(x).transpose(1, 2), (K - 1, 0)),
                           torch.from_numpy(w[:, :, 0, :]), groups=C).transpose(1, 2).numpy()
    streamed = np.concatenate(chunks, axis=1)
    assert_close(streamed, zero_padded, "f32", "streamed in chunks vs zero left padding")


def carry_program(batch: int | None, rng: np.random.Generator, target: str
                  ) -> tuple[rlx.runtime.Program, np.ndarray]:
    """The ``carry`` block over ``[batch, ?, C]`` (None: a dynamic batch), loaded with a
    random weight; returns the program and the weight."""
    h = rlx.HirModule(f"dwconv_carry_{batch}")
    y, final = h.depthwise_conv1d_causal_carry(h.input("x", (batch, None, C)),
                                               h.param("w", (C, 1, 1, K)),
                                               h.input("pad", (batch, K - 1, C)), kernel_size=K)
    h.set_outputs([y, final])
    w = rng.standard_normal((C, 1, 1, K)).astype(np.float32)
    return rlx.runtime.load(rlx.compile(h, target), DEVICE[target], {"w": w}), w


@pytest.mark.parametrize("target", TARGETS)
def test_depthwise_conv1d_causal_carry_chains_chunks(target: str) -> None:
    """With ``carry`` the block returns the last K-1 frames of ``[left_pad | x]``: fed back
    as the next call's ``left_pad``, chunks of any length (1 and longer than K) continue
    the long convolution exactly, and the last state is the sequence's last K-1 frames."""
    rng = np.random.default_rng(1)
    prog, w = carry_program(B, rng, target)
    x = rng.standard_normal((B, S, C)).astype(np.float32)
    state = np.zeros((B, K - 1, C), np.float32)
    outs = []
    for lo, hi in ((0, 1), (1, 7), (7, 8), (8, S)):
        out, state = prog.main(np.ascontiguousarray(x[:, lo:hi]), state)
        outs.append(out)
    want = torch_conv(x, w, np.zeros((B, K - 1, C), np.float32))
    assert_close(np.concatenate(outs, axis=1), want, "f32", "chained with carry")
    np.testing.assert_array_equal(state, x[:, S - K + 1:])


@pytest.mark.parametrize("target", TARGETS)
def test_depthwise_conv1d_causal_dynamic_batch(target: str) -> None:
    """Batch and sequence both dynamic (a batched server's prompts): one compiled module
    over 1, 3 and 5 rows of different lengths, against torch, with the carried frames."""
    rng = np.random.default_rng(2)
    prog, w = carry_program(None, rng, target)
    for rows, seq in ((1, 5), (3, 1), (5, 9)):
        x = rng.standard_normal((rows, seq, C)).astype(np.float32)
        pad = rng.standard_normal((rows, K - 1, C)).astype(np.float32)
        out, frames = prog.main(x, pad)
        assert_close(out, torch_conv(x, w, pad), "f32", f"{rows} rows of {seq}")
        np.testing.assert_array_equal(frames, np.concatenate([pad, x], axis=1)[:, -(K - 1):])


def test_depthwise_conv1d_causal_length_as_height(monkeypatch: pytest.MonkeyPatch) -> None:
    """The form CUDA and ROCm take (the frames as the conv's height, ``[B, C, W, 1]``, kernel
    ``[K, 1]``; ``registry.LLVMGPU_TARGETS``), which no CPU or Vulkan test would otherwise
    run: on llvm-cpu against torch, dynamic batch and length, and chained with ``carry``."""
    from rlx.lowering import registry

    monkeypatch.setattr(registry, "LLVMGPU_TARGETS", ("llvm-cpu",))
    h = rlx.HirModule("tall")
    h.set_outputs([h.depthwise_conv1d_causal(h.input("x", (None, None, C)),
                                             h.param("w", (C, 1, 1, K)),
                                             h.input("pad", (None, K - 1, C)), kernel_size=K)])
    assert f"kernel_size = array<i64: {K}, 1>" in rlx.compile(h, "llvm-cpu", emit="mir")
    test_depthwise_conv1d_causal_dynamic_batch("llvm-cpu")
    test_depthwise_conv1d_causal_carry_chains_chunks("llvm-cpu")
