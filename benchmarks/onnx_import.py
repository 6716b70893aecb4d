"""``python -m benchmarks.onnx_import``: one ONNX file (a small HF LLaMA exported by
``torch.onnx.export``, random weights) run by ONNX Runtime and by rlx after
``rlx.importers.onnx`` (with block recognition, and node by node), interleaved in one
process on llvm-cpu, f32, batch 1, 2 threads everywhere. Prints the median time per call,
the ratios to ORT, the dispatches one rlx call runs, and the largest logit difference.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import rlx  # noqa: E402
from benchmarks.__main__ import timed  # noqa: E402
from rlx.compiler import dispatch_counts  # noqa: E402
from rlx.importers.onnx import import_model  # noqa: E402


def export(path: Path, seq: int) -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
        attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.m(input_ids=ids, use_cache=False).logits

    ids = torch.zeros((1, seq), dtype=torch.int64)
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(Logits().eval(), (ids,), str(path), input_names=["input_ids"],
                          output_names=["logits"], dynamo=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "llama.onnx"
        export(path, args.seq)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = THREADS
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        ids = np.random.default_rng(0).integers(0, 1024, (1, args.seq)).astype(np.int64)
        fns: dict[str, Any] = {"ort": lambda: session.run(None, {"input_ids": ids})}
        want = fns["ort"]()[0]
        rows = {}
        for name, blocks in (("rlx (blocks)", True), ("rlx (node by node)", False)):
            start = time.perf_counter()
            imported = import_model(path, blocks=blocks)
            seconds = time.perf_counter() - start
            program = rlx.runtime.load(rlx.compile(imported.module, "llvm-cpu"),
                                       "local-task", imported.params)
            dev = program.upload(ids)
            fns[name] = lambda p=program, d=dev: p.main.on_device(d)
            err = float(np.abs(program.main(ids) - want).max() / np.abs(want).max())
            d = dispatch_counts(imported.module)
            rows[name] = (f"{len(imported.report.blocks)} blocks, import {seconds:.2f} s",
                          f"{d.flow}+{d.encode} / {d.stream}", f"{err:.1e}")
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.rounds):
            order = list(fns)
            random.shuffle(order)
            for key in order:
                time.sleep(0.03)
                times[key] += timed(fns[key], args.calls)
    median = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"tiny HF LLaMA (hidden 256, 2 layers, GQA 8/2), prefill of {args.seq} tokens, "
          f"{THREADS} threads, {args.rounds} interleaved rounds x {args.calls} calls")
    print("| impl | median ms | / ORT | import | dispatches (flow+encode / run) | "
          "max rel err vs ORT |")
    print("|---|---|---|---|---|---|")
    for key, ms in median.items():
        extra = rows.get(key, ("", "", ""))
        print(f"| {key} | {ms:.3f} | {ms / median['ort']:.2f} | {extra[0]} | {extra[1]} | "
              f"{extra[2]} |")


if __name__ == "__main__":
    main()
