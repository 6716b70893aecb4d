"""Export torchvision's ``resnet18`` and ``mobilenet_v3_small`` (random weights, trained-
looking BatchNorm statistics) to ONNX, and save torch eager's outputs on given inputs.

Run as a script by ``test_onnx_torchvision.py`` in its own process, with torchvision's
directory on ``PYTHONPATH``: ``python torchvision_export.py OUT_DIR``. Why a process of its
own: PyPI's torchvision wheel is built against the CUDA torch, so its ``_C`` extension
does not load beside the CPU torch rlx tests with, and its ``_meta_registrations`` module
then fails to register fake kernels for torchvision's own operators (``roi_align``, ``nms``:
detection ops these classifiers never call). In the test process that failure would break
every ``transformers`` import (transformers imports an installed torchvision). Here that one
module is replaced by an empty one before torchvision is imported; the model classes are
torchvision's own, unchanged.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
from pathlib import Path

import numpy as np

SIZES = {"resnet18": [(2, 3, 64, 64), (1, 3, 45, 71)],
         "mobilenet_v3_small": [(2, 3, 64, 64), (1, 3, 64, 64)]}
"""The input shapes each model is checked at: ResNet-18 over any image size; MobileNetV3
over any batch at the 64 x 64 image it is exported at (its hard-swish / squeeze-excite
blocks over dynamic height and width are covered by ``test_onnx_cnn``'s MobileNet-style
net; torchvision's, over dynamic H and W, costs IREE about 80 s to compile on 2 vCPUs,
over a static image 15 s)."""


def main(out: Path) -> None:
    sys.modules["torchvision._meta_registrations"] = types.ModuleType(
        "torchvision._meta_registrations")
    import torch
    import torchvision

    torch.manual_seed(0)
    models = {"resnet18": torchvision.models.resnet18(weights=None).eval(),
              "mobilenet_v3_small": torchvision.models.mobilenet_v3_small(weights=None).eval()}
    rng = np.random.default_rng(0)
    arrays = {}
    with torch.no_grad():
        for name, model in models.items():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.normal_(0.0, 0.2)
                    m.running_var.uniform_(0.5, 2.0)
            for i, shape in enumerate(SIZES.get(name, [])):
                x = rng.standard_normal(shape).astype(np.float32)
                arrays[f"{name}.x{i}"] = x
                arrays[f"{name}.y{i}"] = model(torch.from_numpy(x)).numpy()
    # ResNet-18 through the dynamo exporter over dynamic batch, height and width;
    # MobileNetV3 through the TorchScript exporter over a dynamic batch.
    exports = {"resnet18": (True, 18, {0: "batch", 2: "height", 3: "width"}),
               "mobilenet_v3_small": (False, 17, {0: "batch"})}
    for name, (dynamo, opset, axes) in exports.items():
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            torch.onnx.export(models[name], (torch.randn(2, 3, 64, 64),),
                              str(out / f"{name}.onnx"), input_names=["x"], dynamo=dynamo,
                              opset_version=opset, dynamic_axes={"x": axes})
    np.savez(out / "eager.npz", **arrays)
    print(torchvision.__version__)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
