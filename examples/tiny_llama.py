"""A tiny LLaMA-style model built with rlx, compiled for llvm-cpu and run.

Token embedding (a gather), N ``transformer_block``s (GQA attention with NeoX RoPE, SwiGLU
FFN), a final RMSNorm and an LM head. Weights come from a fixed seed, so every run prints
the same numbers. The output is checked against rlx's float64 numpy reference.

    python examples/tiny_llama.py [--layers 2] [--target llvm-cpu] [--save-hir tiny.hir]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rlx
from rlx.reference import evaluate

CONFIG = {"vocab": 256, "hidden": 128, "heads": 4, "kv_heads": 2, "head_dim": 32,
          "ffn": 344, "eps": 1e-5, "theta": 10000.0}


def build(layers: int) -> rlx.HirModule:
    c = CONFIG
    e, hd = c["hidden"], c["head_dim"]
    h = rlx.HirModule("tiny_llama")
    ids = h.input("ids", (1, "seq"), "i32")
    cos, sin = h.input("cos", ("seq", hd // 2)), h.input("sin", ("seq", hd // 2))
    x = h.named("embed", lambda h: h.mir("gather", [h.param("embed", (c["vocab"], e)), ids]))
    for i in range(layers):
        p = [h.param(f"layers.{i}.{n}", s) for n, s in (
            ("ln1", (e,)), ("ln1_b", (e,)), ("q", (e, c["heads"] * hd)),
            ("k", (e, c["kv_heads"] * hd)), ("v", (e, c["kv_heads"] * hd)),
            ("o", (c["heads"] * hd, e)), ("ln2", (e,)), ("ln2_b", (e,)),
            ("gate", (e, c["ffn"])), ("up", (e, c["ffn"])), ("down", (c["ffn"], e)))]
        x = h.named(f"layers.{i}", lambda h, x=x, p=p: h.transformer_block(
            x, *p, cos, sin, num_heads=c["heads"], head_dim=hd, num_kv_heads=c["kv_heads"],
            eps=c["eps"]))
    x = h.named("norm", lambda h: h.rms_norm(x, h.param("norm", (e,)), h.param("norm_b", (e,)),
                                             c["eps"]))
    h.set_outputs([h.named("lm_head", lambda h: h.linear(x, h.param("lm_head", (e, c["vocab"]))))])
    return h


def weights(h: rlx.HirModule, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic weights: N(0, 1/fan_in) matrices, norms near 1, zero norm biases."""
    rng = np.random.default_rng(seed)
    out = {}
    for op in h.ops:
        if op.name != "rlx_hir.param":
            continue
        name = op.attributes["name"].value
        shape = tuple(op.results[0].type.shape)
        if name.endswith("_b"):
            out[name] = np.zeros(shape, np.float32)
        elif len(shape) == 1:
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    return out


def rope_tables(seq: int) -> tuple[np.ndarray, np.ndarray]:
    hd = CONFIG["head_dim"]
    inv = CONFIG["theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    angles = np.arange(seq)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--target", default="llvm-cpu", choices=("llvm-cpu", "vulkan"))
    parser.add_argument("--save-hir", help="also write the HIR text to this file")
    args = parser.parse_args()

    h = build(args.layers)
    if args.save_hir:
        with open(args.save_hir, "w") as f:
            f.write(str(h))
    params = weights(h)
    t0 = time.perf_counter()
    vmfb = rlx.compile(h, args.target)
    compile_s = time.perf_counter() - t0
    device = {"llvm-cpu": "local-task", "vulkan": "vulkan"}[args.target]
    model = rlx.runtime.load(vmfb, device, params)

    ids = np.array([[1, 17, 42, 7, 99, 3, 250, 64]], np.int32)
    cos, sin = rope_tables(ids.shape[1])
    t0 = time.perf_counter()
    logits = model.main(ids=ids, cos=cos, sin=sin)
    run_ms = (time.perf_counter() - t0) * 1e3
    want = evaluate(h, {"ids": ids, "cos": cos, "sin": sin}, params)[0]
    err = float(np.abs(logits - want).max())

    print(f"tiny_llama: {args.layers} layers, hidden {CONFIG['hidden']}, "
          f"{CONFIG['heads']} heads / {CONFIG['kv_heads']} KV heads, vocab {CONFIG['vocab']}")
    print(f"compiled for {args.target} in {compile_s:.1f} s ({len(vmfb) / 1024:.0f} KiB vmfb, "
          f"{sum(a.nbytes for a in params.values()) / 2**20:.1f} MiB of weights outside it)")
    print(f"prompt ids:        {ids[0].tolist()}")
    print(f"next-token argmax: {logits[0].argmax(-1).tolist()}")
    print(f"logits[0, -1, :5]: [{', '.join(f'{v:.4f}' for v in logits[0, -1, :5])}]")
    print(f"run: {run_ms:.1f} ms; max |rlx - numpy reference| = {err:.2e}")
    if err > 1e-3:
        raise SystemExit(f"mismatch against the reference: {err}")


if __name__ == "__main__":
    main()
