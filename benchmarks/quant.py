"""Decode GEMV (M = 1, or M rows of a batched decode step) with quantized weights on
llvm-cpu: rlx's fused dequant_matmul per scheme, beside the machine's read bandwidth and
PyTorch eager on dequantized f32 weights.

Everything is measured in one process and one run, best of several repetitions (the
benchmark machines are shared). Each timed call runs ``R`` GEMVs on distinct weights,
96 MiB by default (``--stream-mib``), three times a 32 MiB L3, so the weights stream from DRAM
as in a real model's decode step (one 4096 x 4096 Q4_K weight is 9 MiB and would otherwise
be served from a 32 MiB L3). A larger last-level cache (a 2-vCPU Xeon VM reports 300 MiB)
is named in a warning: more than it per call takes more memory than a 23 GB machine has
for the Q4_K rows (killed at ~24 GB with 375 MiB); Q8_0 alone ran with 900 MiB.

- read bandwidth: a numpy reduction (``sum``) over 512 MiB, on one thread and split over
  all cores (threads; numpy releases the GIL), best of 5;
- rlx: ``dequant_matmul`` per scheme (raw GGUF bytes as parameters, the repacking hoisted
  into initializers by IREE), GB/s = weight bytes as stored in the GGUF file / time; Q8_0
  and Q4_K three times: rlx's hand-written GEMV kernel (the llvm-cpu default), the same
  kernel with 8-bit activations and integer dot products (``q8``:
  ``activation_quant="q8"``, its own numerics mode, checked against its error bound) and
  the fused dequant + matvec (``gemv_kernels=False``, the form of every other scheme);
- torch: ``torch.mv`` on the dequantized f32 weights (``R`` copies as well), its time and
  the f32 bytes it reads;
- ``rlx/torch``: ratio of times (below 1: rlx is faster);
- ``--rows 1,4,8``: each row count ``M`` of ``x [M, K]`` (a batched decode step's sequences):
  where ``M > 1`` the ``kernel`` form is the batched kernel and ``fused`` is the prefill form
  (the weight dequantized K-major and IREE's data-tiled matmul), what M > 1 ran before the
  batched kernels; torch runs ``W x^T`` (its f32 GEMM at M = 3: ~15 ms for a 4096 x 576
  weight, against ~1 ms for its M = 1 matvec, here).

Usage: ``python benchmarks/quant.py [--schemes gguf_q4_k,gguf_q8_0] [--shapes 4096x4096]
[--rows 1,4,8] [--reps 20] [--stream-mib 96] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import rlx  # noqa: E402
from benchmarks.machine import cpu_model, last_level_cache_bytes  # noqa: E402
from rlx.compiler import TargetConfig  # noqa: E402
from rlx.dialects.enums import QUANT_SCHEMES  # noqa: E402
from rlx.lowering.mir_to_linalg.quant.gemv_kernels import kernel_for  # noqa: E402
from rlx.reference import quant as ref  # noqa: E402

GGUF_SCHEMES = [s for s, q in QUANT_SCHEMES.items() if q.gguf]
STREAM_BYTES = 96 << 20
"""Weight bytes per timed call: three times a 32 MiB L3 (``--stream-mib`` sets it)."""


def best_of(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def read_bandwidth(reps: int = 5) -> dict[str, float]:
    """GB/s of reading 512 MiB: numpy's sum on one thread and on all cores, and numpy's BLAS
    matrix-vector product (``[131072, 1024] @ [1024]``, its own threads); ``read_bw`` the
    best. The sum alone is not always memory-bound: on the Intel Xeon VM it read 8.8 GB/s on
    one thread and 17 on two, where the sgemv (and torch's) read 31-33."""
    a = np.ones(512 << 18, np.float32)
    one = a.nbytes / best_of(lambda: a.sum(), reps) / 1e9
    cores = os.cpu_count() or 1
    parts = np.array_split(a, cores)
    with ThreadPoolExecutor(cores) as pool:
        many = a.nbytes / best_of(lambda: list(pool.map(np.sum, parts)), reps) / 1e9
    mat, v = a.reshape(-1, 1024), np.ones(1024, np.float32)
    gemv = a.nbytes / best_of(lambda: mat @ v, reps) / 1e9
    return {"numpy_sum_1t": one, f"numpy_sum_{cores}t": many, "numpy_sgemv": gemv,
            "read_bw": max(one, many, gemv)}


def random_weights(scheme: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Raw GGUF bytes ``[n, ROWBYTES]``: random bits with sane f16 scales."""
    q = QUANT_SCHEMES[scheme]
    if scheme in ("gguf_f16", "gguf_bf16"):
        w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
        if scheme == "gguf_f16":
            return w.astype(np.float16).view(np.int8)
        return (w.view(np.uint32) >> 16).astype(np.uint16).view(np.int8)
    blocks = rng.integers(0, 256, (n, k // q.block_elems, q.block_bytes), dtype=np.uint8)
    scales = {"gguf_q2_k": [80, 82], "gguf_q3_k": [108], "gguf_q6_k": [208],
              "gguf_q8_k": []}.get(scheme, [0, 2] if scheme in (
                  "gguf_q4_1", "gguf_q5_1", "gguf_q4_k", "gguf_q5_k") else [0])
    for at in scales:
        d = (rng.random(blocks.shape[:2]) * 0.01 + 1e-3).astype(np.float16)
        blocks[:, :, at:at + 2] = d.view(np.uint8).reshape(*blocks.shape[:2], 2)
    if scheme == "gguf_q8_k":
        d = (rng.random(blocks.shape[:2]) * 1e-3).astype(np.float32)
        blocks[:, :, 0:4] = d.view(np.uint8).reshape(*blocks.shape[:2], 4)
    return blocks.reshape(n, -1).view(np.int8)


def q8_bound(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``[M, N]``: the most by which quantizing ``x [M, K]`` to int8 blocks of 32 (ggml's
    ``q8_0``) moves ``x w^T`` (``w [N, K]`` f64): ``Σ_b amax_b / 254 Σ_(i in b) |w_i|``,
    times ``1 + 2^-16`` (gemv_q8's docstring)."""
    m, k = x.shape
    half_step = np.abs(x.astype(np.float64)).reshape(m, k // 32, 32).max(2) / 254.0
    return np.einsum("mb,nb->mn", half_step, np.abs(w).reshape(len(w), k // 32, 32).sum(2)
                     ) * (1 + 2.0 ** -16)


def prepare_rlx(scheme: str, n: int, k: int, rng: np.random.Generator, kernels: bool = True,
                m: int = 1, activation_quant: str | None = None, prefetch: int | None = None,
                columns: int | None = None
                ) -> tuple[Callable[[], object], int, int, np.ndarray, np.ndarray, float]:
    """A call of ``R`` GEMVs of ``x [m, K]`` (compiled, loaded and checked against the
    float64 reference), weight bytes per GEMV, copies R, x, the first copy's raw weight and
    the result's max error relative to the largest output (``kernels``: rlx's hand-written
    GEMV where the scheme has one, else the fused form; ``activation_quant``: that compile
    option, checked against its error bound; ``prefetch``: ``gemv_prefetch``, ``columns``:
    ``prefill_columns``, None for the CPU's default)."""
    row = QUANT_SCHEMES[scheme].row_bytes(k)
    copies = max(1, math.ceil(STREAM_BYTES / (n * row)))
    h = rlx.HirModule(f"gemv_{scheme}")
    x = h.input("x", (m, k))
    h.set_outputs([h.dequant_matmul(x, h.param(f"w{i}", (n, row), "i8"), scheme=scheme)
                   for i in range(copies)])
    options: dict[str, object] = {"activation_quant": activation_quant} if activation_quant else {}
    if prefetch is not None:
        options["gemv_prefetch"] = prefetch
    if columns is not None:
        options["prefill_columns"] = columns
    vmfb = rlx.compile(h, "llvm-cpu", gemv_kernels=kernels, **options)
    weights = {f"w{i}": random_weights(scheme, n, k, rng) for i in range(copies)}
    prog = rlx.runtime.load(vmfb, "local-task", weights)
    xv = rng.standard_normal((m, k)).astype(np.float32)
    check = prog.main(xv)
    first = np.array(check[0] if isinstance(check, tuple) else check, copy=True)
    w64 = ref.dequantize_gguf(weights["w0"], scheme).astype(np.float64)
    want = xv.astype(np.float64) @ w64.T
    slack = q8_bound(xv, w64) if activation_quant else 0.0
    err = float(np.max(np.maximum(np.abs(first - want) - slack, 0.0))
                / max(np.abs(want).max(), 1e-30))
    if err > 1e-4:
        raise SystemExit(f"{scheme} {n}x{k}: rlx result off by {err:.2e} (relative)")
    rel = float(np.abs(first - want).max() / max(np.abs(want).max(), 1e-30))
    return lambda: prog.main(xv), n * row, copies, xv, weights["w0"], rel


def bench_torch(scheme: str, n: int, k: int, x: np.ndarray, raw: np.ndarray, reps: int
                ) -> float | None:
    """Seconds per ``torch.mv`` on the dequantized f32 weight (R copies, > 2x L3)."""
    try:
        import torch
    except ImportError:
        return None
    w = torch.from_numpy(ref.dequantize_gguf(raw, scheme))
    copies = max(2, math.ceil(STREAM_BYTES / w.numel() / 4))
    ws = [w.clone() for _ in range(copies)]
    xt = torch.from_numpy(x[0] if len(x) == 1 else x)
    xt_t = xt.T.contiguous()

    def run() -> None:
        for m in ws:
            if len(x) == 1:
                torch.mv(m, xt)
            else:
                torch.mm(m, xt_t)

    with torch.inference_mode():
        return best_of(run, reps) / copies


def forms(scheme: str, shape: str, m: int, prefetch: list[int] | None = None,
          columns: list[int] | None = None) -> tuple[str, ...]:
    """The rlx forms measured for one row: ``kernel``, ``q8`` (where the scheme has an
    integer-dot kernel, ``M = 1``) and ``fused``, or ``fused`` only; with ``prefetch``,
    each kernel form once per hint distance (``kernel@4096``: ``gemv_prefetch=4096``); with
    ``columns``, once per prefill column block (``kernel/32``: ``prefill_columns=32``)."""
    if not has_kernel(scheme, shape, m):
        return ("fused",)
    n, k = (int(v) for v in shape.split("x"))
    q8 = TargetConfig("llvm-cpu", activation_quant="q8").lowering
    kern = kernel_for(scheme, m, n, k, q8)
    kernels = ("kernel", "q8") if kern and kern.int_dot else ("kernel",)
    if prefetch is not None:
        kernels = tuple(f"{f}@{b}" for f in kernels for b in prefetch)
    if columns is not None:
        kernels = tuple(f"{f}/{c}" for f in kernels for c in columns)
    return (*kernels, "fused")


def has_kernel(scheme: str, shape: str, m: int = 1) -> bool:
    """Whether rlx's default llvm-cpu lowering runs this GEMV through a hand-written kernel
    (then it is measured both ways: ``kernel`` and the ``fused`` dequant + matvec that
    ``gemv_kernels=False`` gives; a Q5_0 / Q4_0 / Q6_K weight too large for its widening to
    be hoisted has the fused form only)."""
    n, k = (int(v) for v in shape.split("x"))
    return kernel_for(scheme, m, n, k, TargetConfig("llvm-cpu").lowering) is not None


def _report(run: tuple[str, str, int, str],
            prep: tuple[Callable[[], object], int, int, np.ndarray, np.ndarray, float],
            bw: dict[str, float], reps: int, rows: list[dict[str, object]],
            seconds: float | None = None) -> None:
    """Time (unless ``seconds`` is given) and print one row, with torch beside it."""
    shape, scheme, m, form = run
    n, k = (int(v) for v in shape.split("x"))
    call, nbytes, copies, x, raw, rel = prep
    if seconds is None:
        seconds = best_of(call, reps) / copies
    t_torch = bench_torch(scheme, n, k, x, raw, reps)
    gbs = nbytes / seconds / 1e9
    row = {"scheme": scheme, "form": form, "m": m, "n": n, "k": k, "weight_bytes": nbytes,
           "copies": copies, "rlx_ms": seconds * 1e3, "rlx_gbs": gbs,
           "pct_read_bw": 100 * gbs / bw["read_bw"], "rel_err": rel,
           "torch_ms": None if t_torch is None else t_torch * 1e3,
           "torch_gbs_f32": None if t_torch is None else n * k * 4 / t_torch / 1e9,
           "rlx_over_torch": None if t_torch is None else seconds / t_torch}
    rows.append(row)
    torch_cols = ("- | - | -" if t_torch is None else
                  f"{row['torch_ms']:.3f} | {row['torch_gbs_f32']:.1f} | "
                  f"{row['rlx_over_torch']:.2f}")
    print(f"| {scheme} | {form} | {m} | {n}x{k} | {nbytes / 2**20:.1f} | {copies} | "
          f"{row['rlx_ms']:.3f} | {gbs:.1f} | {row['pct_read_bw']:.0f}% | {rel:.1e} | "
          f"{torch_cols} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schemes", default=",".join(GGUF_SCHEMES))
    p.add_argument("--shapes", default="4096x4096,11008x4096", help="NxK,...")
    p.add_argument("--rows", default="1", help="M of x [M, K], comma-separated")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=1,
                   help="time every rlx row this many times, interleaved (best kept): for "
                        "A/B comparisons on a shared machine; the read bandwidth each round")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--stream-mib", type=int, default=96,
                   help="weight MiB a timed call streams (default 96)")
    p.add_argument("--prefetch", help="bytes, comma-separated: run each kernel form with "
                   "these prefetch hint distances (gemv_prefetch; 0: none) instead of the "
                   "CPU's default")
    p.add_argument("--prefill-columns", help="16,32: run each kernel form with these "
                   "column blocks of the exact prefill GEMM (prefill_columns) instead of "
                   "the CPU's default")
    args = p.parse_args()
    global STREAM_BYTES
    STREAM_BYTES = args.stream_mib << 20
    rng = np.random.default_rng(0)
    bw = read_bandwidth()
    print("read bandwidth: " + ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items()))
    q8_dot = TargetConfig("llvm-cpu", activation_quant="q8").lowering.int_dot
    print(f"CPU {cpu_model()!r}, last-level cache {last_level_cache_bytes() >> 20} MiB, "
          f"{STREAM_BYTES >> 20} MiB of weights a timed call; q8 form's block dot product: "
          f"{q8_dot}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if last_level_cache_bytes() * 5 // 4 > STREAM_BYTES:
        print(f"warning: {STREAM_BYTES >> 20} MiB a timed call is not past this CPU's "
              f"{last_level_cache_bytes() >> 20} MiB last-level cache: weights may be read from "
              "it, not from DRAM (--stream-mib)")
    rows = []
    header = ("| scheme | rlx form | M | N x K | weight MiB | R | rlx ms | rlx GB/s | "
              "% of read bw | max err / max y | torch f32 ms | torch GB/s (f32) | rlx/torch |")
    print(header)
    print("|" + "---|" * 13)
    prefetch = None if args.prefetch is None else [int(b) for b in args.prefetch.split(",")]
    columns = (None if args.prefill_columns is None
               else [int(c) for c in args.prefill_columns.split(",")])
    runs = [(shape, scheme, m, form) for shape in args.shapes.split(",")
            for scheme in args.schemes.split(",")
            for m in (int(v) for v in args.rows.split(","))
            for form in forms(scheme, shape, m, prefetch, columns)]
    prepared = {}
    for run in runs:
        shape, scheme, m, form = run
        n, k = (int(v) for v in shape.split("x"))
        form_hint, _, cols = form.partition("/")
        base, _, hint = form_hint.partition("@")
        prepared[run] = prepare_rlx(scheme, n, k, rng, kernels=form != "fused", m=m,
                                    activation_quant="q8" if base == "q8" else None,
                                    prefetch=int(hint) if hint else None,
                                    columns=int(cols) if cols else None)
        if args.rounds == 1:
            _report(run, prepared[run], bw, args.reps, rows)
            del prepared[run]                    # its weights: up to 100 MiB
    best: dict[tuple[str, str, int, str], float] = {}
    for _ in range(args.rounds if args.rounds > 1 else 0):
        round_bw = read_bandwidth()
        bw = {key: max(v, bw[key]) for key, v in round_bw.items()}
        for run, (call, _, copies, *_unused) in prepared.items():
            t = best_of(call, args.reps) / copies
            best[run] = min(best.get(run, t), t)
    for run, prep in prepared.items():
        _report(run, prep, bw, args.reps, rows, best[run])
    print(f"read bandwidth (best of the rounds): {bw['read_bw']:.1f} GB/s; load average at "
          f"the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"read_bandwidth": bw, "cpu": cpu_model(),
                                               "q8_dot": q8_dot,
                                               "loadavg_end": os.getloadavg(), "rows": rows},
                                              indent=1))


if __name__ == "__main__":
    main()
