"""Truncated, corrupt or lying weight files get one clear WeightError naming the file or the
tensor: nothing is read past the file, no allocation is sized by an unchecked header, and
no pickle / torch.load is used anywhere."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.runtime import save_params

ROOT = Path(__file__).resolve().parent.parent
W = {"fc.w": np.arange(32, dtype=np.float32).reshape(8, 4), "fc.b": np.ones(4, np.float32)}


@pytest.fixture(scope="module")
def vmfb() -> bytes:
    h = rlx.HirModule("lin")
    x = h.input("x", (2, 8))
    h.set_outputs([h.linear(x, h.param("fc.w", (8, 4)), h.param("fc.b", (4,)))])
    return rlx.compile(h)


def safetensors_bytes(tensors: dict[str, np.ndarray], patch: dict | None = None,
                      header_len: int | None = None) -> bytes:
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        data = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    for name, fields in (patch or {}).items():
        header[name] = {**header.get(name, {}), **fields}
    raw = json.dumps(header).encode()
    n = len(raw) if header_len is None else header_len
    return struct.pack("<Q", n) + raw + b"".join(blobs)


@pytest.mark.parametrize(("case", "content", "message"), [
    ("truncated_header", lambda: safetensors_bytes(W)[:20], "header length"),
    ("huge_header_len", lambda: safetensors_bytes(W, header_len=2**62), "runs past the end"),
    ("not_json", lambda: struct.pack("<Q", 4) + b"{{{{", "corrupt safetensors header"),
    ("data_past_end", lambda: safetensors_bytes(W, {"fc.b": {"data_offsets": [128, 1 << 40]}}),
     r"tensor 'fc.b': data \[128, 1099511627776\) lies outside"),
    ("lying_shape", lambda: safetensors_bytes(W, {"fc.w": {"shape": [4, 8]}}),
     r"weight 'fc.w': expected \[8, 4\] f32, found \[4, 8\] f32"),
    ("wrong_dtype", lambda: safetensors_bytes(W, {"fc.b": {"dtype": "F16"}}),
     r"weight 'fc.b': expected \[4\] f32, found \[4\] f16"),
    ("bad_entry", lambda: safetensors_bytes(W, {"fc.b": {"shape": "four"}}),
     "tensor 'fc.b': corrupt header entry"),
    ("missing_tensor", lambda: safetensors_bytes({"fc.w": W["fc.w"]}),
     "weight 'fc.b' .* is not in the file"),
])
def test_hostile_safetensors(vmfb: bytes, tmp_path: Path, case: str, content, message: str
                             ) -> None:
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(content())
    with pytest.raises(rlx.WeightError, match=message) as info:
        rlx.runtime.load(vmfb, params=path)
    assert str(info.value).startswith(str(path))


def test_truncated_and_corrupt_irpa(vmfb: bytes, tmp_path: Path) -> None:
    good = tmp_path / "good.irpa"
    save_params(W, good)
    data = good.read_bytes()
    for cut in (0, 10, 40, 100):
        bad = tmp_path / f"cut{cut}.irpa"
        bad.write_bytes(data[:cut])
        with pytest.raises(rlx.WeightError, match=f"{bad}: error: cannot read weights"):
            rlx.runtime.load(vmfb, params=bad)
    corrupt = tmp_path / "corrupt.irpa"
    corrupt.write_bytes(b"IRPA" + bytes(range(256)) * 8)
    with pytest.raises(rlx.WeightError, match="cannot read weights"):
        rlx.runtime.load(vmfb, params=corrupt)


def test_irpa_with_wrong_sizes(vmfb: bytes, tmp_path: Path) -> None:
    path = tmp_path / "small.irpa"
    save_params({"fc.w": np.ones((4, 4), np.float32), "fc.b": W["fc.b"]}, path)
    with pytest.raises(rlx.WeightError, match=r"weight 'fc.w': expected 128 bytes \(\[8, 4\] "
                                              r"f32\), found 64"):
        rlx.runtime.load(vmfb, params=path)


def test_no_pickle_anywhere() -> None:
    """Weight and input files are parsed by bounded readers, never unpickled."""
    offenders = []
    for path in (ROOT / "python" / "rlx").rglob("*.py"):
        text = path.read_text()
        for bad in ("import pickle", "torch.load(", "allow_pickle=True", "pickle.load"):
            if bad in text:
                offenders.append(f"{path.relative_to(ROOT)}: {bad}")
    assert not offenders
