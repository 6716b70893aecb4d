"""A new sequence's first prefill on a Qwen3.5-shaped model: the state it starts from made
on the device by the module's ``state`` function
(:func:`rlx.models.llama_cache.start_state`) against the host's zeros uploaded
(:func:`rlx.models.qwen35.initial_state`: the KV caches of ``context`` rows, conv and delta
states; ~120 MB for 0.8B at 4096 positions).

Per prompt length, interleaved rounds of: the ``state`` call alone, the upload alone
(``rlx.runtime`` device arrays of the host zeros), and one prefill call from each (the
time to the first token's logits on the host). Same model file and compiled module as
``benchmarks/qwen35.py`` (its ``gguf_files``; random weights).

Usage: ``python benchmarks/first_prefill.py [--model 0.8b] [--format Q8_0]
[--lengths 8,64,256] [--rounds 5] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from benchmarks.llama import llama_cpp_bin  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from benchmarks.qwen35 import gguf_files, hf_model  # noqa: E402
from rlx.generate import Generator  # noqa: E402
from rlx.models import qwen35  # noqa: E402
from rlx.models.llama_cache import start_state  # noqa: E402


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="0.8b")
    ap.add_argument("--format", default="Q8_0")
    ap.add_argument("--lengths", default="8,64,256")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    hf, tensors = hf_model(args.model)
    bindir = llama_cpp_bin()
    path = gguf_files(args.model, hf, tensors, [args.format],
                      Path(bindir) if bindir else None)[args.format]
    del hf, tensors
    model = qwen35.from_gguf(path)
    gen = Generator(model, cache=False)
    program, prefill = gen.program, gen.program.prefill
    host_bytes = sum(a.nbytes for a in model.initial_state())
    rng = np.random.default_rng(0)
    rows = []
    for n in (int(s) for s in args.lengths.split(",")):
        ids = np.asarray([rng.integers(0, model.config.vocab_size, n)], np.int32)
        cos, sin = model.rope_tables(range(n))
        last = np.array([[n - 1]], np.int32)

        def first(state: Any) -> None:
            prefill.on_device(ids, cos, sin, last, *state)[0].numpy()  # noqa: B023

        times: dict[str, list[float]] = {"state": [], "upload": [], "prefill_device": [],
                                         "prefill_upload": []}
        first(start_state(program, model))                              # warm up
        for _ in range(args.rounds):
            times["state"].append(timed(
                lambda: [t.wait() for t in start_state(program, model)]))
            times["upload"].append(timed(
                lambda: [program.upload(a).wait() for a in model.initial_state()]))
            times["prefill_device"].append(timed(lambda: first(start_state(program, model))))
            times["prefill_upload"].append(timed(lambda: first(model.initial_state())))
        row = {"prompt": n, **{f"{k}_ms": 1e3 * statistics.median(v) for k, v in times.items()}}
        rows.append(row)
        print(f"prompt {n}: state {row['state_ms']:.1f} ms, upload {row['upload_ms']:.1f} ms; "
              f"first prefill from the device state {row['prefill_device_ms']:.1f} ms, from "
              f"the upload {row['prefill_upload_ms']:.1f} ms", flush=True)
    res = {"cpu": cpu_model(), "model": args.model, "format": args.format,
           "context": model.context, "host_state_bytes": host_bytes, "rounds": args.rounds,
           "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
