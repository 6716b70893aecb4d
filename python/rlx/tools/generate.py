"""``rlx-generate``: greedy generation with a LLaMA-family or Qwen3.5 model (HF directory or
.gguf); ``--speculative mtp`` drafts with a Qwen3.5 checkpoint's MTP head."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlx.compiler import TARGETS
from rlx.generate import Generator
from rlx.ir.diagnostics import RunError
from rlx.models import qwen35
from rlx.models.llama import LlamaModel, ModelError, from_gguf, from_hf
from rlx.tools._cli import run

QWEN35_TYPES = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"}
"""HF model_type values read by rlx.models.qwen35 (which refuses the MoE ones clearly)."""


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
    p.add_argument("--speculative", choices=["mtp"],
                   help="speculative decoding: 'mtp' drafts with the checkpoint's MTP head "
                        "(Qwen3.5); the tokens are plain greedy's")
    p.add_argument("--draft-tokens", type=int, default=4,
                   help="tokens the draft proposes per verify call (default 4)")
    return p


def load_model(path: str) -> LlamaModel | qwen35.Qwen35Model:
    p = Path(path)
    if p.suffix == ".gguf":
        import rlx.gguf

        with rlx.gguf.load(p) as f:
            arch = f.metadata.get("general.architecture")
        return qwen35.from_gguf(p) if arch in ("qwen35", "qwen35moe") else from_gguf(p)
    if not (p / "config.json").is_file():
        raise ModelError(f"{p}: error: expected an HF model directory with config.json, or "
                         "a .gguf file")
    kind = qwen35.read_config(p / "config.json").get("model_type")
    return qwen35.from_hf(p) if kind in QWEN35_TYPES else from_hf(p)


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
    if args.speculative:
        new = _speculative(model, ids, args)
    else:
        new = Generator(model, args.target, args.device).generate(ids, args.max_new_tokens)
    print(",".join(map(str, new)))
    if tok is not None:
        print(tok.decode(new))  # type: ignore[attr-defined]
    return 0


def _speculative(model: LlamaModel | qwen35.Qwen35Model, ids: list[int],
                 args: argparse.Namespace) -> list[int]:
    from rlx import speculative

    if not isinstance(model, qwen35.Qwen35Model):
        raise RunError(f"error: --speculative mtp needs a Qwen3.5 checkpoint, found a "
                       f"{type(model).__name__}")
    if args.draft_tokens < 1:
        raise RunError(f"error: --draft-tokens: expected >= 1, found {args.draft_tokens}")
    qwen35.require_mtp(model)
    program = speculative.load(model, args.draft_tokens, args.target, args.device)
    dec = speculative.decoder(model, program, args.draft_tokens)
    new = dec.generate(ids, args.max_new_tokens)
    s = dec.stats
    print(f"speculative: {s.rounds} verify calls, {s.accepted} of {s.drafted} drafts "
          f"accepted (acceptance {s.acceptance:.2f})", file=sys.stderr)
    return new


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
