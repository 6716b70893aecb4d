"""Caller-owned transients (:mod:`rlx.transients`): a model's functions take the buffer IREE
suballocates their transients from, rlx's runtime keeps one per function between calls, and
a buffer shorter than the call needs is refused by the module itself, whoever calls it.

The oracle is HF transformers' logits of a tiny random LLaMA at three prompt lengths through
one compiled module (the arena grows for the longer prompt and is reused for the shorter);
the model tests (``test_models``, on llvm-cpu and Vulkan) run every model through the same
path, since ``rlx.generate`` compiles with ``caller_transients`` by default.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlx.generate import Generator
from rlx.models import llama
from rlx.reference.tolerance import assert_close
from rlx.transients import GRANULE, add_size_checks
from test_models import hf_reference, prefill_all, save_hf

EXPORT = ('  util.func public @f$async(%arg0: !hal.buffer_view, %arg1: !hal.buffer, '
          '%arg2: !hal.fence, %arg3: !hal.fence) -> !hal.buffer_view attributes '
          '{iree.abi.stub, iree.reflection = {iree.abi.transients.size = '
          '@f$async_transients_size}} {')


def test_size_checks_call_the_query_first() -> None:
    text, added = add_size_checks("module {\n" + EXPORT + "\n    util.return\n  }\n}")
    assert added == 1
    lines = text.splitlines()
    assert lines[1] == EXPORT
    assert lines[2] == ("    %rlx_need = util.call @f$async_transients_size(%arg0, %arg1, %arg2, "
                        "%arg3) : (!hal.buffer_view, !hal.buffer, !hal.fence, !hal.fence) "
                        "-> index")
    assert lines[3] == "    %rlx_have = hal.buffer.length<%arg1 : !hal.buffer> : index"
    assert "arith.cmpi ule, %rlx_need, %rlx_have" in lines[4]
    assert lines[8].startswith('    util.status.check_ok %rlx_status, "error: f: the transients')
    assert add_size_checks("module {\n  util.func public @g(%arg0: !hal.buffer_view)")[1] == 0
    with pytest.raises(ValueError, match=r"expected one !hal\.buffer"):
        add_size_checks(EXPORT.replace("!hal.buffer_view", "!hal.buffer"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Generator, torch.nn.Module]:
    d = tmp_path_factory.mktemp("tiny_llama")
    hf = save_hf("llama", d)
    return Generator(llama.from_hf(d, logits="all")), hf  # test_models compiled it: cached


def test_arena_grows_and_is_reused(tiny: tuple[Generator, torch.nn.Module]) -> None:
    """Prompts of 3, 40 and 7 tokens through one module: HF's logits each time; the
    function's arena is sized by the module's query, grows for 40 tokens (after the call
    that used the smaller one) and is the same buffer for 7."""
    gen, hf = tiny
    arena = gen.program.prefill._arena
    assert arena is not None
    assert arena.constant is None  # a dynamic length: sized per call by the query
    sizes = []
    for n in (3, 40, 7):
        ids = [(5 + 7 * i) % 128 for i in range(n)]
        want, _ = hf_reference(hf, ids, 0)
        assert_close(prefill_all(gen, ids), want, "f32", f"prefill of {n} tokens")
        sizes.append((arena.size, id(arena.buffer)))
    assert sizes[0][0] < sizes[1][0]
    assert sizes[2] == sizes[1]
    assert all(size % GRANULE == 0 for size, _ in sizes)
    decode = gen.program.decode._arena
    assert decode is not None
    assert decode.constant is not None  # a step's transients do not depend on the cache


def test_a_refused_call_leaves_the_next_one_running(
        tiny: tuple[Generator, torch.nn.Module]) -> None:
    """A call the module refuses (8 tokens against 4 rows of RoPE tables: its run-time size
    check) is a RunError, and never signals its fence; the next call must not wait for it
    (it would wait forever: run in a thread with a deadline) and gives HF's logits."""
    import threading

    from rlx.ir.diagnostics import RunError

    gen, hf = tiny
    ids = [3, 9, 27, 81, 115, 17, 51, 25]
    cos, sin = llama.rope_tables(gen.model.config, range(4))
    with pytest.raises(RunError, match="rope"):
        gen.program.prefill(ids=np.array([ids], np.int32), cos=cos, sin=sin)
    got: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: got.append(prefill_all(gen, ids)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert got, "the call after a refused one did not finish"
    assert_close(got[0], hf_reference(hf, ids, 0)[0], "f32", "prefill after a refused call")


def test_a_call_failed_on_the_device_is_not_waited_for(
        tiny: tuple[Generator, torch.nn.Module]) -> None:
    """A queued call that failed on the device fails its fence, and a call waiting on that
    fence fails too: the arena asks the last call's semaphore first and, where it failed,
    lets that call's buffer and fence go (here a stand-in semaphore whose query raises, as
    IREE's does for a failed one)."""

    class Failed:
        def query(self) -> int:
            raise RuntimeError("ABORTED; the call failed")

    gen, hf = tiny
    arena = gen.program.prefill._arena
    arena.queued(object(), Failed())
    ids = [7, 14, 21, 28, 35]
    assert_close(prefill_all(gen, ids), hf_reference(hf, ids, 0)[0], "f32",
                 "prefill after a failed call")
    assert not isinstance(arena._semaphore, Failed)


def test_short_buffer_is_refused(tiny: tuple[Generator, torch.nn.Module]) -> None:
    """IREE's own emplacement trusts the caller's buffer; the module rlx compiles checks it:
    called through iree.runtime directly with a buffer 64 bytes short of what its size
    query gives, ``prefill`` fails with the check's message instead of writing past it (it
    wrote past a buffer too short before the check: glibc reported a corrupted heap)."""
    import iree.runtime as rt

    gen, _ = tiny
    program = gen.program
    ctx, device = program._ctx, program._device
    ids = [3, 9, 27, 81, 115, 17, 51, 25]
    cos, sin = llama.rope_tables(gen.model.config, range(len(ids)))
    views = [rt.asdevicearray(device, a)._buffer_view
             for a in (np.array([ids], np.int32), cos, sin)]
    need = program.prefill._arena.bytes_for(ctx, views)
    assert need > 64
    args = rt.VmVariantList(4)
    for v in views:
        args.push_ref(v)
    args.push_ref(device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.DEVICE_LOCAL,
        allowed_usage=rt.BufferUsage.DEFAULT | rt.BufferUsage.DISPATCH_STORAGE,
        allocation_size=need - 64))
    with pytest.raises(IndexError, match="OUT_OF_RANGE; error: prefill: the transients "
                                         "buffer is shorter than"):  # iree.runtime's type
        ctx.vm_context.invoke(program._vm.lookup_function("prefill"), args,
                              rt.VmVariantList(8))


def test_cli_flag_adds_the_buffer_input(tmp_path: Path) -> None:
    """``rlx-compile --caller-transients``: both exports take the buffer after the tensors,
    the results are marked for it, and the declaration IREE's tools print names it."""
    hir = Path(__file__).resolve().parent.parent / "examples" / "ffn.hir"
    out = tmp_path / "ffn.mlir"
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.compile", str(hir), "--emit",
                           "linalg", "--caller-transients", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.count("hal.tensor.transients") == 1
    assert "%transients: !hal.buffer {iree.abi.transients}" in text
    assert "!hal.buffer, %arg3: !hal.fence, %arg4: !hal.fence" in text
    plain = subprocess.run([sys.executable, "-m", "rlx.tools.compile", str(hir), "--emit",
                            "linalg"], capture_output=True, text=True)
    assert "transients" not in plain.stdout


FAKE_IREE = """#!/bin/sh
# writes TEXT to the file after -o (a stand-in iree-compile's first part)
while [ "$#" -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
printf '%s' "$TEXT" > "$out"
"""


@pytest.mark.parametrize(("text", "why"), [
    ("module {\n}", "error: rlx found no export that takes caller transients to check"),
    ("module {\n" + EXPORT.replace("!hal.buffer_view", "!hal.buffer") + "\n}",
     "error: @f$async: expected one !hal.buffer argument"),
])
def test_a_stream_module_without_checkable_exports_is_a_compile_error(
        text: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An export the size-check pass cannot read (rlx writes them all, so an internal
    error) ends the compile with one error, not a traceback or an unchecked vmfb; and a
    failed compile under ``caller_transients`` says how rlx ran IREE."""
    from rlx.compiler import TargetConfig, _hints
    from rlx.transients import compile_checked

    tool = tmp_path / "iree-compile"
    tool.write_text(FAKE_IREE)
    tool.chmod(0o755)
    monkeypatch.setenv("TEXT", text)
    proc = compile_checked(str(tool), tmp_path / "m.mlir", [], tmp_path / "m.vmfb")
    assert proc.returncode == 1
    assert proc.stderr.startswith(why)
    assert not (tmp_path / "m.vmfb").exists()
    note, = _hints("error: ...", TargetConfig(caller_transients=True))
    assert "--compile-to=stream" in note
    assert _hints("error: ...", TargetConfig()) == []
