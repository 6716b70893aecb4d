"""rlx scans vs PyTorch eager on llvm-cpu, same process, same run, interleaved rounds.

    python benchmarks/recurrent.py [--rounds 9] [--json out.json]

* LSTM: 2 layers, hidden 512, input 512, batch 8, sequence 128; ``torch.nn.LSTM`` (its
  CPU kernel) with the same weights, packed as rlx's ``lstm`` takes them.
* Gated DeltaNet: 16 heads, state 128, batch 1, sequence 128; against transformers'
  pure-torch ``torch_recurrent_gated_delta_rule`` (Qwen3-Next: the same recurrence, one
  step at a time) and, for reference, its ``torch_chunk_gated_delta_rule`` (a different,
  chunked algorithm, chunk 64).

Every call takes and returns host arrays on both sides. Each round runs every
implementation ``--calls`` times in a fresh random order; the table gives the median per
call and the rlx / torch ratio (< 1: rlx is faster), plus the max error against torch. Both
sides use ``--threads`` threads (2 by default). The compile section shows that the vmfb and
the compile time do not grow with the sequence length (static S = 16 and 256).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any


def _threads() -> int:
    """``--threads N`` (default 2), read before torch starts its OpenMP pool."""
    import sys

    argv = sys.argv
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
    return 2


THREADS = _threads()
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rlx  # noqa: E402

LSTM = {"batch": 8, "seq": 128, "input": 512, "hidden": 512, "layers": 2}
GDN = {"batch": 1, "seq": 128, "heads": 16, "state": 128}


# --------------------------------------------------------------------------------------
# Cases: each returns {impl: fn} and the max relative error of rlx against torch
# --------------------------------------------------------------------------------------


def lstm_module(seq: int | None) -> rlx.HirModule:
    c = LSTM
    h = rlx.HirModule("lstm")
    x = h.input("x", (c["batch"], seq, c["input"]))
    rows = c["layers"] * 4 * c["hidden"]
    w_ih = h.param("w_ih", (rows, c["input"]))  # every layer's input is 512 wide
    w_hh, bias = h.param("w_hh", (rows, c["hidden"])), h.param("bias", (rows,))
    h.set_outputs([h.lstm(x, w_ih, w_hh, bias, c["hidden"], c["layers"])])
    return h


def lstm_case() -> tuple[dict[str, Callable[[], Any]], float]:
    c = LSTM
    torch.manual_seed(0)
    mod = torch.nn.LSTM(c["input"], c["hidden"], num_layers=c["layers"],
                        batch_first=True).eval()

    def get(name: str) -> list[np.ndarray]:
        return [getattr(mod, f"{name}_l{k}").detach().numpy() for k in range(c["layers"])]

    weights = {"w_ih": np.concatenate(get("weight_ih")),
               "w_hh": np.concatenate(get("weight_hh")),
               "bias": np.concatenate([a + b for a, b in zip(get("bias_ih"), get("bias_hh"),
                                                             strict=True)])}
    prog = rlx.runtime.load(rlx.compile(lstm_module(None), "llvm-cpu"), "local-task", weights)
    x = np.random.default_rng(0).standard_normal(
        (c["batch"], c["seq"], c["input"])).astype(np.float32)
    xt = torch.from_numpy(x)

    def run_torch() -> Any:
        with torch.inference_mode():
            return mod(xt)[0]

    want = run_torch().numpy()
    got = prog.main(x=x)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    return {"rlx": lambda: prog.main(x=x), "torch nn.LSTM": run_torch}, err


def gdn_module(seq: int | None) -> rlx.HirModule:
    c = GDN
    h = rlx.HirModule("gdn")
    q, k, v = (h.input(n, (c["batch"], seq, c["heads"], c["state"])) for n in "qkv")
    g, beta = (h.input(n, (c["batch"], seq, c["heads"])) for n in ("g", "beta"))
    h.set_outputs([h.gated_delta_net(q, k, v, g, beta, c["state"])])
    return h


def gdn_case() -> tuple[dict[str, Callable[[], Any]], float]:
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        torch_chunk_gated_delta_rule,
        torch_recurrent_gated_delta_rule,
    )

    c = GDN
    rng = np.random.default_rng(0)
    shape = (c["batch"], c["seq"], c["heads"], c["state"])

    def unit() -> np.ndarray:
        a = rng.standard_normal(shape)
        return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)

    a = rng.standard_normal(shape[:3])
    x = {"q": unit(), "k": unit(), "v": rng.standard_normal(shape).astype(np.float32),
         "g": (-np.log1p(np.exp(a))).astype(np.float32),
         "beta": (1 / (1 + np.exp(-rng.standard_normal(shape[:3])))).astype(np.float32)}
    t = {n: torch.from_numpy(v) for n, v in x.items()}
    prog = rlx.runtime.load(rlx.compile(gdn_module(None), "llvm-cpu"), "local-task")

    def recurrent() -> Any:
        with torch.inference_mode():
            return torch_recurrent_gated_delta_rule(t["q"], t["k"], t["v"], t["g"], t["beta"],
                                                    use_qk_l2norm_in_kernel=False)[0]

    def chunked() -> Any:
        with torch.inference_mode():
            return torch_chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"], t["beta"],
                                                chunk_size=64,
                                                use_qk_l2norm_in_kernel=False)[0]

    want = recurrent().numpy()
    got = prog.main(**x)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    return {"rlx": lambda: prog.main(**x), "torch recurrent": recurrent,
            "torch chunked": chunked}, err


CASES: dict[str, Callable[[], tuple[dict[str, Callable[[], Any]], float]]] = {
    "lstm": lstm_case, "gated_delta_net": gdn_case}


# --------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------


def measure(fns: dict[tuple[str, str], Callable[[], Any]], rounds: int, calls: int
            ) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(wall, process CPU) seconds of every call. CPU time is what the call cost the
    machine, all threads together; on a shared machine it is steadier than wall time (a
    descheduled thread does not count), so the table shows both."""
    times: dict[tuple[str, str], list[tuple[float, float]]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        order = list(fns)
        random.shuffle(order)
        for key in order:
            time.sleep(0.02)  # let the other runtime's worker threads park
            for _ in range(calls):
                t0, c0 = time.perf_counter(), time.process_time()
                fns[key]()
                times[key].append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def compile_scaling() -> list[dict[str, Any]]:
    """vmfb size and compile time at static S = 16 and 256 (the loop does not unroll)."""
    rows = []
    for name, build in (("lstm", lstm_module), ("gated_delta_net", gdn_module)):
        for seq in (16, 256):
            t0 = time.perf_counter()
            vmfb = rlx.compile(build(seq), "llvm-cpu")
            rows.append({"case": name, "seq": seq, "vmfb_bytes": len(vmfb),
                         "compile_s": time.perf_counter() - t0})
    return rows


def report(results: dict[str, Any]) -> str:
    lines = ["# rlx scans vs PyTorch eager (llvm-cpu, f32)", "",
             f"{results['host']}; {THREADS} threads on both sides; {results['rounds']} "
             f"interleaved rounds x {results['calls']} calls.", "",
             f"Reproduce: `{results['command']}`", "",
             "| case | impl | median ms | p25-p75 ms | rlx / impl | CPU ms | rlx / impl (CPU) "
             "| max rel err vs torch |",
             "|---|---|---|---|---|---|---|---|"]
    for case, row in results["cases"].items():
        mine = row["impls"]["rlx"]
        for impl, t in row["impls"].items():
            ratio = "" if impl == "rlx" else f"{mine['median_ms'] / t['median_ms']:.2f}"
            cpu = "" if impl == "rlx" else f"{mine['cpu_ms'] / t['cpu_ms']:.2f}"
            err = f"{row['max_rel_err']:.1e}" if impl == "rlx" else ""
            lines.append(f"| {case} | {impl} | {t['median_ms']:.2f} | {t['p25_ms']:.2f}-"
                         f"{t['p75_ms']:.2f} | {ratio} | {t['cpu_ms']:.2f} | {cpu} | {err} |")
    lines += ["", "| case | static S | vmfb bytes | compile s |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['seq']} | {r['vmfb_bytes']} | {r['compile_s']:.2f} |"
              for r in results["compile"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--threads", type=int, default=2,
                        help="threads on both sides (torch and IREE's task pool)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={THREADS}")
    random.seed(0)
    fns: dict[tuple[str, str], Callable[[], Any]] = {}
    errors = {}
    for case in args.cases:
        impls, errors[case] = CASES[case]()
        fns |= {(case, impl): fn for impl, fn in impls.items()}
    times = measure(fns, args.rounds, args.calls)
    results: dict[str, Any] = {
        "host": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
                f"torch {torch.__version__}",
        "rounds": args.rounds, "calls": args.calls,
        "command": f"python benchmarks/recurrent.py --rounds {args.rounds} --calls {args.calls}"
                   f" --threads {THREADS}",
        "cases": {}, "compile": compile_scaling()}
    for case in args.cases:
        impls = {}
        for (c, impl), ts in times.items():
            if c != case:
                continue
            wall = [w for w, _ in ts]
            q = statistics.quantiles(wall, n=4)
            impls[impl] = {"median_ms": statistics.median(wall) * 1e3, "p25_ms": q[0] * 1e3,
                           "p75_ms": q[2] * 1e3,
                           "cpu_ms": statistics.median(c for _, c in ts) * 1e3}
        results["cases"][case] = {"impls": impls, "max_rel_err": errors[case]}
    md = report(results)
    print(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
