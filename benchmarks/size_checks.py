"""What the run-time size checks cost: the 135M LLaMA-shaped model's decode step (Q8_0 GGUF,
random weights) compiled with the checks (the default) and without, timed in one process,
interleaved rounds of ``--gen`` greedy steps through ``Generator.greedy``: the wall time a
token, and the CPU time the calling thread spends a token (where the checks run: IREE's VM
executes them on the host when a call is made; steadier than wall time on a busy machine).

The checks (``rlx.lowering.guards``) are host-side integer compares of a call's sizes,
emitted by the mir-to-linalg wrapper for every size relation an op's verifier left to run
time; "without" is the same module lowered with that table's ``size_checks`` off (a
measurement switch, not an option: see benchmarks/README.md for the verdict).

Usage: ``python benchmarks/size_checks.py [--rounds 8] [--gen 64] [--model 135m]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import rlx  # noqa: E402
from benchmarks.llama import gguf_files, hf_model  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from rlx.generate import Generator  # noqa: E402
from rlx.lowering.mir_to_linalg.table import MIR_TO_LINALG  # noqa: E402
from rlx.models import llama  # noqa: E402


def build(model: llama.LlamaModel, checks: bool) -> tuple[Generator, int]:
    """The model compiled with or without the checks, and how many checks its decode has."""
    MIR_TO_LINALG.size_checks = checks
    try:
        text = rlx.compile(llama.build(model.config, functions=("decode",)), emit="linalg")
        return Generator(model), text.count("util.status.check_ok")
    finally:
        MIR_TO_LINALG.size_checks = True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="135m")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--gen", type=int, default=64)
    args = p.parse_args()
    path = gguf_files(args.model, hf_model(args.model), ["Q8_0"], None)["Q8_0"]
    model = llama.from_gguf(path)
    sides = {"checks": build(model, True), "no checks": build(model, False)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}

    def run(g: Generator) -> tuple[float, float]:
        _, cache = g.prefill([1])
        t0, c0 = time.perf_counter(), time.thread_time()
        g.greedy(2, 1, cache, args.gen)
        return ((time.perf_counter() - t0) / args.gen, (time.thread_time() - c0) / args.gen)

    for g, _ in sides.values():
        run(g)                                   # warm-up
    for r in range(args.rounds):                 # interleaved, the order alternating
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            time.sleep(0.03)
            wall, host = run(sides[name][0])
            times[name].append(wall)
            cpu[name].append(host)
    print(f"# Run-time size checks: {args.model} Q8_0 decode, {args.gen} steps x "
          f"{args.rounds} interleaved rounds\n\nCPU: {cpu_model()}\n")
    print("| build | checks in decode | ms / token (median, min-max) | calling thread's CPU "
          "ms / token (median, min-max) |")
    print("|---|---|---|---|")
    for name, (_, n) in sides.items():
        t, c = ([1e3 * x for x in d[name]] for d in (times, cpu))
        print(f"| {name} | {n} | {statistics.median(t):.3f} ({min(t):.3f}-{max(t):.3f}) | "
              f"{statistics.median(c):.3f} ({min(c):.3f}-{max(c):.3f}) |")
    for what, d in (("wall", times), ("calling thread's CPU", cpu)):
        on, off = (statistics.median(d[n]) for n in sides)
        print(f"\n{what}: checks / no checks = {on / off:.3f}")


if __name__ == "__main__":
    main()
