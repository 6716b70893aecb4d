"""``rlx-generate``: text (or token ids) in, text (or ids) out, with a LLaMA-family or
Qwen3.5 model (HF directory or .gguf) and its own tokenizer and chat template;
``--speculative mtp`` drafts with a Qwen3.5 checkpoint's MTP head."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from rlx.cache import ENV_VAR, CompileCache
from rlx.compiler import TARGETS
from rlx.generate import Generator, Sampling, encode_prompt, load_model, model_tokenizer
from rlx.ir.diagnostics import RunError
from rlx.lowering.registry import ACTIVATION_QUANT_HELP, ACTIVATION_QUANTS
from rlx.models import qwen35
from rlx.models.llama import DEFAULT_CONTEXT
from rlx.tools._cli import run

SHOW_AFTER_S = 1.0
"""A stage shows progress once it has taken this long (and stderr is a terminal)."""


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line and exit 1, like every other rlx error."""

    def error(self, message: str) -> NoReturn:
        raise RunError(f"{self.prog}: error: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="rlx-generate",
        description="Compile a LLaMA-family model and generate text with its own tokenizer.",
        epilog="examples: rlx-generate model.gguf --prompt 'Once upon a time'; "
               "rlx-generate model.gguf --chat 'Hi!' --temperature 0.7 --seed 1; "
               "rlx-generate ./hf-model --prompt-ids 1,2,3")
    p.add_argument("model", help="an HF model directory (config.json + *.safetensors, "
                                 "tokenizer.json) or a .gguf file")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt", help="prompt text (continued as is)")
    what.add_argument("--chat", metavar="MESSAGE",
                      help="a user message, sent through the model's chat template")
    what.add_argument("--prompt-ids", help="comma-separated token ids")
    p.add_argument("--system", help="a system message before --chat's")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                   help="positions (prompt + new tokens) the KV cache of the model "
                        f"model is preallocated to and updated in place (default "
                        f"{DEFAULT_CONTEXT}); 0: a cache that grows a position a step")
    p.add_argument("--stop", action="append", default=[], metavar="STRING",
                   help="stop before this text (repeatable); the model's end tokens always "
                        "stop")
    p.add_argument("--output", choices=("auto", "text", "ids"), default="auto",
                   help="print text (streamed) or ids; auto: ids for --prompt-ids, else text")
    s = p.add_argument_group("sampling (default: greedy)")
    s.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    s.add_argument("--top-k", type=int, default=0, help="0 keeps every token")
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--min-p", type=float, default=0.0)
    s.add_argument("--repeat-penalty", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", choices=TARGETS, default="llvm-cpu")
    p.add_argument("--device", help="runtime device (default: the target's)")
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS, help=ACTIVATION_QUANT_HELP)
    p.add_argument("--cache-dir", help=f"compiled-model cache (default: ${ENV_VAR}, else "
                                       "$XDG_CACHE_HOME/rlx or ~/.cache/rlx)")
    p.add_argument("--no-cache", action="store_true", help="compile without the cache")
    p.add_argument("--speculative", choices=["mtp"],
                   help="speculative decoding (greedy): 'mtp' drafts with the checkpoint's "
                        "MTP head (Qwen3.5); the tokens are plain greedy's")
    p.add_argument("--draft-tokens", type=int, default=4,
                   help="tokens the draft proposes per verify call (default 4)")
    return p


@contextmanager
def progress(stage: str) -> Iterator[None]:
    """While the block runs: after ``SHOW_AFTER_S``, a tqdm line on stderr with the stage
    and the time so far, when stderr is a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield
        return
    from tqdm import tqdm

    done = threading.Event()

    def tick() -> None:
        if done.wait(SHOW_AFTER_S):
            return
        with tqdm(desc=stage, bar_format="{desc}: {elapsed}", file=sys.stderr,
                  leave=False) as bar:
            while not done.wait(0.2):
                bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _prompt(args: argparse.Namespace) -> Any:
    if args.prompt_ids is not None:
        try:
            return [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise RunError(f"error: --prompt-ids: expected comma-separated integers, found "
                           f"{args.prompt_ids!r}") from None
    if args.chat is not None:
        system = [{"role": "system", "content": args.system}] if args.system else []
        return [*system, {"role": "user", "content": args.chat}]
    if args.system:
        raise RunError("error: --system goes with --chat")
    return args.prompt


def _main() -> int:
    args = _parser().parse_args()
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.min_p,
                        args.repeat_penalty, args.seed)
    with progress(f"loading the tokenizer of {Path(args.model).name}"):
        tokenizer = model_tokenizer(args.model)
    ids = encode_prompt(_prompt(args), tokenizer)  # before the slow part: bad input fails fast
    with progress(f"loading {Path(args.model).name}"):
        model = load_model(args.model, args.context or None)
    ids = encode_prompt(ids, tokenizer, model.config.vocab_size)
    cache: CompileCache | bool = (False if args.no_cache else
                                  CompileCache(Path(args.cache_dir)) if args.cache_dir else True)
    options = {"activation_quant": args.activation_quant} if args.activation_quant else {}
    if args.speculative:
        return _speculative(model, ids, args, sampling, cache, options)
    gen = Generator(model, args.target, args.device, options=options, tokenizer=tokenizer,
                    cache=cache, progress=progress)
    output = args.output if args.output != "auto" else (
        "ids" if args.prompt_ids is not None else "text")
    if output == "ids":
        ends = (tokenizer.end_ids if tokenizer is not None and args.prompt_ids is None
                else frozenset())
        new = list(gen.tokens(ids, args.max_new_tokens, sampling, ends))
        print(",".join(map(str, new)))
    else:
        for piece in gen.stream(ids, args.max_new_tokens, sampling=sampling, stop=args.stop):
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
    how = "the compiled model from the cache" if gen.cache_hit else "compiled"
    weights = "weights encoded and loaded" if gen.encoded else "weights loaded"
    print(f"startup: {gen.startup_s:.1f} s ({how}, {weights})", file=sys.stderr)
    print(gen.stats.line(), file=sys.stderr)
    return 0


def _speculative(model: Any, ids: list[int], args: argparse.Namespace, sampling: Sampling,
                 cache: CompileCache | bool, options: dict[str, Any]) -> int:
    """Greedy decoding with the MTP head drafting; prints the new ids and the acceptance."""
    from rlx import speculative

    if not isinstance(model, qwen35.Qwen35Model):
        raise RunError(f"error: --speculative mtp needs a Qwen3.5 checkpoint, found a "
                       f"{type(model).__name__}")
    if args.draft_tokens < 1:
        raise RunError(f"error: --draft-tokens: expected >= 1, found {args.draft_tokens}")
    if not sampling.greedy:
        raise RunError("error: --speculative decodes greedily: expected --temperature 0 and "
                       "--repeat-penalty 1")
    qwen35.require_mtp(model)
    with progress(f"compiling for {args.target}"):
        program = speculative.load(model, args.draft_tokens, args.target, args.device,
                                   cache=cache, **options)
    dec = speculative.decoder(model, program, args.draft_tokens)
    print(",".join(map(str, dec.generate(ids, args.max_new_tokens))))
    s = dec.stats
    print(f"speculative: {s.rounds} verify calls, {s.accepted} of {s.drafted} drafts "
          f"accepted (acceptance {s.acceptance:.2f})", file=sys.stderr)
    return 0


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
