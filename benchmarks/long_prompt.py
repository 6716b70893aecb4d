"""Prefill speed as prompts grow: rlx (llvm-cpu) beside llama.cpp at prompts of 128, 512,
1024 and 2048 tokens, on the same GGUF file and thread count, in one run.

For each length ``n`` the sides prefill a random ``n``-token prompt:

- rlx: ``from_gguf(path, context=max length)`` (the preallocated KV cache, the default
  form), one ``Generator.prefill`` call: the prompt's logits and its K / V written into the
  cache. Attention runs in rlx's prefill kernel (``mir_to_linalg/prefill_attention.py``);
- with ``--decomposed``, the same model compiled with ``attention_kernel=False`` (the
  decomposed attention, which materializes every score; what rlx ran before the kernel).
  Slow on long prompts (85 s for 2048 tokens of the 135M model): off by default;
- llama.cpp: ``llama-bench -p N -n 0 -r 1`` (its ``pp`` test), once in every round.

Reported: tokens/s (median of ``--rounds``, interleaved), rlx / llama.cpp as a speed ratio
(above 1: rlx is faster). Every side is warmed up with each length once first.

Usage: ``python benchmarks/long_prompt.py [--model 135m] [--format Q8_0]
[--lengths 128,512,1024,2048] [--rounds 3] [--decomposed] [--json F] [--md F]``; the GGUF
files and llama.cpp are those of ``benchmarks/llama.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.llama import (
    gguf_files,
    hf_model,
    llama_cpp_bin,
    llama_cpp_version,
    run_and_report,
)
from benchmarks.long_context import _get, _ratio
from benchmarks.machine import cpu_model
from rlx.generate import Generator
from rlx.models import llama


def rlx_prefill(path: Path, context: int, **options: Any) -> Callable[[list[int]], float]:
    """A function ``prompt -> seconds of one prefill of it``."""
    g = Generator(llama.from_gguf(path, context=context), options=options)

    def run(prompt: list[int]) -> float:
        t0 = time.perf_counter()
        g.prefill(prompt)
        return time.perf_counter() - t0

    return run


def llama_bench_prompt(bindir: Path, path: Path, threads: int, length: int) -> float:
    proc = subprocess.run([str(bindir / "llama-bench"), "-m", str(path), "-t", str(threads),
                           "-p", str(length), "-n", "0", "-r", "1", "-o", "json"],
                          capture_output=True, text=True, check=True)
    return float(json.loads(proc.stdout)[0]["avg_ts"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    bindir = Path(args.llama_cpp) if args.llama_cpp else None
    lengths = [int(n) for n in args.lengths.split(",")]
    path = gguf_files(args.model, hf_model(args.model), [args.format], bindir)[args.format]
    rng = np.random.default_rng(0)
    sides = {"rlx": rlx_prefill(path, max(lengths))}
    if args.decomposed:
        sides["rlx_decomposed"] = rlx_prefill(path, max(lengths), attention_kernel=False)
    times: dict[str, dict[int, list[float]]] = {s: {n: [] for n in lengths}
                                                 for s in [*sides, "llama_cpp"]}
    for n in lengths:   # warm-up: every shape once
        for fn in sides.values():
            fn([int(t) for t in rng.integers(3, 200, n)])
    for r in range(args.rounds):
        for n in lengths:
            prompt = [int(t) for t in rng.integers(3, 200, n)]
            for name, fn in sides.items():
                times[name][n].append(fn(prompt))
            if bindir is not None:
                times["llama_cpp"][n].append(
                    n / llama_bench_prompt(bindir, path, args.threads, n))
            print(f"round {r + 1} prompt {n}: " + ", ".join(
                f"{s} {n / t[n][-1]:.1f} tok/s" for s, t in times.items() if t[n]),
                file=sys.stderr)
    tps = {s: {n: n / statistics.median(v) for n, v in t.items() if v}
           for s, t in times.items()}
    return {"cpu": cpu_model(), "llama_cpp": llama_cpp_version(bindir) if bindir else None,
            "model": args.model, "format": args.format, "file": path.name,
            "threads": args.threads, "rounds": args.rounds, "lengths": lengths,
            "tps": {s: v for s, v in tps.items() if v}}


def report(res: dict[str, Any]) -> str:
    tps, lengths = res["tps"], res["lengths"]
    sides = list(tps)
    lines = [f"# Prefill as prompts grow: {res['model']} {res['format']}\n",
             f"CPU: {res['cpu']}; llama.cpp: {res['llama_cpp'] or 'not run'}; "
             f"{res['threads']} threads; one prefill of a random prompt; median of "
             f"{res['rounds']} interleaved rounds. Ratios above 1: rlx is faster.\n",
             "| prompt | " + " | ".join(f"{s} tok/s" for s in sides) + " | rlx ÷ llama.cpp |",
             "|---" * (2 + len(sides)) + "|"]
    for n in lengths:
        cells = [str(n)] + [f"{v:.1f}" if (v := _get(tps[s], n)) else "n/a" for s in sides]
        here, cpp = _get(tps["rlx"], n), _get(tps.get("llama_cpp", {}), n)
        cells.append(_ratio(here, cpp))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="135m")
    p.add_argument("--format", default="Q8_0")
    p.add_argument("--lengths", default="128,512,1024,2048")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--decomposed", action="store_true",
                   help="also run the decomposed attention (attention_kernel=False)")
    p.add_argument("--llama-cpp", default=llama_cpp_bin())
    run_and_report(p, run, report)


if __name__ == "__main__":
    main()
