"""``rlx-serve MODEL``: compile a LLaMA-family or Qwen3.5 model for continuous batching and serve it
with OpenAI's API on localhost (``--host`` to listen elsewhere)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import NoReturn

from rlx.cache import ENV_VAR
from rlx.compiler import TARGETS
from rlx.generate import load_model, model_tokenizer
from rlx.ir.diagnostics import RlxError, RunError
from rlx.lowering.registry import ACTIVATION_QUANT_HELP, ACTIVATION_QUANTS
from rlx.serve.app import Server, serve
from rlx.serve.engine import BatchModel, Engine


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line and exit 1, like every other rlx error."""

    def error(self, message: str) -> NoReturn:
        raise RunError(f"{self.prog}: error: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rlx-serve",
                description="Serve a LLaMA-family or Qwen3.5 model (HF directory or .gguf) with "
                            "OpenAI's completions and chat completions API.",
                epilog="example: rlx-serve model.gguf --port 8080 --max-batch 8")
    p.add_argument("model", help="an HF model directory (config.json, *.safetensors, "
                                 "tokenizer.json) or a .gguf file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                                                       "localhost only)")
    p.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    p.add_argument("--target", choices=TARGETS, default="llvm-cpu")
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS, help=ACTIVATION_QUANT_HELP)
    p.add_argument("--max-batch", type=int, default=4,
                   help="sequences decoded together (KV cache slots)")
    p.add_argument("--context", type=int, default=1024,
                   help="positions per slot: prompt and output together")
    p.add_argument("--name", help="the model id clients give (default: the file or "
                                  "directory name)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on SIGTERM, seconds in-flight requests get to finish")
    p.add_argument("--cache-dir", help=f"compiled-model cache (default: ${ENV_VAR} or "
                                       "~/.cache/rlx)")
    p.add_argument("--no-cache", action="store_true", help="always compile")
    return p


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.max_batch < 1 or args.context < 2:
        raise RunError("rlx-serve: error: --max-batch must be >= 1 and --context >= 2")
    path = Path(args.model)
    tokenizer = model_tokenizer(path)
    model = load_model(path)
    cache = False if args.no_cache else (args.cache_dir or True)
    print(f"rlx-serve: compiling {path.name} for {args.target} ({args.max_batch} slots, "
          f"context {args.context})", flush=True)
    options = {"activation_quant": args.activation_quant} if args.activation_quant else {}
    batch = BatchModel(model, args.max_batch, args.context, args.target, cache=cache,
                       **options)
    engine = Engine(batch, tokenizer).start()
    server = Server(engine, args.name or (path.stem if path.suffix == ".gguf" else path.name))
    asyncio.run(serve(server, args.host, args.port, args.shutdown_timeout,
                      lambda line: print(line, flush=True)))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except RlxError as e:
        print(str(e), file=sys.stderr)
        return 1
    except OSError as e:  # the port is taken, the address cannot be bound
        print(f"rlx-serve: error: {e}", file=sys.stderr)
        return 1


__all__ = ["main"]
