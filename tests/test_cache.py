"""The compiled-model cache (rlx.cache): a second compile of the same module comes from disk
without running iree-compile; the key follows the module, the target's flags and options
and the versions; corrupt or truncated entries are compiled again with a warning; writers
racing on one entry never leave a partial file; the directory follows $RLX_CACHE_DIR and
the XDG rules; rlx-generate's --cache-dir and --no-cache."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx import cache as rlx_cache
from rlx import compiler
from rlx.cache import HEADER, CompileCache, default_dir


def ffn(width: int = 16) -> rlx.HirModule:
    h = rlx.HirModule("ffn")
    x = h.input("x", (None, width))
    h.set_outputs([h.mir("activation", [x], kind="silu")])
    return h


@pytest.fixture
def no_iree(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts iree-compile runs (the real one still runs)."""
    calls: list[int] = []
    real = compiler.run_iree

    def counting(*args: object, **kwargs: object) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compiler, "run_iree", counting)
    return calls


def test_second_compile_comes_from_the_cache(tmp_path: Path, no_iree: list[int]) -> None:
    store = CompileCache(tmp_path)
    first = rlx.compile(ffn(), cache=store)
    assert no_iree == [1]
    assert (store.misses, store.hits) == (1, 0)
    second = rlx.compile(ffn(), cache=store)
    assert no_iree == [1]  # no iree-compile the second time
    assert second == first
    assert (store.misses, store.hits) == (1, 1)
    out = rlx.runtime.load(second).main(np.ones((2, 16), np.float32))
    np.testing.assert_allclose(out, np.ones((2, 16)) / (1 + np.exp(-1)), rtol=1e-6)
    rlx.compile(ffn(), cache=store, output=tmp_path / "copy.vmfb")
    assert (tmp_path / "copy.vmfb").read_bytes() == first
    # what changes the output changes the key: the module, the flags, the options
    rlx.compile(ffn(32), cache=store)
    rlx.compile(ffn(), cache=store, opt_level="O2")
    rlx.compile(ffn(), cache=store, extra_flags=["--iree-opt-strip-assertions"])
    assert no_iree == [1, 1, 1, 1]
    assert len(list(store.folder.glob("*.vmfb"))) == 4
    rlx.compile(ffn(), cache=None)
    rlx.compile(ffn())  # the default for rlx.compile: no cache
    assert no_iree == [1] * 6


def test_key_covers_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    store = CompileCache(Path("/nonexistent"))
    key = store.key("module", ["--flag"], {"attention": "decomposed"})
    assert key == store.key("module", ["--flag"], {"attention": "decomposed"})
    assert key != store.key("module", ["--flag"], {"attention": "fused"})
    assert key != store.key("module", ["--other"], {"attention": "decomposed"})
    versions = dict(rlx_cache.versions())
    assert set(versions) == {"rlx_source", "host_cpu", "iree", "iree_revision"}
    monkeypatch.setattr(rlx_cache, "versions", lambda: {**versions, "iree": "4.0"})
    assert store.key("module", ["--flag"], {"attention": "decomposed"}) != key


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entries_are_compiled_again(damage: str, tmp_path: Path, no_iree: list[int],
                                            capfd: pytest.CaptureFixture[str]) -> None:
    store = CompileCache(tmp_path)
    good = rlx.compile(ffn(), cache=store)
    (entry,) = store.folder.glob("*.vmfb")
    data = entry.read_bytes()
    broken = {"truncate": data[:len(data) // 2], "empty": b"",
              "flip": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
              "garbage": b"not a cache entry at all" * 10}[damage]
    entry.write_bytes(broken)
    capfd.readouterr()
    assert rlx.compile(ffn(), cache=store) == good
    assert no_iree == [1, 1]
    err = capfd.readouterr().err
    assert f"warning: compile cache entry {entry} is " in err
    assert "compiling again" in err
    assert entry.read_bytes() == data  # replaced by a good entry
    assert rlx.compile(ffn(), cache=store) == good
    assert no_iree == [1, 1]


def _writer(directory: str, payload: bytes, rounds: int) -> None:
    store = CompileCache(Path(directory))
    for _ in range(rounds):
        store.put("racing", payload)


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]
                                                        ) -> None:
    payload = os.urandom(1 << 20)
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(str(tmp_path), payload, 40)) for _ in range(2)]
    for w in writers:
        w.start()
    store = CompileCache(tmp_path)
    seen = []
    while any(w.is_alive() for w in writers):
        got = store.get("racing")
        if got is not None:
            seen.append(got == payload)
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert store.get("racing") == payload
    assert all(seen)
    assert "warning" not in capfd.readouterr().err
    assert [p.name for p in store.folder.iterdir()] == ["racing.vmfb"]  # no temp files left


def test_unwritable_cache_warns_and_compiles(tmp_path: Path,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    store = CompileCache(blocker)
    assert rlx.compile(ffn(), cache=store)
    assert "warning: cannot write the compile cache in" in capfd.readouterr().err


def test_default_directory_follows_env_and_xdg(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "mine"))
    assert default_dir() == tmp_path / "mine"
    monkeypatch.delenv("RLX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == tmp_path / "xdg" / "rlx"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_dir() == tmp_path / "home" / ".cache" / "rlx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_dir() == tmp_path / "home" / ".cache" / "rlx"
    assert CompileCache().directory == tmp_path / "home" / ".cache" / "rlx"
    assert HEADER.size == 48
