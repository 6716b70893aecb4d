"""Decode (or prefill) tokens/s of one GGUF model under several sets of compile options, side
by side in one process: an A/B of a kernel choice (``gemv_prefetch``, ``activation_quant``,
``caller_transients``, ...) on a whole decode or prefill rather than on one kernel.

Each set of options is compiled (or taken from rlx's cache) into a ``Generator`` of its own,
all holding the same weights; then, in ``--rounds`` interleaved rounds, each runs a 1-token
prefill and ``--gen`` pipelined greedy decode steps (``Generator.greedy``, as
``rlx-generate`` decodes), timed from the first step to the last; with ``--prefill N``,
instead, one prefill of an N-token prompt (``Generator.prefill``, its logits read back).
Reported per set: median
and best tokens/s over the rounds and every round's value, with the CPU model; ``--json``
writes the same.

Usage: ``python benchmarks/decode_options.py MODEL.gguf --sets
'{"plain": {"activation_quant": "q8"}, "hints": {"activation_quant": "q8",
"gemv_prefetch": 4096}}' [--rounds 5] [--gen 32] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model  # noqa: E402
from rlx.generate import Generator, load_model  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--sets", required=True, type=json.loads,
                   help="JSON: a name per set of rlx.compile options")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--prefill", type=int, default=0,
                   help="time a prefill of this many tokens instead of the decode")
    p.add_argument("--json")
    a = p.parse_args()
    model = load_model(a.model)
    sides = {name: Generator(model, options=opts) for name, opts in a.sets.items()}
    prompt = [100 + (i * 7) % 3000 for i in range(max(a.gen + 2, a.prefill))]
    for g in sides.values():                     # first calls: buffers, caches, page faults
        _, state = g.prefill(prompt[:max(1, a.prefill)])
        g.greedy(prompt[1], 1, state, 4)
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(a.rounds):
        for name, g in sides.items():
            if a.prefill:
                start = time.perf_counter()
                g.prefill(prompt[:a.prefill])
                rates[name].append(a.prefill / (time.perf_counter() - start))
                continue
            _, state = g.prefill(prompt[:1])
            start = time.perf_counter()
            g.greedy(prompt[1], 1, state, a.gen)
            rates[name].append(a.gen / (time.perf_counter() - start))
    what = f"prefill of {a.prefill}" if a.prefill else f"{a.gen} decode tokens"
    print(f"{cpu_model()}; {Path(a.model).name}; {what} a round, {a.rounds} rounds")
    for name, r in rates.items():
        print(f"{name}: median {statistics.median(r):.2f} tok/s, best {max(r):.2f}, rounds "
              f"{', '.join(f'{x:.1f}' for x in r)}")
    if a.json:
        Path(a.json).write_text(json.dumps({"cpu": cpu_model(), "model": Path(a.model).name,
                                            "gen": a.gen, "prefill": a.prefill, "sets": a.sets,
                                            "tok_s": rates},
                                           indent=1))


if __name__ == "__main__":
    main()
