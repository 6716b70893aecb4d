"""``rlx-compile``: compile a ``.hir`` file for a target, or stop at an earlier stage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlx.compiler import EMITS, TARGETS, compile
from rlx.lowering.registry import (
    ACTIVATION_QUANT_HELP,
    ACTIVATION_QUANTS,
    ATTENTION_LOWERINGS,
)
from rlx.tools._cli import run, write_output


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-compile",
        description="Compile an rlx HIR module (.hir) to an IREE vmfb, or print the module "
                    "after any stage (--emit).")
    p.add_argument("input", help="the .hir file")
    p.add_argument("-o", "--output",
                   help="output file (default: INPUT.vmfb for vmfb, stdout for text stages)")
    p.add_argument("--target", choices=TARGETS, default="llvm-cpu")
    p.add_argument("--emit", choices=EMITS, default="vmfb",
                   help="stop after this stage: hir (verified input), mir (after hir-to-mir), "
                        "linalg (the MLIR given to iree-compile), vmfb (default)")
    p.add_argument("--cpu", default="host",
                   help="llvm-cpu: --iree-llvmcpu-target-cpu (default host; e.g. znver3, "
                        "x86-64-v3 for a portable vmfb)")
    p.add_argument("--vulkan-target", default="llvmpipe",
                   help="vulkan: --iree-vulkan-target (default llvmpipe, which Mesa lavapipe "
                        "runs; e.g. ampere, rdna3, valhall4)")
    p.add_argument("--cuda-arch", default="sm_80",
                   help="cuda: sm_XX (sm_90 / sm_100 use a target description derived from "
                        "sm_89, since IREE 3.13 has none)")
    p.add_argument("--rocm-arch", default="gfx942", help="rocm: gfxNNNN")
    p.add_argument("--attention", choices=ATTENTION_LOWERINGS,
                   help="attention lowering (default: decomposed on llvm-cpu / vulkan, fused "
                        "on cuda / rocm)")
    p.add_argument("--no-compute-barriers", action="store_true",
                   help="do not insert iree_tensor_ext.compute_barrier (llvm-cpu default: on)")
    p.add_argument("--no-data-tiling", action="store_true", help="llvm-cpu: data tiling off")
    p.add_argument("--no-gemv-kernels", action="store_true",
                   help="llvm-cpu: decode GEMVs of Q8_0 / Q4_K (and small Q5_0 / Q4_0 / Q6_K) "
                        "weights as IREE-generated fused dequant + matvec instead of rlx's "
                        "hand-written kernels")
    p.add_argument("--no-prefill-kernels", action="store_true",
                   help="llvm-cpu: prefill matmuls (many rows) of F16 / BF16 / Q8_0 / Q5_0 / "
                        "Q4_0 / Q4_K / Q6_K weights as IREE's data-tiled matmul (the weight "
                        "dequantized and packed each call) instead of rlx's batched kernel")
    p.add_argument("--no-attention-kernel", action="store_true",
                   help="llvm-cpu: attention in the decomposed form (decode: seven "
                        "dispatches; prefill: every score stored), and an in-place "
                        "gated_delta_net step as linalg, instead of rlx's hand-written "
                        "kernels (one dispatch each)")
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS, help=ACTIVATION_QUANT_HELP)
    p.add_argument("--caller-transients", action="store_true",
                   help="each function takes a !hal.buffer after its tensors that the call's "
                        "transients are suballocated from (size: the export "
                        "F$async_transients_size; iree-run-module: --input=&Nxi8=0); "
                        "rlx.runtime passes one kept between calls")
    p.add_argument("--iree-flag", action="append", default=[], metavar="FLAG",
                   help="extra flag for iree-compile (repeatable), e.g. "
                        "--iree-flag=--iree-opt-level=O2")
    return p


def _main() -> int:
    args = _parser().parse_args()
    options = {"cpu": args.cpu, "vulkan_target": args.vulkan_target,
               "cuda_arch": args.cuda_arch, "rocm_arch": args.rocm_arch,
               "attention": args.attention}
    if args.no_compute_barriers:
        options["compute_barriers"] = False
    if args.no_data_tiling:
        options["data_tiling"] = False
    if args.no_gemv_kernels:
        options["gemv_kernels"] = False
    if args.no_prefill_kernels:
        options["prefill_kernels"] = False
    if args.no_attention_kernel:
        options["attention_kernel"] = False
    if args.activation_quant:
        options["activation_quant"] = args.activation_quant
    if args.caller_transients:
        options["caller_transients"] = True
    output = args.output
    if output is None and args.emit == "vmfb":
        output = str(Path(args.input).with_suffix(".vmfb").name)
    if args.emit == "vmfb":
        compile(args.input, args.target, output=output, extra_flags=args.iree_flag, **options)
        return 0
    text = compile(args.input, args.target, emit=args.emit, extra_flags=args.iree_flag,
                   **options)
    write_output(text, output)
    return 0


def main() -> None:
    sys.exit(run(_main))


if __name__ == "__main__":
    main()
