"""Compile rlx's GPU check suite into a bundle that ``tools/gpu_run.py`` runs on a machine with
a GPU and no compiler (README "Running on a GPU").

    python tools/gpu_bundle.py OUT_DIR --target cuda --target vulkan
        [--cuda-arch sm_90] [--vulkan-target ampere] [--suite full|small|models]
        [--formats Q4_K_M,Q8_0,F16] [--wheel download|none|PATH] [--debs download|none]

The suite (``full``):

- every module of ``tests/hir_zoo.py`` (every HIR op family and variant, the MIR escape
  hatch), run at two sizes of its dynamic dims (5 and 19) where it has any;
- the tiny LLaMA of ``examples/tiny_llama.py`` (2 layers): ``prefill`` of 8 tokens and one
  ``decode`` step on its cache; the same for a small Qwen3.5 (three Gated DeltaNet layers,
  one gated attention layer, a preallocated cache), its conv and delta states carried;
- decode GEMVs (``dequant_matmul``, M = 1) of Q8_0, Q4_K, Q5_K, Q6_K and Q4_0 weights,
  1024 x 2048, and the Q4_K one at M = 4;
- an LSTM (hidden 128) and a Gated DeltaNet (4 heads of 64, and of 128 as Qwen3.5's) over a
  dynamic sequence (16, 64);
- timed: a LLaMA block of TinyLlama-1.1B's shape (hidden 2048, 32 / 8 heads of 64, FFN 5632)
  at f32 and f16, prefill of 128 tokens and decode with a 512-token cache, and Q8_0 / Q4_K
  decode GEMVs of 11008 x 4096 (LLaMA-7B's FFN); their weights are made on the GPU machine.

``small`` (for the runner's test on the CPU, ``--target llvm-cpu``): two zoo modules, and
timed a decode step of a small f32 block and 64 x 512 Q8_0 / Q4_K GEMVs, and a small made
LLaMA model in Q4_K_M.

``models``: whole TinyLlama-1.1B-shaped LLaMA GGUF models in ``--formats``, their files
made from a seed on both machines (:mod:`gpu_models`), greedy tokens and the prompt's
logits from rlx on llvm-cpu as the reference, timed beside PyTorch eager.

Each check case stores its inputs, weights and float64 reference outputs (``rlx.reference``)
and the tolerance of each output's dtype (``rlx.reference.tolerance``).
A module that does not compile for a target is recorded with IREE's error (the runner
reports it) and the bundle is still made. The ``iree-base-runtime`` wheel for the GPU
machine's Python 3.12 is downloaded with pip (``--wheel``), and Debian's Vulkan loader
packages with apt (``--debs``; the runner unpacks them where the system has no loader). The
bundle must stay under ``MAX_BYTES`` (what one device call carries, with room for the tree).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from tests.hir_zoo import HIR_ZOO  # noqa: E402
from tests.hir_zoo import build as zoo_build  # noqa: E402
from tests.numerics.harness import make_inputs, make_params  # noqa: E402

import rlx  # noqa: E402
from gpu_run import BUNDLE_VERSION, MANIFEST, SCALE_FIELDS  # noqa: E402
from rlx.compiler import TargetConfig  # noqa: E402
from rlx.dialects.enums import QUANT_SCHEMES  # noqa: E402
from rlx.ir.diagnostics import CompileError  # noqa: E402
from rlx.models import llama, qwen35  # noqa: E402
from rlx.reference import evaluate  # noqa: E402
from rlx.reference.tolerance import TOLERANCES  # noqa: E402

MAX_BYTES = 48 * 2**20
RUNTIME_WHEEL = "iree-base-runtime==3.13.0"
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
DYN_SIZES = (5, 19)
BLOCK_1B = {"hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64, "ffn": 5632,
            "eps": 1e-5}
BLOCK_SMALL = {"hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128, "eps": 1e-5}
SMALL_ZOO = ("linear", "rope_neox")
QWEN_CONTEXT = 32


# --------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------


def block_module(c: dict[str, Any], dtype: str, seq: int, past: int) -> rlx.HirModule:
    """One LLaMA decoder layer (RMSNorm, q / k / v, NeoX RoPE, GQA causal attention over the
    cache and the new positions, o, residual, RMSNorm, SwiGLU, residual) in ``dtype``;
    with ``past`` the cache ``k_past`` / ``v_past`` is an input and the grown one an output
    (``gpu_run.torch_block`` is the same computation in PyTorch)."""
    e, hd, kv = c["hidden"], c["head_dim"], c["kv_heads"] * c["head_dim"]
    h = rlx.HirModule("llama_block")
    x = h.input("x", (1, seq, e), dtype)
    cos, sin = h.input("cos", (seq, hd // 2), dtype), h.input("sin", (seq, hd // 2), dtype)
    pasts = [h.input(n, (1, past, kv), dtype) for n in ("k_past", "v_past")] if past else []
    zeros = h.constant(np.zeros(e, np.float16 if dtype == "f16" else np.float32))

    def p(name: str, *shape: int) -> rlx.HirValue:
        return h.param(name, shape, dtype)

    n1 = h.rms_norm(x, p("ln1", e), zeros, c["eps"])
    q = h.rope(h.linear(n1, p("q", e, c["heads"] * hd)), cos, sin, hd)
    k = h.rope(h.linear(n1, p("k", e, kv)), cos, sin, hd)
    v = h.linear(n1, p("v", e, kv))
    if pasts:
        k = h.mir("concat", [pasts[0], k], axis=1)
        v = h.mir("concat", [pasts[1], v], axis=1)
    a = h.attention(q, k, v, num_heads=c["heads"], head_dim=hd, mask_kind="causal")
    x1 = h.mir("binary", [x, h.linear(a, p("o", c["heads"] * hd, e))], kind="add")
    n2 = h.rms_norm(x1, p("ln2", e), zeros, c["eps"])
    ffn = h.swiglu_ffn(n2, p("up", e, c["ffn"]), p("gate", e, c["ffn"]), p("down", c["ffn"], e))
    y = h.mir("binary", [x1, ffn], kind="add")
    h.set_outputs([y, k, v] if past else [y])
    return h


def gemv_module(scheme: str, n: int, k: int, m: int = 1) -> rlx.HirModule:
    h = rlx.HirModule(f"gemv_{scheme}")
    x = h.input("x", (m, k))
    w = h.param("w", (n, QUANT_SCHEMES[scheme].row_bytes(k)), "i8")
    h.set_outputs([h.dequant_matmul(x, w, scheme=scheme)])
    return h


def lstm_module(inp: int, hid: int) -> rlx.HirModule:
    h = rlx.HirModule("lstm")
    x = h.input("x", (1, None, inp))
    h.set_outputs([h.lstm(x, h.param("wih", (4 * hid * inp,)), h.param("whh", (4 * hid, hid)),
                          h.param("b", (4 * hid,)), hid)])
    return h


def gdn_module(heads: int, dim: int) -> rlx.HirModule:
    h = rlx.HirModule("gdn")
    q, k, v = (h.input(n, (1, None, heads, dim)) for n in "qkv")
    g, beta = h.input("g", (1, None, heads)), h.input("beta", (1, None, heads))
    h.set_outputs([h.gated_delta_net(q, k, v, g, beta, dim)])
    return h


def tiny_llama() -> tuple[llama.LlamaConfig, rlx.HirModule, dict[str, np.ndarray]]:
    c = llama.LlamaConfig(vocab_size=256, hidden_size=128, num_layers=2, num_heads=4,
                          num_kv_heads=2, head_dim=32, intermediate_size=344)
    rng = np.random.default_rng(0)
    weights = {}
    for name, shape in llama.param_shapes(c).items():
        scale = 1.0 if name == "embed" else 1.0 / np.sqrt(shape[0])
        weights[name] = ((1.0 + 0.1 * rng.standard_normal(shape)) if len(shape) == 1 else
                         rng.standard_normal(shape) * scale).astype(np.float32)
    return c, llama.build(c), weights


def tiny_qwen35() -> tuple[qwen35.Qwen35Config, rlx.HirModule, dict[str, np.ndarray]]:
    """Qwen3.5's hybrid trunk, small: three Gated DeltaNet layers (2 key / 4 value heads of
    64) and one gated full-attention layer (GQA 4 / 2, heads of 32, partial RoPE), a KV cache
    preallocated to 32 positions."""
    c = qwen35.Qwen35Config(
        vocab_size=256, hidden_size=128, layer_types=("linear_attention",) * 2 + (
            "full_attention", "linear_attention"), num_heads=4, num_kv_heads=2, head_dim=32,
        intermediate_size=256, linear_k_heads=2, linear_v_heads=4, linear_head_dim=64,
        n_rot=16)
    rng = np.random.default_rng(1)
    weights = {n: (0.1 * rng.standard_normal(s) if len(s) == 1 else
                   rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
               for n, s in qwen35.param_shapes(c).items()}
    return c, qwen35.build(c, context=QWEN_CONTEXT), weights


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------


class Bundle:
    """The bundle being written: compiled modules (one vmfb per module and target), data
    files and the manifest's cases."""

    def __init__(self, out: Path, targets: dict[str, dict[str, Any]]) -> None:
        self.out, self.targets = out, targets
        self.cases: list[dict[str, Any]] = []
        self._compiled: dict[str, tuple[dict[str, str], dict[str, str]]] = {}

    def compile(self, key: str, h: rlx.HirModule) -> tuple[dict[str, str], dict[str, str]]:
        """vmfb paths (relative) and compile errors per target, compiled once per key."""
        if key in self._compiled:
            return self._compiled[key]
        paths, errors = {}, {}
        for target, options in self.targets.items():
            rel = f"{target}/{key}.vmfb"
            (self.out / target).mkdir(exist_ok=True)
            t = time.perf_counter()
            try:
                rlx.compile(h, target, output=self.out / rel, **options)
                paths[target] = rel
            except CompileError as e:
                errors[target] = "\n".join(str(e).splitlines()[:4])
            print(f"  {target:8s} {key:40s} {time.perf_counter() - t:5.1f} s "
                  f"{'FAILED' if target in errors else ''}", flush=True)
        self._compiled[key] = (paths, errors)
        return paths, errors

    def cpu_vmfb(self, paths: dict[str, str]) -> bytes | None:
        """The bundle's llvm-cpu vmfb of a case where it was compiled with the default
        options (what the reference would compile again), else None."""
        if self.targets.get("llvm-cpu") != {} or "llvm-cpu" not in paths:
            return None
        return (self.out / paths["llvm-cpu"]).read_bytes()

    def save(self, rel: str, arrays: dict[str, np.ndarray]) -> str:
        (self.out / rel).parent.mkdir(exist_ok=True)
        np.savez(self.out / rel, **arrays)
        return rel

    def check(self, name: str, h: rlx.HirModule, feeds: list[dict[str, np.ndarray]],
              weights: dict[str, np.ndarray], function: str = "main",
              key: str | None = None) -> list[list[np.ndarray]]:
        """A numerics case: the module compiled, each input set with its reference outputs;
        returns the references."""
        paths, errors = self.compile(key or name, h)
        runs, wants = [], []
        for i, f in enumerate(feeds):
            want = evaluate(h, f, weights, function=None if function == "main" else function)
            wants.append(want)
            runs.append({"inputs": self.save(f"data/{name}.{i}.in.npz", f),
                         "want": self.save(f"data/{name}.{i}.want.npz", {
                             f"out{j}": _as_reference(w) for j, w in enumerate(want)})})
        self.cases.append({
            "name": name, "kind": "check", "function": function, "vmfb": paths,
            "compile_errors": errors, "runs": runs, "out_dtypes": [_dtype(w) for w in wants[0]],
            "weights": self.save(f"data/{name}.weights.npz", weights) if weights else None,
            "tolerances": _tolerances()})
        return wants

    def timed(self, name: str, h: rlx.HirModule, spec: dict[str, Any], seed: int,
              schemes: dict[str, str] | None = None) -> None:
        paths, errors = self.compile(name, h)
        self.cases.append({"name": name, "kind": "time", "vmfb": paths, "compile_errors": errors,
                           "weights": None, "schemes": schemes or {}, "seed": seed,
                           "time": spec, "tolerances": _tolerances()})


def _as_reference(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a


def _dtype(a: np.ndarray) -> str:
    return {"float32": "f32", "float16": "f16", "float64": "f64", "bool": "i1", "int8": "i8",
            "int32": "i32", "int64": "i64", "uint16": "bf16"}.get(a.dtype.name, a.dtype.name)


def _tolerances() -> dict[str, list[float]]:
    return {str(d): list(t) for d, t in TOLERANCES.items()}


def _dynamic(h: rlx.HirModule) -> bool:
    return any(d is None for v in h.inputs for d in v.type.shape)


def add_zoo(b: Bundle, names: list[str]) -> None:
    for name in names:
        h = zoo_build(name)
        rng = np.random.default_rng(len(name))
        weights = make_params(h, rng)
        sizes = DYN_SIZES if _dynamic(h) else DYN_SIZES[:1]
        b.check(f"zoo_{name}", h, [make_inputs(h, rng, dyn) for dyn in sizes], weights)


def add_tiny_llama(b: Bundle) -> None:
    c, h, weights = tiny_llama()
    prompt = np.array([[1, 17, 42, 7, 99, 3, 250, 64]], np.int32)
    cos, sin = llama.rope_tables(c, range(prompt.shape[1]))
    pre = {"ids": prompt, "cos": cos, "sin": sin,
           "last": np.array([[prompt.shape[1] - 1]], np.int32)}
    want = b.check("tiny_llama_prefill", h, [pre], weights, "prefill", key="tiny_llama")[0]
    cos1, sin1 = llama.rope_tables(c, [prompt.shape[1]])
    step = {"ids": want[1].reshape(1, 1).astype(np.int32), "cos": cos1, "sin": sin1}
    for i in range(c.num_layers):
        step[f"k_{i}"], step[f"v_{i}"] = want[2 + 2 * i], want[3 + 2 * i]
    b.check("tiny_llama_decode", h, [step], weights, "decode", key="tiny_llama")


def add_tiny_qwen35(b: Bundle) -> None:
    c, h, weights = tiny_qwen35()
    prompt = np.array([[5, 80, 13, 200, 7, 31, 2, 99, 150]], np.int32)
    names = qwen35.state_names(c, QWEN_CONTEXT)
    state = dict(zip(names, qwen35.initial_state(c, QWEN_CONTEXT), strict=True))
    cos, sin = qwen35.rope_tables(c, range(prompt.shape[1]))
    pre = {"ids": prompt, "cos": cos, "sin": sin,
           "last": np.array([[prompt.shape[1] - 1]], np.int32), **state}
    want = b.check("tiny_qwen35_prefill", h, [pre], weights, "prefill", key="tiny_qwen35")[0]
    cos1, sin1 = qwen35.rope_tables(c, [prompt.shape[1]])
    step = {"ids": want[1].reshape(1, 1).astype(np.int32), "cos": cos1, "sin": sin1,
            **dict(zip(names, want[2:], strict=True))}
    b.check("tiny_qwen35_decode", h, [step], weights, "decode", key="tiny_qwen35")


def add_quant_and_scans(b: Bundle) -> None:
    rng = np.random.default_rng(7)
    n, k = 1024, 2048
    for scheme in ("gguf_q8_0", "gguf_q4_k", "gguf_q5_k", "gguf_q6_k", "gguf_q4_0"):
        h = gemv_module(scheme, n, k)
        w = _gguf_bytes(scheme, n, k, rng)
        b.check(f"gemv_{scheme}_{n}x{k}", h, [{"x": rng.standard_normal((1, k), np.float32)}],
                {"w": w})
    m, scheme = 4, "gguf_q4_k"                      # a few rows: the dequant feeds a GEMM
    b.check(f"gemm_{scheme}_{m}x{n}x{k}", gemv_module(scheme, n, k, m),
            [{"x": rng.standard_normal((m, k), np.float32)}], {"w": _gguf_bytes(scheme, n, k, rng)})
    hid, heads = 128, 4
    h = lstm_module(32, hid)
    b.check(f"lstm_{hid}", h, [make_inputs(h, rng, s) for s in (16, 64)], make_params(h, rng))
    for dim in (64, 128):                               # 128: Qwen3.5's heads
        h = gdn_module(heads, dim)
        feeds = []
        for s in (16, 64):
            f = make_inputs(h, rng, s)
            f["g"] = -np.abs(f["g"]) * 0.1                # decays in (0, 1]: exp(g)
            f["beta"] = 1 / (1 + np.exp(-f["beta"]))
            for n_ in "qk":
                f[n_] = f[n_] / np.linalg.norm(f[n_], axis=-1, keepdims=True)
            feeds.append({k_: v.astype(np.float32) for k_, v in f.items()})
        b.check(f"gated_delta_net_{heads}x{dim}", h, feeds, {})


def _gguf_bytes(scheme: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Random GGUF blocks with sane f16 scales (:data:`gpu_run.SCALE_FIELDS`)."""
    q = QUANT_SCHEMES[scheme]
    raw = rng.integers(0, 256, (n, k // q.block_elems, q.block_bytes), dtype=np.uint8)
    for at, value in SCALE_FIELDS[scheme][1].items():
        raw[..., at:at + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return raw.reshape(n, -1).view(np.int8)


def add_timed(b: Bundle, small: bool) -> None:
    c = BLOCK_SMALL if small else BLOCK_1B
    seq, past = (16, 32) if small else (128, 512)
    for dtype in ("f32",) if small else ("f32", "f16"):
        if not small:
            b.timed(f"llama_block_prefill_{dtype}", block_module(c, dtype, seq, 0),
                    {"kind": "block", "config": c, "dtype": dtype, "seq": seq, "past": 0}, 11)
        b.timed(f"llama_block_decode_{dtype}", block_module(c, dtype, 1, past),
                {"kind": "block", "config": c, "dtype": dtype, "seq": 1, "past": past}, 12)
    n, k = (64, 512) if small else (11008, 4096)
    for scheme in ("gguf_q8_0", "gguf_q4_k"):
        b.timed(f"gemv_{scheme}_{n}x{k}_time", gemv_module(scheme, n, k),
                {"kind": "gemv", "scheme": scheme, "n": n, "k": k}, 13, {"w": scheme})


def add_models(b: Bundle, small: bool, formats: list[str]) -> None:
    """Whole LLaMA models from made GGUF files (:mod:`gpu_models`): each compiled for the
    bundle's targets through ``from_gguf``, its reference (the prompt's last logits and the
    greedy tokens) from rlx on llvm-cpu, and the map from its parameters to the file's
    tensors, checked here to remake every weight bit for bit."""
    import tempfile

    import gpu_models

    c = gpu_models.LLAMA_SMALL if small else gpu_models.LLAMA_1B
    prompt, steps, seed = (8, 8, 21) if small else (128, 32, 21)
    size = "small" if small else "1b"
    for fmt in formats:
        name = f"llama_{size}_{fmt}"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.gguf"
            gpu_models.write_gguf(path, c, fmt, seed)
            model = llama.from_gguf(path, context=prompt + steps)
            params = gpu_models.param_sources(model.weights)
            case = {"name": name, "kind": "model", "config": c, "format": fmt, "seed": seed,
                    "params": params, "tolerance": list(TOLERANCES[rlx.DType.F32])}
            remade = gpu_models.model_weights(case)
            for pname, want in model.weights.items():
                if not np.array_equal(remade[pname], want):
                    raise SystemExit(f"error: {name}: weight '{pname}' is not remade "
                                     "from its seed")
            del remade
            paths, errors = b.compile(name, model.module)
            ref = rlx.runtime.load(b.cpu_vmfb(paths) or rlx.compile(model.module, "llvm-cpu"),
                                   "local-task", model.weights)
            ids = np.random.default_rng(seed).integers(0, c["vocab"], (1, prompt),
                                                       dtype=np.int32)
            cos, sin = model.rope_tables(range(prompt + steps))
            logits, tokens = gpu_models.generate(ref, ids, cos, sin, steps)
            del ref, model
        case.update(vmfb=paths, compile_errors=errors, data=b.save(
            f"data/{name}.npz", {"ids": ids, "cos": cos, "sin": sin, "logits": logits,
                                 "tokens": np.asarray(tokens, np.int32)}))
        b.cases.append(case)


# --------------------------------------------------------------------------------------
# What the GPU machine cannot fetch: the runtime wheel, the Vulkan loader
# --------------------------------------------------------------------------------------


def fetch_wheel(out: Path, how: str, notes: list[str]) -> None:
    if how == "none":
        return
    dest = out / "wheels"
    dest.mkdir(exist_ok=True)
    if how != "download":
        shutil.copy(how, dest)
        return
    platforms = [a for p in WHEEL_PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    *platforms, "-d", str(dest), RUNTIME_WHEEL], check=True)
    notes.append(f"wheel: {', '.join(p.name for p in dest.glob('*.whl'))}")


VULKAN_DEBS = ("libvulkan1", "libglvnd0", "libegl1", "libgl1", "libglx0", "libopengl0",
               "libgles2")
"""Debian's Vulkan loader, and the GL vendor-neutral libraries NVIDIA's Vulkan driver
(``libGLX_nvidia``) links: with the loader alone, ``vkCreateInstance`` answers
``VK_ERROR_INCOMPATIBLE_DRIVER`` on an H200 machine without them (seen 2026-12-04)."""


def fetch_debs(out: Path, how: str, notes: list[str]) -> None:
    """Debian's packages of :data:`VULKAN_DEBS`, for a GPU machine without a loader."""
    if how == "none":
        return
    dest = out / "debs"
    dest.mkdir(exist_ok=True)
    proc = subprocess.run(["apt-get", "download", *VULKAN_DEBS], cwd=dest, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        notes.append(f"no Vulkan loader packages (apt-get download {' '.join(VULKAN_DEBS)}: "
                     f"{proc.stderr.strip()[:200]})")


def _size(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "python"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return proc.stdout.strip() + (" (modified)" if dirty else "")


def target_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    per = {"cuda": {"cuda_arch": args.cuda_arch}, "vulkan": {"vulkan_target": args.vulkan_target},
           "llvm-cpu": {}, "rocm": {}}
    return {t: per[t] for t in args.target}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--target", action="append", choices=("cuda", "vulkan", "llvm-cpu"),
                   required=True)
    p.add_argument("--cuda-arch", default="sm_90")
    p.add_argument("--vulkan-target", default="ampere",
                   help="IREE's Vulkan target (NVIDIA Hopper runs 'ampere' code)")
    p.add_argument("--suite", choices=("full", "small", "models"), default="full",
                   help="models: whole 1B-shaped LLaMA GGUF models only (--formats)")
    p.add_argument("--formats", default="Q4_K_M,Q8_0,F16",
                   help="GGUF formats of the model cases (of F16, Q8_0, Q4_K_M)")
    p.add_argument("--wheel", default="download", help="download (default), none, or a path")
    p.add_argument("--debs", choices=("download", "none"), default="download")
    args = p.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    options = target_options(args)
    b = Bundle(args.out, options)
    small = args.suite == "small"
    if args.suite == "models":
        add_models(b, False, args.formats.split(","))
    else:
        add_zoo(b, list(SMALL_ZOO) if small else list(HIR_ZOO))
    if args.suite == "full":
        add_tiny_llama(b)
        add_tiny_qwen35(b)
        add_quant_and_scans(b)
    if args.suite != "models":
        add_timed(b, small)
    if small:
        add_models(b, True, ["Q4_K_M"])
    notes: list[str] = []
    fetch_wheel(args.out, args.wheel, notes)
    if "vulkan" in options:
        fetch_debs(args.out, args.debs, notes)
    manifest = {"version": BUNDLE_VERSION, "made": time.strftime("%Y-%m-%d %H:%M:%S"),
                "rlx_commit": _commit(), "notes": notes, "cases": b.cases,
                "targets": {t: {"flags": TargetConfig(target=t, **o).flags()}
                            for t, o in options.items()}}
    (args.out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    size = _size(args.out)
    failed = [f"{c['name']} ({t})" for c in b.cases for t in c["compile_errors"]]
    print(f"{args.out}: {len(b.cases)} cases, {size / 2**20:.1f} MiB"
          + (f"; did not compile: {', '.join(failed)}" if failed else ""))
    if size > MAX_BYTES:
        print(f"error: the bundle is {size / 2**20:.1f} MiB, over {MAX_BYTES / 2**20:.0f} MiB",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
