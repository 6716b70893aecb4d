"""tools/gpu_bundle.py and tools/gpu_run.py on the CPU: a small llvm-cpu bundle (no wheel, no
Vulkan loader) run on ``local-task``: every check within its tolerance, the timed cases timed
against PyTorch (CPU here) and within tolerance of PyTorch's float64 result, both reports
written; a whole made LLaMA GGUF model gives the bundle's greedy tokens; and a wrong
reference (an output, a token) is reported as a failure (exit status 1)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    proc = _tool("tools/gpu_bundle.py", str(out), "--target", "llvm-cpu", "--suite", "small",
                 "--wheel", "none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _run(bundle: Path, out: Path) -> tuple[int, dict]:
    proc = _tool("tools/gpu_run.py", str(bundle), "--out", str(out), "--repeat", "3")
    assert (out / "gpu.md").is_file(), proc.stdout + proc.stderr
    return proc.returncode, json.loads((out / "gpu.json").read_text())


def test_runner_checks_and_times_a_cpu_bundle(bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert list(manifest["targets"]) == ["llvm-cpu"]
    rc, report = _run(bundle, tmp_path)
    results = report["results"]
    assert rc == 0, [r for r in results if not r.get("ok")]
    assert len(results) == len(manifest["cases"]) == 6
    assert report["environment"]["iree_devices"] == {"llvm-cpu": ["default"]}
    checks = [r for r in results if r["kind"] == "check"]
    # outputs compared: (2 of linear, 1 of rope) x 2 sizes of the dynamic dims
    assert {r["case"]: r["outputs"] for r in checks} == {"zoo_linear": 4, "zoo_rope_neox": 2}
    for r in results:
        if r["kind"] == "time":
            assert r["rlx"]["latency_ms"] > 0, r
            assert r["torch"]["pipelined_ms"] > 0, r
            assert r["err"] <= r["bound"], r
    model, = (r for r in results if r["kind"] == "model")
    # the made GGUF's weights remade here from the seed; the greedy tokens as the bundle's
    assert model["case"] == "llama_small_Q4_K_M", model
    assert model["ok"], model
    assert model["tokens_same"] == model["tokens"] == 9
    assert model["rlx"]["decode_tok_s"] > 0
    assert model["torch"]["decode_tok_s"] > 0, model.get("torch_error")
    assert model["err"] <= model["bound"]
    text = (tmp_path / "gpu.md").read_text()
    assert "| llvm-cpu | llama_small_Q4_K_M | 9 / 9 |" in text
    assert "| llvm-cpu | zoo_linear | ok |" in text
    assert "llama_block_decode_f32" in text


def test_runner_reports_a_wrong_result(bundle: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bundle"
    shutil.copytree(bundle, bad)
    want = bad / "data" / "zoo_linear.1.want.npz"
    with np.load(want) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["out0"] = arrays["out0"] + 1e-2
    np.savez(want, **arrays)
    model = bad / "data" / "llama_small_Q4_K_M.npz"
    with np.load(model) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["tokens"][3] = (arrays["tokens"][3] + 1) % 512
    np.savez(model, **arrays)
    rc, report = _run(bad, tmp_path / "report")
    assert rc == 1
    failed = [r for r in report["results"] if not r.get("ok")]
    assert [r["case"] for r in failed] == ["zoo_linear", "llama_small_Q4_K_M"], failed
    assert failed[0]["where"] == "data/zoo_linear.1.in.npz output #0 (f32)"
    assert failed[1]["tokens_same"] == 3
    assert failed[1]["where"].startswith("token 3:")
