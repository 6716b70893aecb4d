"""Weights encoded ahead of time (rlx.encoding): the kernels' planes computed once by IREE's
parameter encoder and kept in the cache, against the same module loading them through its
initializers: bit-identical logits and tokens, the archive reused by the next load, made
again when it is broken or the weights change, and not held in anonymous memory."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from hf_gguf import write_gguf
from rlx.dialects.enums import QUANT_SCHEMES
from rlx.encoding import LIMIT_VAR, compile_model, limit_bytes, make_room, weights_fingerprint
from rlx.generate import Generator
from rlx.models import llama
from test_models import PROMPT, prefill_all, save_hf

MIB = 1 << 20


ON = {"encode_parameters": True}
"""The default outside the test suite (conftest sets RLX_ENCODE_PARAMETERS=0)."""


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny HF LLaMA of test_models, as a Q8_0 GGUF (q/k/v and gate/up packed)."""
    path = tmp_path_factory.mktemp("enc")
    return write_gguf(save_hf("llama", path / "hf"), path / "tiny-Q8_0.gguf", "Q8_0")


@pytest.fixture(scope="module")
def warm(gguf_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A compile cache holding the model's module both ways (with its encoder, and with
    initializers), and the initializers' logits and tokens: the reference of every test."""
    cache = tmp_path_factory.mktemp("warm")
    plain = Generator(llama.from_gguf(gguf_file, logits="all"),
                      options={"encode_parameters": False}, cache=cache)
    assert not plain.encoded
    compile_model(plain.model.module, plain.model.weights, "llvm-cpu", cache, **ON)
    return {"cache": cache, "logits": prefill_all(plain, PROMPT),
            "tokens": plain.generate(PROMPT, 16)}


def _cache(warm: dict, tmp_path: Path) -> Path:
    """A compile cache of the test's own with the warm one's vmfbs (no archive yet)."""
    shutil.copytree(Path(warm["cache"]) / "vmfb", tmp_path / "vmfb")  # type: ignore[arg-type]
    return tmp_path


def _archives(cache: Path) -> list[Path]:
    return sorted((cache / "params").glob("*.irpa"))


def test_encoded_load_matches_initializers(gguf_file: Path, warm: dict, tmp_path: Path
                                           ) -> None:
    """The first load encodes, the second reuses the archive; both give the logits and
    tokens of the module that makes its planes at load, bit for bit; the module really
    reads the archive (one of zeros in its place changes the logits)."""
    cache = _cache(warm, tmp_path)
    first = Generator(llama.from_gguf(gguf_file, logits="all"), options=ON, cache=cache)
    assert first.encoded
    assert first.cache_hit
    assert len(_archives(cache)) == 1
    second = Generator(llama.from_gguf(gguf_file, logits="all"), options=ON, cache=cache)
    assert not second.encoded
    assert len(_archives(cache)) == 1
    for gen in (first, second):
        np.testing.assert_array_equal(prefill_all(gen, PROMPT), warm["logits"])
        assert gen.generate(PROMPT, 16) == warm["tokens"]
    archive, = _archives(cache)
    zeros = bytearray(archive.read_bytes())
    zeros[4096:] = bytes(len(zeros) - 4096)                  # the header stays
    archive.write_bytes(bytes(zeros))
    broken = Generator(llama.from_gguf(gguf_file, logits="all"), options=ON, cache=cache)
    assert not broken.encoded           # same entries and sizes: taken as it is
    assert not np.array_equal(prefill_all(broken, PROMPT), warm["logits"])


def test_broken_archive_is_encoded_again(gguf_file: Path, warm: dict, tmp_path: Path
                                         ) -> None:
    cache = _cache(warm, tmp_path)
    model = llama.from_gguf(gguf_file, logits="all")
    assert Generator(model, options=ON, cache=cache).encoded
    archive, = _archives(cache)
    archive.write_bytes(archive.read_bytes()[:4096])              # truncated
    again = Generator(model, options=ON, cache=cache)
    assert again.encoded
    np.testing.assert_array_equal(prefill_all(again, PROMPT), warm["logits"])
    archive.write_bytes(b"not an archive")
    assert Generator(model, options=ON, cache=cache).encoded
    assert _archives(cache) == [archive]
    assert not list((cache / "params").glob(".*.tmp"))


def test_full_disk_is_one_clear_error(gguf_file: Path, warm: dict, tmp_path: Path) -> None:
    """Writing the encoded weights to a disk that cannot take them (here a file-size limit,
    RLIMIT_FSIZE, of 64 KiB: writes past it fail as on a full disk) is one error naming the
    archive and what to do, and leaves no partial file behind."""
    cache = _cache(warm, tmp_path)
    code = f"""
import resource, signal, sys
sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parent.parent)]!r}
from rlx.generate import Generator
from rlx.ir.diagnostics import RlxError
from rlx.models import llama
model = llama.from_gguf({str(gguf_file)!r}, logits="all")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.RLIM_INFINITY))
try:
    Generator(model, options={{"encode_parameters": True}}, cache={str(cache)!r})
except RlxError as e:
    print(e)
    sys.exit(3)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    message = proc.stdout.strip()
    assert "writing the encoded weights" in message
    assert "encode_parameters=False" in message
    assert str(cache / "params") in message
    assert "\n" not in message
    assert not list((cache / "params").glob("*"))


def test_archives_are_bounded_least_recently_used_first(gguf_file: Path, warm: dict,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """With a bound the archives cannot all fit in (RLX_ENCODED_CACHE_GB), encoding a
    second model's weights removes the first's archive, never its own; the first model
    then encodes again and still matches. A reused archive is touched, so the least
    recently used goes first (make_room on plain files: oldest use first, down to what fits
    beside the new one)."""
    cache = _cache(warm, tmp_path)
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(gguf_file.read_bytes())
    assert Generator(llama.from_gguf(gguf_file, logits="all"), options=ON, cache=cache).encoded
    first, = _archives(cache)
    monkeypatch.setenv(LIMIT_VAR, str(1.5 * first.stat().st_size / 2**30))
    assert Generator(llama.from_gguf(copy, logits="all"), options=ON, cache=cache).encoded
    second, = _archives(cache)
    assert second != first
    os.utime(second, (1, 1))
    assert not Generator(llama.from_gguf(copy, logits="all"), options=ON, cache=cache).encoded
    assert second.stat().st_mtime > 1               # a reuse marks it recently used
    again = Generator(llama.from_gguf(gguf_file, logits="all"), options=ON, cache=cache)
    assert again.encoded
    assert _archives(cache) == [first]
    np.testing.assert_array_equal(prefill_all(again, PROMPT), warm["logits"])
    files = tmp_path / "plain"
    files.mkdir()
    for i, name in enumerate("abcd"):
        (files / f"{name}.irpa").write_bytes(bytes(100))
        os.utime(files / f"{name}.irpa", (1000 + i, 1000 + i))
    os.utime(files / "a.irpa", (2000, 2000))        # a was used last
    assert make_room(files / "d.irpa", 100, 300) == [files / "b.irpa"]
    assert make_room(files / "new.irpa", 200, 300) == [files / "c.irpa", files / "d.irpa"]
    assert sorted(p.name for p in files.iterdir()) == ["a.irpa"]
    assert make_room(files / "new.irpa", 10**9, None) == []
    monkeypatch.setenv(LIMIT_VAR, "0")
    assert limit_bytes() is None
    monkeypatch.delenv(LIMIT_VAR)
    assert limit_bytes() == 32 * 2**30
    for bad in ("lots", "-1", "nan", "inf"):
        monkeypatch.setenv(LIMIT_VAR, bad)
        with pytest.raises(rlx.RlxError, match=f"{LIMIT_VAR}=.*expected a size in GiB"):
            limit_bytes()


def test_changed_weights_get_their_own_archive(gguf_file: Path, tmp_path: Path) -> None:
    """The fingerprint names a GGUF's tensors by the file (path, size, mtime, inode) and
    place, other arrays by their bytes: a touched file or a changed array is a new key."""
    model = llama.from_gguf(gguf_file, logits="all")
    first = weights_fingerprint(model.weights)
    assert first == weights_fingerprint(llama.from_gguf(gguf_file, logits="all").weights)
    copy = tmp_path / gguf_file.name
    copy.write_bytes(gguf_file.read_bytes())
    assert weights_fingerprint(llama.from_gguf(copy, logits="all").weights) != first
    st = copy.stat()
    moved = weights_fingerprint(llama.from_gguf(copy, logits="all").weights)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert weights_fingerprint(llama.from_gguf(copy, logits="all").weights) != moved
    plain = {"a": np.arange(4, dtype=np.float32)}
    before = weights_fingerprint(plain)
    plain["a"][1] = 7
    assert weights_fingerprint(plain) != before
    changed = dict(model.weights, norm=model.weights["norm"] * 2)
    assert weights_fingerprint(changed) != first


def test_weights_too_large_to_hash_load_with_initializers(gguf_file: Path, warm: dict,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A GGUF's tensors cost nothing to fingerprint; arrays of other memory are hashed, up
    to MAX_HASHED bytes: beyond it the planes are made by initializers, as without a
    cache, and as with RLX_ENCODE_PARAMETERS=0 where the option is not given."""
    cache = _cache(warm, tmp_path)
    model = llama.from_gguf(gguf_file, logits="all")
    monkeypatch.setattr("rlx.encoding.MAX_HASHED", 16)
    assert weights_fingerprint(model.weights) is not None      # all views of the file
    model = dataclasses.replace(model, weights=dict(model.weights,
                                                    norm=model.weights["norm"].copy()))
    assert weights_fingerprint(model.weights) is None
    compiled = compile_model(model.module, model.weights, "llvm-cpu", cache, **ON)
    assert compiled.encoded is None
    assert not compiled.encoder
    gen = Generator(model, options=ON, cache=cache)
    assert not gen.encoded
    assert not _archives(cache)
    np.testing.assert_array_equal(prefill_all(gen, PROMPT), warm["logits"])
    assert compile_model(model.module, model.weights, "llvm-cpu", None, **ON).encoded is None
    monkeypatch.setenv("RLX_ENCODE_PARAMETERS", "0")
    assert compile_model(model.module, model.weights, "llvm-cpu", cache).encoded is None
    monkeypatch.setenv("RLX_ENCODE_PARAMETERS", "1")
    monkeypatch.setattr("rlx.encoding.MAX_HASHED", 1 << 30)
    assert compile_model(model.module, model.weights, "llvm-cpu", cache).encoded is not None


def test_compile_writes_the_encoder_beside_the_vmfb(tmp_path: Path) -> None:
    """``rlx.compile(..., output=M.vmfb, encode_parameters=True)`` writes M.encoder.vmfb
    where there are weights to encode, and no such file where there are none."""
    h = rlx.HirModule("g")
    x = h.input("x", (1, 256))
    w = h.param("w", (64, QUANT_SCHEMES["gguf_q8_0"].row_bytes(256)), "i8")
    h.set_outputs([h.dequant_matmul(x, w, scheme="gguf_q8_0")])
    rlx.compile(h, output=tmp_path / "q.vmfb", encode_parameters=True)
    assert (tmp_path / "q.encoder.vmfb").stat().st_size > 0
    plain = rlx.HirModule("p")
    y = plain.input("y", (4,))
    plain.set_outputs([plain.mir("binary", [y, y], kind="add")])
    rlx.compile(plain, output=tmp_path / "p.vmfb", encode_parameters=True)
    assert (tmp_path / "p.vmfb").is_file()
    assert not (tmp_path / "p.encoder.vmfb").exists()


def test_encode_parameters_is_llvm_cpu_only() -> None:
    h = rlx.HirModule("m")
    x = h.input("x", (4,))
    h.set_outputs([h.mir("binary", [x, x], kind="add")])
    with pytest.raises(rlx.CompileError, match=r"encode_parameters=True.*'vulkan'"):
        rlx.compile(h, "vulkan", encode_parameters=True)


_RESIDENT_PROBE = """
import mmap, sys
from pathlib import Path
import iree.runtime as rt
import numpy as np
import rlx
from rlx.encoding import compile_model, load_compiled
from rlx.weights import register_file_map

def anon():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

path, n, k, encode = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
h = rlx.HirModule("big")
x = h.input("x", (1, k))
w = h.param("w", (n, path.stat().st_size // n), "i8")
h.set_outputs([h.dequant_matmul(x, w, scheme="gguf_q8_0")])
f = path.open("rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
register_file_map(m, path)
weights = {"w": np.frombuffer(m, np.int8).reshape(n, -1)}
compiled = compile_model(h, weights, "llvm-cpu", sys.argv[5],
                         encode_parameters=encode == "1")
assert bool(compiled.encoder) == (encode == "1")
rt.Config("local-task")    # the device first: its workers' memory (L2-sized) is not the weight's
start = anon()
program, _ = load_compiled(compiled, weights, "local-task")
y = np.asarray(program.main(np.ones((1, k), np.float32)))
print(anon() - start, float(y[0, 0]), float(y[0, -1]))
"""


def test_encoded_planes_stay_file_pages(tmp_path: Path) -> None:
    """A 32 MiB Q8_0 weight: made by initializers its planes are ~32 MiB of anonymous
    memory; loaded encoded they are the archive's file pages (reclaimable, shared between
    processes), and the process's anonymous memory does not grow by them (the load that
    encodes does, while the encoder runs). Same results."""
    n, k = 8192, 4096
    rng = np.random.default_rng(0)
    rows = np.zeros((n, k // 32, 34), np.uint8)
    rows[..., :2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    rows[..., 2:] = rng.integers(0, 256, (n, k // 32, 32), dtype=np.uint8)
    path = tmp_path / "w.bin"
    rows.tofile(path)
    assert path.stat().st_size == n * QUANT_SCHEMES["gguf_q8_0"].row_bytes(k)
    out = {}
    for run, encode in (("plain", "0"), ("encoding", "1"), ("encoded", "1")):
        proc = subprocess.run([sys.executable, "-c", _RESIDENT_PROBE, str(path), str(n),
                               str(k), encode, str(tmp_path / "cache")],
                              capture_output=True, text=True, check=True)
        grown, *ys = proc.stdout.split()
        out[run] = (int(grown), ys)
    assert out["plain"][1] == out["encoding"][1] == out["encoded"][1]
    assert out["plain"][0] > 24 * MIB, out
    assert out["encoded"][0] < 8 * MIB, out      # the second load: the archive is there
