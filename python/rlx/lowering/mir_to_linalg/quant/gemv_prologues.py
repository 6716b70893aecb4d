"""The prologues of the decode GEMV kernels (:mod:`.gemv_kernels`, ``M = 1`` only) that
compute the kernel's ``x [K]`` into a stack buffer ``%x`` every workgroup fills: RMSNorm of
the norm's input (operands ``%xin``, ``%gamma``, ``%beta``) and SwiGLU's ``silu(g) · u`` of
``%gu = [g, u]``. Bounds: ``xin``, ``gamma``, ``beta`` ``[K]`` and the stack ``x [K]`` in
steps of 16 (``K % 32 = 0``); ``gu [2 K]`` at ``i`` and ``K + i``, ``i < K``."""

from __future__ import annotations

from rlx.lowering.mir_to_linalg.executable import V16, Text, f32_literal, memref


def norm_prologue(t: Text, k: int, eps: float) -> None:
    """``%x`` = RMSNorm(``%xin``) = ``xin * rsqrt(mean(xin²) + eps) * gamma + beta`` (f32, as
    the rms_norm lowering computes it), in a stack buffer every workgroup fills."""
    vec = memref([k], "f32")
    t("%c16n = arith.constant 16 : index")
    t(f"%kn = arith.constant {k} : index")
    t(f"%zn = arith.constant dense<0.0> : {V16}")
    t.block(f"%sq = scf.for %i = %c0 to %kn step %c16n iter_args(%a = %zn) -> ({V16})")
    t(f"%v = vector.load %xin[%i] : {vec}, {V16}")
    t(f"%a2 = vector.fma %v, %v, %a : {V16}")
    t(f"scf.yield %a2 : {V16}")
    t.end()
    t(f"%ssum = vector.reduction <add>, %sq : {V16} into f32")
    t(f"%invk = arith.constant {f32_literal(1.0 / k)} : f32")
    t(f"%eps = arith.constant {f32_literal(eps)} : f32")
    t("%mean = arith.mulf %ssum, %invk : f32")
    t("%me = arith.addf %mean, %eps : f32")
    t("%inv = math.rsqrt %me : f32")
    t(f"%invv = vector.broadcast %inv : f32 to {V16}")
    t(f"%x = memref.alloca() : {vec}")
    t.block("scf.for %i = %c0 to %kn step %c16n")
    for name in ("xin", "gamma", "beta"):
        t(f"%{name}_v = vector.load %{name}[%i] : {vec}, {V16}")
    t(f"%nx = arith.mulf %xin_v, %invv : {V16}")
    t(f"%gx = arith.mulf %nx, %gamma_v : {V16}")
    t(f"%bx = arith.addf %gx, %beta_v : {V16}")
    t(f"vector.store %bx, %x[%i] : {vec}, {V16}")
    t.end()


def glu_prologue(t: Text, k: int) -> None:
    """``%x`` = ``silu(g) * u`` = ``g / (1 + exp(-g)) * u`` (f32, as the activation and
    multiply lowerings compute it) of ``%gu = [g, u]``, in a stack buffer every workgroup
    fills."""
    vec, gu = memref([k], "f32"), memref([2 * k], "f32")
    t("%glu_c16 = arith.constant 16 : index")
    t(f"%glu_k = arith.constant {k} : index")
    t(f"%glu_one = arith.constant dense<1.0> : {V16}")
    t(f"%x = memref.alloca() : {vec}")
    t.block("scf.for %glu_i = %c0 to %glu_k step %glu_c16")
    t("%glu_iu = arith.addi %glu_i, %glu_k : index")
    t(f"%glu_g = vector.load %gu[%glu_i] : {gu}, {V16}")
    t(f"%glu_u = vector.load %gu[%glu_iu] : {gu}, {V16}")
    t(f"%glu_ng = arith.negf %glu_g : {V16}")
    t(f"%glu_e = math.exp %glu_ng : {V16}")
    t(f"%glu_d = arith.addf %glu_one, %glu_e : {V16}")
    t(f"%glu_s = arith.divf %glu_g, %glu_d : {V16}")
    t(f"%glu_x = arith.mulf %glu_s, %glu_u : {V16}")
    t(f"vector.store %glu_x, %x[%glu_i] : {vec}, {V16}")
    t.end()


__all__ = ["glu_prologue", "norm_prologue"]
