"""``rlx-import-onnx``: import an ONNX model as a HIR module (.hir) and its weights (.irpa)."""

from __future__ import annotations

import argparse
import sys

from rlx.ir.diagnostics import RlxError
from rlx.tools._cli import run


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-import-onnx",
        description="Import an ONNX model as an rlx HIR module. Initializers become weights "
                    "in a parameter file; common subgraphs (linear, RMSNorm, SwiGLU, "
                    "attention, RoPE) become HIR blocks; a report of what was recognized "
                    "goes to stderr. Nothing is written unless the whole import succeeds.")
    p.add_argument("input", help="the .onnx file (external data is read from its folder)")
    p.add_argument("-o", "--output", required=True, help="the .hir file to write")
    p.add_argument("--params-out", metavar="FILE.irpa",
                   help="where the weights go (required when the model has any)")
    p.add_argument("--no-blocks", action="store_true",
                   help="import node by node (MIR ops), without recognizing blocks")
    p.add_argument("-q", "--quiet", action="store_true", help="no report")
    return p


def _main() -> int:
    args = _parser().parse_args()
    try:
        from rlx.importers.onnx import import_model
    except ImportError as e:
        raise RlxError(f"error: rlx-import-onnx needs the onnx package ({e}); install rlx "
                       "with its test extra or: pip install onnx==1.23.2") from None
    result = import_model(args.input, blocks=not args.no_blocks)
    result.save(args.output, args.params_out)
    if not args.quiet:
        print(result.report.summary(), file=sys.stderr)
    return 0


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
