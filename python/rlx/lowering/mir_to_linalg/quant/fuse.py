"""The ``fuse-gemv-neighbours`` rewrite (run by ``mir-to-linalg`` before its rules, or alone
as ``rlx-opt --pass=fuse-gemv-neighbours``): a decode GEMV that runs a hand-written kernel
takes in what IREE cannot fuse into rlx's dispatch, each of which would otherwise be a
dispatch of its own, twice per decoder layer and token:

- the RMSNorm that computes its ``x`` (the kernel normalizes ``x`` itself; the norm is
  dropped once no other use is left), for one row of ``x`` only (:func:`_fits_prologue`);
- the SwiGLU ``silu(g) * u`` that computes its ``x`` from a packed gate / up projection
  (the kernel reads ``[g, u]``; likewise dropped; one row of ``x`` only);
- the residual add that is its only use (``h + W x``: the kernel adds ``h``), for any
  number of rows of ``x`` (a batched decode step's ``M <= MAX_BATCH``).

Such a GEMV is lowered here, with its neighbours, by the dequant_matmul rule's own
:func:`.rule.lower`; every other op is left to the rules. (A pass, not a rule: the greedy
rewrite may visit the add before the GEMV.)
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from rlx.dialects.mir import MIR
from rlx.dialects.schema import decode
from rlx.ir.text import walk_ops
from rlx.lowering import emit
from rlx.lowering.mir_to_linalg.quant import gemv_kernels
from rlx.lowering.mir_to_linalg.quant.rule import Neighbours, kernel_of, lower
from rlx.lowering.registry import LoweringContext


def _residual_add(op: ir.Operation) -> tuple[ir.Operation, int] | None:
    """``(add, i)`` if the only use of ``op``'s f32 result is a ``binary add`` of it and
    ``r = add.operands[i]``, ``r`` of the same type and defined before ``op`` (so that a
    kernel dispatched in ``op``'s place can read it). Else None."""
    result = op.results[0]
    uses = list(result.uses)
    if len(uses) != 1 or emit.elem(result) != emit.f32():
        return None
    add = uses[0].owner
    if (add.name != "rlx_mir.binary" or ir.StringAttr(add.attributes["kind"]).value != "add"
            or add.operands[0] == add.operands[1]):
        return None
    i = 1 - uses[0].operand_number
    r = add.operands[i]
    if r.type != result.type:
        return None
    owner = r.owner
    if isinstance(owner, ir.Block):
        if owner != op.block:                    # an argument of another region's block
            return None
    elif (owner.operation.block != op.block
          or not owner.operation.is_before_in_block(op)):
        return None
    return add.operation, i


def _producer(v: ir.Value, name: str) -> ir.Operation | None:
    """The ``rlx_mir.<name>`` op that defines ``v``, if one does."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != f"rlx_mir.{name}":
        return None
    return owner.operation


def _fits_prologue(kern: gemv_kernels.Kernel) -> bool:
    """A prologue's stack buffer holds one ``x [K]`` (:data:`.gemv_kernels.MAX_NORM_K`):
    GEMVs of one row only. (``M`` rows would take ``4 M K`` bytes of IREE's 32 KiB llvm-cpu
    stack, 64 KiB at M = 8 and K = 2048, and each workgroup would normalize all of them.)"""
    return kern.batch == 1 and kern.k <= gemv_kernels.MAX_NORM_K


def _rms_norm_input(op: ir.Operation, kern: gemv_kernels.Kernel) -> ir.Operation | None:
    """The ``rms_norm`` that computes ``op``'s ``x`` if its operands are f32 and the GEMV
    fits the prologue (:func:`_fits_prologue`), so that the kernel can normalize ``x``
    itself."""
    norm = _producer(op.operands[0], "rms_norm")
    if not _fits_prologue(kern) or norm is None:
        return None
    axis = ir.IntegerAttr(norm.attributes["axis"]).value
    if axis not in (-1, emit.rank(norm.operands[0]) - 1):
        return None
    if any(emit.elem(v) != emit.f32() for v in norm.operands):
        return None
    return norm


def _half(op: ir.Operation | None, k: int) -> tuple[ir.Value, int] | None:
    """``(src, i)`` if ``op`` is a unit-stride slice of ``src [1, 1, 2K]`` f32 taking
    half ``i`` of its last axis."""
    if op is None or emit.static_shape(op.operands[0]) != [1, 1, 2 * k]:
        return None
    starts = list(ir.DenseI64ArrayAttr(op.attributes["starts"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["sizes"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    if strides != [1, 1, 1] or starts[:2] != [0, 0] or starts[2] not in (0, k):
        return None
    if emit.static_shape(op.results[0]) != [1, 1, k] or sizes[2] != k:
        return None
    return op.operands[0], starts[2] // k


def _swiglu_input(op: ir.Operation, kern: gemv_kernels.Kernel) -> list[ir.Operation] | None:
    """``[mul, silu, gate slice, up slice]`` if ``op``'s ``x`` is
    ``silu(gu[..., :K]) * gu[..., K:]`` of one f32 ``gu [1, 1, 2K]`` (a SwiGLU FFN's packed
    gate / up projection) and the GEMV fits the prologue (:func:`_fits_prologue`): the
    kernel computes ``x`` itself from ``gu`` (the slices' operand), and these ops can go
    once unused."""
    k = kern.k
    mul = _producer(op.operands[0], "binary")
    if (not _fits_prologue(kern) or mul is None
            or ir.StringAttr(mul.attributes["kind"]).value != "mul"):
        return None
    act = _producer(mul.operands[0], "activation")
    if act is None or ir.StringAttr(act.attributes["kind"]).value != "silu":
        return None
    gate = _half(_producer(act.operands[0], "slice"), k)
    up = _half(_producer(mul.operands[1], "slice"), k)
    if gate is None or up is None or gate[0] != up[0] or (gate[1], up[1]) != (0, 1):
        return None
    if emit.elem(gate[0]) != emit.f32():
        return None
    return [mul, act, act.operands[0].owner.operation, mul.operands[1].owner.operation]


@dataclass(frozen=True)
class _Plan:
    """A GEMV to lower with its kernel and the neighbours it takes in."""

    op: ir.Operation
    kern: gemv_kernels.Kernel
    norm: ir.Operation | None
    glu: list[ir.Operation] | None
    add: tuple[ir.Operation, int] | None


def _plans(module: ir.Module, ctx: LoweringContext) -> list[_Plan]:
    """Every dequant_matmul that runs a kernel and has a neighbour to take in."""
    plans = []
    with module.context:
        for op in walk_ops(module.operation):
            kern = kernel_of(ctx, op) if op.name == "rlx_mir.dequant_matmul" else None
            if kern is None:
                continue
            norm = _rms_norm_input(op, kern)
            glu = _swiglu_input(op, kern)
            add = _residual_add(op)
            if norm is not None or glu is not None or add is not None:
                plans.append(_Plan(op, kern, norm, glu, add))
    return plans


def fuse_gemv_neighbours(module: ir.Module, ctx: LoweringContext) -> None:
    """Lower each decode GEMV that has neighbours to take in (see the module docstring)
    together with them; drop the neighbours no other use needs."""
    schema = MIR.ops["dequant_matmul"]
    dropped: list[ir.Operation] = []
    for p in _plans(module, ctx):
        # operands read now: one may be an earlier plan's result (a sum, the gate / up GEMV)
        near = Neighbours(residual=None if p.add is None else p.add[0].operands[p.add[1]],
                          norm=p.norm, gu=None if p.glu is None else p.glu[2].operands[0])
        with ir.InsertionPoint(p.op), p.op.location:
            y = lower(ctx, decode(schema, p.op, check=False), p.kern, near)
        if p.add is None:
            p.op.results[0].replace_all_uses_with(y)
        else:
            p.add[0].results[0].replace_all_uses_with(y)
            p.add[0].erase()
        p.op.erase()
        for gone in ([p.norm] if p.norm is not None else []) + (p.glu or []):
            if gone not in dropped:
                dropped.append(gone)
    for gone in dropped:                  # users first: the mul before its silu and slices
        if not list(gone.results[0].uses):
            gone.erase()


__all__ = ["fuse_gemv_neighbours"]
