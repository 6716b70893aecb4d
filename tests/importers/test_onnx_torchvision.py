"""torchvision's own ResNet-18 and MobileNetV3-Small (issue 22, point 1), exported to ONNX
by ``torch.onnx.export`` (ResNet-18: the dynamo exporter at opset 18 over any image size;
MobileNetV3: the TorchScript exporter at opset 17 over any batch), imported into one
module, compiled once and run: equal to ONNX Runtime and to torchvision's model in torch
eager. The export runs in a process of its
own with torchvision on its path (see ``torchvision_export.py``: PyPI's torchvision wheel
is the CUDA build; ``make venv`` installs it, with Pillow, into ``.venv/torchvision-site``
without putting it on the test process's path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from torchvision_export import SIZES

from onnx_models import compile_together, ort_run
from rlx.reference.tolerance import assert_close

HERE = Path(__file__).resolve().parent
SITE = Path(sys.prefix) / "torchvision-site"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, object]:
    if not (SITE / "torchvision").is_dir():
        pytest.fail(f"torchvision is not installed in {SITE}: run `make venv` (it installs "
                    "torchvision==0.28.0 and pillow there with pip --target)")
    out = tmp_path_factory.mktemp("torchvision")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), str(HERE)])}
    proc = subprocess.run([sys.executable, str(HERE / "torchvision_export.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().startswith("0.28.0"), proc.stdout
    results, program = compile_together({n: out / f"{n}.onnx" for n in SIZES}, "torchvision")
    return out, results, program


@pytest.mark.parametrize("name", sorted(SIZES))
def test_torchvision_model_matches_ort_and_eager(name: str, exported: tuple) -> None:
    out, _, program = exported
    model = onnx.load(str(out / f"{name}.onnx"))
    eager = np.load(out / "eager.npz")
    for i in range(len(SIZES[name])):
        x = eager[f"{name}.x{i}"]
        got = program[name](x=x)  # type: ignore[index]
        assert_close(got, ort_run(model, {"x": x})[0], "f32", f"{name} {x.shape} vs ORT")
        assert_close(got, eager[f"{name}.y{i}"], "f32", f"{name} {x.shape} vs torch eager")


def test_torchvision_imports_keep_sizes_dynamic_and_name_blocks(exported: tuple) -> None:
    """The classifier heads are ``linear`` blocks (MobileNetV3's two, around its
    hard-swish); ResNet-18 keeps batch, height and width dynamic, MobileNetV3 its batch."""
    _, results, _ = exported
    assert results["resnet18"].report.block_counts()["linear"] == 1
    assert results["mobilenet_v3_small"].report.block_counts()["linear"] == 2
    assert "tensor<?x3x?x?xf32>" in str(results["resnet18"].module)
    assert "tensor<?x3x64x64xf32>" in str(results["mobilenet_v3_small"].module)
