"""Whole LLaMA-shaped models from GGUF files: rlx (llvm-cpu) vs HF transformers eager vs
llama.cpp, prefill and decode tokens/s, in one run on the same files and thread count.

For each model shape (random weights, std 0.02, fixed seed) the script builds the HF model,
writes it as an F16 GGUF the way llama.cpp's converter does (``tests/hf_gguf.py``, with
a byte-level tokenizer so that llama.cpp loads it), and derives Q8_0, Q4_K_M and Q5_K_M files from
it with llama.cpp's ``llama-quantize`` (without llama.cpp: Q8_0 written by the ``gguf``
package, no Q4_K). Then, per format:

- rlx: ``rlx.models.llama.from_gguf`` compiled for llvm-cpu; prefill = one ``prefill`` call
  on a ``--prompt``-token prompt (host ids in, last logits out); decode = ``--gen`` decode
  greedy steps after a 1-token prompt (timed: the steps, not that prompt's prefill, as
  llama-bench times its ``tg`` run) through ``Generator.greedy``, as ``rlx.generate`` runs
  them: each step's token is the module's ``next`` output (argmax on the device), step
  n + 1 is queued before step n's token is read back, the KV cache stays on the device;
- HF transformers eager (f32; the same weights, not rounded), ``torch.set_num_threads``:
  the same prefill, and decode steps on HF's KV cache;
- llama.cpp: ``llama-bench -t THREADS -p PROMPT -n GEN -r 1`` on the same GGUF file, once
  in every round (so that a slow phase of a shared machine hits all three sides alike).

Quantized files run in each numerics mode of ``--modes`` (default both), as rows of their
own beside the same HF and llama.cpp timings: ``exact`` (f32 activations; rlx's default)
and ``q8`` (``activation_quant="q8"``: each decode GEMV's activations quantized to 8-bit
blocks and integer block dot products, the numerics llama.cpp's CPU backend uses). F16 rows
run exact only.

Prefill runs once per ``--prompt`` length (``pp128``, ``pp512``: llama-bench's ``-p 128,512``).
The 3B row (Llama-3.2-3B's shape) runs without HF eager by default (``--hf-models``: its f32
model does not fit beside the others in 23 GB). After the timed rounds each side's peak
resident memory is measured in a process of its own (:mod:`benchmarks.memory`; rlx loading
from the compile cache and running a prefill and decode, llama.cpp its llama-bench runs),
beside the file's size.

Reported: tokens/s (median of ``--rounds``), rlx/HF and rlx/llama.cpp as speed ratios
(above 1: rlx is faster), decode GB/s = weight bytes one decode token reads (every linear
weight as stored in the file, the LM head included; the embedding row and the KV cache are
negligible here) x tokens/s, and the dispatches one decode token runs (IREE stream
dispatches of the ``decode`` function).

Usage: ``python benchmarks/llama.py [--models tiny,135m,1b,3b] [--formats F16,Q8_0,Q4_K(,Q5_K)]
[--modes exact,q8] [--prompt 128,512] [--hf-models tiny,135m,1b] [--no-memory]
[--llama-cpp DIR] [--threads 2] [--json out.json]``. ``DIR`` holds
``llama-bench`` and ``llama-quantize`` (default ``$RLX_LLAMA_CPP`` or
``benchmarks/.cache/llama.cpp/build/bin``; ``benchmarks/build_llama_cpp.sh`` builds them).
Generated files go to ``benchmarks/.cache/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402
from tests.hf_gguf import write_gguf  # noqa: E402

import rlx.gguf  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from benchmarks.memory import rlx_peak, run_measured  # noqa: E402
from rlx.compiler import dispatch_counts  # noqa: E402
from rlx.generate import Generator  # noqa: E402
from rlx.lowering.registry import PREFILL_COLUMNS  # noqa: E402
from rlx.models import llama  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
SHAPES = {
    # name: hidden, layers, heads, kv heads, ffn, vocab, tied
    "tiny": (256, 2, 4, 2, 512, 512, False),
    "135m": (576, 30, 9, 3, 1536, 49152, True),   # SmolLM-135M
    "1b": (2048, 22, 32, 4, 5632, 32000, False),  # TinyLlama-1.1B
    "3b": (3072, 28, 24, 8, 8192, 128256, True),  # Llama-3.2-3B
}
ROPE_THETA = {"3b": 500000.0}
"""Shapes whose published config has another RoPE base than LLaMA's 10000 (Llama 3.2's
``rope_scaling`` stretches positions past 8192 only: the same values at these lengths)."""
HF_MODELS = ("tiny", "135m", "1b")
"""Shapes whose HF eager side runs by default (``--hf-models``): 3B's f32 model is 12.8 GB,
which beside rlx's and llama.cpp's does not fit the project's 23 GB machines; its GGUF is
written from an f16 model that is dropped before anything is timed."""
QUANTIZE_TYPES = {"Q8_0": "Q8_0", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}


def hf_model(shape: str, seed: int = 0, dtype: torch.dtype = torch.float32
             ) -> transformers.PreTrainedModel:
    hidden, layers, heads, kv, ffn, vocab, tied = SHAPES[shape]
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, intermediate_size=ffn,
        max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=tied,
        rope_theta=ROPE_THETA.get(shape, 10000.0), attn_implementation="eager")
    torch.manual_seed(seed)
    torch.set_default_dtype(dtype)
    try:
        return transformers.LlamaForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)


def gguf_files(shape: str, model: transformers.PreTrainedModel | None, formats: list[str],
               bindir: Path | None) -> dict[str, Path]:
    """The model as GGUF files per format: F16 written from HF, the others quantized from it
    by llama.cpp's ``llama-quantize`` (without llama.cpp: Q8_0 written directly, no Q4_K).
    ``model`` is read only to write a file that is not in the cache yet."""
    CACHE.mkdir(exist_ok=True)
    f16 = CACHE / f"llama-{shape}-F16.gguf"
    if not f16.exists():
        write_gguf(model, f16, "F16", vocab=True)
    files = {"F16": f16}
    for fmt in formats:
        if fmt == "F16":
            continue
        out = CACHE / f"llama-{shape}-{fmt}.gguf"
        if not out.exists():
            if bindir is not None:
                subprocess.run([str(bindir / "llama-quantize"), str(f16), str(out),
                                QUANTIZE_TYPES[fmt], "2"], check=True, capture_output=True)
            elif fmt == "Q8_0":
                write_gguf(model, out, "Q8_0", vocab=True)
            else:
                print(f"  {fmt}: skipped (needs llama.cpp's llama-quantize)", file=sys.stderr)
                continue
        files[fmt] = out
    return {k: v for k, v in files.items() if k in formats}


def decode_bytes(path: Path) -> int:
    """Weight bytes one decode token reads: every 2-D tensor but the embedding, plus the
    embedding when it is also the LM head (tied)."""
    with rlx.gguf.load(path) as f:
        sizes = {t.name: t.nbytes for t in f.tensors.values() if len(t.shape) == 2}
    tied = "output.weight" not in sizes
    return sum(n for name, n in sizes.items() if tied or name != "token_embd.weight")


def timed(fn: Callable[[], Any]) -> float:
    """Seconds of ``fn()``, or what it returns if it times itself (a decode run: its steps,
    not the one-token prefill that starts its cache). Starts after a pause: torch's OpenMP
    workers spin for a few ms after a call, and an rlx call timed right after an HF one
    shared the 2 cores with them (tiny prefill 4.5-5.5 ms alone, 7.6-8.1 ms right after HF)."""
    time.sleep(0.03)
    t0 = time.perf_counter()
    own = fn()
    return own if isinstance(own, float) else time.perf_counter() - t0


def prefill_phases(prompts: list[int], run: Callable[[list[int]], Any], ids: list[int]
                   ) -> dict[str, Callable[[], Any]]:
    """One prefill phase per prompt length: ``pp128`` runs ``run(ids[:128])``."""
    return {f"pp{n}": (lambda n=n: run(ids[:n])) for n in prompts}


def rlx_side(path: Path, prompt: list[int], gen: int, mode: str = "exact",
             prompts: list[int] | None = None) -> dict[str, Any]:
    model = llama.from_gguf(path)
    t0 = time.perf_counter()
    g = Generator(model, options=mode_options(mode))
    compile_s = time.perf_counter() - t0

    def decode() -> float:
        _, cache = g.prefill(prompt[:1])
        t0 = time.perf_counter()                 # the decode steps only (as llama-bench's tg)
        g.greedy(prompt[1], 1, cache, gen)
        return time.perf_counter() - t0

    counts = dispatch_counts(llama.build(model.config, functions=("decode",),
                                         context=model.context), **mode_options(mode))
    phases = prefill_phases(prompts or [len(prompt)], g.prefill, prompt)
    return {"prefill": lambda: g.prefill(prompt), **phases, "decode": decode,
            "compile_s": compile_s, "dispatches": counts.stream}


QUANT_MODES = ("exact", "q8")
"""rlx's numerics modes for quantized decode GEMVs: ``exact`` (f32 activations, within
dequant_matmul's f32 tolerance) and ``q8`` (``activation_quant="q8"``: activations
quantized to 8-bit blocks and integer block dot products, llama.cpp's numerics)."""


def mode_options(mode: str) -> dict[str, Any]:
    """The compile options of a numerics mode, ``/N`` after it: ``prefill_columns=N`` (an
    A/B of the exact prefill GEMM's column blocks, ``exact/16,exact/32``)."""
    base, _, columns = mode.partition("/")
    options: dict[str, Any] = {} if base == "exact" else {"activation_quant": base}
    return {**options, "prefill_columns": int(columns)} if columns else options


def modes_for(fmt: str, modes: list[str]) -> list[str]:
    """The modes that differ for a file format: ``q8`` only where the weights are
    quantized (F16 / F32 GEMVs have no quantized-activation form)."""
    return [m for m in modes if m.partition("/")[0] == "exact"
            or fmt not in ("F16", "F32", "BF16")]


def parse_modes(text: str) -> list[str]:
    modes = text.split(",")
    bad = [m for m in modes if m.partition("/")[0] not in QUANT_MODES
           or m.partition("/")[2] not in ("", *map(str, PREFILL_COLUMNS))]
    if bad or not modes:
        sys.exit(f"error: --modes: expected some of {', '.join(QUANT_MODES)}, each with "
                 f"/16 or /32 (prefill_columns) or not, found {text!r}")
    return modes


def format_label(row: dict[str, Any]) -> str:
    """A row's format cell: the file format, and the numerics mode where it is not exact."""
    mode = row.get("mode", "exact")
    return row["format"] if mode == "exact" else f"{row['format']} ({mode})"


def hf_side(model: transformers.PreTrainedModel, prompt: list[int], gen: int,
            prompts: list[int] | None = None) -> dict[str, Any]:
    ids = torch.tensor([prompt])

    def prefill(part: list[int] = prompt) -> None:
        with torch.no_grad():
            model(torch.tensor([part]), use_cache=True)

    def decode() -> float:
        with torch.no_grad():
            out = model(ids[:, :1], use_cache=True)
            t0 = time.perf_counter()             # the decode steps only
            for pos in range(1, gen + 1):
                out = model(ids[:, pos % len(prompt)].reshape(1, 1), cache=out.cache,
                            use_cache=True)
                out.logits[0, -1].argmax()
            return time.perf_counter() - t0

    return {"prefill": prefill, **prefill_phases(prompts or [len(prompt)], prefill, prompt),
            "decode": decode}


def llama_bench(bindir: Path, path: Path, threads: int, prompt: int | list[int], gen: int,
                reps: int, peak_mb: list[float] | None = None) -> dict[str, float]:
    """llama-bench's tokens/s: ``prefill`` and ``decode`` for one prompt length, ``pp<N>``
    per length and ``decode`` for a list; its peak resident memory appended to ``peak_mb``."""
    lengths = [prompt] if isinstance(prompt, int) else prompt
    stdout, mb = run_measured([str(bindir / "llama-bench"), "-m", str(path), "-t",
                               str(threads), "-p", ",".join(map(str, lengths)), "-n", str(gen),
                               "-r", str(reps), "-o", "json"])
    if peak_mb is not None:
        peak_mb.append(mb)
    out = {}
    for row in json.loads(stdout):
        n = row["n_prompt"]
        out[("prefill" if isinstance(prompt, int) else f"pp{n}") if n else "decode"] = float(
            row["avg_ts"])
    return out


def llama_cpp_version(bindir: Path) -> str:
    proc = subprocess.run([str(bindir / "llama-bench"), "--version"], capture_output=True,
                          text=True)
    return (proc.stdout + proc.stderr).strip().splitlines()[0]


def run(args: argparse.Namespace) -> dict[str, Any]:
    bindir = Path(args.llama_cpp) if args.llama_cpp else None
    if bindir is not None and not (bindir / "llama-bench").is_file():
        sys.exit(f"error: --llama-cpp {bindir}: no llama-bench there "
                 "(run benchmarks/build_llama_cpp.sh)")
    torch.set_num_threads(args.threads)
    prompt = [int(t) for t in np.random.default_rng(0).integers(3, 200, max(args.prompt))]
    rows = []
    for shape in args.models.split(","):
        print(f"{shape}: building and writing GGUF files", file=sys.stderr)
        with_hf = shape in args.hf_models.split(",")
        formats = args.formats.split(",")
        missing = any(not (CACHE / f"llama-{shape}-{f}.gguf").exists() for f in ["F16", *formats])
        hf = (hf_model(shape, dtype=torch.float32 if with_hf else torch.float16)
              if with_hf or missing else None)
        files = gguf_files(shape, hf, formats, bindir)
        hf_fns = hf_side(hf, prompt, args.gen, args.prompt) if with_hf else None
        del hf                                   # held by hf_fns where it is timed
        gc.collect()
        for fmt, path in files.items():
            rows += _format_rows(args, bindir, shape, fmt, path, prompt, hf_fns)
    return {"machine": f"{cpu_model()} ({platform.machine()}), {os.cpu_count()} cpus, load "
                       f"average {os.getloadavg()[0]:.1f} at the end, torch "
                       f"{torch.__version__}, transformers {transformers.__version__}",
            "llama_cpp": llama_cpp_version(bindir) if bindir is not None else None,
            "threads": args.threads, "prompts": args.prompt, "gen": args.gen,
            "rounds": args.rounds, "rows": rows}


def _format_rows(args: argparse.Namespace, bindir: Path | None, shape: str, fmt: str,
                 path: Path, prompt: list[int], hf_fns: dict[str, Any] | None
                 ) -> list[dict[str, Any]]:
    """One file's rows (one per numerics mode): every side timed in interleaved rounds,
    then each side's peak resident memory in a process of its own."""
    modes = modes_for(fmt, args.modes)
    phases = [f"pp{n}" for n in args.prompt] + ["decode"]
    print(f"{shape} {fmt}: compiling rlx ({', '.join(modes)})", file=sys.stderr)
    sides = {m: rlx_side(path, prompt, args.gen, m, args.prompt) for m in modes}
    rlx_t = {m: {ph: [] for ph in phases} for m in modes}
    hf_t: dict[str, list[float]] = {ph: [] for ph in phases}
    for phase in phases:                         # warm-up
        for side in sides.values():
            side[phase]()
        if hf_fns is not None:
            hf_fns[phase]()
    cpp_tps: dict[str, list[float]] = {ph: [] for ph in phases}
    cpp_peak: list[float] = []
    for _ in range(args.rounds):                 # interleaved: noise hits every side alike
        for phase in phases:
            for m, side in sides.items():
                rlx_t[m][phase].append(timed(side[phase]))
            if hf_fns is not None:
                hf_t[phase].append(timed(hf_fns[phase]))
        if bindir is not None:                   # one llama-bench repetition (after its warm-up)
            for phase, tps in llama_bench(bindir, path, args.threads, args.prompt, args.gen,
                                          1, cpp_peak).items():
                cpp_tps[phase].append(tps)
    cpp = {phase: statistics.median(v) for phase, v in cpp_tps.items() if v}
    nbytes = decode_bytes(path)
    rows = []
    for m, side in sides.items():
        row = {"model": shape, "format": fmt, "mode": m,
               "file_mb": path.stat().st_size / 1e6, "compile_s": side["compile_s"],
               "dispatches_per_token": side["dispatches"], "decode_weight_mb": nbytes / 1e6}
        for phase in phases:
            n = args.gen if phase == "decode" else int(phase[2:])
            row[f"rlx_{phase}_tps"] = n / statistics.median(rlx_t[m][phase])
            if hf_t[phase]:
                row[f"hf_{phase}_tps"] = n / statistics.median(hf_t[phase])
            if phase in cpp:
                row[f"llama_cpp_{phase}_tps"] = cpp[phase]
        row["rlx_decode_gbs"] = nbytes * row["rlx_decode_tps"] / 1e9
        if "llama_cpp_decode_tps" in row:
            row["llama_cpp_decode_gbs"] = nbytes * row["llama_cpp_decode_tps"] / 1e9
        rows.append(row)
    del sides
    for row in rows:
        if args.memory:
            mem = rlx_peak(path, row["mode"].partition("/")[0], max(args.prompt), args.gen)
            row["rlx_peak_mb"], row["rlx_steady_mb"] = mem["peak_mb"], mem["steady_mb"]
            row["rlx_encode_peak_mb"] = mem["encode_peak_mb"]   # a start that encodes
        if cpp_peak:
            row["llama_cpp_peak_mb"] = max(cpp_peak)
        print(_line(row), file=sys.stderr)
    return rows


def _line(row: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in row.items())


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def report(res: dict[str, Any]) -> str:
    prompts = res.get("prompts", [res.get("prompt")])
    phases = [f"pp{n}" for n in prompts] + ["decode"]
    lines = ["# LLaMA-shaped models from GGUF: rlx vs HF eager vs llama.cpp\n",
             f"Machine: {res['machine']}; llama.cpp: {res['llama_cpp'] or 'not run'}; "
             f"{res['threads']} threads everywhere; prefill of {' and '.join(map(str, prompts))}"
             f" tokens (ppN), decode {res['gen']} tokens; median of {res['rounds']} "
             f"interleaved rounds (llama.cpp: one llama-bench repetition in each round). Speed"
             f" ratios: above 1, rlx is faster. Peak resident memory: each side in a process "
             f"of its own, the KV cache sized to the longest prompt and the decode steps "
             f"(rlx: the model loaded from the compile cache and run; llama.cpp: its "
             f"llama-bench run).\n"]
    head = ["model", "format"]
    for phase in phases:
        head += [f"{phase} tok/s rlx / HF / llama.cpp", "rlx÷HF", "rlx÷llama.cpp"]
    head += ["decode GB/s rlx / llama.cpp", "peak MB rlx / llama.cpp (file)",
             "dispatches / token", "compile s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in res["rows"]:
        cells = [r["model"], format_label(r)]
        for phase in phases:
            rlx_, hf_, cpp = (r.get(f"{s}_{phase}_tps") for s in ("rlx", "hf", "llama_cpp"))
            cells += [" / ".join(f"{v:.0f}" if v else "n/a" for v in (rlx_, hf_, cpp)),
                      _ratio(rlx_, hf_), _ratio(rlx_, cpp)]
        cpp_gbs = r.get("llama_cpp_decode_gbs")
        peaks = " / ".join(f"{r[k]:.0f}" if k in r else "n/a"
                           for k in ("rlx_peak_mb", "llama_cpp_peak_mb"))
        cells += [f"{r['rlx_decode_gbs']:.1f} / " + (f"{cpp_gbs:.1f}" if cpp_gbs else "n/a"),
                  f"{peaks} ({r['file_mb']:.0f})", str(r["dispatches_per_token"]),
                  f"{r['compile_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def llama_cpp_bin() -> str | None:
    """The llama.cpp build the benchmarks run: ``$RLX_LLAMA_CPP``, else the one
    ``build_llama_cpp.sh`` leaves in the cache, else None (not run)."""
    built = CACHE / "llama.cpp/build/bin"
    return os.environ.get("RLX_LLAMA_CPP") or (
        str(built) if (built / "llama-bench").is_file() else None)


def run_and_report(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], Any],
                   report: Callable[[Any], str]) -> None:
    """A benchmark's command line: ``--json`` / ``--md`` added to ``p``; the results of
    ``run`` printed as ``report`` writes them, and saved where asked."""
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--md", help="also write the Markdown table here")
    args = p.parse_args()
    res = run(args)
    text = report(res)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if args.md:
        Path(args.md).write_text(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="tiny,135m")
    p.add_argument("--formats", default="F16,Q8_0,Q4_K")
    p.add_argument("--llama-cpp", default=llama_cpp_bin())
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=lambda t: [int(n) for n in t.split(",")],
                   default=[128, 512], help="prompt lengths of the prefill columns")
    p.add_argument("--hf-models", default=",".join(HF_MODELS),
                   help="shapes whose HF eager side runs (the rest: n/a)")
    p.add_argument("--no-memory", dest="memory", action="store_false",
                   help="skip the peak resident memory columns")
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", type=parse_modes, default=list(QUANT_MODES),
                   help="numerics modes of quantized rows (exact: f32 activations; q8: "
                        "activation_quant='q8'); F16 rows run exact only; a mode with /16 "
                        "or /32 compiles with prefill_columns=16 or 32")
    run_and_report(p, run, report)


if __name__ == "__main__":
    main()
