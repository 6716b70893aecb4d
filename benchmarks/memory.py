"""Peak resident memory of rlx and of llama.cpp on the same GGUF file, each measured in a
process of its own (the kernel's ``ru_maxrss`` of that child: the weights' file pages it
touched included, as a user's ``time -v`` would report).

- rlx: this module as a child (``python -m benchmarks.memory FILE``): the model (LLaMA
  family or Qwen3.5, ``rlx.generate.load_model``) with the KV cache preallocated to
  ``--prompt`` + ``--gen`` positions (llama-bench's context), the compiled model, a
  ``--prompt``-token prefill and ``--gen`` greedy decode steps; run twice, the first to
  fill the compile cache (and the weights' encoded planes, ``rlx.encoding``), so that the
  second measures loading and running, not the compiler. It also reports its resident
  size after them (``steady_mb``). A third run (``--encode``) removes the model's encoded
  archive first: the peak of a start that encodes the weights (``encode_peak_mb``).
- llama.cpp: :func:`run_measured` around the ``llama-bench`` runs themselves.

Usage (what ``benchmarks/llama.py`` runs per row): ``python -m benchmarks.memory FILE
[--mode exact|q8] [--prompt 128] [--gen 16]``; prints one JSON line. ``--compare FILE...``
measures both sides on each file (no timing) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


_WRAPPER = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execvp(sys.argv[1], sys.argv[1:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "sys.stderr.write(f'\\nMAXRSS_KIB {usage.ru_maxrss}\\n')\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")
"""Runs its arguments as a grandchild and reports that one's ``ru_maxrss``. Linux carries a
process's peak across ``exec`` from the image it replaced: a command spawned straight from
this (large) process reported this process's peak, not its own. The wrapper is a small
Python (~10 MB), the floor of what it can report."""


def run_measured(cmd: list[str]) -> tuple[str, float]:
    """Run ``cmd``; (its stdout, its peak resident memory in MB). Fails as ``check=True``
    would, with the child's stderr."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True,
                          text=True, check=True)
    kib = int(proc.stderr.rsplit("MAXRSS_KIB", 1)[1].split()[0])
    return proc.stdout, kib * 1024 / 1e6


def rlx_peak(path: Path, mode: str, prompt: int, gen: int) -> dict[str, float]:
    """rlx's peak and steady resident memory (MB) on ``path`` in a child process, and the
    peak of a start that encodes the weights' planes."""
    cmd = [sys.executable, "-m", "benchmarks.memory", str(path), "--mode", mode, "--prompt",
           str(prompt), "--gen", str(gen)]
    run_measured(cmd)                                       # compiles (the cache fills)
    out, peak = run_measured(cmd)
    _, encode_peak = run_measured([*cmd, "--encode"])
    return {"peak_mb": peak, "encode_peak_mb": encode_peak,
            **json.loads(out.strip().splitlines()[-1])}


def _resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return float("nan")


def compare(paths: list[Path], modes: list[str], prompt: int, gen: int) -> str:
    """Peak resident memory (MB) of rlx (each mode) and llama.cpp on each file."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.llama import llama_bench, llama_cpp_bin
    from benchmarks.machine import cpu_model

    bindir = llama_cpp_bin()
    lines = [f"Peak resident memory, MB ({cpu_model()}; prompt {prompt}, {gen} decode steps; "
             "rlx steady = after them; encoding = a start that encodes the weights' planes, "
             "once per model)\n", "| file | MB | rlx mode | rlx peak | rlx steady | "
             "rlx peak encoding | llama.cpp peak | rlx ÷ llama.cpp |",
             "|---|---|---|---|---|---|---|---|"]
    for path in paths:
        cpp: list[float] = []
        if bindir is not None:
            llama_bench(Path(bindir), path, 2, prompt, gen, 1, cpp)
        quantized = not any(t in path.name for t in ("F16", "F32", "BF16"))
        for mode in modes if quantized else ["exact"]:
            mem = rlx_peak(path, mode, prompt, gen)
            ratio = f"{mem['peak_mb'] / cpp[0]:.2f}" if cpp else "n/a"
            lines.append(f"| {path.name} | {path.stat().st_size / 1e6:.0f} | {mode} | "
                         f"{mem['peak_mb']:.0f} | {mem['steady_mb']:.0f} | "
                         f"{mem['encode_peak_mb']:.0f} | "
                         f"{cpp[0] if cpp else float('nan'):.0f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path, nargs="?")
    p.add_argument("--compare", type=Path, nargs="+", metavar="FILE")
    p.add_argument("--modes", default="exact,q8")
    p.add_argument("--mode", default="exact", choices=("exact", "q8"))
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--gen", type=int, default=16)
    p.add_argument("--encode", action="store_true",
                   help="remove the model's encoded weights first (measure a start that "
                        "encodes them)")
    args = p.parse_args()
    if args.compare:
        print(compare(args.compare, args.modes.split(","), args.prompt, args.gen))
        return
    if args.path is None:
        p.error("give a GGUF file (or --compare FILE...)")
    sys.path.insert(0, str(ROOT / "python"))
    from rlx.cache import CompileCache
    from rlx.encoding import compile_model
    from rlx.generate import Generator, load_model

    model = load_model(args.path, context=args.prompt + args.gen + 1)
    options = {} if args.mode == "exact" else {"activation_quant": args.mode}
    if args.encode:
        encoded = compile_model(model.module, model.weights, "llvm-cpu", CompileCache(),
                                **options).encoded
        if encoded is not None:
            encoded.unlink(missing_ok=True)
    g = Generator(model, options=options)
    ids = [3 + i % 197 for i in range(args.prompt)]
    _, cache = g.prefill(ids)
    g.greedy(ids[-1], args.prompt, cache, args.gen)
    print(json.dumps({"steady_mb": _resident_mb(), "cache_hit": g.cache_hit}))


if __name__ == "__main__":
    main()
