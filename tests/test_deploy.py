"""Deploying a compiled model with the IREE runtime alone (README "Deploy without the
compiler"): a fresh venv gets ``iree-base-runtime``, numpy and rlx (``--no-deps``), and
``tests/deploy_check.py`` runs there a vmfb compiled here, its weights from a numpy dict, an
``.irpa``, a ``.safetensors`` and a ``.gguf`` (as a path and through ``rlx.gguf``), called
plainly, by name, on device and with ``submit``. The venv is made with this Python and the
packages come through pip's configured index (the test needs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

import rlx
from rlx.runtime import save_params

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_PIN = "iree-base-runtime==3.13.0"


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def runtime_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a fresh venv (no pip of its own: this Python's pip installs into it)
    with the runtime, numpy and rlx's wheel, built here from a copy of the sources so that
    the build leaves nothing in the checkout."""
    tmp = tmp_path_factory.mktemp("deploy")
    src = tmp / "src"
    shutil.copytree(ROOT / "python", src / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "whl"),
          str(src)])
    _run([*pip, "--python", str(python), "install", "-q", RUNTIME_PIN, "numpy"])
    _run([*pip, "--python", str(python), "install", "-q", "--no-deps",
          *map(str, (tmp / "whl").glob("rlx-*.whl"))])
    return python


def _model() -> rlx.HirModule:
    h = rlx.HirModule("deploy")
    x = h.input("x", (None, 64))
    y = h.dequant_matmul(x, h.param("wq", (32, 68), "i8"), scheme="gguf_q8_0")
    h.set_outputs([h.linear(y, h.param("w2", (32, 16)), None, "silu")])
    return h


def _write_weights(work: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    w = rng.standard_normal((32, 64)).astype(np.float32)
    wq = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    weights = {"wq": wq.view(np.int8), "w2": rng.standard_normal((32, 16)).astype(np.float32)}
    np.savez(work / "weights.npz", **weights)
    save_params(weights, work / "weights.irpa")
    save_file(weights, str(work / "weights.safetensors"))
    writer = gguf.GGUFWriter(str(work / "weights.gguf"), "llama")
    writer.add_tensor("wq", wq, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("w2", weights["w2"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return weights


def test_runtime_only_install_runs_a_compiled_module(runtime_python: Path,
                                                     tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weights = _write_weights(tmp_path, rng)
    vmfb = rlx.compile(_model(), "llvm-cpu", output=tmp_path / "module.vmfb")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "want.npy", rlx.runtime.load(vmfb, "local-task", weights).main(x))
    proc = _run([str(runtime_python), str(ROOT / "tests" / "deploy_check.py"), str(tmp_path)],
                cwd=tmp_path)
    assert "deploy check passed" in proc.stdout
