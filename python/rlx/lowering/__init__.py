"""The named passes of rlx (what ``rlx-opt --pass=NAME`` runs) and the full lowering."""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir

from rlx.dialects import fusion_policy, verify_module
from rlx.lowering.registry import LoweringContext, LoweringOptions, check_lowered


def lower_hir_to_mir(module: ir.Module, options: LoweringOptions) -> None:
    """HIR blocks -> MIR ops, by the module's fusion policy."""
    from rlx.lowering.hir_to_mir import HIR_TO_MIR

    verify_module(module, "hir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    HIR_TO_MIR.run(module, ctx)
    verify_module(module, "mir")


def lower_mir_to_linalg(module: ir.Module, options: LoweringOptions) -> None:
    """MIR ops -> linalg / tensor / arith / math / iree_linalg_ext / util ops."""
    from rlx.lowering.mir_to_linalg import MIR_TO_LINALG, declare_params
    from rlx.lowering.mir_to_linalg.executable import declare_executables
    from rlx.lowering.mir_to_linalg.quant import fuse_gemv_neighbours

    verify_module(module, "mir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    declare_params(module, ctx)
    fuse_gemv_neighbours(module, ctx)
    MIR_TO_LINALG.run(module, ctx)
    declare_executables(module, ctx)
    check_lowered(module)
    with module.context:
        module.operation.verify()


def fuse_gemv_neighbours_pass(module: ir.Module, options: LoweringOptions) -> None:
    """llvm-cpu decode GEMVs that run a hand-written kernel take in the RMSNorm or SwiGLU that
    computes their ``x`` and the residual add that is their only use. ``mir-to-linalg`` runs
    the same rewrite before its rules (sharing their context); run alone, it leaves MIR in
    which those GEMVs are lowered and their kernels declared."""
    from rlx.lowering.mir_to_linalg.executable import declare_executables
    from rlx.lowering.mir_to_linalg.quant import fuse_gemv_neighbours as fuse

    verify_module(module, "mir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    fuse(module, ctx)
    declare_executables(module, ctx)


def check_lowered_pass(module: ir.Module, options: LoweringOptions) -> None:
    """Fail, naming each by label, if any rlx op is left."""
    check_lowered(module)


Pass = Callable[[ir.Module, LoweringOptions], None]
MIR_PASSES = ("fuse-gemv-neighbours", "mir-to-linalg")
"""Passes whose input is MIR."""
PASSES: dict[str, Pass] = {
    "hir-to-mir": lower_hir_to_mir,
    "fuse-gemv-neighbours": fuse_gemv_neighbours_pass,
    "mir-to-linalg": lower_mir_to_linalg,
    "check-lowered": check_lowered_pass,
}


def run_passes(module: ir.Module, names: list[str], options: LoweringOptions) -> None:
    for name in names:
        PASSES[name](module, options)


__all__ = ["MIR_PASSES", "PASSES", "LoweringOptions", "fuse_gemv_neighbours_pass",
           "lower_hir_to_mir", "lower_mir_to_linalg", "run_passes"]
