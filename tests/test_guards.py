"""Run-time size checks (rlx.lowering.guards): every relation between dynamic sizes that a
lowering relies on is checked when the module runs, in the default build.

Each case is a module whose inputs have dynamic dims, called once with sizes that agree
(the result is compared with the numpy reference) and once per relation with sizes that
break it: the call must fail with a RunError naming the op's label and both dims, and no
result may come back (oracle-free: any returned array is a failure). The same modules run
on llvm-cpu and on Vulkan (lavapipe); one also through ``iree-run-module`` and ``rlx-run``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from harness import DEVICE, TARGETS, random_array

import rlx
from rlx import reference
from rlx.ir.types import DType
from rlx.reference.tolerance import assert_close

Shapes = dict[str, tuple[int, ...]]


@dataclass
class Case:
    """A module, input shapes that agree, and per broken relation: shape overrides and the
    message fragment (label, op, both dims) the RunError must carry."""

    build: Callable[[], rlx.HirModule]
    good: Shapes
    bad: list[tuple[Shapes, str]]
    options: dict[str, object] = field(default_factory=dict)
    values: Callable[[str, tuple[int, ...], np.random.Generator], np.ndarray] | None = None


def _attention(mask_kind: str = "none", q_seq: int | None = 1) -> rlx.HirModule:
    h = rlx.HirModule("attn")
    q = h.input("q", (1, q_seq, 32))
    k, v = h.input("k", (1, None, 32)), h.input("v", (1, None, 32))
    mask = None
    if mask_kind == "custom":
        mask = h.input("mask", (1, None))
    elif mask_kind == "bias":
        mask = h.input("mask", (1, 2, q_seq, None))
    h.set_outputs([h.named("attn", lambda h: h.attention(
        q, k, v, mask, num_heads=2, head_dim=16, mask_kind=mask_kind))])
    return h


def _rope() -> rlx.HirModule:
    h = rlx.HirModule("rope")
    x = h.input("x", (1, None, 32))
    cos, sin = h.input("cos", (None, 8)), h.input("sin", (None, 8))
    h.set_outputs([h.named("pos", lambda h: h.rope(x, cos, sin, head_dim=16))])
    return h


def _gdn() -> rlx.HirModule:
    h = rlx.HirModule("gdn")
    q, k, v = (h.input(n, (1, None, 2, 8)) for n in "qkv")
    g, beta = h.input("g", (1, None, 2)), h.input("beta", (1, None, 2))
    h.set_outputs([h.named("scan", lambda h: h.gated_delta_net(q, k, v, g, beta, 8))])
    return h


def _lstm() -> rlx.HirModule:
    h = rlx.HirModule("lstm")
    x = h.input("x", (None, None, 8))
    w_ih, w_hh, b = h.param("w_ih", (64, 8)), h.param("w_hh", (64, 16)), h.param("b", (64,))
    h0, c0 = h.input("h0", (1, None, 16)), h.input("c0", (1, None, 16))
    y, _, _ = h.lstm_carry(x, w_ih, w_hh, b, h0, c0, hidden_size=16)
    h.set_outputs([y])
    return h


def _gather() -> rlx.HirModule:
    h = rlx.HirModule("pick")
    table, idx = h.input("table", (None, 6, 4)), h.input("idx", (None, 3), "i32")
    h.set_outputs([h.named("pick", lambda h: h.mir("gather", [table, idx], axis=1,
                                                   batch_dims=1))])
    return h


def _gather_rows() -> rlx.HirModule:
    h = rlx.HirModule("rows")
    table, idx = h.input("table", (None, 4)), h.input("idx", (3,), "i32")
    h.set_outputs([h.named("embed", lambda h: h.mir("gather", [table, idx], axis=0))])
    return h


def _elementwise() -> rlx.HirModule:
    h = rlx.HirModule("ew")
    a, b = h.input("a", (None, 4)), h.input("b", (None, 4))
    s = h.named("add", lambda h: h.mir("binary", [a, b], kind="add"))
    c = h.input("c", (None,))
    r = h.named("rows", lambda h: h.mir("reshape", [c], new_shape=[-1, 4]))
    d = h.input("d", (None,))
    f = h.named("flat", lambda h: h.mir("reshape", [d], new_shape=[2, 4]))
    h.set_outputs([s, r, f])
    return h


def _contraction() -> rlx.HirModule:
    h = rlx.HirModule("mm")
    x, w = h.input("x", (3, None)), h.input("w", (None, 5))
    g = h.input("g", (None,))
    y = h.named("mm", lambda h: h.mir("matmul", [x, w]))
    n = h.named("norm", lambda h: h.rms_norm(x, g, g))
    h.set_outputs([y, n])
    return h


def _data_movement() -> rlx.HirModule:
    h = rlx.HirModule("move")
    a, b = h.input("a", (None, 4)), h.input("b", (None, 4))
    cat = h.named("cat", lambda h: h.mir("concat", [a, b], axis=1))
    part = h.named("part", lambda h: h.mir("narrow", [a], axis=0, start=1, len=2))
    e = h.input("e", (None, 4))
    wide = h.named("wide", lambda h: h.mir("expand", [e], target_shape=[3, 4]))
    h.set_outputs([cat, part, wide])
    return h


CASES: dict[str, Case] = {
    "attention_decode_kernel": Case(lambda: _attention(), {
        "q": (1, 1, 32), "k": (1, 9, 32), "v": (1, 9, 32)}, [
        ({"k": (1, 64, 32), "v": (1, 4, 32)},
         r"\"attn\": operand 'v' dim 1: expected the size of operand 'k' dim 1")]),
    "attention_decomposed": Case(lambda: _attention(q_seq=None), {
        "q": (1, 5, 32), "k": (1, 7, 32), "v": (1, 7, 32)}, [
        ({"k": (1, 2000, 32), "v": (1, 2, 32)},
         r"\"attn\": operand 'v' dim 1: expected the size of operand 'k' dim 1")],
        {"attention_kernel": False}),
    "attention_custom_mask": Case(lambda: _attention("custom"), {
        "q": (1, 1, 32), "k": (1, 6, 32), "v": (1, 6, 32), "mask": (1, 6)}, [
        ({"mask": (1, 3)}, r"\"attn\": operand 'mask' dim 1: expected the size of operand "
                           r"'k' dim 1"),
        ({"mask": (1, 600)}, r"operand 'mask' dim 1: expected the size of operand 'k'")],
        values=lambda n, s, rng: (rng.random(s) < 0.8).astype(np.float32) if n == "mask"
        else random_array(s, DType.F32, rng)),
    "attention_bias": Case(lambda: _attention("bias", q_seq=None), {
        "q": (1, 3, 32), "k": (1, 5, 32), "v": (1, 5, 32), "mask": (1, 2, 3, 5)}, [
        ({"mask": (1, 2, 3, 2)}, r"operand 'mask' dim 3: expected the size of operand 'k' "
                                 r"dim 1"),
        ({"mask": (1, 2, 1, 5)}, r"operand 'mask' dim 2: expected the size of operand 'q' "
                                 r"dim 1")]),
    "rope": Case(_rope, {"x": (1, 8, 32), "cos": (9, 8), "sin": (9, 8)}, [
        ({"cos": (2, 8), "sin": (2, 8)},
         r"\"pos\": operand 'cos' dim 0: expected at least the size of operand 'x' dim 1"),
        ({"sin": (8, 8)}, r"operand 'sin' dim 0: expected the size of operand 'cos' dim 0")]),
    "gated_delta_net": Case(_gdn, {n: (1, 5, 2, 8) for n in "qkv"} | {
        "g": (1, 5, 2), "beta": (1, 5, 2)}, [
        ({"g": (1, 3, 2)}, r"\"scan\": operand 'g' dim 1: expected the size of operand 'q' "
                           r"dim 1"),
        ({"v": (1, 9, 2, 8)}, r"operand 'v' dim 1: expected the size of operand 'q' dim 1")],
        values=lambda n, s, rng: -rng.random(s).astype(np.float32) if n == "g"
        else random_array(s, DType.F32, rng) * 0.3),
    "lstm": Case(_lstm, {"x": (2, 4, 8), "h0": (1, 2, 16), "c0": (1, 2, 16)}, [
        ({"h0": (1, 1, 16)}, r"operand 'h0' dim 1: expected the size of operand 'x' dim 0"),
        ({"c0": (1, 7, 16)}, r"operand 'c0' dim 1: expected the size of operand 'x' dim 0")]),
    "gather": Case(_gather, {"table": (2, 6, 4), "idx": (2, 3)}, [
        ({"idx": (5, 3)}, r"\"pick\": operand 'indices' dim 0: expected the size of operand "
                          r"'table' dim 0")],
        values=lambda n, s, rng: rng.integers(-3, 9, size=s).astype(np.int32) if n == "idx"
        else random_array(s, DType.F32, rng)),
    "gather_empty_axis": Case(_gather_rows, {"table": (5, 4), "idx": (3,)}, [
        ({"table": (0, 4)}, r"\"embed\": operand 'table' dim 0: expected at least 1")],
        values=lambda n, s, rng: rng.integers(-2, 7, size=s).astype(np.int32) if n == "idx"
        else random_array(s, DType.F32, rng)),
    "elementwise": Case(_elementwise, {"a": (3, 4), "b": (3, 4), "c": (12,), "d": (8,)}, [
        ({"b": (5, 4)}, r"\"add\": operand 'rhs' dim 0: expected the size of operand 'lhs' "
                        r"dim 0"),
        ({"c": (6,)}, r"\"rows\": operand 'x' element count: expected a multiple of 4"),
        # to a static shape, IREE makes the input's size static at the entry point
        ({"d": (6,)}, r"main: input 'd' dim 0: expected 8 \(the module's ops need")]),
    "contraction": Case(_contraction, {"x": (3, 6), "w": (6, 5), "g": (6,)}, [
        ({"w": (9, 5)}, r"\"mm\": operand 'rhs' dim 0: expected the size of operand 'lhs' "
                        r"dim 1"),
        ({"g": (2,)}, r"\"norm\": operand 'gamma' dim 0: expected the size of operand 'x' "
                      r"dim 1")]),
    "data_movement": Case(_data_movement, {"a": (3, 4), "b": (3, 4), "e": (3, 4)}, [
        ({"b": (2, 4)}, r"\"cat\": operand #1 dim 0: expected the size of operand #0 dim 0"),
        ({"a": (2, 4), "b": (2, 4)}, r"\"part\": operand 'x' dim 0: expected at least 3"),
        # IREE makes this size static at the entry point (the expand reads 3 rows): its
        # refusal of the input, named by rlx.runtime
        ({"e": (2, 4)}, r"main: input 'e' dim 0: expected 3 \(the module's ops need this "
                        r"size\), found 2")]),
}


def _feeds(case: Case, h: rlx.HirModule, shapes: Shapes, seed: int = 0
           ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, v in zip(h.input_names, h.inputs, strict=True):
        shape = shapes[name]
        out[name] = (case.values(name, shape, rng) if case.values is not None
                     else random_array(shape, v.dtype, rng))
    return out


def _params(h: rlx.HirModule) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    from iree.compiler import ir

    out = {}
    for op in h.ops:
        if op.name.endswith(".param"):
            t = op.results[0].type
            shape = tuple(ir.RankedTensorType(t).shape)
            out[ir.StringAttr(op.attributes["name"]).value] = (
                rng.standard_normal(shape) * 0.2).astype(np.float32)
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_broken_relation_is_a_run_error(name: str, target: str) -> None:
    case = CASES[name]
    h = case.build()
    params = _params(h)
    options = case.options if target == "llvm-cpu" else {}
    prog = rlx.runtime.load(rlx.compile(h, target, **options), DEVICE[target], params)
    feeds = _feeds(case, h, case.good)
    got = prog.main(**feeds)
    got = list(got) if isinstance(got, tuple) else [got]
    want = reference.evaluate(h, feeds, params)
    for g, w, out in zip(got, want, h.outputs, strict=True):
        assert_close(g, w, out.dtype, f"{name}: agreeing sizes")
    for overrides, fragment in case.bad:
        bad = _feeds(case, h, case.good | overrides)
        result = None
        with pytest.raises(rlx.RunError, match=fragment) as info:
            result = prog.main(**bad)
        assert result is None
        message = str(info.value)
        assert message.count("\n") == 0, message
        if "found another size at run time" in message:    # the module's own check
            assert re.search(rf"^{h.name}\.hir:\d+:\d+: error: 'rlx_mir\.", message), message
        with pytest.raises(rlx.RunError, match=fragment):   # the pipelined path alike
            prog.main.submit(**bad)


def test_gather_indices_are_clamped_into_the_table() -> None:
    """Gather indices are data, not sizes: an index outside the axis reads the nearest row
    (``rlx_mir.gather``'s clamp), never memory outside the table."""
    h = _gather()
    prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu"))
    table = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)
    idx = np.array([[-100000, 2, 7], [5, 1 << 30, -1]], np.int32)
    got = prog.main(table=table, idx=idx)
    want = np.stack([table[b][np.clip(idx[b], 0, 5)] for b in range(2)])
    np.testing.assert_array_equal(got, want)


def test_dequant_matmul_sizes_are_static() -> None:
    """dequant_matmul's K and the weight's row bytes are never left to run time: K is a
    static dim of ``x`` and the GGUF weight's shape is static, so ROWBYTES = K / block *
    block_bytes is checked when the op is built."""
    h = rlx.HirModule("q8")
    x = h.input("x", (None, 64))
    with pytest.raises(rlx.VerifyError, match=r"operand 'w': expected a static shape "
                                               r"\[N, ROWBYTES\]"):
        h.dequant_matmul(x, h.input("w", (8, None), "i8"), scheme="gguf_q8_0")
    with pytest.raises(rlx.VerifyError, match=r"operand 'w' dim 1: expected 68 \(bytes per "
                                               r"row for K = 64"):
        h.dequant_matmul(x, h.input("w2", (8, 60), "i8"), scheme="gguf_q8_0")
    with pytest.raises(rlx.VerifyError, match=r"operand 'x' dim -1: expected a static "
                                               r"contraction size K"):
        h.dequant_matmul(h.input("y", (2, None)), h.param("w3", (8, 68), "i8"),
                         scheme="gguf_q8_0")


def test_the_checks_survive_every_opt_level() -> None:
    """IREE strips cf.assert at -O1 and above; the size checks are util.status.check_ok,
    which stays: at O0..O3 a mismatch fails."""
    h = _rope()
    x = np.zeros((1, 8, 32), np.float32)
    short = np.zeros((2, 8), np.float32)
    for level in ("O0", "O1", "O2", "O3"):
        prog = rlx.runtime.load(rlx.compile(h, "llvm-cpu", opt_level=level))
        with pytest.raises(rlx.RunError, match="operand 'cos' dim 0"):
            prog.main(x=x, cos=short, sin=short)


@pytest.fixture(scope="module")
def rope_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("rope")
    rlx.compile(_rope(), "llvm-cpu", output=tmp / "rope.vmfb")
    np.save(tmp / "x.npy", np.zeros((1, 8, 32), np.float32))
    np.save(tmp / "short.npy", np.zeros((2, 8), np.float32))
    return tmp


def test_iree_run_module_gets_irees_failure_and_no_result(rope_files: Path) -> None:
    from iree.runtime import _binding  # noqa: F401  (the tools ship with iree-base-runtime)

    tool = Path(sys.executable).parent / "iree-run-module"
    proc = subprocess.run([str(tool), f"--module={rope_files / 'rope.vmfb'}",
                           "--device=local-task", f"--input=@{rope_files / 'x.npy'}",
                           f"--input=@{rope_files / 'short.npy'}",
                           f"--input=@{rope_files / 'short.npy'}"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "result[" not in proc.stdout
    assert "INVALID_ARGUMENT" in proc.stderr
    assert "operand 'cos' dim 0: expected at least the size of operand 'x' dim 1" in proc.stderr


def test_rlx_run_prints_one_message_and_exits_1(rope_files: Path) -> None:
    tool = Path(sys.executable).parent / "rlx-run"
    proc = subprocess.run([str(tool), str(rope_files / "rope.vmfb"),
                           "--input", f"x={rope_files / 'x.npy'}",
                           "--input", f"cos={rope_files / 'short.npy'}",
                           "--input", f"sin={rope_files / 'short.npy'}"],
                          capture_output=True, text=True, cwd=rope_files)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "\"pos\": operand 'cos' dim 0: expected at least the size of operand 'x'" in lines[0]
    assert not list(rope_files.glob("output_*.npy"))


def test_checks_run_before_any_work_is_queued() -> None:
    """A check between two dispatches would split IREE's stream execution region (one per
    layer of a decode step): checks whose sizes resolve to the function's inputs, as a
    KV cache grown by concat does, sit at the top of the function, before every op that
    computes."""
    from rlx import compiler

    h = rlx.HirModule("kv")
    q = h.input("q", (1, 1, 32))
    cache_k, cache_v = h.input("cache_k", (1, None, 32)), h.input("cache_v", (1, None, 32))
    k_new, v_new = h.input("k", (1, 1, 32)), h.input("v", (1, 1, 32))
    out = q
    for layer in range(2):
        k = h.mir("concat", [cache_k, k_new], axis=1)
        v = h.mir("concat", [cache_v, v_new], axis=1)
        out = h.named(f"layers.{layer}", lambda h, out=out, k=k, v=v: h.attention(
            out, k, v, num_heads=2, head_dim=16))
    h.set_outputs([out])
    lowered = compiler.load(h)
    compiler.lower(lowered, compiler.TargetConfig("llvm-cpu"))
    # the body both exports call (main and main$async, rlx.lowering.exports)
    text = compiler.lowered_text(lowered.module)
    body = text.split("@main$body(", 1)[1].split("util.func public", 1)[0]
    checks = [i for i, line in enumerate(body.splitlines()) if "util.status.check_ok" in line]
    work = [i for i, line in enumerate(body.splitlines())
            if any(op in line for op in ("flow.dispatch", "linalg.", "tensor.concat"))]
    assert len(checks) == 2, checks                 # one K/V length check a layer
    assert max(checks) < min(work), (checks, work)


def test_a_prefills_checks_run_before_its_layers(tmp_path: Path) -> None:
    """A prefill's per-layer checks (RoPE's table against the prompt's length) read a size
    that passes through every layer's hand-written kernels and compute barriers: resolved
    through them to the prompt's length, they all sit at the top. Left at each layer, they
    split IREE's stream into one region per layer whose transient slabs all stayed until
    the call ended (135M, 512 tokens: 220 MB of anonymous memory, 23 MB hoisted)."""
    from hf_gguf import write_gguf
    from rlx import compiler
    from rlx.models import llama
    from test_models import save_hf

    model = llama.from_gguf(write_gguf(save_hf("llama", tmp_path / "hf"),
                                       tmp_path / "tiny.gguf", "Q8_0"), logits="all")
    lowered = compiler.load(model.module)
    compiler.lower(lowered, compiler.TargetConfig("llvm-cpu"))
    text = compiler.lowered_text(lowered.module)
    body = text.split("@prefill$body(", 1)[1].split("util.func public", 1)[0].splitlines()
    ropes = [i for i, line in enumerate(body)
             if "util.status.check_ok" in line and "'rlx_mir.rope'" in line]
    kernels = [i for i, line in enumerate(body) if "flow.dispatch @rlx_gemv" in line]
    assert len(ropes) >= 3 * model.config.num_layers, ropes     # sin, cos and S a layer
    assert kernels
    assert max(ropes) < min(kernels), (ropes, kernels)
