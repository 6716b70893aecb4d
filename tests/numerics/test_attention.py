"""Numerics of attention and RoPE: every mask kind, GQA, all q/k/v layouts, dynamic and
different query / key lengths, both lowerings (decomposed; IREE's fused op on llvm-cpu),
the llvm-cpu decode kernel (one query, and one per sequence of a batch with a keep mask)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from harness import TARGETS, check_module

import rlx
from rlx import compiler, reference, runtime
from rlx.dialects.enums import MASK_KINDS
from rlx.ir.text import walk_ops
from rlx.reference.tolerance import assert_close


def attention_module(dtype: str) -> rlx.HirModule:
    """Packed heads, GQA (8 query heads over 2 KV heads), dynamic lengths: one attention of
    each mask kind over the same ``q``, ``k``, ``v`` (output ``i``: ``MASK_KINDS[i]``; one
    compile for all of them), each mask its own input (``mask_<kind>``)."""
    h = rlx.HirModule("attn_masks")
    q = h.input("q", (2, None, 8 * 16), dtype)
    k = h.input("k", (2, None, 2 * 16), dtype)
    v = h.input("v", (2, None, 2 * 16), dtype)
    h.set_outputs(every_mask_kind(h, q, k, v, dtype, batch=2, heads=8, queries=None))
    return h


def every_mask_kind(h: rlx.HirModule, q: rlx.HirValue, k: rlx.HirValue, v: rlx.HirValue,
                    dtype: str, *, batch: int, heads: int, queries: int | None
                    ) -> list[rlx.HirValue]:
    """One attention of each of :data:`MASK_KINDS` (head dim 16, a window of 3), each mask
    an input of its own (``mask_<kind>``)."""
    masks = {"custom": h.input("mask_custom", (batch, None), dtype),
             "bias": h.input("mask_bias", (batch, heads, queries, None), dtype),
             "causal_lengths": h.input("mask_causal_lengths", (batch,), "i32")}
    return [h.attention(q, k, v, masks.get(kind), num_heads=heads, head_dim=16,
                        mask_kind=kind, window=3 if kind == "sliding_window" else None)
            for kind in MASK_KINDS]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_attention_masks(target: str, dtype: str) -> None:
    check_module(attention_module(dtype), target, dyn=6, inputs=mask_inputs(dtype))


def mask_inputs(dtype: str) -> dict[str, np.ndarray]:
    """custom: random keep flags (key 0 kept); causal_lengths: 6 of the 6 keys filled in
    row 0, 3 in row 1 (its first three queries see no key: every score masked)."""
    m = (np.random.default_rng(3).random((2, 6)) < 0.6).astype(np.float16 if dtype == "f16"
                                                                else np.float32)
    m[:, 0] = 1
    return {"mask_causal_lengths": np.array([6, 3], np.int32), "mask_custom": m}


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_decode_shape_queries_are_the_last_positions(dtype: str) -> None:
    """S = 1 query against S_k = 9 keys: causal keeps every key, a window of 3 keeps 4;
    one attention of each mask kind (output ``i``: ``MASK_KINDS[i]``), one compile."""
    h = rlx.HirModule("decode")
    q = h.input("q", (1, 1, 64), dtype)
    k = h.input("k", (1, None, 32), dtype)
    v = h.input("v", (1, None, 32), dtype)
    h.set_outputs(every_mask_kind(h, q, k, v, dtype, batch=1, heads=4, queries=1))
    check_module(h, "llvm-cpu", dyn=9, inputs={"mask_causal_lengths": np.array([5], np.int32)})


SCORE = 120.0
"""What every decode-kernel test score is near: ``exp`` overflows f32 above 88.72, so a
kernel that skipped the max subtraction would return inf / NaN for every key."""


def decode_inputs(heads: int, kv_heads: int, head_dim: int, keys: int,
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``q [1, 1, H·hd]``, ``k`` / ``v [1, keys, Hkv·hd]`` whose scores ``q·k / sqrt(hd)``
    are all within a few units of :data:`SCORE` (lane 0 of every q head and every K row is
    a constant: its product carries the score; the other lanes are random, ``q`` scaled by 4,
    so that scores spread by ~4 between keys and differ between KV heads). q and k lie on a
    grid of 1/8 and stay small enough that every dot product is exact in f32: a score's only
    rounding is its scale, whatever the kernel's summation order."""
    scale = 1.0 / math.sqrt(head_dim)
    q = np.round(32 * rng.standard_normal((heads, head_dim))) / 8
    k = np.round(8 * rng.standard_normal((keys, kv_heads, head_dim))) / 8
    q[:, 0] = 16.0
    k[:, :, 0] = np.round(8 * SCORE / (16.0 * scale)) / 8
    v = rng.standard_normal((1, keys, kv_heads * head_dim))
    return {"q": q.reshape(1, 1, -1).astype(np.float32),
            "k": k.reshape(1, keys, -1).astype(np.float32), "v": v.astype(np.float32)}


def decode_scores(inputs: dict[str, np.ndarray], heads: int, head_dim: int) -> np.ndarray:
    """``[H, keys]``: every query head's score of every key (float64)."""
    q = inputs["q"].astype(np.float64).reshape(heads, head_dim)
    k = inputs["k"].astype(np.float64)[0]
    kv = k.reshape(len(k), -1, head_dim)
    group = heads // kv.shape[1]
    return np.einsum("hd,jhd->hj", q, np.repeat(kv, group, axis=1)) / math.sqrt(head_dim)


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "mask_kind", "window", "keys"), [
    (9, 3, 64, "causal", None, 1),          # the 135M model's shape; one key
    (9, 3, 64, "causal", None, 37),
    (9, 3, 64, "causal", None, 65536),      # the longest cache a 135M model is built for
    (4, 4, 32, "none", None, 300),          # MHA, a cache longer than the unrolled tiles
    (32, 8, 128, "causal", None, 19),       # the 1B model's shape
    (6, 2, 16, "sliding_window", 5, 40),    # the last 6 keys
    (6, 2, 16, "sliding_window", 50, 40),   # a window wider than the cache
    (6, 2, 16, "sliding_window", 600, 1000),  # a window over blocks of keys, the last partial
    (4, 2, 16, "causal", None, -7),          # a static cache length (7); V's dynamic
])
def test_decode_attention_kernel(heads: int, kv_heads: int, head_dim: int, mask_kind: str,
                                 window: int | None, keys: int) -> None:
    """One query against the cache through rlx's hand-written llvm-cpu kernel (one
    dispatch, checked in the lowered module), against the numpy reference. Every score is
    above 88.72 (:func:`decode_inputs`), where f32 ``exp`` overflows: a kernel without the
    max subtraction fails here (checked by breaking it); different KV heads catch a wrong
    head mapping. The 65536-key cache tests the kernel's summation: every key counts
    (scores spread by ~4), and summed in key order in f32 its many small weights fall below
    half an ulp of the running sums, 1.2e-4 of the largest output off, beyond the f32
    tolerance; the kernel's sums in blocks of keys are 7e-7 off (the sequential sum fails
    here, checked). ``keys < 0``: a static K length of ``-keys`` (V stays dynamic)."""
    h = rlx.HirModule("decode_kernel")
    length = -keys if keys < 0 else None
    keys = abs(keys)
    q = h.input("q", (1, 1, heads * head_dim))
    k = h.input("k", (1, length, kv_heads * head_dim))
    v = h.input("v", (1, None, kv_heads * head_dim))
    h.set_outputs([h.attention(q, k, v, num_heads=heads, head_dim=head_dim,
                               mask_kind=mask_kind, window=window)])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    assert linalg.count("flow.dispatch @rlx_attention_decode_") == 1
    assert "linalg.softmax" not in linalg
    inputs = decode_inputs(heads, kv_heads, head_dim, keys, np.random.default_rng(keys))
    assert decode_scores(inputs, heads, head_dim).max(axis=1).min() > 90.0
    check_module(h, "llvm-cpu", inputs=inputs)


def test_batched_decode_attention_kernel() -> None:
    """B = 4 queries, one per sequence, each against its own row of the cache through the
    kernel, the 4 query heads of a KV head in one workgroup (``_g4``: K and V rows read once
    for the four): a custom keep mask (i1, the batched decode's ``row <= pos``; and f32 over
    a dynamic key length, with a row that keeps no key: uniform over its keys as the
    decomposed form, not NaN), and causal (every key). All three are kernel dispatches in
    the lowered module; each matches the numpy reference (a head of the group mapped to
    another's query, output or KV head fails it)."""
    b, heads, kv_heads, hd, keys = 4, 8, 2, 16, 10
    h = rlx.HirModule("batched_decode")
    q = h.input("q", (b, 1, heads * hd))
    k, v = (h.input(n, (b, keys, kv_heads * hd)) for n in ("k", "v"))
    kd, vd = (h.input(n, (b, None, kv_heads * hd)) for n in ("kd", "vd"))
    keep, keep_f = h.input("keep", (b, keys), "i1"), h.input("keep_f", (b, None))
    h.set_outputs([
        h.attention(q, k, v, keep, num_heads=heads, head_dim=hd, mask_kind="custom"),
        h.attention(q, kd, vd, keep_f, num_heads=heads, head_dim=hd, mask_kind="custom"),
        h.attention(q, k, v, num_heads=heads, head_dim=hd, mask_kind="causal")])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    kernels = re.findall(r"flow\.dispatch @(rlx_attention_decode_\w+)::", linalg)
    assert len(kernels) == 3, kernels
    assert all(n.endswith("_g4") for n in kernels), kernels
    assert "linalg.softmax" not in linalg
    rng = np.random.default_rng(5)
    pos = np.array([2, 9, 0, 6])
    seen = (rng.random((b, 7)) < 0.5).astype(np.float32)
    seen[0] = 0     # a row that keeps no key
    check_module(h, "llvm-cpu", dyn=7, inputs={"keep": np.arange(keys)[None] <= pos[:, None],
                                               "keep_f": seen})


def _unchecked_kernel(h: rlx.HirModule, dispatch: str, check: str) -> object:
    """``h`` compiled for llvm-cpu through the decode kernel ``dispatch`` with its run-time
    size checks (``check``, which must be there) removed, loaded: what the kernel reads
    when those relations do not hold."""
    config = compiler.TargetConfig("llvm-cpu")
    lowered = compiler.load(h)
    compiler.lower(lowered, config)
    checks = [op for op in walk_ops(lowered.module.operation)
              if op.name == "util.status.check_ok"]
    assert checks, f"{check} the kernel must not depend on"
    for op in checks:
        op.erase()
    assert f"flow.dispatch @{dispatch}" in compiler.lowered_text(lowered.module)
    return runtime.load(compiler.run_iree(lowered, config, None), "local-task")


@pytest.mark.parametrize(("len_k", "len_v", "mask_kind", "window"), [
    (40, 29, "causal", None),               # V shorter: nothing past its 29 rows is read
    (29, 40, "none", None),
    (40, 29, "sliding_window", 5),          # the window ends at the last key both have
    (1000, 990, "causal", None),            # blocks of keys, V ending inside the last
])
def test_decode_attention_kernel_stays_within_k_and_v(len_k: int, len_v: int, mask_kind: str,
                                                      window: int | None) -> None:
    """K and V of different row counts, which the op's run-time shape checks reject: the
    module is lowered with those checks removed, so the kernel itself sees the mismatch. It
    attends over the keys both have (it gets each row count as the dims of its own binding)
    and reads nothing past either: the result is the reference over the first
    ``min(len_k, len_v)`` keys."""
    heads, kv_heads, head_dim = 6, 2, 32
    h = rlx.HirModule("mismatch")
    q = h.input("q", (1, 1, heads * head_dim))
    k = h.input("k", (1, None, kv_heads * head_dim))
    v = h.input("v", (1, None, kv_heads * head_dim))
    h.set_outputs([h.attention(q, k, v, num_heads=heads, head_dim=head_dim,
                               mask_kind=mask_kind, window=window)])
    prog = _unchecked_kernel(h, "rlx_attention_decode_", "the K / V length check")
    inputs = decode_inputs(heads, kv_heads, head_dim, max(len_k, len_v),
                           np.random.default_rng(len_k))
    inputs["k"], inputs["v"] = inputs["k"][:, :len_k], inputs["v"][:, :len_v]
    n = min(len_k, len_v)
    want = reference.evaluate(h, {"q": inputs["q"], "k": inputs["k"][:, :n],
                                  "v": inputs["v"][:, :n]}, {})[0]
    assert_close(prog.main(**inputs), want, "f32", f"K {len_k} rows, V {len_v}")


def test_batched_decode_kernel_stays_within_its_rows() -> None:
    """A batch of 2 with K / V of 12 rows a sequence and a keep mask of 9, which the op's
    run-time shape checks reject: lowered with those checks removed, the masked batched
    kernel takes ``rows = min(24, 24, 18) / 2 = 9`` rows a sequence of the collapsed
    operands (row ``b`` reads collapsed rows ``9 b .. 9 b + 8`` of K, V and mask), and reads
    nothing past any binding: the result is the reference over exactly those rows."""
    b, heads, kv_heads, hd = 2, 4, 2, 16
    h = rlx.HirModule("batched_mismatch")
    q = h.input("q", (b, 1, heads * hd))
    k, v = (h.input(n, (b, None, kv_heads * hd)) for n in ("k", "v"))
    keep = h.input("keep", (b, None))
    h.set_outputs([h.attention(q, k, v, keep, num_heads=heads, head_dim=hd,
                               mask_kind="custom")])
    prog = _unchecked_kernel(h, "rlx_attention_decode_4x2x16_", "the mask length check")
    rng = np.random.default_rng(9)
    inputs = {"q": rng.standard_normal((b, 1, heads * hd)).astype(np.float32),
              "k": rng.standard_normal((b, 12, kv_heads * hd)).astype(np.float32),
              "v": rng.standard_normal((b, 12, kv_heads * hd)).astype(np.float32),
              "keep": (rng.random((b, 9)) < 0.6).astype(np.float32)}
    seen = {n: inputs[n].reshape(b * inputs[n].shape[1], -1)[:18].reshape(b, 9, -1)
            for n in ("k", "v")}
    want = reference.evaluate(h, {"q": inputs["q"], **seen, "keep": inputs["keep"]}, {})[0]
    assert_close(prog.main(**inputs), want, "f32", "K / V 12 rows a sequence, mask 9")


def test_decode_score_scale_and_softcap() -> None:
    h = rlx.HirModule("scale")
    q = h.input("q", (1, 1, 32))
    kv = h.input("kv", (1, 5, 32))
    h.set_outputs([h.mir("attention", [q, kv, kv], num_heads=2, head_dim=16, mask_kind="none",
                         score_scale=0.5, attn_logit_softcap=2.0)])
    check_module(h, "llvm-cpu")


def layouts(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("layouts")
    outs = []
    q2 = h.input("q2", (None, 4 * 8), dtype)
    kv2 = h.input("kv2", (None, 4 * 8), dtype)
    outs.append(h.attention(q2, kv2, kv2, num_heads=4, head_dim=8, mask_kind="causal"))
    bshd = h.input("bshd", (2, None, 4, 8), dtype)
    kv4 = h.input("kv4", (2, None, 2, 8), dtype)
    outs.append(h.attention(bshd, kv4, kv4, num_heads=4, head_dim=8, mask_kind="causal"))
    bhsd = h.input("bhsd", (2, 4, 5, 8), dtype)
    kvh = h.input("kvh", (2, 1, 7, 8), dtype)
    outs.append(h.attention(bhsd, kvh, kvh, num_heads=4, head_dim=8, mask_kind="causal"))
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
def test_attention_layouts(target: str) -> None:
    check_module(layouts("f32"), target, dyn=6)


def test_fused_attention_lowering() -> None:
    """iree_linalg_ext.attention (the CUDA / ROCm default), selected on llvm-cpu, for every
    mask kind."""
    check_module(attention_module("f32"), "llvm-cpu", dyn=6, inputs=mask_inputs("f32"),
                 attention="fused")


def test_score_scale_and_softcap() -> None:
    h = rlx.HirModule("scale")
    q = h.input("q", (1, 4, 32))
    h.set_outputs([h.mir("attention", [q, q, q], num_heads=2, head_dim=16, mask_kind="none",
                         score_scale=0.5, attn_logit_softcap=2.0)])
    check_module(h, "llvm-cpu")


def rope_module(dtype: str) -> rlx.HirModule:
    h = rlx.HirModule("rope")
    x = h.input("x", (2, None, 4 * 16), dtype)
    cos, sin = h.input("cos", (None, 8), dtype), h.input("sin", (None, 8), dtype)
    x2 = h.input("x2", (None, 2 * 16), dtype)
    x4 = h.input("x4", (2, None, 3, 16), dtype)
    outs = []
    for style in ("neox", "gptj"):
        outs += [h.rope(x, cos, sin, 16, 16, style), h.rope(x, cos, sin, 16, 6, style),
                 h.rope(x2, cos, sin, 16, 10, style), h.rope(x4, cos, sin, 16, 16, style)]
    h.set_outputs(outs)
    return h


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rope(target: str, dtype: str) -> None:
    check_module(rope_module(dtype), target, dyn=5)


def test_rope_table_longer_than_sequence() -> None:
    """Tables hold T >= S rows; row t is position t."""
    h = rlx.HirModule("rope_long")
    x = h.input("x", (1, 3, 32))
    cos, sin = h.param("cos", (16, 8)), h.param("sin", (16, 8))
    h.set_outputs([h.rope(x, cos, sin, 16, 16)])
    check_module(h, "llvm-cpu")


@pytest.mark.parametrize("barriers", [True, False])
@pytest.mark.parametrize(("batch", "heads", "kv_heads", "head_dim"),
                         [(2, 2, 1, 4), (None, 1, 1, 8)])
def test_projected_attention_with_data_tiling(barriers: bool, batch: int | None, heads: int,
                                              kv_heads: int, head_dim: int) -> None:
    """Found by tests/fuzz: q/k/v projected from one input, 3 positions. IREE 3.13 with data
    tiling computed wrong attention unless q/k/v pass a barrier; rlx emits them whenever
    data tiling is on, even with compute_barriers=False."""
    h = rlx.HirModule("fuzz_regression")
    x = h.input("x0", (batch, 3, 8))
    q = h.linear(x, h.param("p1", (8, heads * head_dim)))
    k = h.linear(x, h.param("p2", (8, kv_heads * head_dim)))
    v = h.linear(x, h.param("p3", (8, kv_heads * head_dim)))
    h.set_outputs([h.attention(q, k, v, num_heads=heads, head_dim=head_dim,
                               mask_kind="none")])
    check_module(h, "llvm-cpu", compute_barriers=barriers, dyn=2)


def test_head_major_attention_over_a_dynamic_batch_past_64_keys() -> None:
    """Found importing a wav2vec2 export (dynamic batch and length): q / k / v projected,
    split into heads and transposed to ``[B, H, S, hd]``, then attention: the block (output
    0), and loose matmul / softmax / matmul as an export that no block matches becomes
    (output 1). With a dynamic batch, IREE 3.13's data tiling of the batch matmuls over
    ``B · H`` computed wrong outputs past 64 keys (errors of 0.4-34, not the same from run
    to run), and failed to compile the loose form; rlx keeps those contractions out of data
    tiling (two batch dims), so both match the reference past 64 positions and below, from
    one compile."""
    h = rlx.HirModule("head_major")
    x = h.input("x", (None, None, 32))
    heads = [h.mir("transpose", [h.mir("reshape", [h.linear(x, h.param(f"w{i}", (32, 32)))],
                                       new_shape=[-2, -3, 4, 8])], perm=[0, 2, 1, 3])
             for i in range(3)]
    q, k, v = heads
    scores = h.mir("matmul", [q, h.mir("transpose", [k], perm=[0, 1, 3, 2])])
    probs = h.mir("softmax", [h.mir("binary", [scores, h.constant(
        np.array(8 ** -0.5, np.float32), "f32")], kind="mul")], axis=3)
    h.set_outputs([h.attention(q, k, v, num_heads=4, head_dim=8), h.mir("matmul", [probs, v])])
    rng = np.random.default_rng(0)
    weights = {f"w{i}": rng.standard_normal((32, 32)).astype(np.float32) * 0.3
               for i in range(3)}
    prog = runtime.load(compiler.compile(h, "llvm-cpu"), "local-task", weights)
    for batch, length in ((1, 65), (1, 100), (2, 5), (3, 70)):
        feeds = {"x": rng.standard_normal((batch, length, 32)).astype(np.float32)}
        got = prog.main(**feeds)
        for i, want in enumerate(reference.evaluate(h, feeds, weights)):
            assert_close(got[i], want, "f32", f"output {i}, batch {batch}, {length} positions")


@pytest.mark.parametrize("group", [8, 16])
def test_prefill_attention_with_a_whole_tile_of_query_heads_per_kv_head(group: int) -> None:
    """A GQA group that fills whole data-tiling row tiles (8 f32 rows on AVX2, 16 on
    AVX-512: TinyLlama's and Llama-3.2-1B's 32 / 4 heads, Llama-3-8B's 32 / 8 on AVX2).
    IREE 3.13 failed to compile the Q pack ("affine.delinearize_index ... non-positive")
    until rlx put a barrier between Q's head transpose and QKᵀ."""
    h = rlx.HirModule("gqa_whole_tile")
    x = h.input("x", (1, None, 16))
    q = h.linear(x, h.param("wq", (16, group * 8)))
    k = h.linear(x, h.param("wk", (16, 8)))
    v = h.linear(x, h.param("wv", (16, 8)))
    h.set_outputs([h.attention(q, k, v, num_heads=group, head_dim=8, mask_kind="causal")])
    check_module(h, "llvm-cpu", dyn=5)


def test_decode_kernel_reads_each_rows_filled_keys() -> None:
    """causal_lengths through the llvm-cpu kernel (one dispatch, the 3 query heads of a KV
    head in one workgroup): each of 4 rows of a preallocated cache sees its first ``n_b``
    keys; ``n_b`` = 0 and -5 see none (every score masked: the average of the row's keys, as
    the reference), 99 (past the 9 rows) all of them: the kernel clamps the device-side
    count into its row."""
    h = rlx.HirModule("decode_filled")
    q = h.input("q", (4, 1, 6 * 16))
    k, v = h.input("k", (4, None, 2 * 16)), h.input("v", (4, None, 2 * 16))
    n = h.input("n", (4,), "i32")
    h.set_outputs([h.attention(q, k, v, n, num_heads=6, head_dim=16,
                               mask_kind="causal_lengths")])
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    assert linalg.count("flow.dispatch @rlx_attention_decode_6x2x16_s3e800000_b4_n_g3") == 1
    check_module(h, "llvm-cpu", dyn=9, inputs={"n": np.array([0, 4, 99, -5], np.int32)})


def prefill_inputs(batch: int, queries: int, keys: int, heads: int, kv_heads: int,
                   head_dim: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``q [B, S, H·hd]``, ``k`` / ``v [B, keys, Hkv·hd]`` whose scores all lie within a few
    units of :data:`SCORE` (as :func:`decode_inputs`: lane 0 carries it, the rest random on
    a grid where every dot product is exact in f32)."""
    scale = 1.0 / math.sqrt(head_dim)
    q = np.round(32 * rng.standard_normal((batch, queries, heads, head_dim))) / 8
    k = np.round(8 * rng.standard_normal((batch, keys, kv_heads, head_dim))) / 8
    q[..., 0] = 16.0
    k[..., 0] = np.round(8 * SCORE / (16.0 * scale)) / 8
    v = rng.standard_normal((batch, keys, kv_heads * head_dim))
    return {"q": q.reshape(batch, queries, -1).astype(np.float32),
            "k": k.reshape(batch, keys, -1).astype(np.float32), "v": v.astype(np.float32)}


def prefill_module(batch: int, heads: int, kv_heads: int, head_dim: int, mask_kind: str,
                   window: int | None) -> rlx.HirModule:
    """Packed q / k / v of dynamic lengths; custom: ``[B, S_k]`` keep flags; causal_lengths:
    ``[B]`` i32 counts."""
    h = rlx.HirModule("prefill_kernel")
    q = h.input("q", (batch, None, heads * head_dim))
    k = h.input("k", (batch, None, kv_heads * head_dim))
    v = h.input("v", (batch, None, kv_heads * head_dim))
    mask = (h.input("mask", (batch, None)) if mask_kind == "custom" else
            h.input("mask", (batch,), "i32") if mask_kind == "causal_lengths" else None)
    h.set_outputs([h.attention(q, k, v, mask, num_heads=heads, head_dim=head_dim,
                               mask_kind=mask_kind, window=window)])
    return h


@pytest.mark.parametrize(("batch", "queries", "keys", "heads", "kv_heads", "head_dim",
                          "mask_kind", "window"), [
    (1, 300, 300, 9, 3, 64, "causal", None),    # the 135M model's heads; rows past a block
    (1, 5, 12, 4, 2, 16, "causal", None),       # queries are the last 5 of 12 positions
    (1, 12, 5, 4, 2, 16, "causal", None),       # the first 7 queries sit before every key
    (2, 7, 9, 4, 4, 32, "none", None),          # MHA, a batch
    (1, 40, 40, 6, 2, 16, "sliding_window", 5),
    (1, 20, 300, 6, 2, 16, "sliding_window", 200),  # a window over blocks of keys
    (2, 6, 10, 4, 2, 16, "custom", None),
    (4, 6, 10, 4, 2, 16, "causal_lengths", None),
    (1, 9, 4, 32, 8, 128, "causal_lengths", None),  # the 1B model's heads
    (1, 2, 65536, 9, 3, 64, "none", None),      # long rows: the sums in two levels
    (1, 21, 37, 4, 2, 16, "custom", None),      # 16 consecutive key rows a block, masked
    (1, 40, 40, 2, 1, 256, "causal", None),     # Qwen3.5's heads: the 8-row kernel
])
def test_prefill_attention_kernel(batch: int, queries: int, keys: int, heads: int,
                                  kv_heads: int, head_dim: int, mask_kind: str,
                                  window: int | None) -> None:
    """Several queries per sequence through rlx's hand-written llvm-cpu prefill kernels (one
    dispatch, no softmax left in the lowered module; 16 query rows a workgroup, one a lane,
    for heads up to 128 wide, :mod:`rlx.lowering.mir_to_linalg.prefill_rows`, and the
    8-row kernel for wider ones), against the numpy reference. Fewer than 16 key rows take
    the rows kernel's clamped key rows, 16 or more its consecutive ones. Scores
    above 88.72 catch a missing max subtraction, different KV heads a wrong head mapping,
    batches a wrong row. causal_lengths counts 10 / 3 / -5 / 99 (a row whose queries all
    sit before its keys, and one past its rows: clamped), 2 for the one-row case; custom
    keeps random keys, with a row that keeps none (uniform, not NaN). 65536 keys test the
    summation of long rows: 1.2e-6 of the largest output off (the sums in two levels;
    5.9e-6 with the partial sums never folded, measured)."""
    h = prefill_module(batch, heads, kv_heads, head_dim, mask_kind, window)
    linalg = rlx.compile(h, "llvm-cpu", emit="linalg")
    kernel = "prefill_rows_" if head_dim <= 128 else "prefill_"
    assert linalg.count(f"flow.dispatch @rlx_attention_{kernel}{heads}x") == 1
    assert "linalg.softmax" not in linalg
    rng = np.random.default_rng(queries * keys)
    inputs = prefill_inputs(batch, queries, keys, heads, kv_heads, head_dim, rng)
    if mask_kind == "causal_lengths":
        inputs["mask"] = np.array([10, 3, -5, 99][:batch] if batch > 1 else [2], np.int32)
    elif mask_kind == "custom":
        inputs["mask"] = (rng.random((batch, keys)) < 0.5).astype(np.float32)
        inputs["mask"][0] = 0
    check_module(h, "llvm-cpu", inputs=inputs)


def test_prefill_attention_kernel_propagates_nan() -> None:
    """A NaN in one key's K makes exactly the query rows that see that key NaN (their block
    max may pass over the NaN score, its weight does not); the rows before it, whose blocks
    hold the key's lane too, match the numpy reference on the same inputs."""
    h = prefill_module(1, 4, 2, 16, "causal", None)
    rng = np.random.default_rng(3)
    inputs = prefill_inputs(1, 40, 40, 4, 2, 16, rng)
    inputs["k"][0, 20, 3] = np.nan
    prog = runtime.load(rlx.compile(h, "llvm-cpu"))
    got = np.asarray(prog.main(inputs["q"], inputs["k"], inputs["v"])).reshape(40, 4, 16)
    want = np.asarray(reference.evaluate(h, inputs, {})[0]).reshape(40, 4, 16)
    assert np.isnan(got[20:, :2]).all()          # the heads of KV head 0, from key 20 on
    assert np.isfinite(got[20:, 2:]).all()
    assert np.isfinite(got[:20]).all()
    assert_close(got[:20], want[:20], "f32")


@pytest.mark.parametrize(("len_k", "len_v", "mask_kind", "hd"), [
    (40, 29, "causal", 32), (29, 40, "none", 32), (300, 290, "causal_lengths", 32),
    (13, 40, "causal", 32), (40, 29, "causal", 256)])
def test_prefill_attention_kernel_stays_within_k_and_v(len_k: int, len_v: int,
                                                       mask_kind: str, hd: int) -> None:
    """K and V of different row counts, which the op's run-time checks reject, lowered with
    those checks removed: the prefill kernel attends over the keys both have (each binding's
    row count reaches it as its memref dim) and reads nothing past either. causal_lengths
    passes a count of 1000 for 290 rows: clamped into them. 13 rows take the 16-row
    kernel's clamped key rows, 29 and more its consecutive ones; 256-wide heads the 8-row
    kernel."""
    heads, kv_heads, queries = 6, 2, 7
    h = prefill_module(1, heads, kv_heads, hd, mask_kind, None)
    kernel = "prefill_rows_" if hd <= 128 else "prefill_"
    prog = _unchecked_kernel(h, f"rlx_attention_{kernel}{heads}x", "the K / V length check")
    inputs = prefill_inputs(1, queries, max(len_k, len_v), heads, kv_heads, hd,
                            np.random.default_rng(len_k))
    inputs["k"], inputs["v"] = inputs["k"][:, :len_k], inputs["v"][:, :len_v]
    n = min(len_k, len_v)
    mask = {"mask": np.array([1000], np.int32)} if mask_kind == "causal_lengths" else {}
    want = reference.evaluate(h, {"q": inputs["q"], "k": inputs["k"][:, :n],
                                  "v": inputs["v"][:, :n], **mask}, {})[0]
    assert_close(prog.main(**inputs, **mask), want, "f32", f"K {len_k} rows, V {len_v}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask_kind", ["causal", "sliding_window"])
def test_decomposed_queries_before_every_key(target: str, mask_kind: str) -> None:
    """The decomposed form (llvm-cpu without its kernels; Vulkan) with more queries than
    keys: the first queries sit before every key and see none, the spec's uniform row (an
    unsigned position compare once wrapped them around to see every key)."""
    h = prefill_module(1, 4, 2, 16, mask_kind, 2 if mask_kind == "sliding_window" else None)
    inputs = prefill_inputs(1, 12, 5, 4, 2, 16, np.random.default_rng(12))
    check_module(h, target, inputs=inputs, attention_kernel=False)
