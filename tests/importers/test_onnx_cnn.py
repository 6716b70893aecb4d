"""Convolutional models over images of any size (issue 22, points 1 and 2): ResNet-18- and
MobileNetV3-style networks (the same layer kinds as torchvision's, whose own models
test_onnx_torchvision checks at fewer dynamic dims, compiling faster: conv + BN + ReLU
residual blocks with a strided 1x1 downsample; depthwise-separable inverted residuals
with hardswish and squeeze-excite; adaptive average pooling) and a nearest / bilinear /
transposed-convolution upsampler, exported with a dynamic batch, height and width by
torch.onnx; hand-built graphs whose inputs spell a dynamic dim as ``-1``, ``0`` or a
string, Resize's other modes and ConvTranspose's attributes. All imported into one
module, compiled once for llvm-cpu and run at several sizes against ONNX Runtime."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from onnx_models import compile_together, init, model, ort_run, rand, vi
from rlx.importers.onnx import OnnxImport
from rlx.reference.tolerance import assert_close


def _torch_models() -> dict[str, object]:
    import torch
    from torch import nn

    def cbr(cin: int, cout: int, k: int, s: int, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups,
                                             bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([act()] if act is not None else []))

    class Basic(nn.Module):
        """ResNet's BasicBlock: two 3x3 conv + BN, ReLU, a 1x1 strided downsample."""

        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.a = cbr(cin, cout, 3, stride)
            self.b = cbr(cout, cout, 3, 1, act=None)
            self.down = cbr(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
                else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.b(self.a(x)) + self.down(x))

    class ResNetish(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(cbr(3, 8, 7, 2), nn.MaxPool2d(3, 2, 1))
            self.layers = nn.Sequential(Basic(8, 8, 1), Basic(8, 16, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))

    class SqueezeExcite(nn.Module):
        def __init__(self, c: int, squeezed: int) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn.Conv2d(c, squeezed, 1), nn.Conv2d(squeezed, c, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(self.pool(x)))))
            return x * s

    class InvertedResidual(nn.Module):
        def __init__(self, c: int, expanded: int) -> None:
            super().__init__()
            self.body = nn.Sequential(cbr(c, expanded, 1, 1, act=nn.Hardswish),
                                      cbr(expanded, expanded, 3, 1, groups=expanded,
                                          act=nn.Hardswish),
                                      SqueezeExcite(expanded, 8),
                                      cbr(expanded, c, 1, 1, act=None))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x)

    class MobileNetish(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(cbr(3, 16, 3, 2, act=nn.Hardswish),
                                          cbr(16, 16, 3, 2, groups=16), cbr(16, 12, 1, 1),
                                          InvertedResidual(12, 32))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Sequential(nn.Linear(12, 24), nn.Hardswish(), nn.Linear(24, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(torch.flatten(self.pool(self.features(x)), 1))

    class Upsampler(nn.Module):
        """A decoder's upsampling: nearest 2x (as U-Nets and FPNs do), bilinear, a strided
        transposed convolution, and bicubic (ONNX's cubic mode, a = -0.75) beside it."""

        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 3, 2, 1), nn.Conv2d(4, 2, 3, 1, 1)
            self.up = nn.ConvTranspose2d(2, 3, 4, stride=2, padding=1)
            self.c = nn.Conv2d(2, 3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = nn.functional.interpolate(self.a(x), scale_factor=2.0, mode="nearest")
            y = nn.functional.interpolate(self.b(y), scale_factor=2.0, mode="bilinear")
            return self.up(y) + nn.functional.interpolate(self.c(y), scale_factor=2.0,
                                                          mode="bicubic")

    class Restorer(nn.Module):
        """An image-to-image net as restoration and style-transfer models are built:
        reflect / circular / replicate padding, instance and group norm, PReLU, ELU, SELU,
        pixel shuffle, Mish and Softsign, and a per-pixel class map (argmax)."""

        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Conv2d(3, 8, 3)
            self.inorm = nn.InstanceNorm2d(8, affine=True)
            self.act = nn.PReLU(8)
            self.down = nn.Conv2d(8, 16, 3, 2, 1, padding_mode="circular")
            self.gnorm = nn.GroupNorm(4, 16)
            self.up = nn.Conv2d(16, 12, 3, padding=1, padding_mode="replicate")
            self.seg = nn.Conv2d(3, 5, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f = nn.functional
            y = self.act(self.inorm(self.head(f.pad(x, (1, 1, 1, 1), mode="reflect"))))
            y = f.elu(self.gnorm(self.down(y)))
            y = f.pixel_shuffle(self.up(f.selu(y)), 2)
            img = torch.tanh(y) + f.mish(x) + f.softsign(x)
            return img, self.seg(img).argmax(1)

    torch.manual_seed(0)
    models = {"resnet": ResNetish().eval(), "mobilenet": MobileNetish().eval(),
              "upsampler": Upsampler().eval(), "restorer": Restorer().eval()}
    with torch.no_grad():  # trained-looking BN statistics, not the identity
        for m in models.values():
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.normal_(0.0, 0.2)
                    mod.running_var.uniform_(0.5, 2.0)
                if isinstance(mod, nn.InstanceNorm2d | nn.GroupNorm | nn.PReLU):
                    mod.weight.uniform_(0.5, 1.5)  # not the identity either
    return models


def _export(module: object, path: Path, dynamo: bool) -> Path:
    import torch

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, (torch.randn(2, 3, 32, 32),), str(path),
                          input_names=["x"], dynamo=dynamo, opset_version=18,
                          dynamic_axes={"x": {0: "b", 2: "h", 3: "w"}})
    return path


def _input(name: str, dims: list[int | str]) -> onnx.ValueInfoProto:
    """A float input whose dims are written as given: ``-1`` and ``0`` as ``dim_value``
    (how older exporters spell a dynamic dim), strings as ``dim_param``."""
    v = helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
    shape = v.type.tensor_type.shape
    for d in dims:
        entry = shape.dim.add()
        if isinstance(d, int):
            entry.dim_value = d
        else:
            entry.dim_param = d
    return v


def _pools(rng: np.random.Generator) -> onnx.ModelProto:
    """Strided, padded and grouped convolutions (auto_pad SAME), max and average pools in
    ceil mode and with the pads counted, over an input ``[-1, 3, 0, 'width']``."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], group=8, auto_pad="SAME_UPPER"),
             helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 3],
                              strides=[2, 2], pads=[0, 1, 1, 1], count_include_pad=1,
                              ceil_mode=1),
             helper.make_node("AveragePool", ["c2"], ["y2"], kernel_shape=[3, 3],
                              strides=[1, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p2"], ["y1"])]
    return model(nodes, [_input("x", [-1, 3, 0, "width"])],
                 [vi("y1", [None] * 4), vi("y2", [None] * 4)],
                 [init("w1", rand(rng, 8, 3, 3, 3, scale=0.3)), init("b1", rand(rng, 8)),
                  init("w2", rand(rng, 8, 1, 3, 3, scale=0.3))])


def _conv1d(rng: np.random.Generator) -> onnx.ModelProto:
    """A strided 1-D convolution and pool over a length named by free text."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1], strides=[2]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2], strides=[2])]
    return model(nodes, [_input("x", ["batch", 4, "n frames"])], [vi("y", [None] * 3)],
                 [init("w", rand(rng, 6, 4, 3, scale=0.3))])


def _resizes() -> onnx.ModelProto:
    """Resize by scales with ``align_corners`` (linear) and to static sizes with
    ``round_prefer_ceil`` (nearest), over a dynamic height and width."""
    empty = np.zeros(0, np.float32)
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["y1"], mode="linear",
                              coordinate_transformation_mode="align_corners"),
             helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y2"], mode="nearest",
                              nearest_mode="round_prefer_ceil")]
    return model(nodes, [_input("x", [1, 3, "h", "w"])],
                 [vi("y1", [None] * 4), vi("y2", [None] * 4)],
                 [init("roi", empty), init("scales", np.asarray([1, 1, 2, 3], np.float32)),
                  init("sizes", np.asarray([1, 3, 5, 9], np.int64))])


def _transposed(rng: np.random.Generator) -> onnx.ModelProto:
    """ConvTranspose: strided, grouped, with output_padding and pads that cut; dilated
    with a stride on one axis; 1-D over a length named by free text."""
    nodes = [helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["y1"], strides=[2, 2],
                              pads=[1, 0, 1, 2], output_padding=[1, 0], group=2),
             helper.make_node("ConvTranspose", ["x", "w2"], ["y2"], strides=[1, 3],
                              dilations=[2, 1], pads=[3, 0, 0, 0]),
             helper.make_node("ReduceMean", ["x", "axis"], ["line"], keepdims=0),
             helper.make_node("ConvTranspose", ["line", "w3"], ["y3"], strides=[3],
                              pads=[1, 1])]
    return model(nodes, [_input("x", [-1, 4, "h", "w"])],
                 [vi(f"y{i}", [None] * 4) for i in (1, 2)] + [vi("y3", [None] * 3)],
                 [init("w1", rand(rng, 4, 3, 3, 3)), init("b1", rand(rng, 6)),
                  init("w2", rand(rng, 4, 5, 3, 2)), init("w3", rand(rng, 4, 2, 4)),
                  init("axis", np.asarray([2], np.int64))])


def _volumetric(rng: np.random.Generator) -> onnx.ModelProto:
    """3-D (video / volume) convolutions over a dynamic batch, depth, height and width:
    padded and strided in-plane, grouped with a depth dilation, with a run-time bias; a
    transposed one strided in depth."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 0, 1, 1, 1],
                              strides=[1, 2, 2]),
             helper.make_node("Conv", ["c1", "w2"], ["y1"], group=2, dilations=[2, 1, 1],
                              pads=[2, 1, 1, 2, 1, 1]),
             helper.make_node("ConvTranspose", ["x", "w3"], ["y2"], strides=[2, 1, 2],
                              pads=[1, 0, 1, 0, 1, 0], output_padding=[1, 0, 0])]
    return model(nodes, [_input("x", [-1, 2, "d", "h", "w"])],
                 [vi("y1", [None] * 5), vi("y2", [None] * 5)],
                 [init("w1", rand(rng, 4, 2, 3, 3, 3, scale=0.3)), init("b1", rand(rng, 4)),
                  init("w2", rand(rng, 6, 2, 2, 3, 3, scale=0.3)),
                  init("w3", rand(rng, 2, 3, 3, 2, 3, scale=0.3))])


def _norms_and_pads(rng: np.random.Generator) -> onnx.ModelProto:
    """GroupNormalization-21 (per-channel scale), MeanVarianceNormalization and
    LpNormalization; edge / reflect / wrap pads; a Hardmax, and the OneHot of an ArgMin;
    LRN and an L3 LpPool, all over a dynamic batch, height and width."""
    nodes = [helper.make_node("GroupNormalization", ["x", "gs", "gb"], ["g"], num_groups=2,
                              epsilon=1e-4),
             helper.make_node("MeanVarianceNormalization", ["g"], ["m"]),
             helper.make_node("LpNormalization", ["m"], ["l"], axis=1, p=2),
             helper.make_node("Pad", ["l", "pads_e"], ["pe"], mode="edge"),
             helper.make_node("Pad", ["pe", "pads_r"], ["pr"], mode="reflect"),
             helper.make_node("Pad", ["pr", "pads_w"], ["y1"], mode="wrap"),
             helper.make_node("Hardmax", ["x"], ["y2"], axis=1),
             helper.make_node("ArgMin", ["x"], ["a"], axis=1, keepdims=0),
             helper.make_node("OneHot", ["a", "depth", "onoff"], ["y3"], axis=1),
             helper.make_node("LRN", ["x"], ["y4"], size=3, alpha=0.3, beta=0.6, bias=1.5),
             helper.make_node("LpPool", ["x"], ["y5"], kernel_shape=[2, 3], p=3,
                              pads=[1, 0, 0, 1], strides=[1, 2])]
    model_21 = model(nodes, [_input("x", ["b", 4, "h", "w"])],
                     [vi(f"y{i}", [None] * 4) for i in range(1, 6)],
                     [init("gs", rand(rng, 4)), init("gb", rand(rng, 4)),
                      init("pads_e", np.asarray([0, 0, 2, 0, 0, 0, 1, 3], np.int64)),
                      init("pads_r", np.asarray([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
                      init("pads_w", np.asarray([0, 0, 0, 2, 0, 0, 1, 0], np.int64)),
                      init("depth", np.asarray(4, np.int64)),
                      init("onoff", np.asarray([-1.0, 2.0], np.float32))])
    model_21.opset_import[0].version = 21
    return model_21


def _for_ort(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with its ``-1`` / ``0`` input dims named (ONNX Runtime reads them as sizes)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    for inp in out.graph.input:
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value <= 0:
                d.Clear()
                d.dim_param = f"{inp.name}_{axis}"
    return out


Compiled = tuple[dict[str, onnx.ModelProto], dict[str, OnnxImport], object]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    tmp = tmp_path_factory.mktemp("cnn")
    nets = _torch_models()
    rng = np.random.default_rng(3)
    models = {"resnet_dynamo": onnx.load(str(_export(nets["resnet"], tmp / "r.onnx", True))),
              "mobilenet_torchscript": onnx.load(str(_export(nets["mobilenet"],
                                                             tmp / "m.onnx", False))),
              "upsampler_dynamo": onnx.load(str(_export(nets["upsampler"], tmp / "u.onnx",
                                                        True))),
              "restorer_torchscript": onnx.load(str(_export(nets["restorer"], tmp / "s.onnx",
                                                            False))),
              "restorer_dynamo": onnx.load(str(_export(nets["restorer"], tmp / "sd.onnx",
                                                       True))),
              "norms_and_pads": _norms_and_pads(rng),
              "pools": _pools(rng), "conv1d": _conv1d(rng), "resizes": _resizes(),
              "transposed": _transposed(rng), "volumetric": _volumetric(rng)}
    results, program = compile_together(models, "cnn")
    return models, results, program


SHAPES = {"resnet_dynamo": [(2, 3, 32, 32), (1, 3, 45, 29)],
          "mobilenet_torchscript": [(2, 3, 32, 32), (1, 3, 24, 41)],
          "restorer_torchscript": [(2, 3, 16, 16), (1, 3, 12, 20)],
          "restorer_dynamo": [(1, 3, 16, 16), (2, 3, 6, 10)],
          "norms_and_pads": [(2, 4, 5, 6), (1, 4, 3, 9)],
          "pools": [(1, 3, 17, 23), (2, 3, 8, 8)],
          "conv1d": [(2, 4, 11), (1, 4, 30)],
          "upsampler_dynamo": [(1, 3, 16, 16), (2, 3, 10, 22)],
          "resizes": [(1, 3, 4, 6), (1, 3, 7, 3)],
          "transposed": [(1, 4, 5, 6), (2, 4, 3, 8)],
          "volumetric": [(2, 2, 5, 6, 7), (1, 2, 3, 9, 4)]}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_matches_onnxruntime_at_several_sizes(name: str, compiled: Compiled) -> None:
    models, _, program = compiled
    rng = np.random.default_rng(4)
    oracle = _for_ort(models[name])
    for shape in SHAPES[name]:
        x = rand(rng, *shape)
        got = program[name](x=x)  # type: ignore[index]
        got = list(got) if isinstance(got, tuple) else [got]
        want = ort_run(oracle, {"x": x})
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            if w.dtype.kind in "iu":  # a class map: every index
                np.testing.assert_array_equal(g, w)
            else:
                assert_close(g, w, "f32")


def test_dynamic_inputs_and_blocks(compiled: Compiled) -> None:
    """Spatial dims stay dynamic (``-1`` / ``0`` / free-text dims too); the classifier
    heads are ``linear`` blocks."""
    _, results, _ = compiled
    assert "tensor<?x3x?x?xf32>" in str(results["pools"].module)
    assert "tensor<?x4x?xf32>" in str(results["conv1d"].module)
    assert "tensor<?x2x?x?x?xf32>" in str(results["volumetric"].module)
    for name in ("resnet_dynamo", "mobilenet_torchscript"):
        text = str(results[name].module)
        assert "tensor<?x3x?x?xf32>" in text
        assert results[name].report.block_counts()["linear"] >= 1


def test_restorer_ops_are_imported_not_expanded(compiled: Compiled) -> None:
    """The exporters write the restorer's layers as the ONNX ops themselves (TorchScript
    also as ``Pad`` modes), and rlx converts those ops."""
    _, results, _ = compiled
    for name in ("restorer_torchscript", "restorer_dynamo"):
        converted = results[name].report.converted
        for op in ("InstanceNormalization", "PRelu", "Elu", "Selu", "DepthToSpace", "ArgMax",
                   "Pad"):
            assert converted[op] >= 1, (name, op, dict(converted))


@pytest.mark.vulkan
def test_restorer_on_vulkan(compiled: Compiled) -> None:
    """The same export compiled for Vulkan (IREE's SPIR-V path needs the norm statistics
    over one flattened spatial axis), against ONNX Runtime at two image sizes."""
    import rlx
    from rlx.importers.onnx import import_model

    models, _, _ = compiled
    result = import_model(models["restorer_dynamo"])
    program = rlx.runtime.load(rlx.compile(result.module, "vulkan"), "vulkan", result.params)
    rng = np.random.default_rng(5)
    for shape in [(1, 3, 16, 16), (2, 3, 10, 6)]:
        x = rand(rng, *shape)
        img, seg = program.main(x=x)
        want_img, want_seg = ort_run(models["restorer_dynamo"], {"x": x})
        assert_close(img, want_img, "f32")
        np.testing.assert_array_equal(seg, want_seg)
