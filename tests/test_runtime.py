"""rlx.runtime and rlx-run: weights from a dict, .irpa or .safetensors (checked against the
module before anything runs), inputs by position or name, clear errors."""

from __future__ import annotations

import itertools
import json
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.runtime import read_safetensors_header, save_params

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def linear_vmfb() -> bytes:
    h = rlx.HirModule("lin")
    x = h.input("x", (None, 8))
    h.set_outputs([h.linear(x, h.param("fc.w", (8, 4)), h.param("fc.b", (4,)), "relu")])
    return rlx.compile(h)


WEIGHTS = {"fc.w": np.arange(32, dtype=np.float32).reshape(8, 4) / 10,
           "fc.b": np.array([1, -1, 0.5, -0.5], np.float32)}
X = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
WANT = np.maximum(X @ WEIGHTS["fc.w"] + WEIGHTS["fc.b"], 0)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray],
                      header_override: dict | None = None) -> None:
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header.update(header_override or {})
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def test_params_from_dict_irpa_and_safetensors(linear_vmfb: bytes, tmp_path: Path) -> None:
    irpa, st = tmp_path / "w.irpa", tmp_path / "w.safetensors"
    save_params(WEIGHTS, irpa)
    write_safetensors(st, WEIGHTS)
    for params in (WEIGHTS, irpa, str(st)):
        out = rlx.runtime.load(linear_vmfb, params=params).main(X)
        np.testing.assert_allclose(out, WANT, rtol=1e-6, atol=1e-6)


def test_local_sync_device(linear_vmfb: bytes) -> None:
    out = rlx.runtime.load(linear_vmfb, "local-sync", WEIGHTS).main(x=X)
    np.testing.assert_allclose(out, WANT, rtol=1e-6, atol=1e-6)


def test_results_do_not_alias_later_calls() -> None:
    """A kept result must not change when a later call reuses the device's memory (on
    local-task, IREE's to_host() is a view of a result buffer the allocator hands out again)."""
    h = rlx.HirModule("four")
    x = h.input("x", (1, 64))
    h.set_outputs([h.linear(x, h.param(f"w{i}", (64, 32))) for i in range(4)])
    weights = {f"w{i}": np.eye(64, 32, dtype=np.float32) * (i + 1) for i in range(4)}
    run = rlx.runtime.load(rlx.compile(h), params=weights).main
    kept = [[y[0] for y in run(np.eye(1, 64, i, dtype=np.float32))] for i in range(4)]
    for i, rows in enumerate(kept):
        for j, row in enumerate(rows):
            np.testing.assert_array_equal(row, np.eye(1, 32, i, dtype=np.float32)[0] * (j + 1))


def test_weight_errors_name_the_tensor(linear_vmfb: bytes, tmp_path: Path) -> None:
    with pytest.raises(rlx.WeightError, match=r"weight 'fc.b' .* is missing"):
        rlx.runtime.load(linear_vmfb, params={"fc.w": WEIGHTS["fc.w"]})
    with pytest.raises(rlx.WeightError, match=r"weight 'fc.w': expected \[8, 4\] float32, "
                                              r"found \[4, 8\] float32"):
        rlx.runtime.load(linear_vmfb, params={**WEIGHTS, "fc.w": WEIGHTS["fc.w"].T.copy()})
    with pytest.raises(rlx.WeightError, match="needs weights"):
        rlx.runtime.load(linear_vmfb)
    st = tmp_path / "half.safetensors"
    write_safetensors(st, {**WEIGHTS, "fc.w": WEIGHTS["fc.w"].astype(np.float16)})
    with pytest.raises(rlx.WeightError, match=r"weight 'fc.w': expected \[8, 4\] f32, found "
                                              r"\[8, 4\] f16"):
        rlx.runtime.load(linear_vmfb, params=st)
    irpa = tmp_path / "partial.irpa"
    save_params({"fc.w": WEIGHTS["fc.w"]}, irpa)
    with pytest.raises(rlx.WeightError, match=r"weight 'fc.b' .* is not in the file"):
        rlx.runtime.load(linear_vmfb, params=irpa)
    with pytest.raises(rlx.WeightError, match="weight file not found"):
        rlx.runtime.load(linear_vmfb, params=tmp_path / "nope.irpa")


def test_hostile_safetensors_headers(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(rlx.WeightError, match=r"header length .* runs past the end"):
        read_safetensors_header(bad)
    write_safetensors(bad, WEIGHTS, {"fc.w": {"dtype": "F32", "shape": [8, 4],
                                              "data_offsets": [0, 1 << 30]}})
    with pytest.raises(rlx.WeightError, match=r"tensor 'fc.w': data .* outside the file"):
        read_safetensors_header(bad)
    bad.write_bytes(b"\x01\x00")
    with pytest.raises(rlx.WeightError, match="shorter than 8 bytes"):
        read_safetensors_header(bad)


def test_input_errors(linear_vmfb: bytes) -> None:
    prog = rlx.runtime.load(linear_vmfb, params=WEIGHTS)
    with pytest.raises(rlx.RunError, match=r"expected 1 inputs \(x\), found 2"):
        prog.main(X, X)
    with pytest.raises(rlx.RunError, match="unknown input"):
        prog.main(y=X)
    with pytest.raises(rlx.RunError, match=r"input 'x': expected float32 \[\?, 8\], found "
                                           r"float64 \[3, 8\]"):
        prog.main(X.astype(np.float64))
    with pytest.raises(rlx.RunError, match=r"input 'x': expected float32 \[\?, 8\], found "
                                           r"float32 \[3, 7\]"):
        prog.main(X[:, :7])
    # a device tensor (a kept result) is checked by IREE's entry point; rlx still names it
    kept = prog.main.on_device(X)  # [3, 4]
    with pytest.raises(rlx.RunError, match=r"input 'x': expected float32 \[\?, 8\], found "
                                           r"float32 \[3, 4\]"):
        prog.main(kept)
    np.testing.assert_allclose(prog.main(prog.upload(X)), WANT, rtol=1e-6)
    with pytest.raises(rlx.RunError, match="no function 'decode'"):
        prog["decode"]
    with pytest.raises(rlx.RunError, match="unknown device"):
        rlx.runtime.load(linear_vmfb, "tpu", WEIGHTS)


def test_submit_chains_on_the_device(linear_vmfb: bytes) -> None:
    """``submit`` queues a call and returns device tensors that are ready later: 40 calls,
    each taking the previous one's still-pending result, equal numpy's chain; a synchronous
    call given a pending tensor waits for it; errors name the input as for plain calls."""
    h = rlx.HirModule("square")
    x = h.input("x", (None, 8))
    h.set_outputs([h.linear(x, h.param("w", (8, 8)), h.param("b", (8,)), "relu")])
    rng = np.random.default_rng(0)
    w = {"w": (np.eye(8) * 0.9 + rng.standard_normal((8, 8)) * 0.05).astype(np.float32),
         "b": rng.standard_normal(8).astype(np.float32) * 0.1}
    prog = rlx.runtime.load(rlx.compile(h), params=w)
    assert prog.main.signature.startswith("async func @main(")  # IREE's coarse-fences ABI
    y, want = prog.main.submit(X), X
    for _ in range(39):
        y = prog.main.submit(y)
    for _ in range(40):
        want = np.maximum(want @ w["w"] + w["b"], 0)
    after = prog.main(y)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after, np.maximum(want @ w["w"] + w["b"], 0), rtol=1e-5,
                               atol=1e-6)
    assert y.shape == (3, 8)
    assert y.dtype == np.float32
    with pytest.raises(rlx.RunError, match=r"input 'x': expected float32 \[\?, 8\], found "
                                           r"float32 \[3, 7\]"):
        prog.main.submit(X[:, :7])
    pending = rlx.runtime.load(linear_vmfb, params=WEIGHTS).main.submit(X)  # [3, 4]
    with pytest.raises(rlx.RunError, match=r"input 'x': expected float32 \[\?, 8\], found "
                                           r"float32 \[3, 4\]"):
        prog.main.submit(pending)


def test_failed_call_is_a_run_error() -> None:
    """A call that fails on the device (its fence failed, here by hand) is a RunError where
    its result is read, and a later call that takes that result fails the same way."""
    h = rlx.HirModule("relu")
    h.set_outputs([h.mir("activation", [h.input("x", (None, 8))], kind="relu")])
    prog = rlx.runtime.load(rlx.compile(h))
    y = prog.main.submit(X)
    y._ready.fail("injected failure")
    with pytest.raises(rlx.RunError, match=r"the call computing .* failed: .*injected failure"):
        y.numpy()
    z = prog.main.submit(X)
    z._ready.fail("injected failure")
    with pytest.raises(rlx.RunError, match="injected failure"):
        prog.main.submit(z).wait()


class _WaitProbe:
    """Stands in for a pending result's semaphore and fence and records, in order, what one
    ``wait()`` does: each poll of the semaphore (the value read), each sleep (its length) and
    the entry into IREE's own blocking wait (the semaphore's value then, seconds since the
    wait began)."""

    def __init__(self, tensor: rlx.runtime.DeviceTensor,
                 events: list[tuple[str, float, float]]) -> None:
        self._semaphore, self._fence, self._events = tensor._semaphore, tensor._ready, events
        self._start = time.perf_counter()
        tensor._semaphore = self
        tensor._ready = self

    def query(self) -> int:
        value = self._semaphore.query()
        self._events.append(("poll", value, 0.0))
        return value

    def wait(self) -> None:
        self._events.append(("iree_wait", self._semaphore.query(),
                             time.perf_counter() - self._start))
        self._fence.wait()


def test_waiting_for_a_result_does_not_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting for a result sleeps between polls of the call's semaphore and enters IREE's
    own wait (which spins on the CPU for up to ~2 ms) only once the call is done, or, with no
    later call queued behind it (the caller waits on the latency), after WAIT_PLAIN_POLL_S
    of polling: on the 2-core CI machine IREE's spinning took CPU that its two workers need.
    What each wait does is recorded, not timed, so a loaded machine cannot fail this; a
    busy-polling wait, a sleep(0) one or IREE's wait at once fails it."""
    events: list[tuple[str, float, float]] = []

    def sleep(seconds: float) -> None:
        events.append(("sleep", seconds, 0.0))
        time.sleep(seconds)

    monkeypatch.setattr(rlx.runtime, "time",
                        types.SimpleNamespace(perf_counter=time.perf_counter, sleep=sleep))
    h = rlx.HirModule("chain")
    x, w = h.input("x", (256, 256)), h.input("w", (256, 256))
    y = x
    for _ in range(20):
        y = h.linear(y, w)
    h.set_outputs([y])
    prog = rlx.runtime.load(rlx.compile(h))
    a = ((np.arange(256 * 256, dtype=np.float32).reshape(256, 256) % 7) - 3) / 64
    shortest = rlx.runtime.WAIT_POLL_S[0]

    for pipelined in (True, False):
        pending, polled = prog.main.submit(a, a), 0
        for i in range(30):
            following = prog.main.submit(pending, a) if pipelined else None
            events.clear()
            _WaitProbe(pending, events)
            pending.wait()
            where = (f"{'pipelined' if pipelined else 'plain'} wait #{i}: {len(events)} "
                     f"events, first and last {events[:6]} ... {events[-2:]}")
            kind, value, waited = events[-1]
            assert kind == "iree_wait", where
            assert [e for e in events if e[0] == "iree_wait"] == [events[-1]], where
            if pipelined:
                assert value >= 1, where
            else:
                assert value >= 1 or waited >= rlx.runtime.WAIT_PLAIN_POLL_S, where
            for (kind, value, _), (next_kind, seconds, _) in itertools.pairwise(events):
                if kind == "poll" and value < 1:  # then a sleep, or (plain) IREE's wait
                    assert next_kind in ("sleep", "iree_wait"), where
                if next_kind == "sleep":
                    assert seconds >= shortest, where
            polled += events[0][:2] == ("poll", 0)
            pending = following if pipelined else prog.main.submit(pending, a)
        pending.wait()
        assert polled, "no wait began before its call finished: nothing was tested"


def test_module_without_fences() -> None:
    """A vmfb with IREE's synchronous ABI (built by hand or an older rlx) still runs; only
    submit needs the fences, and says so."""
    h = rlx.HirModule("relu")
    h.set_outputs([h.mir("activation", [h.input("x", (None, 8))], kind="relu")])
    prog = rlx.runtime.load(rlx.compile(h, extra_flags=["--iree-execution-model=async-internal"]))
    assert prog.main.signature.startswith("sync func")
    np.testing.assert_array_equal(prog.main(X), np.maximum(X, 0))
    with pytest.raises(rlx.RunError, match="compiled without IREE's coarse-fences ABI"):
        prog.main.submit(X)


def test_rlx_run_cli(linear_vmfb: bytes, tmp_path: Path) -> None:
    vmfb, x, w = tmp_path / "m.vmfb", tmp_path / "x.npy", tmp_path / "w.irpa"
    vmfb.write_bytes(linear_vmfb)
    np.save(x, X)
    save_params(WEIGHTS, w)
    run = [sys.executable, "-m", "rlx.tools.run", str(vmfb), "--params", str(w)]
    proc = subprocess.run([*run, "--input", f"x={x}", "--output-dir", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o" / "output_0.npy"), WANT, rtol=1e-6)
    proc = subprocess.run([*run, "--input", str(x)], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "output 0: float32[3, 4]" in proc.stdout
    proc = subprocess.run([*run, "--input", f"x={tmp_path / 'missing.npy'}"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "cannot read a .npy array" in proc.stderr
