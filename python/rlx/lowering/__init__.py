"""The named passes of rlx (what ``rlx-opt --pass=NAME`` runs) and the full lowering.

Importing this package installs :func:`lower_to_mir` as what ``HirModule.lower_to_mir`` runs
(:func:`rlx.dialects.mir_module.install_mir_lowering`): the dialects sit below the lowering
and never import it.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir

from rlx.dialects import FUSION_POLICY_ATTR, fusion_policy, verify_module
from rlx.dialects.hir_module import HirModuleCore
from rlx.dialects.mir_module import MirModule, install_mir_lowering
from rlx.ir.text import parse_module
from rlx.lowering.guards import hoist_checks
from rlx.lowering.hir_to_mir import HIR_TO_MIR
from rlx.lowering.mir_to_linalg import MIR_TO_LINALG, declare_params
from rlx.lowering.mir_to_linalg.executable import declare_executables
from rlx.lowering.mir_to_linalg.quant import fuse_gemv_neighbours
from rlx.lowering.registry import LoweringContext, LoweringOptions, check_lowered


def lower_hir_to_mir(module: ir.Module, options: LoweringOptions) -> None:
    """HIR blocks -> MIR ops, by the module's fusion policy."""
    verify_module(module, "hir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    HIR_TO_MIR.run(module, ctx)
    verify_module(module, "mir")


def lower_mir_to_linalg(module: ir.Module, options: LoweringOptions) -> None:
    """MIR ops -> linalg / tensor / arith / math / iree_linalg_ext / util ops."""
    verify_module(module, "mir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    declare_params(module, ctx)
    fuse_gemv_neighbours(module, ctx)
    MIR_TO_LINALG.run(module, ctx)
    hoist_checks(module)
    declare_executables(module, ctx)
    check_lowered(module)
    with module.context:
        module.operation.verify()


def fuse_gemv_neighbours_pass(module: ir.Module, options: LoweringOptions) -> None:
    """llvm-cpu decode GEMVs that run a hand-written kernel take in the RMSNorm or SwiGLU that
    computes their ``x`` and the residual add that is their only use. ``mir-to-linalg`` runs
    the same rewrite before its rules (sharing their context); run alone, it leaves MIR in
    which those GEMVs are lowered and their kernels declared."""
    verify_module(module, "mir")
    ctx = LoweringContext(options, fusion_policy(module), module)
    fuse_gemv_neighbours(module, ctx)
    declare_executables(module, ctx)


def check_lowered_pass(module: ir.Module, options: LoweringOptions) -> None:
    """Fail, naming each by label, if any rlx op is left."""
    check_lowered(module)


def lower_to_mir(module: HirModuleCore, fusion_policy: str | None = None) -> MirModule:
    """A new MIR module from a HIR module (``hir-to-mir`` with the module's, or the given,
    policy); ``module`` is left as it is. ``h.lower_to_mir()`` runs this."""
    mir = parse_module(str(module), f"{module.name}.hir")
    if fusion_policy is not None:
        with mir.context:
            mir.operation.attributes[FUSION_POLICY_ATTR] = ir.StringAttr.get(fusion_policy)
    lower_hir_to_mir(mir, LoweringOptions())
    return MirModule(mir)


def lower_for_autodiff(module: HirModuleCore) -> MirModule:
    """:func:`lower_to_mir` with the ``for_autodiff`` policy (primitive chains)."""
    return lower_to_mir(module, "for_autodiff")


install_mir_lowering(lower_to_mir)

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
           "lower_for_autodiff", "lower_hir_to_mir", "lower_mir_to_linalg", "lower_to_mir",
           "run_passes"]
