"""``rlx-generate``: greedy generation with a LLaMA-family model (HF directory or .gguf)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlx.compiler import TARGETS
from rlx.generate import Generator
from rlx.ir.diagnostics import RunError
from rlx.models.llama import LlamaModel, ModelError, from_gguf, from_hf
from rlx.tools._cli import run


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-generate",
        description="Compile a LLaMA-family model and generate tokens greedily.",
        epilog="example: rlx-generate ./tiny-llama --prompt-ids 1,2,3 --max-new-tokens 32")
    p.add_argument("model", help="an HF model directory (config.json + *.safetensors) or a "
                                 ".gguf file")
    p.add_argument("--prompt-ids", help="comma-separated token ids")
    p.add_argument("--prompt", help="prompt text (needs the model's tokenizer.json and the "
                                    "'tokenizers' package)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--target", choices=TARGETS, default="llvm-cpu")
    p.add_argument("--device", help="runtime device (default: the target's)")
    return p


def load_model(path: str) -> LlamaModel:
    p = Path(path)
    if p.suffix == ".gguf":
        return from_gguf(p)
    if not (p / "config.json").is_file():
        raise ModelError(f"{p}: error: expected an HF model directory with config.json, or "
                         "a .gguf file")
    return from_hf(p)


def _tokenizer(path: str) -> object | None:
    file = Path(path) / "tokenizer.json"
    if not file.is_file():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_file(str(file))


def _main() -> int:
    args = _parser().parse_args()
    tok = _tokenizer(args.model) if Path(args.model).is_dir() else None
    if args.prompt_ids:
        try:
            ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise RunError(f"error: --prompt-ids: expected comma-separated integers, found "
                           f"{args.prompt_ids!r}") from None
    elif args.prompt is not None:
        if tok is None:
            raise RunError("error: --prompt needs the model's tokenizer.json and the "
                           "'tokenizers' package; use --prompt-ids")
        ids = tok.encode(args.prompt).ids  # type: ignore[attr-defined]
    else:
        raise RunError("error: give --prompt-ids (or --prompt)")
    model = load_model(args.model)
    vocab = model.config.vocab_size
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise RunError(f"error: prompt ids {bad} are outside the vocabulary (0..{vocab - 1})")
    gen = Generator(model, args.target, args.device)
    new = gen.generate(ids, args.max_new_tokens)
    print(",".join(map(str, new)))
    if tok is not None:
        print(tok.decode(new))  # type: ignore[attr-defined]
    return 0


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
