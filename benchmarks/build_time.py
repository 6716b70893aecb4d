"""Time to build and lower a model, before IREE starts: ``llama.build`` (the HIR module in
Python), ``rlx.compiler.load`` (verify, print, reparse with source positions), ``lower``
(HIR -> MIR -> linalg) and the text handed to ``iree-compile``, for the SmolLM2-135M shape
and a 32-layer LLaMA-2-7B shape, both functions (``prefill`` and ``decode``), no weights
(the builder declares parameters by shape). Each shape is built with f32 linear weights and
with Q4_1 GGUF ones (``dequant_matmul``, what the real SmolLM2-135M Q4_1 file holds; the
q / k / v and gate / up projections left unpacked). Targets (issue 25, point 6): under 1 s
for the 135M model and under 3 s for the 7B one.

Interleaved rounds (every model once a round, the order alternating), medians; wall time
and the process's CPU time (steadier on a busy machine). Prints a Markdown table with the
CPU model and the load average.

Usage: ``python benchmarks/build_time.py [--rounds 3] [--models 135m,7b] [--target llvm-cpu]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model  # noqa: E402
from rlx.compiler import TargetConfig, load, lower, lowered_text  # noqa: E402
from rlx.ir.text import walk_ops  # noqa: E402
from rlx.models import llama  # noqa: E402

SHAPES = {
    # vocab, hidden, layers, heads, kv heads, head dim, ffn, tied
    "135m": (49152, 576, 30, 9, 3, 64, 1536, True),       # SmolLM2-135M
    "7b": (32000, 4096, 32, 32, 32, 128, 11008, False),   # LLaMA-2-7B
}
TARGETS_S = {"135m": 1.0, "7b": 3.0}
STAGES = ("build", "load", "lower", "text")



def config(shape: str, scheme: str | None) -> llama.LlamaConfig:
    """The shape's config; with ``scheme`` every linear weight a GGUF ``dequant_matmul``."""
    vocab, hidden, layers, heads, kv, hd, ffn, tied = SHAPES[shape]
    c = llama.LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_layers=layers,
                          num_heads=heads, num_kv_heads=kv, head_dim=hd,
                          intermediate_size=ffn, tie_word_embeddings=tied)
    if scheme is None:
        return c
    linear = [n for n in llama.param_shapes(c) if n.rsplit(".", 1)[-1] in llama.LINEAR]
    return replace(c, tie_word_embeddings=False,
                   weight_schemes={n: scheme for n in [*linear, "lm_head"]})


def stages(c: llama.LlamaConfig, target: str) -> dict[str, Any]:
    """Seconds (wall, CPU) of each stage, the HIR op count and the linalg text's size."""
    out: dict[str, Any] = {}
    state: dict[str, Any] = {}

    def timed(name: str, fn: Callable[[], Any]) -> None:
        t, cpu = time.perf_counter(), time.process_time()
        state[name] = fn()
        out[name] = (time.perf_counter() - t, time.process_time() - cpu)

    tc = TargetConfig(target=target)
    timed("build", lambda: llama.build(c))
    timed("load", lambda: load(state["build"]))
    timed("lower", lambda: lower(state["load"], tc))
    timed("text", lambda: lowered_text(state["load"].module))
    out["ops"] = sum(1 for op in walk_ops(state["build"].mlir.operation)
                     if op.name.startswith("rlx_"))
    out["text_mb"] = len(state["text"]) / 1e6
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default="135m,7b")
    p.add_argument("--target", default="llvm-cpu")
    args = p.parse_args()
    models = {f"{s} {fmt}": config(s, None if fmt == "f32" else "gguf_q4_1")
              for s in args.models.split(",") for fmt in ("f32", "q4_1")}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
    load_before = os.getloadavg()
    for r in range(args.rounds):
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            runs[name].append(stages(models[name], args.target))
    load_after = os.getloadavg()
    print(f"# Build and lower (no IREE), {args.target}, {args.rounds} interleaved rounds\n\n"
          f"CPU: {cpu_model()} ({os.cpu_count()} CPUs); load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after\n")
    print("| model | HIR ops | " + " | ".join(f"{s} s" for s in STAGES)
          + " | total s (wall) | total s (CPU) | target | linalg MB |")
    print("|---|---|" + "---|" * (len(STAGES) + 4))
    for name, rs in runs.items():
        med = {s: statistics.median(r[s][0] for r in rs) for s in STAGES}
        wall = statistics.median(sum(r[s][0] for s in STAGES) for r in rs)
        cpu = statistics.median(sum(r[s][1] for s in STAGES) for r in rs)
        goal = TARGETS_S[name.split()[0]] if name.split()[0] in TARGETS_S else float("nan")
        print(f"| {name} | {rs[0]['ops']} | " + " | ".join(f"{med[s]:.2f}" for s in STAGES)
              + f" | {wall:.2f} | {cpu:.2f} | < {goal:g} | {rs[0]['text_mb']:.1f} |")


if __name__ == "__main__":
    main()
