"""PyTorch programs straight from ``torch.export`` (issue 22, point 5): a tiny HF
LlamaForCausalLM with a dynamic sequence length, a tiny HF BertModel with its attention
mask, ResNet-18, an ``nn.LSTM`` model and an ``F.interpolate`` upsampler over a dynamic
image size (random weights) are imported with
``rlx.importers.torch.import_program`` into two modules, compiled at once for llvm-cpu, and
run against torch eager at two sizes each; the report and the HIR name the blocks
recognized and the module paths; bad programs are one clear error."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import rlx
from compile_parts import compile_parts, split
from rlx.importers.torch import TorchImport, import_program
from rlx.ir.diagnostics import ModelImportError, RlxError
from rlx.reference.tolerance import assert_close

Case = tuple[Any, Any, Callable[[int], tuple]]
"""(the exported program, the eager module, the inputs at a size)."""


def _llama() -> Case:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norm weights that are not all ones
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.2)

    class Logits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, ids: Any) -> Any:
            return self.m(input_ids=ids, use_cache=False).logits

    seq = torch.export.Dim("seq", min=2, max=64)
    eager = Logits().eval()
    ep = torch.export.export(eager, (torch.randint(0, 128, (1, 8)),),
                             dynamic_shapes={"ids": {1: seq}})
    return ep, eager, lambda s: (torch.randint(0, 128, (1, s)),)


def _bert() -> Case:
    import transformers

    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=64)
    bert = transformers.BertModel(config).eval()

    class Hidden(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = bert

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    def inputs(s: int) -> tuple:
        mask = torch.ones(2, s, dtype=torch.int64)
        mask[0, s - 3:] = 0  # row 0 padded
        return torch.randint(0, 100, (2, s)), mask

    batch, seq = torch.export.Dim("b", min=1, max=8), torch.export.Dim("s", min=2, max=64)
    eager = Hidden().eval()
    ep = torch.export.export(eager, inputs(8), dynamic_shapes={
        "ids": {0: batch, 1: seq}, "mask": {0: batch, 1: seq}})
    return ep, eager, inputs


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (torchvision is not a test dependency)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout)) if stride != 1 or cin != cout \
            else None

    def forward(self, x: Any) -> Any:
        y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision's ``resnet18()`` layer for layer: 7x7 stem, max pool, 4 stages of 2
    BasicBlocks (64, 128, 256, 512), global average pool, 1000-way linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        for i, (cin, cout, stride) in enumerate(widths, start=1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, stride),
                                                     BasicBlock(cout, cout, 1)))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: Any) -> Any:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _resnet() -> Case:
    eager = ResNet18().eval()
    with torch.no_grad():  # running statistics that are not 0 / 1
        for m in eager.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    batch = torch.export.Dim("b", min=1, max=4)
    ep = torch.export.export(eager, (torch.randn(2, 3, 64, 64),),
                             dynamic_shapes={"x": {0: batch}})
    return ep, eager, lambda b: (torch.randn(b, 3, 64, 64),)


class Tagger(nn.Module):
    """A two-layer LSTM over a batch of sequences and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: Any) -> Any:
        y, _ = self.lstm(x)
        return self.head(y)


def _lstm() -> Case:
    eager = Tagger().eval()
    batch = torch.export.Dim("b", min=1, max=8)  # torch.export specializes the LSTM's length
    ep = torch.export.export(eager, (torch.randn(2, 5, 8),), dynamic_shapes={"x": {0: batch}})
    return ep, eager, lambda b: (torch.randn(b, 5, 8),)


class Upsampler(nn.Module):
    """A decoder's ``F.interpolate`` calls over a dynamic image size: nearest, bilinear and
    bicubic, with and without ``align_corners``, to twice the input's size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Any) -> Any:
        x = self.conv(x)
        size = (2 * x.shape[-2], 2 * x.shape[-1])
        out = nn.functional.interpolate(x, size=size, mode="nearest")
        for k, (mode, align) in enumerate([("bilinear", False), ("bicubic", False),
                                           ("bilinear", True), ("bicubic", True)]):
            out = out + (k + 2) * nn.functional.interpolate(x, size=size, mode=mode,
                                                            align_corners=align)
        return out


def _upsampler() -> Case:
    eager = Upsampler().eval()
    side = torch.export.Dim("side", min=2, max=64)
    ep = torch.export.export(eager, (torch.randn(1, 3, 8, 8),),
                             dynamic_shapes={"x": {2: side, 3: side}})
    return ep, eager, lambda n: (torch.randn(1, 3, n, n),)


class InPlace(nn.Module):
    """What torchvision's ResNet and MobileNetV3 export to: ``out += identity``
    (``add_``), ``ReLU`` / ``Hardswish`` / ``Dropout`` with ``inplace=True``, a
    ``Hardsigmoid`` gate, and a tensor read after an in-place write whose result nothing
    uses (``mul_``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.act, self.relu = nn.Hardswish(inplace=True), nn.ReLU(inplace=True)
        self.gate, self.drop = nn.Hardsigmoid(), nn.Dropout(0.2, inplace=True)

    def forward(self, x: Any) -> Any:
        y = self.act(self.conv1(x))
        out = self.conv2(y)
        out += y
        out = self.relu(out)
        scaled = out * 2
        before = scaled + 1
        scaled.mul_(self.gate(out))
        return self.drop(scaled + before).mean((2, 3))


def _inplace() -> Case:
    eager = InPlace().eval()
    batch = torch.export.Dim("b", min=1, max=4)
    ep = torch.export.export(eager, (torch.randn(2, 3, 12, 12),),
                             dynamic_shapes={"x": {0: batch}})
    return ep, eager, lambda b: (torch.randn(b, 3, 12, 12),)


class Remainders(nn.Module):
    """``torch.remainder`` has the divisor's sign, ``torch.fmod`` the dividend's."""

    def forward(self, x: Any) -> Any:
        i = (x * 10).to(torch.int32)
        return (torch.remainder(x, 1.5) + 2 * torch.fmod(x, -0.7) +
                (10 * torch.remainder(i, -5) + torch.fmod(i, 3)).to(torch.float32))


def _rows_case(module: nn.Module, scale: float) -> Case:
    """``module`` exported over ``x [rows, 6]`` (normal values times ``scale``), the rows
    dynamic."""
    eager = module.eval()
    rows = torch.export.Dim("rows", min=1, max=16)
    ep = torch.export.export(eager, (torch.randn(4, 6) * scale,),
                             dynamic_shapes={"x": {0: rows}})
    return ep, eager, lambda n: (torch.randn(n, 6) * scale,)


def _remainders() -> Case:
    return _rows_case(Remainders(), 5.0)


class MathBits(nn.Module):
    """The math functions and the integer bitwise ops and shifts (``>>`` of a negative
    int32 is arithmetic in torch, as in rlx's ``shr``)."""

    def forward(self, x: Any) -> Any:
        i = (x * 100).to(torch.int32)
        bits = ((i & 0x5A) | (i >> 2)) ^ (i << 1) ^ ~i
        return (torch.floor(x) + torch.ceil(x * 0.5) + torch.asinh(x)
                + torch.atanh(torch.tanh(x) * 0.9) + torch.acosh(x.abs() + 1)
                + torch.sinh(x * 0.3) + torch.cosh(x * 0.3) + torch.asin(torch.tanh(x))
                + bits.to(torch.float32) * 1e-3
                + torch.logical_xor(x > 0, x < 1).to(torch.float32))


def _math_bits() -> Case:
    return _rows_case(MathBits(), 2.0)


class Picks(nn.Module):
    """Padding in every mode, group and instance norm, the activations written as MIR ops,
    pixel_shuffle, argmax / argmin, topk (largest and smallest), and the scatters (index_put into a
    clone, scatter_add, scatter_reduce amax), with a dynamic batch and a dynamic number of
    writes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.prelu = nn.PReLU(8)
        self.gnorm, self.inorm = nn.GroupNorm(4, 8), nn.InstanceNorm2d(8, affine=True)

    def forward(self, x: Any, cache: Any, new: Any, pos: Any, labels: Any, v: Any) -> Any:
        f = nn.functional
        y = self.conv(f.pad(x, (1, 1, 1, 1), mode="reflect"))
        y = self.inorm(self.gnorm(y)) + f.instance_norm(y)
        y = f.elu(y) + f.selu(y) + f.mish(y) + f.leaky_relu(y, 0.1) + f.celu(y, 0.5)
        y = f.pad(self.prelu(y), (2, 0, 0, 1), mode="replicate")
        y = f.pad(y, (1, 1, 2, 0), mode="circular") + f.pad(y, (1, 1, 2, 0), value=0.5)
        y = f.pixel_shuffle(y[:, :8], 2)
        c = cache.clone()
        c[:, pos] = new
        h = torch.zeros(v.shape[0], 6).scatter_add(1, labels, v)
        h2 = torch.ones(v.shape[0], 6).scatter_reduce(1, labels, v, reduce="amax")
        top = torch.topk(x.flatten(2), 3, dim=-1)  # random values: torch orders ties freely
        low = torch.topk(v, 2, dim=1, largest=False)
        return (y, y.argmax(1), y.argmin(1), c * 2, h, h2, top.values, top.indices,
                low.values, low.indices)


def _picks() -> Case:
    eager = Picks().eval()
    with torch.no_grad():  # norm weights that are not the identity
        for norm in (eager.gnorm, eager.inorm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
    b, s = torch.export.Dim("b", max=4), torch.export.Dim("s", max=12)
    n, length = torch.export.Dim("n", max=8), torch.export.Dim("l", max=12)

    def inputs(k: int) -> tuple:
        return (torch.randn(k, 3, 8, 8), torch.randn(2, 16, 8), torch.randn(2, k + 2, 8),
                torch.arange(4, 6 + k), torch.randint(0, 6, (k + 1, 9)), torch.randn(k + 1, 9))

    ep = torch.export.export(eager, inputs(2), dynamic_shapes={
        "x": {0: b}, "cache": None, "new": {1: s}, "pos": {0: s}, "labels": {0: n, 1: length},
        "v": {0: n, 1: length}})
    return ep, eager, inputs


class Shuffles(nn.Module):
    """pixel_unshuffle then pixel_shuffle over a dynamic batch, height and width (``H = 2 h``,
    ``W = 2 w`` as torch.export's derived dims)."""

    def forward(self, x: Any) -> Any:
        f = nn.functional
        return f.pixel_shuffle(torch.tanh(f.pixel_unshuffle(x, 2)) * 2.0, 2) + x


def _shuffles() -> Case:
    def inputs(k: int) -> tuple:
        return (torch.randn(k, 3, 2 * (k + 2), 2 * (k + 3)),)

    dim = torch.export.Dim
    ep = torch.export.export(Shuffles(), inputs(2), dynamic_shapes=(
        {0: dim("b", max=8), 2: 2 * dim("h", max=16), 3: 2 * dim("w", max=16)},))
    return ep, Shuffles(), inputs


def _masked_decoders() -> Case:
    """A LLaMA, a RoBERTa and a GPT-2 with their attention masks, exported with
    ``Dim.AUTO`` (no upper bound on batch or length): transformers builds the padding mask
    by indexing it with broadcast iotas (``aten.index``), RoBERTa counts its position ids
    with ``cumsum`` and BERT-style embeddings ``gather`` their token types; GPT-2's Conv1D
    is ``addmm`` of its input flattened to ``[B S, K]``, viewed back to ``[B, S, N]``."""
    import transformers

    llama = transformers.LlamaModel(transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)).eval()
    roberta = transformers.RobertaModel(transformers.RobertaConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130, pad_token_id=1),
        add_pooling_layer=False).eval()
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=128, n_embd=32, n_layer=1, n_head=2, n_positions=128)).eval()

    class Both(nn.Module):
        def forward(self, ids: Any, mask: Any) -> Any:
            return (llama(input_ids=ids, attention_mask=mask).last_hidden_state,
                    roberta(input_ids=ids, attention_mask=mask).last_hidden_state,
                    gpt2(input_ids=ids, attention_mask=mask).last_hidden_state)

    def inputs(s: int) -> tuple:
        mask = torch.ones(2, s, dtype=torch.int64)
        mask[0, s - 2:] = 0  # row 0 padded
        return torch.randint(2, 128, (2, s)), mask

    auto = torch.export.Dim.AUTO
    ep = torch.export.export(Both().eval(), inputs(7), dynamic_shapes={
        "ids": {0: auto, 1: auto}, "mask": {0: auto, 1: auto}})
    return ep, Both().eval(), inputs


class Indexing(nn.Module):
    """``torch.gather``; tensors indexed by broadcast index tensors (negative ones
    counting from the end) on leading, inner adjacent and separated dims; a cumulative
    count of a mask."""

    def forward(self, x: Any, idx: Any, rows: Any) -> Any:
        b = torch.arange(x.shape[0])[:, None]
        return (torch.gather(x, 1, idx), x[b, rows], x[:, rows[0]], x[b, :, rows[:, :1]],
                torch.cumsum(x > 0, dim=1))


class Odds(nn.Module):
    """What MPNet, DeBERTa, BLOOM and OPT export beside their blocks: ``abs`` of integers,
    ``torch.min`` of two tensors, ``masked_fill``, ``baddbmm`` with its scales, and an MLP
    on hidden states flattened to ``[B S, D]`` with a flattened residual, viewed back."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 4)

    def forward(self, x: Any, pos: Any) -> Any:
        buckets = torch.min(torch.abs(pos[:, None] - pos[None, :]), torch.full_like(pos, 3))
        scores = torch.baddbmm(x[:, :, :1], x, x.transpose(1, 2), beta=0.5, alpha=0.25)
        scores = scores.masked_fill(scores > 1.0, -2.0)
        flat = x.reshape(-1, 4)
        out = (flat + self.fc2(torch.relu(self.fc1(flat)))).view(x.shape)
        return buckets, scores, out


def _odds() -> Case:
    def inputs(k: int) -> tuple:
        return torch.randn(k + 1, k + 4, 4), torch.arange(k + 4) * 3 - 5

    n, s = torch.export.Dim("n"), torch.export.Dim("s")
    eager = Odds().eval()
    ep = torch.export.export(eager, inputs(2), dynamic_shapes={"x": {0: n, 1: s},
                                                                "pos": {0: s}})
    return ep, eager, inputs


def _indexing() -> Case:
    def inputs(k: int) -> tuple:
        return (torch.randn(k + 1, 5, 4), torch.randint(0, 5, (k + 1, 7, 4)),
                torch.randint(-4, 4, (k + 1, 3)))

    n = torch.export.Dim("n")
    ep = torch.export.export(Indexing(), inputs(2), dynamic_shapes={
        "x": {0: n}, "idx": {0: n}, "rows": {0: n}})
    return ep, Indexing(), inputs


class AudioFront(nn.Module):
    """wav2vec2's front end in small: strided 1-D convolutions over audio of any length,
    and a grouped, padded positional convolution under weight norm (``_weight_norm``
    computed from the weights at import time)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 10, stride=5, bias=False)
        self.down = nn.Conv1d(8, 8, 3, stride=2, dilation=2)
        self.pos = nn.utils.parametrizations.weight_norm(
            nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2)

    def forward(self, audio: Any) -> Any:
        h = self.down(nn.functional.gelu(self.conv(audio[:, None])))
        return h + nn.functional.gelu(self.pos(h))


def _audio_front() -> Case:
    eager = AudioFront().eval()
    ep = torch.export.export(eager, (torch.randn(2, 400),), dynamic_shapes=(
        {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO},))
    return ep, eager, lambda k: (torch.randn(k, 300 + 97 * k),)


CASES = {"llama": (_llama, (5, 11)), "audio_front": (_audio_front, (1, 3)),
         "masked_decoders": (_masked_decoders, (4, 9)), "indexing": (_indexing, (1, 3)),
         "odds": (_odds, (1, 3)),
         "bert": (_bert, (6, 13)), "resnet18": (_resnet, (1, 2)),
         "lstm": (_lstm, (1, 3)), "upsampler": (_upsampler, (5, 12)),
         "inplace": (_inplace, (1, 3)), "remainders": (_remainders, (3, 9)),
         "math_bits": (_math_bits, (3, 9)), "picks": (_picks, (1, 3)),
         "shuffles": (_shuffles, (1, 3))}

Compiled = tuple[dict[str, Case], dict[str, TorchImport], Any]


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """Every program imported into one of two modules of about equal size (graph nodes; a
    function each), compiled at once (:mod:`compile_parts`)."""
    torch.manual_seed(0)
    cases = {name: make() for name, (make, _) in CASES.items()}
    results: dict[str, TorchImport] = {}
    parts = []
    for i, keys in enumerate(split({name: len(ep.graph.nodes)
                                    for name, (ep, _, _) in cases.items()})):
        h = rlx.HirModule(f"torch_programs_{i}")
        params: dict[str, np.ndarray] = {}
        for name in keys:
            results[name] = import_program(cases[name][0], module=h, function=name,
                                           param_prefix=f"{name}.", source=name)
            params.update(results[name].params)
        parts.append((h, params, keys))
    return cases, results, compile_parts(parts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_eager_at_two_sizes(name: str, compiled: Compiled) -> None:
    cases, _, program = compiled
    ep, eager, inputs = cases[name]
    names = list(ep.graph_signature.user_inputs)
    torch.manual_seed(1)
    for size in CASES[name][1]:
        args = inputs(size)
        got = program[name](**{n: a.numpy() for n, a in zip(names, args, strict=True)})
        with torch.no_grad():
            want = eager(*args)
        if isinstance(want, tuple):  # several results, some of them indices
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                if w.dtype == torch.int64:
                    np.testing.assert_array_equal(g, w.numpy(), f"{name} #{k} at {size}")
                else:
                    assert_close(g, w.numpy(), "f32", f"{name} #{k} at {size}")
        else:
            assert_close(got, want.numpy(), "f32", f"{name} at {size}")


def test_llama_layers_are_blocks(compiled: Compiled) -> None:
    """Each decoder layer is one ``llama_decoder_block`` labelled with its module path;
    the final norm and the head are blocks too; only the embedding is converted."""
    _, results, _ = compiled
    report = results["llama"].report
    assert {(b.kind, b.label) for b in report.blocks} == {
        ("llama_decoder_block", "m.model.layers.0"),
        ("llama_decoder_block", "m.model.layers.1"),
        ("rms_norm", "m.model.norm"), ("linear", "m.lm_head")}
    assert list(report.converted) == ["aten.embedding.default"]
    assert "blocks recognized: 4 (linear 1, llama_decoder_block 2, rms_norm 1)" in \
        report.summary()
    hir = str(results["llama"].module)
    assert len(re.findall(r'rlx_hir.llama_decoder_block".*loc\("m.model.layers.\d"\)',
                          hir)) == 2
    assert 'rlx_mir.gather"(%0, %arg0) {axis = 0 : i64, batch_dims = 0 : i64} : (tensor<128x64' \
        'xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32> loc("m.model.embed_tokens")' in hir


def test_llama_parts_without_the_layer_block() -> None:
    """Imported into a module of its own with a layer's SwiGLU result as a second output,
    layer 0 is its parts (RMSNorms, linears, RoPEs, causal GQA attention, SwiGLU)."""
    torch.manual_seed(0)
    ep, _, _ = _llama()
    out = next(n for n in ep.graph.nodes if n.op == "output")
    down = next(n for n in ep.graph.nodes if n.name == "linear_6")  # layer 0's down_proj
    out.args = ((*out.args[0], down),)
    ep.graph_signature.output_specs.append(type(ep.graph_signature.output_specs[0])(
        kind=ep.graph_signature.output_specs[0].kind,
        arg=type(ep.graph_signature.output_specs[0].arg)(name=down.name), target=None))
    blocks = import_program(ep).report.blocks
    layer0 = sorted(b.kind for b in blocks if b.label.startswith("m.model.layers.0"))
    assert layer0 == ["attention", "linear", "linear", "linear", "linear", "rms_norm",
                      "rms_norm", "rope", "rope", "swiglu"]
    attn = [b for b in blocks if b.kind == "attention"]
    assert [b.label for b in attn] == ["m.model.layers.0.self_attn"]


def test_bert_attention_takes_the_padding_mask(compiled: Compiled) -> None:
    """BERT's mask, however HF expands it, is the attention block's ``custom`` mask over
    the ``mask`` input; q / k / v / out and the MLP projections (GELU fused) are linear."""
    _, results, _ = compiled
    counts = results["bert"].report.block_counts()
    assert counts["attention"] == 2
    assert counts["linear"] == 12
    hir = str(results["bert"].module).split("func.func @bert(")[1].split("func.func @")[0]
    assert hir.count('mask = "custom"') == 2
    assert 'activation = "gelu"' in hir
    assert re.search(r'loc\("m.encoder.layer.1.attention.self"\)', hir)


def test_dynamic_dims_stay_dynamic(compiled: Compiled) -> None:
    _, results, _ = compiled
    inputs = {name: [str(v.type) for v in r.module.function(name).inputs]
              for name, r in results.items()}
    assert inputs["llama"] == ["tensor<1x?xi64>"]
    assert inputs["bert"] == ["tensor<?x?xi64>", "tensor<?x?xi64>"]
    assert inputs["resnet18"] == ["tensor<?x3x64x64xf32>"]
    assert inputs["lstm"] == ["tensor<?x5x8xf32>"]


def test_ops_are_labelled_with_module_paths(compiled: Compiled) -> None:
    """Every op made from the ResNet carries the module path of the node it came from (the
    node's name for the model's own ``torch.flatten``, which no submodule calls)."""
    from rlx.ir.locations import label_of

    ep = compiled[0]["resnet18"][0]
    paths = {p for n in ep.graph.nodes for p, _ in (n.meta.get("nn_module_stack") or {}
                                                      ).values()}
    imported = import_program(ep)   # held: its ops die with the module (MLIR bindings)
    ops = [op for op in imported.module.ops if not op.name.endswith((".param", ".constant"))]
    labels = {label_of(op.location) for op in ops}
    assert labels <= paths | {"flatten"}, labels - paths
    assert {"conv1", "layer1.0.conv1", "layer4.1.bn2", "layer2.0.downsample.0", "fc"} <= labels


# -- bad programs ------------------------------------------------------------------------


class Inner(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.cumprod(x, 1)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), Inner())

    def forward(self, x: Any) -> Any:
        return self.body(x)


def _error(program: Any) -> str:
    with pytest.raises(ModelImportError) as info:
        import_program(program, source="bad")
    assert isinstance(info.value, RlxError)
    assert info.value.__cause__ is None
    return str(info.value)


def test_unsupported_op_names_op_and_module_path() -> None:
    ep = torch.export.export(Outer().eval(), (torch.randn(2, 4),))
    assert _error(ep) == ("bad: error: node 'cumprod' (aten.cumprod.default) in module "
                          "'body.1': no rlx converter for this ATen op")


def test_unsupported_dtype_names_the_input() -> None:
    ep = torch.export.export(Outer().double().eval(), (torch.randn(2, 4, dtype=torch.float64),))
    message = _error(ep)
    assert message.startswith("bad: error: node 'linear' (aten.linear.default) in module "
                              "'body.0': input 'x': element type float64")


def test_data_dependent_size_is_refused() -> None:
    class Pick(nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.nonzero(x > 0) * 2

    message = _error(torch.export.export(Pick(), (torch.randn(5),)))
    assert "(aten.nonzero.default)" in message
    assert "depends on the data" in message


def test_new_converters_refuse_what_they_do_not_compute() -> None:
    """Indexing by a boolean mask (a data-dependent size, which the program's own sizes
    already say), ``torch.max`` along a dim (values and indices) and a 1-D convolution
    with ``padding="same"``: one error naming the node each."""

    class MaskPick(nn.Module):
        def forward(self, x: Any, i: Any) -> Any:
            return x[i > 0, :1] + 1

    class MaxDim(nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.max(x, 1).values

    message = _error(torch.export.export(MaskPick(), (torch.randn(4, 3), torch.randn(4))))
    assert "(aten.index.Tensor)" in message
    assert "depends on the data" in message
    message = _error(torch.export.export(MaxDim(), (torch.randn(4, 3),)))
    assert "aten.max.dim: only the elementwise form (two tensors) is supported" in message
    conv = nn.Conv1d(2, 2, 3, padding="same")
    message = _error(torch.export.export(conv, (torch.randn(1, 2, 8),)))
    assert "padding 'same' is not supported (give sizes)" in message


def test_not_a_program() -> None:
    assert "takes a torch.export.ExportedProgram" in _error(Outer())


def test_importing_rlx_does_not_import_torch() -> None:
    code = ("import sys, rlx, rlx.importers, rlx.compiler, rlx.runtime; "
            "assert 'torch' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_an_in_place_write_through_a_view_is_refused() -> None:
    """``y[:, :2].add_(1)`` changes ``y`` through a view, which the importer does not
    track: one error naming the op, not a module that ignores the write."""

    class ViewWrite(nn.Module):
        def forward(self, x: Any) -> Any:
            y = x * 2
            y[:, :2].add_(1)
            return y

    message = _error(torch.export.export(ViewWrite(), (torch.randn(3, 4),)))
    assert "node 'add_' (aten.add_.Tensor): an in-place op writing 'slice_1', a view" in message


def test_an_odd_height_fails_the_pixel_unshuffle(compiled: Compiled) -> None:
    """``pixel_unshuffle``'s ``H / 2`` over a dynamic ``H`` is checked at run time: an odd
    height fails the call naming the op (the compiled module takes any height: the
    derived dim ``2 * h`` of torch.export is a promise of the exporter's, not a check)."""
    _, _, program = compiled
    x = np.zeros((1, 3, 5, 6), np.float32)
    with pytest.raises(rlx.RlxError, match=r"'rlx_mir.reshape' \"pixel_unshuffle\": operand "
                                           r"'x' dim 2: expected a multiple of 2"):
        program["shuffles"](x=x)
