"""``rlx-run``: run a compiled module on ``.npy`` inputs and print or save the outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rlx.ir.diagnostics import RunError
from rlx.runtime import DEVICES, load
from rlx.tools._cli import run


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-run",
        description="Run a function of an rlx vmfb on .npy inputs.",
        epilog="example: rlx-run model.vmfb --input x=x.npy --params w.irpa --output-dir out")
    p.add_argument("module", help="the .vmfb")
    p.add_argument("--function", default="main", help="entry point (default: main)")
    p.add_argument("--device", choices=DEVICES, default="local-task")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input by name (or by position: just FILE.npy), repeatable")
    p.add_argument("--params", help="weights: .irpa or .safetensors (or a .npz of arrays)")
    p.add_argument("--output-dir", help="save output i as DIR/output_i.npy instead of printing")
    return p


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise RunError(f"{path}: error: cannot read a .npy array: {e}") from None


def _main() -> int:
    args = _parser().parse_args()
    params = None
    if args.params:
        if args.params.endswith(".npz"):
            with np.load(args.params, allow_pickle=False) as data:
                params = {k: data[k] for k in data.files}
        else:
            params = args.params
    program = load(args.module, args.device, params)
    positional, named = [], {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if sep:
            named[name] = _load_npy(path)
        else:
            positional.append(_load_npy(item))
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


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
