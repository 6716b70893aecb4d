"""``python -m benchmarks``: rlx vs PyTorch eager vs ONNX Runtime on transformer blocks.

One process, one run: every round visits every (block, implementation) pair in a fresh
random order, so machine noise hits all sides alike. Reports the median time per call,
the rlx/PyTorch and rlx/ORT ratios, GFLOP/s beside the machine's sgemm GFLOP/s (numpy /
OpenBLAS, measured in the same run), GB/s of weights + cache read for the decode step beside
the 2-thread read bandwidth (same run), and the IREE dispatches one call runs. Writes
``benchmarks/results/blocks.json`` and ``.md``. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rlx  # noqa: E402
from benchmarks.blocks import BLOCKS, Torch, make_block, make_weights, rlx_block  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402
from rlx.compiler import dispatch_counts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], Any], calls: int) -> list[float]:
    fn()  # warm-up, untimed
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def machine_ceilings(rounds: int) -> dict[str, float]:
    """sgemm 1024³ (numpy/OpenBLAS, 2 threads) and read bandwidth over 512 MiB."""
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    sgemm = min(min(timed(lambda: a @ a, 3)) for _ in range(rounds))
    big = np.ones(128 * 1024 * 1024, np.float32)
    tbig = torch.from_numpy(big)
    np_sum = min(min(timed(big.sum, 1)) for _ in range(max(rounds // 2, 2)))
    torch_sum = min(min(timed(tbig.sum, 1)) for _ in range(max(rounds // 2, 2)))
    return {"sgemm_gflops": 2 * 1024**3 / sgemm / 1e9,
            "read_gbs_numpy_1thread": big.nbytes / np_sum / 1e9,
            "read_gbs_torch_2threads": big.nbytes / torch_sum / 1e9}


def ort_session(module: torch.nn.Module, args: tuple[torch.Tensor, ...], tmp: Path) -> Any:
    import onnxruntime as ort

    path = tmp / f"{module.name}.onnx"
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), dynamo=True, optimize=True,
                          external_data=False, verbose=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def candidates(name: str, w: dict[str, np.ndarray], tmp: Path, with_ort: bool,
               columns: list[int]) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The block's callables: ``rlx`` (rlx's defaults), ``rlx/cN`` for each ``columns`` (the
    same module compiled with ``prefill_columns=N``: an A/B of the prefill tile in one run),
    ``torch`` and (``with_ort``) ``ort``."""
    block = make_block(name, w)
    h = rlx_block(name)
    vmfb = rlx.compile(h)
    prog = rlx.runtime.load(vmfb, params=w)
    dev = {k: prog.upload(v) for k, v in block.inputs.items()}
    fns: dict[str, Callable[[], Any]] = {"rlx": lambda: prog.main.on_device(**dev)}
    for n in columns:
        other = rlx.runtime.load(rlx.compile(h, prefill_columns=n), params=w)
        up = {k: other.upload(v) for k, v in block.inputs.items()}
        fns[f"rlx/c{n}"] = lambda other=other, up=up: other.main.on_device(**up)
    tmod = Torch(name, w).eval()
    targs = tuple(torch.from_numpy(v) for v in block.inputs.values())

    def run_torch() -> Any:
        with torch.inference_mode():
            return tmod(*targs)

    fns["torch"] = run_torch
    info: dict[str, Any] = {"block": block, "dispatches": dispatch_counts(h)}
    got = prog.main(**block.inputs)
    want = run_torch()
    first = got[0] if isinstance(got, tuple) else got
    ref = (want[0] if isinstance(want, tuple) else want).numpy()
    info["max_rel_err"] = float(np.abs(first - ref).max() / np.abs(ref).max())
    if with_ort:
        sess = ort_session(tmod, targs, tmp)
        feeds = {i.name: v for i, v in zip(sess.get_inputs(), block.inputs.values(),
                                           strict=True)}
        fns["ort"] = lambda: sess.run(None, feeds)
    return fns, info


def measure(all_fns: dict[tuple[str, str], Callable[[], Any]], rounds: int,
            calls: dict[str, int]) -> dict[tuple[str, str], list[float]]:
    times: dict[tuple[str, str], list[float]] = {k: [] for k in all_fns}
    for fn in all_fns.values():  # two warm-up calls each
        fn()
        fn()
    for _ in range(rounds):
        order = list(all_fns)
        random.shuffle(order)
        for key in order:
            time.sleep(0.03)  # let the previous runtime's spinning threads park
            times[key] += timed(all_fns[key], calls[key[0]])
    return times


def report(results: dict[str, Any]) -> str:
    ceil = results["machine"]
    lines = [
        "# rlx vs PyTorch eager vs ONNX Runtime (llvm-cpu, f32, batch 1)",
        "",
        f"Machine: {results['host']}; {THREADS} threads everywhere. Same process, "
        f"{results['rounds']} interleaved rounds. sgemm 1024³ (numpy/OpenBLAS): "
        f"{ceil['sgemm_gflops']:.0f} GFLOP/s; read bandwidth 512 MiB: "
        f"{ceil['read_gbs_torch_2threads']:.1f} GB/s (torch.sum, 2 threads), "
        f"{ceil['read_gbs_numpy_1thread']:.1f} GB/s (numpy, 1 thread).",
        "",
        f"Reproduce: `{results['command']}`",
        "",
        "| block | impl | median ms | p25-p75 ms | rlx/torch | rlx/ORT | throughput | "
        "dispatches (flow+encode / run) | max rel err vs torch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["blocks"].items():
        for impl, t in row["impls"].items():
            ratio_t = t["median_ms"] / row["impls"]["torch"]["median_ms"]
            ratio_o = (f'{t["median_ms"] / row["impls"]["ort"]["median_ms"]:.2f}'
                       if "ort" in row["impls"] else "n/a")
            rlx_row = impl.startswith("rlx")
            d = row["dispatches"]
            err = row["max_rel_err"]
            lines.append(
                f"| {name} | {impl} | {t['median_ms']:.3f} | {t['p25_ms']:.3f}-{t['p75_ms']:.3f}"
                f" | {f'{ratio_t:.2f}' if rlx_row else ''} | {ratio_o if rlx_row else ''}"
                f" | {t['throughput']} | {f'{d[0]}+{d[1]} / {d[2]}' if impl == 'rlx' else ''}"
                f" | {f'{err:.1e}' if impl == 'rlx' else ''} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--blocks", nargs="*", default=list(BLOCKS), choices=BLOCKS)
    parser.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    parser.add_argument("--prefill-columns", type=int, nargs="*", default=[],
                        help="also time rlx compiled with prefill_columns=N (rows 'rlx/cN')")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={THREADS}")
    random.seed(0)
    w = make_weights()
    fns: dict[tuple[str, str], Callable[[], Any]] = {}
    infos: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.blocks:
            block_fns, infos[name] = candidates(name, w, Path(tmp), not args.no_ort,
                                                args.prefill_columns)
            fns |= {(name, impl): fn for impl, fn in block_fns.items()}
        calls = {"rmsnorm": 20, "swiglu_ffn": 3, "attention": 5, "prefill_block": 3,
                 "decode_step": 10}
        times = measure(fns, args.rounds, calls)
    machine = machine_ceilings(3)
    results: dict[str, Any] = {
        "host": f"{platform.machine()} {cpu_model()}, {os.cpu_count()} cpus, "
                f"torch {torch.__version__}".strip(),
        "rounds": args.rounds, "machine": machine,
        "command": "python -m benchmarks " + " ".join(
            [f"--rounds {args.rounds}", *(["--no-ort"] if args.no_ort else []),
             *([f"--blocks {' '.join(args.blocks)}"] if args.blocks != list(BLOCKS) else []),
             *([f"--prefill-columns {' '.join(map(str, args.prefill_columns))}"]
               if args.prefill_columns else [])]),
        "blocks": {}}
    for name in args.blocks:
        block, info = infos[name]["block"], infos[name]
        impls = {}
        for (bname, impl), ts in times.items():
            if bname != name:
                continue
            med = statistics.median(ts)
            q = statistics.quantiles(ts, n=4)
            thr = (f"{block.bytes_read / med / 1e9:.1f} GB/s" if name == "decode_step"
                   else f"{block.flops / med / 1e9:.0f} GFLOP/s")
            impls[impl] = {"median_ms": med * 1e3, "p25_ms": q[0] * 1e3, "p75_ms": q[2] * 1e3,
                           "throughput": thr}
        d = info["dispatches"]
        results["blocks"][name] = {"impls": impls, "dispatches": [d.flow, d.encode, d.stream],
                                   "max_rel_err": info["max_rel_err"]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "blocks.json").write_text(json.dumps(results, indent=2))
    md = report(results)
    (args.out / "blocks.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
