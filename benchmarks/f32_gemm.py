"""f32 prefill GEMMs on a parameter weight: rlx compiled with ``prefill_columns`` 16 (IREE's
data-tiled ``mmt4d``) and 32 (rlx's column-block GEMM where the CPU has AVX-512:
``quant/f32_matmul.py``) beside PyTorch's ``linear``, interleaved in one run.

    python benchmarks/f32_gemm.py --shapes 1024x5632,2816x1024 --rows 128 --rounds 7

Each shape is ``KxN``; ``y [M, N] = x [M, K] W`` with ``W`` an rlx parameter. Every round
visits every (shape, implementation) pair in a fresh random order and times 5 calls after
one untimed; medians. Both rlx forms are checked against float64 first. 2 threads
everywhere. See benchmarks/README.md, "f32 prefill matmuls in column blocks of 32".
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rlx  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402


def candidates(k: int, n: int, m: int, rng: np.random.Generator
               ) -> dict[str, Callable[[], Any]]:
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    h = rlx.HirModule("gemm")
    h.set_outputs([h.linear(h.input("x", (None, k)), h.param("w", (k, n)))])
    want = x.astype(np.float64) @ w.astype(np.float64)
    fns: dict[str, Callable[[], Any]] = {}
    for columns in (16, 32):
        prog = rlx.runtime.load(rlx.compile(h, prefill_columns=columns), params={"w": w})
        got = np.asarray(prog.main(x))
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if err > 1e-5:
            raise SystemExit(f"{k}x{n} prefill_columns={columns}: max relative error {err:.2e}")
        xd = prog.upload(x)
        fns[f"rlx/c{columns}"] = lambda prog=prog, xd=xd: prog.main.on_device(xd)
    tw, tx = torch.from_numpy(w.T.copy()), torch.from_numpy(x)

    def run_torch() -> Any:
        with torch.inference_mode():
            return torch.nn.functional.linear(tx, tw)

    fns["torch"] = run_torch
    return fns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="1024x5632,2816x1024,2048x5632,5632x2048,1024x1024")
    p.add_argument("--rows", type=int, default=128, help="M, the rows of x")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    torch.set_num_threads(THREADS)
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={THREADS}")
    rng = np.random.default_rng(0)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    fns = {(k, n, impl): fn for k, n in shapes
           for impl, fn in candidates(k, n, args.rows, rng).items()}
    times: dict[tuple[int, int, str], list[float]] = {key: [] for key in fns}
    for _ in range(args.rounds):
        order = list(fns)
        random.shuffle(order)
        for key in order:
            time.sleep(0.02)
            fns[key]()
            start = time.perf_counter()
            for _ in range(5):
                fns[key]()
            times[key].append((time.perf_counter() - start) / 5)
    print(f"{cpu_model()}, {THREADS} threads, M = {args.rows}, {args.rounds} rounds (medians)")
    print("| K x N | rlx/c16 ms | rlx/c32 ms | torch ms | c32 GFLOP/s |")
    print("|---|---|---|---|---|")
    for k, n in shapes:
        med = {impl: statistics.median(times[(k, n, impl)]) * 1e3
               for impl in ("rlx/c16", "rlx/c32", "torch")}
        flops = 2 * args.rows * k * n / med["rlx/c32"] / 1e6
        print(f"| {k} x {n} | {med['rlx/c16']:.2f} | {med['rlx/c32']:.2f} | "
              f"{med['torch']:.2f} | {flops:.0f} |")


if __name__ == "__main__":
    main()
