"""What a loaded model keeps resident: arrays IREE can use in place (64-byte aligned), the
pages of a weight file dropped once read, and one copy of each weight's kernel planes
however many functions read them (the lit test gemv_kernels.mlir shows the globals)."""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path

import numpy as np

import rlx
from rlx.weights import IMPORT_ALIGNMENT, aligned, aligned_concat, release_file_pages

MIB = 1 << 20


def _status(key: str) -> int:
    """A /proc/self/status field in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/self/status")


def _mapping_rss(address: int) -> int:
    """Resident bytes of the mapping that holds ``address`` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5:
            lo, hi = (int(v, 16) for v in head[0].split("-"))
            inside = lo <= address < hi
        elif inside and head[0] == "Rss:":
            return int(head[1]) * 1024
    raise AssertionError(f"no mapping holds {address:#x}")


def test_aligned_arrays_keep_their_values() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    for dtype in (None, np.float64):
        out = aligned(a[:, 1:], dtype)
        assert out.ctypes.data % IMPORT_ALIGNMENT == 0
        np.testing.assert_array_equal(out, a[:, 1:])
    parts = [rng.integers(-128, 127, (n, 6), dtype=np.int8) for n in (3, 1, 4)]
    cat = aligned_concat(parts, axis=0)
    assert cat.ctypes.data % IMPORT_ALIGNMENT == 0
    np.testing.assert_array_equal(cat, np.concatenate(parts))
    cols = aligned_concat([a, a[:, :2]], axis=1)
    np.testing.assert_array_equal(cols, np.concatenate([a, a[:, :2]], axis=1))


def test_release_drops_file_pages_and_keeps_values(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    data = np.arange(8 * MIB // 4, dtype=np.int32)
    data.tofile(path)
    with path.open("rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = np.frombuffer(memoryview(m), np.int32)[7:]      # a GgufFile.raw-like view
    assert int(view.sum(dtype=np.int64)) == int(data[7:].sum(dtype=np.int64))   # all paged in
    before = _mapping_rss(view.ctypes.data)
    release_file_pages([view])
    after = _mapping_rss(view.ctypes.data)
    assert before >= 7 * MIB
    assert after <= 2 * mmap.PAGESIZE                       # the partial pages at the ends
    np.testing.assert_array_equal(view, data[7:])           # faulted back from the file
    anon = aligned(data)                                    # anonymous memory: left alone
    release_file_pages([anon, data])
    np.testing.assert_array_equal(anon, np.arange(8 * MIB // 4, dtype=np.int32))


_IN_PLACE_PROBE = """
import sys
from pathlib import Path
import iree.runtime as rt
import numpy as np
from rlx import runtime
from rlx.weights import aligned

def anon():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

vmfb, n, offset, lead = Path(sys.argv[1]).read_bytes(), *map(int, sys.argv[2:5])
raw = aligned(np.zeros(n + 128, np.int8))
raw[offset:offset + n] = 7
w = raw[offset - lead:offset + n]      # the weight's n bytes, and the lead's before them
rt.Config("local-task")    # the device first: its workers' memory (L2-sized) is not the weight's
start = anon()
program = runtime.load(vmfb, "local-task", {"w": w})
assert int(np.asarray(program.main(np.array([n - 1], np.int32)))[0]) == 7
print(anon() - start)
"""


def test_iree_uses_aligned_weights_in_place(tmp_path: Path) -> None:
    """The relation IMPORT_ALIGNMENT states: a weight on a 64-byte boundary loads without a
    copy, one 32 bytes past it is copied (a change in IREE fails here, not in memory); with
    a ``lead`` of 32 (``rlx_hir.param``) the same weight's parameter starts on the boundary
    and loads in place. Each load in a fresh process: in a long-lived one a copy can land
    in memory an earlier test freed, and the resident size does not grow."""
    n = 32 * MIB
    grown = {}
    for offset, lead in ((64, 0), (96, 0), (96, 32)):
        h = rlx.HirModule("big")
        at = h.input("at", (1,), "i32")
        h.set_outputs([h.mir("gather", [h.param("w", (n,), "i8", lead=lead), at], axis=0)])
        path = tmp_path / f"big{lead}.vmfb"
        path.write_bytes(rlx.compile(h))
        proc = subprocess.run([sys.executable, "-c", _IN_PLACE_PROBE, str(path), str(n),
                               str(offset), str(lead)], capture_output=True, text=True,
                              check=True)
        grown[offset, lead] = int(proc.stdout.split()[-1])
    assert grown[64, 0] < 8 * MIB, grown
    assert grown[96, 0] > 24 * MIB, grown
    assert grown[96, 32] < 8 * MIB, grown
