"""Decode speed as the KV cache fills: rlx (llvm-cpu) beside llama.cpp at 128, 1024 and
4096 positions already in the cache, on the same GGUF file and thread count, in one run.

For each depth ``d`` the sides decode ``--gen`` greedy tokens after ``d`` positions:

- rlx, preallocated cache (``from_gguf(path, context=max depth + gen)``, the default form):
  the cache filled to ``d`` rows (see :func:`rlx_decode`: a short prefill, then the filled
  count set to ``d``; not timed), then ``--gen`` pipelined decode steps as
  ``rlx.generate`` runs them (``Generator.greedy``); each step writes its K / V in place
  and attends to the filled rows only;
- rlx, growing cache (``context=None``, the form before): the same, where each step
  returns the cache one position longer (a copy of all of it) — shown to say what the
  preallocated cache changed;
- llama.cpp: ``llama-bench -p 0 -n GEN -d DEPTH -r 1`` (its ``tg`` run after ``d`` tokens
  of context), once in every round.

Reported: tokens/s (median of ``--rounds``, interleaved), rlx / llama.cpp as a speed ratio
(above 1: rlx is faster), and each side's tokens/s at a depth over its tokens/s at the
first depth: how much of a step's cost grows with the filled length.

Usage: ``python benchmarks/long_context.py [--model 135m] [--format Q8_0]
[--depths 128,1024,4096] [--gen 32] [--rounds 3] [--no-grown] [--json F] [--md F]``;
the GGUF files and llama.cpp are those of ``benchmarks/llama.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
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
from benchmarks.machine import cpu_model
from rlx.generate import Generator
from rlx.models import llama


def rlx_decode(path: Path, context: int | None) -> Any:
    """A function ``(prompt, gen) -> seconds of gen decode steps after len(prompt) - 1
    positions``. The cache is filled to that depth without a prefill of that length (before
    rlx's prefill attention kernel, prefills of 128, 1024 and 4096 tokens on both forms
    took over 7 minutes here; prefill is measured by ``long_prompt.py``): a prefill of
    :data:`PREFIX` tokens, then the count of filled rows set to the depth (preallocated
    cache: ``filled``; growing cache: K / V of ``depth`` rows, the prefix's rows first and
    zeros after). A step's work does not depend on the rows' values: it reads and attends
    to ``depth`` rows either way."""
    model = llama.from_gguf(path, context=context)
    g = Generator(model)
    kv = model.config.kv_dim

    def run(prompt: list[int], gen: int) -> float:
        depth = len(prompt) - 1
        _, cache = g.prefill(prompt[:PREFIX])
        if context is not None:
            cache = (np.array([depth], np.int32), *cache[1:])
        else:
            cache = tuple(np.concatenate([t.numpy(), np.zeros((1, depth - PREFIX, kv),
                                                              np.float32)], axis=1)
                          for t in cache)
        t0 = time.perf_counter()
        g.greedy(prompt[-1], depth, cache, gen)
        return time.perf_counter() - t0

    return run


PREFIX = 16
"""Tokens rlx actually prefills before its cache is set to a depth."""


def llama_bench_depth(bindir: Path, path: Path, threads: int, depth: int, gen: int
                      ) -> float:
    proc = subprocess.run([str(bindir / "llama-bench"), "-m", str(path), "-t", str(threads),
                           "-p", "0", "-n", str(gen), "-d", str(depth), "-r", "1",
                           "-o", "json"], capture_output=True, text=True, check=True)
    return float(json.loads(proc.stdout)[0]["avg_ts"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    bindir = Path(args.llama_cpp) if args.llama_cpp else None
    depths = [int(d) for d in args.depths.split(",")]
    path = gguf_files(args.model, hf_model(args.model), [args.format], bindir)[args.format]
    rng = np.random.default_rng(0)
    sides = {"rlx": rlx_decode(path, max(depths) + args.gen + 1)}
    if args.grown:
        sides["rlx_grown"] = rlx_decode(path, None)
    times: dict[str, dict[int, list[float]]] = {s: {d: [] for d in depths}
                                                 for s in [*sides, "llama_cpp"]}
    for depth in depths:   # warm-up: every shape once
        prompt = [int(t) for t in rng.integers(3, 200, depth + 1)]
        for fn in sides.values():
            fn(prompt, 2)
    for r in range(args.rounds):
        for depth in depths:
            prompt = [int(t) for t in rng.integers(3, 200, depth + 1)]
            for name, fn in sides.items():
                times[name][depth].append(fn(prompt, args.gen))
            if bindir is not None:
                tps = llama_bench_depth(bindir, path, args.threads, depth, args.gen)
                times["llama_cpp"][depth].append(args.gen / tps)
            print(f"round {r + 1} depth {depth}: " + ", ".join(
                f"{s} {args.gen / t[depth][-1]:.1f} tok/s" for s, t in times.items()
                if t[depth]), file=sys.stderr)
    tps = {s: {d: args.gen / statistics.median(v) for d, v in t.items() if v}
           for s, t in times.items()}
    return {"cpu": cpu_model(), "llama_cpp": llama_cpp_version(bindir) if bindir else None,
            "model": args.model, "format": args.format, "file": path.name,
            "threads": args.threads, "gen": args.gen, "rounds": args.rounds,
            "depths": depths, "tps": {s: v for s, v in tps.items() if v}}


def report(res: dict[str, Any]) -> str:
    tps, depths = res["tps"], res["depths"]
    sides = list(tps)
    lines = [f"# Decode as the cache fills: {res['model']} {res['format']}\n",
             f"CPU: {res['cpu']}; llama.cpp: {res['llama_cpp'] or 'not run'}; "
             f"{res['threads']} threads; {res['gen']} tokens decoded after each depth; median "
             f"of {res['rounds']} interleaved rounds. Ratios above 1: rlx is faster. "
             f"'÷ first' is tokens/s at the depth over tokens/s at {depths[0]}.\n",
             "| depth | " + " | ".join(f"{s} tok/s | {s} ÷ first" for s in sides)
             + " | rlx ÷ llama.cpp |",
             "|---" * (2 + 2 * len(sides)) + "|"]
    for d in depths:
        cells = [str(d)]
        for s in sides:
            here, first = _get(tps[s], d), _get(tps[s], depths[0])
            cells += [f"{here:.1f}" if here else "n/a",
                      f"{here / first:.2f}" if here and first else "n/a"]
        cpp = _get(tps.get("llama_cpp", {}), d)
        cells.append(_ratio(_get(tps["rlx"], d), cpp))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def _get(table: dict[Any, float], depth: int) -> float | None:
    """``table[depth]`` whether its keys are ints or (read back from JSON) strings."""
    return table.get(depth, table.get(str(depth)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="135m")
    p.add_argument("--format", default="Q8_0")
    p.add_argument("--depths", default="128,1024,4096")
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-grown", dest="grown", action="store_false",
                   help="skip the growing-cache form")
    p.add_argument("--llama-cpp", default=llama_cpp_bin())
    run_and_report(p, run, report)


if __name__ == "__main__":
    main()
