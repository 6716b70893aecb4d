"""Small ONNX models for the importer tests, built with ``onnx.helper``, and a helper that
imports several into one HIR module (one compile), runs them, and runs ONNX Runtime on the
same models as the oracle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rlx
from compile_parts import Programs, compile_parts, split
from rlx.importers.onnx import ImportReport, OnnxImport, import_model

F = TensorProto.FLOAT
OPSET = 18


def rand(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], inits: Sequence[onnx.TensorProto] = (),
          opset: int = OPSET, name: str = "g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def vi(name: str, shape: Sequence[int | str | None] | None, elem: int = F
       ) -> onnx.ValueInfoProto:
    """A tensor value info (``shape=None``: rank unknown)."""
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


# --------------------------------------------------------------------------------------
# Block-shaped graphs (what torch.onnx.export writes for HF-style modules)
# --------------------------------------------------------------------------------------


def linear_graph(rng: np.random.Generator, act: str | None, bias: bool = True
                 ) -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="fc/MatMul")]
    last = "mm"
    if bias:
        nodes.append(helper.make_node("Add", ["mm", "b"], ["biased"], name="fc/Add"))
        last = "biased"
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", [last], ["sig"], name="act/Sigmoid"),
                  helper.make_node("Mul", [last, "sig"], ["y"], name="act/Mul")]
    elif act is not None:
        extra = {"approximate": "tanh"} if act == "GeluTanh" else {}
        nodes.append(helper.make_node("Gelu" if act == "GeluTanh" else act, [last], ["y"],
                                      name=f"act/{act}", **extra))
    else:
        nodes[-1].output[0] = "y"
    inits = [init("w", rand(rng, 16, 12, scale=0.25)), init("b", rand(rng, 12))]
    return model(nodes, [vi("x", ["batch", 5, 16])], [vi("y", ["batch", 5, 12])],
                 inits[:2 if bias else 1], opset=20)


def rms_norm_graph(rng: np.random.Generator, gamma: bool = True, div: bool = False
                   ) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Pow", ["x", "two"], ["sq"], name="norm/Pow"),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="norm/ReduceMean",
                         keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"], name="norm/Add"),
        helper.make_node("Sqrt", ["mse"], ["rms"], name="norm/Sqrt"),
    ]
    if div:
        nodes.append(helper.make_node("Div", ["x", "rms"], ["normed"], name="norm/Div"))
    else:
        nodes += [helper.make_node("Reciprocal", ["rms"], ["inv"], name="norm/Reciprocal"),
                  helper.make_node("Mul", ["x", "inv"], ["normed"], name="norm/Mul")]
    if gamma:
        nodes.append(helper.make_node("Mul", ["g", "normed"], ["y"], name="norm/Scale"))
    else:
        nodes[-1].output[0] = "y"
    inits = [init("two", np.float32(2.0)), init("axes", np.array([-1], np.int64)),
             init("eps", np.float32(1e-5)), init("g", rand(rng, 32))]
    return model(nodes, [vi("x", [2, "seq", 32])], [vi("y", [2, "seq", 32])],
                 inits if gamma else inits[:3])


def swiglu_graph(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["x", "wg"], ["g"], name="mlp/gate"),
        helper.make_node("Sigmoid", ["g"], ["sg"], name="mlp/Sigmoid"),
        helper.make_node("Mul", ["g", "sg"], ["silu"], name="mlp/silu"),
        helper.make_node("MatMul", ["x", "wu"], ["u"], name="mlp/up"),
        helper.make_node("Mul", ["silu", "u"], ["h"], name="mlp/Mul"),
        helper.make_node("MatMul", ["h", "wd"], ["y"], name="mlp/down"),
    ]
    inits = [init("wg", rand(rng, 16, 40, scale=0.25)), init("wu", rand(rng, 16, 40, scale=0.25)),
             init("wd", rand(rng, 40, 16, scale=0.2))]
    return model(nodes, [vi("x", [1, "seq", 16])], [vi("y", [1, "seq", 16])], inits)


def rope_tables(seq: int, hd: int) -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    freqs = np.outer(np.arange(seq), inv)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return (np.cos(emb).astype(np.float32)[None, None],
            np.sin(emb).astype(np.float32)[None, None])


def rope_graph(heads: int = 3, seq: int = 6, hd: int = 8) -> onnx.ModelProto:
    """HF's apply_rotary_pos_emb on ``[B, S, H, hd]`` transposed to ``[B, H, S, hd]``."""
    cos, sin = rope_tables(seq, hd)
    half = hd // 2
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], name="attn/transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["xt", "cos"], ["xc"], name="rope/mul_cos"),
        helper.make_node("Slice", ["xt", "zero", "half", "last"], ["x1"], name="rope/slice1"),
        helper.make_node("Slice", ["xt", "half", "big", "last"], ["x2"], name="rope/slice2"),
        helper.make_node("Neg", ["x2"], ["nx2"], name="rope/neg"),
        helper.make_node("Concat", ["nx2", "x1"], ["rot"], name="rope/cat", axis=-1),
        helper.make_node("Mul", ["rot", "sin"], ["rs"], name="rope/mul_sin"),
        helper.make_node("Add", ["xc", "rs"], ["y"], name="rope/add"),
    ]
    inits = [init("cos", cos), init("sin", sin), init("zero", np.array([0], np.int64)),
             init("half", np.array([half], np.int64)),
             init("big", np.array([2**62], np.int64)), init("last", np.array([-1], np.int64))]
    return model(nodes, [vi("x", [2, seq, heads, hd])], [vi("y", [2, heads, seq, hd])], inits)


def attention_graph(rng: np.random.Generator, *, heads: int = 4, kv_heads: int = 2,
                    seq: int = 6, hd: int = 8, mask: str = "causal", scale: str = "mul"
                    ) -> onnx.ModelProto:
    """Eager attention over ``[B, H, S, hd]`` with HF's repeat_kv for GQA."""
    rep = heads // kv_heads
    nodes = []
    inits = [init("unsq_axis", np.array([2], np.int64)),
             init("expand_to", np.array([1, kv_heads, rep, seq, hd], np.int64)),
             init("merge", np.array([1, heads, seq, hd], np.int64))]
    for t in ("k", "v"):
        nodes += [helper.make_node("Unsqueeze", [t, "unsq_axis"], [f"{t}u"], name=f"{t}/unsq"),
                  helper.make_node("Expand", [f"{t}u", "expand_to"], [f"{t}e"],
                                   name=f"{t}/expand"),
                  helper.make_node("Reshape", [f"{t}e", "merge"], [f"{t}r"], name=f"{t}/view")]
    nodes += [helper.make_node("Transpose", ["kr"], ["kt"], name="attn/kT", perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["qk"], name="attn/qk")]
    scores = "qk"
    if scale == "mul":
        nodes.append(helper.make_node("Mul", ["qk", "scale"], ["sc"], name="attn/scale"))
        inits.append(init("scale", np.float32(hd ** -0.5)))
        scores = "sc"
    elif scale == "div_custom":
        nodes.append(helper.make_node("Div", ["qk", "scale"], ["sc"], name="attn/scale"))
        inits.append(init("scale", np.float32(3.0)))
        scores = "sc"
    if mask != "none":
        nodes.append(helper.make_node("Add", [scores, "mask"], ["masked"], name="attn/mask"))
        scores = "masked"
        if mask == "causal":
            m = np.triu(np.full((seq, seq), np.finfo(np.float32).min, np.float32), 1)
        else:
            m = rand(rng, seq, seq)
        inits.append(init("mask", m[None, None]))
    nodes += [helper.make_node("Softmax", [scores], ["p"], name="attn/softmax", axis=-1),
              helper.make_node("MatMul", ["p", "vr"], ["o"], name="attn/pv")]
    return model(nodes, [vi("q", [1, heads, seq, hd]), vi("k", [1, kv_heads, seq, hd]),
                         vi("v", [1, kv_heads, seq, hd])], [vi("o", [1, heads, seq, hd])],
                 inits)


# --------------------------------------------------------------------------------------
# Running through rlx and ONNX Runtime
# --------------------------------------------------------------------------------------


@dataclass
class Ran:
    name: str
    got: list[np.ndarray]
    want: list[np.ndarray]
    report: ImportReport
    hir: str


def ort_run(m: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return list(session.run(None, dict(feeds)))


def compile_together(models: Mapping[str, onnx.ModelProto | Path], name: str = "onnx_models",
                     *, blocks: bool = True) -> tuple[dict[str, OnnxImport], Programs]:
    """Import the models into :data:`.compile_parts.PARTS` HIR modules of about equal size
    (ONNX nodes; function ``key`` each, its parameters prefixed ``key.``), compile them for
    llvm-cpu at once and load them: the imports and ``program[key]``, each model's
    function."""
    sizes = {key: len((m if isinstance(m, onnx.ModelProto) else
                       onnx.load(str(m), load_external_data=False)).graph.node)
             for key, m in models.items()}
    results: dict[str, OnnxImport] = {}
    parts = []
    for i, keys in enumerate(split(sizes)):
        h = rlx.HirModule(f"{name}_{i}")
        params: dict[str, np.ndarray] = {}
        for key in keys:
            m = models[key]
            source = None if isinstance(m, Path) else f"{key}.onnx"
            results[key] = import_model(m, module=h, function=key, blocks=blocks,
                                        param_prefix=f"{key}.", source=source)
            params.update(results[key].params)
        parts.append((h, params, keys))
    return results, compile_parts(parts)


def run_models(cases: Mapping[str, tuple[onnx.ModelProto, Mapping[str, np.ndarray]]],
               *, blocks: bool = True) -> dict[str, Ran]:
    """Import every model into one HIR module (one function each), compile once for
    llvm-cpu, run each function, and run ONNX Runtime on the same model and inputs."""
    results, program = compile_together({k: m for k, (m, _) in cases.items()},
                                        blocks=blocks)
    out = {}
    for name, (m, feeds) in cases.items():
        got = program[name](**feeds)
        out[name] = Ran(name, list(got) if isinstance(got, tuple) else [got],
                        ort_run(m, feeds), results[name].report, str(results[name].module))
    return out
