"""The batched decode step of ``rlx.serve.engine.BatchModel`` (what rlx-serve runs): every
slot busy with a random prompt, then ``--steps`` decode calls; the wall time and the CPU
time of the process (IREE's workers included: the work a step does, steadier than wall time
on a busy machine) per step, median and min, and the greedy tokens of every slot (to check
that a change keeps them).

One batch size per process, so that sides compare in separate processes back to back
(benchmarks/README.md, "Batched decode step", runs batch 8 and batch 1 of each side
interleaved). Without ``--model``: the 135M Q8_0 GGUF that ``benchmarks/llama.py`` writes
to ``benchmarks/.cache/``.

``--busy R``: only slots ``0 .. R - 1`` hold sequences (the others free), so the step runs
the module's ``decode_R`` (a server below its full batch).

``--activation-quant q8``: the step in the q8 mode (rlx-serve's option of that name).

Usage: ``python benchmarks/batch_step.py --batch 8 [--busy R] [--context 256] [--prompt 12]
[--steps 20] [--model FILE.gguf] [--activation-quant q8]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model  # noqa: E402
from rlx.generate import Sampling, load_model  # noqa: E402
from rlx.lowering.registry import ACTIVATION_QUANTS  # noqa: E402
from rlx.serve.engine import BatchModel  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--busy", type=int, help="slots holding a sequence (default: all)")
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--prompt", type=int, default=12, help="prompt tokens a slot")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", default=str(ROOT / "benchmarks" / ".cache" /
                                          "llama-135m-Q8_0.gguf"))
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS)
    a = p.parse_args()
    model = load_model(a.model)
    start = time.perf_counter()
    options = {"activation_quant": a.activation_quant} if a.activation_quant else {}
    bm = BatchModel(model, a.batch, a.context, **options)
    print(f"{cpu_model()}; numerics {a.activation_quant or 'exact'}; compile (or cache) + load "
          f"{time.perf_counter() - start:.1f} s")
    rng = np.random.default_rng(0)
    greedy = Sampling()
    busy = a.batch if a.busy is None else a.busy
    tokens = np.zeros(a.batch, np.int64)
    tokens[:busy] = [bm.prefill(b, rng.integers(0, model.config.vocab_size, a.prompt)
                                .tolist(), greedy) for b in range(busy)]
    pos = np.full(a.batch, a.prompt)
    seen, wall, cpu = [tokens.copy()], [], []
    for _ in range(a.steps):
        t, c = time.perf_counter(), time.process_time()
        tokens = bm.step(tokens, pos, [greedy] * busy + [None] * (a.batch - busy))
        wall.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
        pos = pos + 1
        seen.append(np.asarray(tokens).copy())
    print(f"batch {a.batch}, {busy} busy: step median {statistics.median(wall):.1f} ms, min "
          f"{min(wall):.1f} ms, {busy * 1e3 / statistics.median(wall):.1f} tokens/s; CPU "
          f"median {statistics.median(cpu):.1f} ms, min {min(cpu):.1f} ms, "
          f"{busy * 1e3 / statistics.median(cpu):.1f} tokens per CPU-second")
    print("tokens", np.stack(seen).T[:busy].tolist())


if __name__ == "__main__":
    main()
