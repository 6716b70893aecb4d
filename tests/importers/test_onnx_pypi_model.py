"""A real trained ONNX file that ships inside a PyPI package (issue 22, point 1): Google's
Magika file-type classifier (``magika`` on PyPI, Apache-2.0; ``standard_v3_3/model.onnx``,
written by tf2onnx from JAX at opset 15: one-hot bytes, dense layers, a layer norm
spelled out in reductions, a 2-D convolution, a global max pool, a softmax over 214
content types; a dynamic batch). rlx computes the model inside Magika's own pipeline:
Magika reads real contents, extracts its byte features and reads the labels off rlx's
scores, which match ONNX Runtime's."""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest

import rlx
from onnx_models import ort_run
from rlx.importers.onnx import OnnxImport, import_model
from rlx.reference.tolerance import assert_close

ROOT = Path(__file__).resolve().parents[2]


def _png(w: int, h: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + bytes((x * 7 + y * 3) % 256 for x in range(w * 3))
                    for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _contents() -> dict[str, bytes]:
    """Real files of several kinds: this repository's own sources and documents, and
    formats written here by their standard libraries."""
    source = (ROOT / "python" / "rlx" / "importers" / "onnx.py").read_bytes()
    return {
        "python": source,
        "markdown": (ROOT / "README.md").read_bytes(),
        "toml": (ROOT / "pyproject.toml").read_bytes(),
        "json": json.dumps({"layers": [{"kind": "linear", "width": i} for i in range(60)]},
                           indent=2).encode(),
        "gzip": gzip.compress(source),
        "png": _png(64, 48),
        "shell": (ROOT / ".ci" / "run").read_bytes(),
    }


class _RlxSession:
    """What Magika calls on its ONNX Runtime session, answered by the rlx program; every
    batch is also run through ONNX Runtime and kept for the comparison."""

    def __init__(self, program: object, model: onnx.ModelProto) -> None:
        self.program, self.model = program, model
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def run(self, names: list[str], feeds: dict[str, object]) -> list[np.ndarray]:
        assert names == ["target_label"]
        x = np.asarray(feeds["bytes"], np.int32)
        got = self.program.main(bytes=x)
        self.pairs.append((got, ort_run(self.model, {"bytes": x})[0]))
        return [got]


@pytest.fixture(scope="module")
def magika_model() -> tuple[object, Path, OnnxImport]:
    from magika import Magika

    reference = Magika()
    path = Path(reference._model_path)
    return reference, path, import_model(path)


@pytest.fixture(scope="module")
def magika_cpu(magika_model: tuple[object, Path, OnnxImport]) -> object:
    _, _, result = magika_model
    return rlx.runtime.load(rlx.compile(result.module, "llvm-cpu"), "local-task",
                            result.params)


def test_magika_model_imports(magika_model: tuple[object, Path, OnnxImport]) -> None:
    _, path, result = magika_model
    assert path.is_file()
    assert result.report.block_counts()["linear"] == 2  # the dense layers
    assert {"Conv", "GlobalMaxPool", "ReduceSum"} <= set(result.report.converted)


def test_magika_labels_with_rlx(magika_model: tuple[object, Path, OnnxImport],
                                magika_cpu: object) -> None:
    """Magika's pipeline with rlx computing the model, on llvm-cpu: one batch of all
    contents and each alone (batch 1); the scores match ONNX Runtime's within the f32
    tolerance and every label is the one Magika gives with ONNX Runtime."""
    from magika import Magika

    reference, path, _ = magika_model
    ours = Magika()
    session = _RlxSession(magika_cpu, onnx.load(str(path)))
    ours._onnx_session = session
    contents = _contents()
    want = [r.output.label for r in (reference.identify_bytes(c) for c in contents.values())]
    got = [r.output.label for r in (ours.identify_bytes(c) for c in contents.values())]
    assert got == want
    assert len({str(x) for x in want}) >= 5  # several kinds told apart, not one label
    assert [p[0].shape for p in session.pairs] == [(1, 214)] * len(contents)
    for pair in session.pairs:
        assert_close(*pair, "f32")


def test_magika_batch_matches_onnxruntime(magika_model: tuple[object, Path, OnnxImport],
                                          magika_cpu: object, tmp_path: Path) -> None:
    """Magika batches the files it is given: 7 files in one call (a batch of 7 from the
    same compiled module)."""
    from magika import Magika

    reference, path, _ = magika_model
    files = []
    for name, content in _contents().items():
        files.append(tmp_path / f"sample_{name}")
        files[-1].write_bytes(content)
    ours = Magika()
    session = _RlxSession(magika_cpu, onnx.load(str(path)))
    ours._onnx_session = session
    got = [r.output.label for r in ours.identify_paths(files)]
    want = [r.output.label for r in reference.identify_paths(files)]
    assert got == want
    assert [p[0].shape for p in session.pairs] == [(len(files), 214)]
    assert_close(*session.pairs[0], "f32")


@pytest.mark.vulkan
def test_magika_on_vulkan(magika_model: tuple[object, Path, OnnxImport]) -> None:
    """The same model compiled for Vulkan (lavapipe in CI), batches of 1 and 3 of random
    byte features (padding token 256 included), against ONNX Runtime."""
    _, path, result = magika_model
    program = rlx.runtime.load(rlx.compile(result.module, "vulkan"), "vulkan", result.params)
    rng = np.random.default_rng(4)
    model = onnx.load(str(path))
    for batch in (1, 3):
        x = rng.integers(0, 257, (batch, 2048)).astype(np.int32)
        assert_close(program.main(bytes=x), ort_run(model, {"bytes": x})[0], "f32")
