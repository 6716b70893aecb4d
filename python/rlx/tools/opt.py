"""``rlx-opt``: read a HIR/MIR file, verify it, run named passes, print the result."""

from __future__ import annotations

import argparse
import sys

from rlx.compiler import TARGETS, TargetConfig
from rlx.dialects import verify_module
from rlx.ir.diagnostics import RlxError
from rlx.ir.text import parse_module, print_module
from rlx.lowering import MIR_PASSES, PASSES, run_passes
from rlx.lowering.registry import (
    ACTIVATION_QUANT_HELP,
    ACTIVATION_QUANTS,
    ATTENTION_LOWERINGS,
)
from rlx.tools._cli import read_input, run, write_output


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-opt",
        description="Parse and verify an rlx module (.hir / .mir, MLIR generic form), run "
                    "named passes, print the result (canonical rlx text, or MLIR with "
                    "locations after mir-to-linalg).")
    p.add_argument("input", help="input file, or - for stdin")
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    p.add_argument("--stage", choices=("hir", "mir"), default="hir",
                   help="which ops the input may hold (default: hir, which includes the "
                        "rlx_mir escape hatch)")
    p.add_argument("--pass", dest="passes", action="append", default=[],
                   choices=sorted(PASSES), metavar="NAME",
                   help="run a named pass (repeatable, in order): "
                        + ", ".join(sorted(PASSES)))
    p.add_argument("--target", choices=TARGETS, default="llvm-cpu",
                   help="target whose lowering choices mir-to-linalg uses (default llvm-cpu)")
    p.add_argument("--vulkan-target", default="llvmpipe",
                   help="vulkan: the IREE Vulkan target whose lowering choices apply (default "
                        "llvmpipe, Mesa lavapipe's)")
    p.add_argument("--attention", choices=ATTENTION_LOWERINGS,
                   help="attention lowering for mir-to-linalg (default: the target's)")
    p.add_argument("--cpu", default="host",
                   help="mir-to-linalg on llvm-cpu: the LLVM CPU name whose features the "
                        "hand-written kernels use (default host: this machine's; e.g. "
                        "x86-64-v3 for AVX2 without AVX-512, znver4 with it)")
    p.add_argument("--no-gemv-kernels", action="store_true",
                   help="mir-to-linalg on llvm-cpu: no hand-written decode GEMV kernels")
    p.add_argument("--no-attention-kernel", action="store_true",
                   help="mir-to-linalg on llvm-cpu: no hand-written attention kernels")
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS, help=ACTIVATION_QUANT_HELP)
    p.add_argument("--split-input-file", action="store_true",
                   help="treat each '// -----' separated chunk as its own module; report "
                        "every chunk's error (exit 1 if any failed)")
    return p


def _process(text: str, source: str, args: argparse.Namespace) -> str:
    module = parse_module(text, source)
    stage = args.stage
    if args.passes and args.passes[0] in MIR_PASSES:
        stage = "mir"
    verify_module(module, stage)
    if not args.passes:
        return print_module(module)
    options = TargetConfig(target=args.target, cpu=args.cpu, attention=args.attention,
                           vulkan_target=args.vulkan_target,
                           gemv_kernels=False if args.no_gemv_kernels else None,
                           attention_kernel=False if args.no_attention_kernel else None,
                           activation_quant=args.activation_quant).lowering
    run_passes(module, args.passes, options)
    if args.passes[-1] == "hir-to-mir":
        return print_module(module)
    return module.operation.get_asm(enable_debug_info=True, use_local_scope=True)


def _chunks(text: str) -> list[str]:
    """Chunks separated by ``// -----`` lines, padded so line numbers match the file."""
    out, current, first_line = [], [], 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if line.strip() == "// -----":
            out.append("\n" * first_line + "".join(current))
            current, first_line = [], i + 1
        else:
            current.append(line)
    out.append("\n" * first_line + "".join(current))
    return out


def _main() -> int:
    args = _parser().parse_args()
    text, source = read_input(args.input)
    if not args.split_input_file:
        write_output(_process(text, source, args), args.output)
        return 0
    results, failed = [], False
    for chunk in _chunks(text):
        try:
            results.append(_process(chunk, source, args))
        except RlxError as e:
            print(str(e), file=sys.stderr)
            failed = True
    write_output("// -----\n".join(results), args.output)
    return 1 if failed else 0


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
