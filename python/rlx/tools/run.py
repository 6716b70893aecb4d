"""``rlx-run``: run a compiled module on ``.npy`` inputs and print or save the outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rlx.compiler import compile
from rlx.debug import check_numerics
from rlx.ir.diagnostics import RunError
from rlx.runtime import DEVICES, load
from rlx.tools._cli import run
from rlx.weights import WEIGHT_FORMATS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-run",
        description="Run a function of an rlx vmfb on .npy inputs.",
        epilog="example: rlx-run model.vmfb --input x=x.npy --params w.irpa --output-dir out")
    p.add_argument("module", help="the .vmfb, or a .hir (compiled for --target first)")
    p.add_argument("--target", default="llvm-cpu",
                   help="target to compile a .hir for (default llvm-cpu)")
    p.add_argument("--check-numerics", action="store_true",
                   help="(.hir only) run a debug variant that exposes every intermediate "
                        "result and report the first op, by label, producing a NaN or Inf")
    p.add_argument("--function", default="main", help="entry point (default: main)")
    p.add_argument("--device", choices=DEVICES, default="local-task")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input by name (or by position: just FILE.npy), repeatable")
    p.add_argument("--params", help="weights: " + ", ".join(WEIGHT_FORMATS) + " (as "
                   "rlx.runtime.load's params=)")
    p.add_argument("--output-dir", help="save output i as DIR/output_i.npy instead of printing")
    return p


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise RunError(f"{path}: error: cannot read a .npy array: {e}") from None


def _main() -> int:
    args = _parser().parse_args()
    params = args.params or None  # read by rlx.weights.parameter_index, as in Python
    positional, named = [], {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if sep:
            named[name] = _load_npy(path)
        else:
            positional.append(_load_npy(item))
    if args.check_numerics:
        return _check_numerics(args, params, positional, named)
    module = args.module
    if module.endswith(".hir"):
        module = compile(module, args.target)
    program = load(module, args.device, params)
    out = program[args.function](*positional, **named)
    outputs = list(out) if isinstance(out, tuple) else [out]
    if args.output_dir:
        d = Path(args.output_dir)
        d.mkdir(parents=True, exist_ok=True)
        for i, o in enumerate(outputs):
            np.save(d / f"output_{i}.npy", o)
        return 0
    with np.printoptions(threshold=64, edgeitems=3, precision=5):
        for i, o in enumerate(outputs):
            print(f"output {i}: {o.dtype}{list(o.shape)}")
            print(o)
    return 0


def _check_numerics(args: argparse.Namespace, params: object, positional: list,
                    named: dict) -> int:
    if not args.module.endswith(".hir"):
        raise RunError(f"{args.module}: error: --check-numerics needs the .hir module (it "
                       "compiles a debug variant exposing every intermediate result)")
    if positional and named:
        raise RunError("error: --check-numerics: give inputs all by name or all by position")
    finding = check_numerics(args.module, named or positional, params, target=args.target,
                             function=args.function)
    if finding is None:
        print(f"no NaN or Inf in any result of any op of {args.function}")
        return 0
    print(str(finding), file=sys.stderr)
    return 1


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
