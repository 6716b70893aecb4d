"""Qwen3.5-shaped models from GGUF files: rlx (llvm-cpu) vs HF transformers eager vs
llama.cpp, prefill and decode tokens/s, in one run on the same files and thread count; and
speculative decoding with the MTP head against plain decode.

Shapes (random weights, std 0.02, fixed seed, a random MTP head): ``tiny`` and ``0.8b``
(Qwen3.5-0.8B's published text config: hidden 1024, 24 layers in 3:1 DeltaNet / gated
attention, 16 key = value heads of 128 in the DeltaNet layers, 8 query / 2 KV heads of 256,
partial RoPE over 64 lanes, FFN 3584, vocabulary 248320, tied embeddings). The HF model is
written as an F16 GGUF the way llama.cpp's converter does (``tests/hf_gguf_qwen35.py``) and
quantized to Q8_0 / Q4_K_M by ``llama-quantize`` (without llama.cpp: Q8_0 written directly,
no Q4_K). Per format, interleaved in rounds (as ``benchmarks/llama.py``): rlx prefill (one
call on a ``--prompt``-token prompt) and ``--gen`` pipelined greedy decode steps; HF eager
(f32) the same; ``llama-bench -p PROMPT -n GEN -r 1``. Dispatches a decode token runs: IREE
stream dispatches of the ``decode`` function.

Quantized files run in each numerics mode of ``--modes`` (``exact`` and ``q8``, as
``benchmarks/llama.py`` describes), rows of their own beside the same HF and llama.cpp runs.

Speculative (``--speculative-format``, K = ``--draft-tokens``): tokens/s of greedy
generation of ``--gen`` tokens through ``rlx.speculative`` with the MTP head (its measured
acceptance rate; random weights: about 1/vocabulary) and with a draft that is always right
(replaying plain decode's own tokens: every draft accepted, the upper bound), against plain
pipelined decode, all three timed from the same prefilled prompt.

Usage: ``python benchmarks/qwen35.py [--models tiny,0.8b] [--formats F16,Q8_0,Q4_K]
[--llama-cpp DIR] [--threads 2] [--json out.json] [--md out.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
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

import torch  # noqa: E402
import transformers  # noqa: E402

from benchmarks.llama import (  # noqa: E402
    CACHE,
    QUANT_MODES,
    QUANTIZE_TYPES,
    _line,
    _ratio,
    decode_bytes,
    format_label,
    llama_bench,
    llama_cpp_version,
    mode_options,
    modes_for,
    parse_modes,
    timed,
)
from benchmarks.machine import cpu_model  # noqa: E402
from hf_gguf_qwen35 import write_gguf  # noqa: E402
from rlx import speculative  # noqa: E402
from rlx.compiler import dispatch_counts  # noqa: E402
from rlx.generate import Generator  # noqa: E402
from rlx.models import qwen35  # noqa: E402

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
             "linear_num_key_heads": 2, "linear_num_value_heads": 4,
             "linear_key_head_dim": 64, "linear_value_head_dim": 64, "vocab_size": 512,
             "tie_word_embeddings": False},
    "0.8b": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 8,
             "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 3584,
             "linear_num_key_heads": 16, "linear_num_value_heads": 16,
             "linear_key_head_dim": 128, "linear_value_head_dim": 128,
             "vocab_size": 248320, "tie_word_embeddings": True},
}


def hf_model(shape: str, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """The HF model and its tensors with a random MTP head (``mtp.*``)."""
    cfg = transformers.Qwen3_5TextConfig(
        **SHAPES[shape], linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        max_position_embeddings=4096, initializer_range=0.02,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0,
                         "partial_rotary_factor": 0.25})
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.Qwen3_5ForCausalLM(cfg).eval()
    tensors = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(seed + 1)
    e = cfg.hidden_size
    full = f"model.layers.{cfg.layer_types.index('full_attention')}."
    tensors["mtp.fc.weight"] = rng.normal(0, 0.02, (e, 2 * e)).astype(np.float32)
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        tensors[f"mtp.{n}.weight"] = np.zeros(e, np.float32)
    for k, v in list(tensors.items()):
        if k.startswith(full):
            tensors["mtp.layers.0." + k[len(full):]] = rng.normal(
                0, 0.02, v.shape).astype(np.float32) if v.ndim == 2 else v.copy()
    return model, tensors


def gguf_files(shape: str, model: Any, tensors: dict[str, np.ndarray], formats: list[str],
               bindir: Path | None) -> dict[str, Path]:
    import subprocess

    CACHE.mkdir(exist_ok=True)
    f16 = CACHE / f"qwen35-{shape}-F16.gguf"
    if not f16.exists():
        write_gguf(model, f16, "F16", tensors=tensors, vocab=True)
    files = {"F16": f16}
    for fmt in formats:
        out = CACHE / f"qwen35-{shape}-{fmt}.gguf"
        if fmt == "F16" or out.exists():
            files[fmt] = out if fmt != "F16" else f16
            continue
        if bindir is not None:
            subprocess.run([str(bindir / "llama-quantize"), str(f16), str(out),
                            QUANTIZE_TYPES[fmt], "2"], check=True, capture_output=True)
        elif fmt == "Q8_0":
            write_gguf(model, out, "Q8_0", tensors=tensors, vocab=True)
        else:
            print(f"  {fmt}: skipped (needs llama.cpp's llama-quantize)", file=sys.stderr)
            continue
        files[fmt] = out
    return {k: v for k, v in files.items() if k in formats}


def rlx_side(path: Path, prompt: list[int], gen: int, mode: str = "exact") -> dict[str, Any]:
    model = qwen35.from_gguf(path)
    t0 = time.perf_counter()
    g = Generator(model, options=mode_options(mode))
    compile_s = time.perf_counter() - t0

    def decode() -> float:
        _, state = g.prefill(prompt[:1])
        t0 = time.perf_counter()
        g.greedy(prompt[1], 1, state, gen)
        return time.perf_counter() - t0

    counts = dispatch_counts(qwen35.build(model.config, functions=("decode",),
                                          context=model.context),
                             **mode_options(mode))
    return {"prefill": lambda: g.prefill(prompt), "decode": decode, "compile_s": compile_s,
            "dispatches": counts.stream, "gen": g}


def hf_side(model: Any, prompt: list[int], gen: int) -> dict[str, Any]:
    ids = torch.tensor([prompt])

    def prefill() -> None:
        with torch.no_grad():
            model(ids, use_cache=True)

    def decode() -> float:
        with torch.no_grad():
            out = model(ids[:, :1], use_cache=True)
            t0 = time.perf_counter()
            for pos in range(1, gen + 1):
                out = model(ids[:, pos % len(prompt)].reshape(1, 1), cache=out.cache,
                            use_cache=True)
                out.logits[0, -1].argmax()
            return time.perf_counter() - t0

    return {"prefill": prefill, "decode": decode}


def speculative_row(path: Path, prompt: list[int], gen: int, k: int, rounds: int
                    ) -> dict[str, Any]:
    """Plain decode vs MTP drafts vs always-right drafts, greedy ``gen`` tokens each."""
    model = qwen35.from_gguf(path)
    program = speculative.load(model, k)
    plain = Generator(model)
    want = plain.generate(prompt, gen + k + 1)
    runs = {"plain": lambda: plain.generate(prompt, gen)}
    stats = {}
    for kind in ("mtp", "replay"):
        def run(kind: str = kind) -> None:
            dec = speculative.decoder(model, program, k, kind, want)
            assert dec.generate(prompt, gen) == want[:gen], f"{kind}: not plain greedy"
            stats[kind] = dec.stats
        runs[kind] = run
    times: dict[str, list[float]] = {n: [] for n in runs}
    for fn in runs.values():
        fn()
    for _ in range(rounds):
        for name, fn in runs.items():
            times[name].append(timed(fn))
    row = {"format": path.stem, "draft_tokens": k, "gen": gen,
           "mtp_acceptance": stats["mtp"].acceptance,
           "mtp_tokens_per_verify": gen / max(stats["mtp"].rounds, 1),
           "replay_tokens_per_verify": gen / max(stats["replay"].rounds, 1)}
    for name, t in times.items():
        row[f"{name}_tps"] = gen / statistics.median(t)
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    bindir = Path(args.llama_cpp) if args.llama_cpp else None
    torch.set_num_threads(args.threads)
    prompt = [int(t) for t in np.random.default_rng(0).integers(3, 200, args.prompt)]
    rows, spec_rows = [], []
    for shape in args.models.split(","):
        print(f"{shape}: building and writing GGUF files", file=sys.stderr)
        hf, tensors = hf_model(shape)
        files = gguf_files(shape, hf, tensors, args.formats.split(","), bindir)
        hf_fns = hf_side(hf, prompt, args.gen)
        for fmt, path in files.items():
            modes = modes_for(fmt, args.modes)
            print(f"{shape} {fmt}: compiling rlx ({', '.join(modes)})", file=sys.stderr)
            sides = {m: rlx_side(path, prompt, args.gen, m) for m in modes}
            t: dict[str, dict[str, list[float]]] = {s: {"prefill": [], "decode": []}
                                                     for s in (*modes, "hf", "cpp")}
            for phase in ("prefill", "decode"):
                for side in sides.values():
                    side[phase]()
                hf_fns[phase]()
            for _ in range(args.rounds):
                for phase in ("prefill", "decode"):
                    for m, side in sides.items():
                        t[m][phase].append(timed(side[phase]))
                    t["hf"][phase].append(timed(hf_fns[phase]))
                if bindir is not None:
                    for phase, tps in llama_bench(bindir, path, args.threads, args.prompt,
                                                  args.gen, 1).items():
                        t["cpp"][phase].append(tps)
            nbytes = decode_bytes(path)
            for m, side in sides.items():
                row = {"model": shape, "format": fmt, "mode": m, "compile_s": side["compile_s"],
                       "dispatches_per_token": side["dispatches"],
                       "decode_weight_mb": nbytes / 1e6}
                for phase, n in (("prefill", args.prompt), ("decode", args.gen)):
                    row[f"rlx_{phase}_tps"] = n / statistics.median(t[m][phase])
                    row[f"hf_{phase}_tps"] = n / statistics.median(t["hf"][phase])
                    if t["cpp"][phase]:
                        row[f"llama_cpp_{phase}_tps"] = statistics.median(t["cpp"][phase])
                rows.append(row)
                print(_line(row), file=sys.stderr)
            del sides
            if fmt == args.speculative_format:
                spec = speculative_row(path, prompt[:16], args.gen, args.draft_tokens,
                                       args.rounds)
                spec_rows.append({"model": shape, **spec})
                print(_line(spec_rows[-1]), file=sys.stderr)
    cpu = cpu_model()
    return {"machine": f"{cpu}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}"
                       f" at the end, torch {torch.__version__}, transformers "
                       f"{transformers.__version__}",
            "llama_cpp": llama_cpp_version(bindir) if bindir is not None else None,
            "threads": args.threads, "prompt": args.prompt, "gen": args.gen,
            "rounds": args.rounds, "rows": rows, "speculative": spec_rows}


def report(res: dict[str, Any]) -> str:
    lines = ["# Qwen3.5-shaped models from GGUF: rlx vs HF eager vs llama.cpp\n",
             f"Machine: {res['machine']}; llama.cpp: {res['llama_cpp'] or 'not run'}; "
             f"{res['threads']} threads everywhere; prefill {res['prompt']} tokens, decode "
             f"{res['gen']} tokens; median of {res['rounds']} interleaved rounds. Speed "
             "ratios: above 1, rlx is faster.\n",
             "| model | format | prefill tok/s rlx / HF / llama.cpp | rlx÷HF | rlx÷llama.cpp "
             "| decode tok/s rlx / HF / llama.cpp | rlx÷HF | rlx÷llama.cpp | dispatches / "
             "token | compile s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        cells = [r["model"], format_label(r)]
        for phase in ("prefill", "decode"):
            rlx_, hf_, cpp = (r.get(f"{s}_{phase}_tps") for s in ("rlx", "hf", "llama_cpp"))
            cells += [f"{rlx_:.1f} / {hf_:.1f} / " + (f"{cpp:.1f}" if cpp else "n/a"),
                      _ratio(rlx_, hf_), _ratio(rlx_, cpp)]
        cells += [str(r["dispatches_per_token"]), f"{r['compile_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if res["speculative"]:
        lines += ["", "Speculative decoding (greedy, same tokens as plain decode, asserted):",
                  "", "| model | file | K | plain tok/s | MTP tok/s (acceptance) | "
                  "always-right tok/s (tokens / verify) |", "|---|---|---|---|---|---|"]
        for s in res["speculative"]:
            lines.append(f"| {s['model']} | {s['format']} | {s['draft_tokens']} | "
                         f"{s['plain_tps']:.1f} | {s['mtp_tps']:.1f} "
                         f"({s['mtp_acceptance']:.3f}) | {s['replay_tps']:.1f} "
                         f"({s['replay_tokens_per_verify']:.2f}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="tiny,0.8b")
    p.add_argument("--formats", default="F16,Q8_0,Q4_K")
    p.add_argument("--llama-cpp", default=os.environ.get("RLX_LLAMA_CPP") or (
        str(CACHE / "llama.cpp/build/bin")
        if (CACHE / "llama.cpp/build/bin/llama-bench").is_file() else None))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--draft-tokens", type=int, default=3)
    p.add_argument("--speculative-format", default="Q8_0")
    p.add_argument("--modes", type=parse_modes, default=list(QUANT_MODES),
                   help="numerics modes of quantized rows (as benchmarks/llama.py's)")
    p.add_argument("--json")
    p.add_argument("--md")
    args = p.parse_args()
    res = run(args)
    text = report(res)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    if args.md:
        Path(args.md).write_text(text)


if __name__ == "__main__":
    main()
