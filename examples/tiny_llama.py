"""A tiny LLaMA-style model built with rlx, compiled for llvm-cpu, generating tokens.

``rlx.models.llama.build`` gives a HIR module with ``prefill`` and ``decode`` entry points
(token embedding, N decoder layers with GQA attention, NeoX RoPE and a SwiGLU FFN, a final
RMSNorm, an LM head; the KV cache stays on the device between calls). Weights come from a
fixed seed, so every run prints the same tokens. The prefill logits are checked against
rlx's float64 numpy reference.

    python examples/tiny_llama.py [--layers 2] [--tokens 16] [--target llvm-cpu]
                                  [--save-hir tiny.hir] [--save-weights tiny.irpa]
                                  [--save-inputs DIR]

``--save-weights`` writes the weights as an IREE parameter archive and ``--save-inputs``
the prompt's ``prefill`` inputs (``ids.npy``, ``cos.npy``, ``sin.npy``, ``last.npy``), for
``rlx-run`` and ``iree-run-module`` (README, "From the command line").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from rlx.generate import Generator
from rlx.models import llama
from rlx.reference import evaluate
from rlx.runtime import save_params


def config(layers: int) -> llama.LlamaConfig:
    return llama.LlamaConfig(vocab_size=256, hidden_size=128, num_layers=layers, num_heads=4,
                             num_kv_heads=2, head_dim=32, intermediate_size=344,
                             rms_norm_eps=1e-5, rope_theta=10000.0)


def weights(c: llama.LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic weights: N(0, 1/fan_in) matrices (a larger embedding), norms near 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in llama.param_shapes(c).items():
        if len(shape) == 1:
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            scale = 1.0 if name == "embed" else 1.0 / np.sqrt(shape[0])
            out[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--target", default="llvm-cpu", choices=("llvm-cpu", "vulkan"))
    parser.add_argument("--save-hir", help="also write the HIR text to this file")
    parser.add_argument("--save-weights", help="also write the weights to this .irpa file")
    parser.add_argument("--save-inputs", metavar="DIR",
                        help="also write the prompt's prefill inputs as DIR/<name>.npy")
    args = parser.parse_args()

    c = config(args.layers)
    model = llama.LlamaModel(c, llama.build(c), weights(c))
    if args.save_hir:
        with open(args.save_hir, "w") as f:
            f.write(str(model.module))
    if args.save_weights:
        save_params(model.weights, args.save_weights)
    t0 = time.perf_counter()
    gen = Generator(model, args.target)
    compile_s = time.perf_counter() - t0

    prompt = [1, 17, 42, 7, 99, 3, 250, 64]
    t0 = time.perf_counter()
    tokens = gen.generate(prompt, args.tokens)
    gen_s = time.perf_counter() - t0

    logits, _ = gen.prefill(prompt)
    cos, sin = llama.rope_tables(c, range(len(prompt)))
    feeds = {"ids": np.array([prompt], np.int32), "cos": cos, "sin": sin,
             "last": np.array([[len(prompt) - 1]], np.int32)}
    if args.save_inputs:
        for name, value in feeds.items():
            np.save(Path(args.save_inputs) / f"{name}.npy", value)
    want = evaluate(model.module, feeds, model.weights, function="prefill")[0][0, -1]
    err = float(np.abs(logits - want).max())

    print(f"tiny_llama: {c.num_layers} layers, hidden {c.hidden_size}, {c.num_heads} heads / "
          f"{c.num_kv_heads} KV heads, vocab {c.vocab_size}")
    print(f"compiled prefill + decode for {args.target} in {compile_s:.1f} s "
          f"({len(gen.vmfb) / 1024:.0f} KiB vmfb; "
          f"{sum(a.nbytes for a in model.weights.values()) / 2**20:.1f} MiB of weights outside)")
    print(f"prompt ids:    {prompt}")
    print(f"generated ids: {tokens}")
    print(f"{len(tokens)} tokens in {gen_s * 1e3:.0f} ms "
          f"({len(tokens) / gen_s:.0f} tokens/s, prefill included)")
    print(f"prefill logits: max |rlx - numpy reference| = {err:.2e}")
    if err > 1e-3:
        raise SystemExit(f"mismatch against the reference: {err}")


if __name__ == "__main__":
    main()
