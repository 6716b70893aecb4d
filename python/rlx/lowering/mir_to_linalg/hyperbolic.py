"""The hyperbolic functions and their inverses, written to keep their digits near 0.

MLIR's own expansions (``math.sinh`` as ``(exp(x) - exp(-x)) / 2``, ``math.asinh`` as
``log(x + sqrt(x^2 + 1))``, ``math.atanh`` as ``log((1 + x) / (1 - x)) / 2``), which IREE
3.13 applies on every target, cancel near 0: measured in f32 on llvm-cpu and Vulkan,
``sinh(1e-6)`` was 1.7% off, ``asinh(1e-6)`` 4.6%, ``atanh(1e-6)`` 1.3%, and each of them
returned 0 for 1e-30. These forms use series near 0 (``sinh``, and :func:`log1p`, which the
inverses go through, as glibc's do) and the closed forms away from it, and keep the sign of
their argument (``-0`` included).
"""

from __future__ import annotations

import math as pymath

from iree.compiler import ir
from iree.compiler.dialects import arith, math

from rlx.lowering import emit

LARGE = {32: 2.0 ** 12, 64: 2.0 ** 28}
"""Above this ``|x|``, ``asinh(|x|) = log(2 |x|)`` and ``acosh(x) = log(2 x)`` to the type's
precision (the terms dropped are ``1 / (4 x^2)``), and ``x^2`` would overflow soon after."""


def _width(x: ir.Value) -> int:
    return 64 if isinstance(x.type, ir.F64Type) else 32


def log1p(x: ir.Value) -> ir.Value:
    """``log(1 + x)`` to the type's precision near 0: ``2 atanh(z)`` with ``z = x / (2 +
    x)`` as its odd series ``2 z (1 + z^2 / 3 + z^4 / 5 + ...)`` for ``|x| < 1/2`` (``|z| <=
    1/3``; 8 terms reach f32's precision, 16 f64's), ``log(1 + x)`` beyond (at most a few
    ulps off there). Neither ``math.log1p`` nor the ``log(u) x / (u - 1)`` trick is used:
    measured on lavapipe, IREE 3.13's ``math.log1p`` is ``log(1 + x)`` (``asinh(1e-6)``
    through it was 4.6% off), and the driver folds ``(1 + x) - 1`` to ``x``, which undoes
    the trick."""
    t = x.type
    one = emit.scalar(1.0, t)
    z = arith.divf(x, arith.addf(emit.scalar(2.0, t), x))
    z2 = arith.mulf(z, z)
    terms = 16 if _width(x) == 64 else 8
    series = emit.scalar(1.0 / (2 * terms - 1), t)
    for k in range(terms - 2, -1, -1):  # Horner, from the smallest term
        series = arith.addf(emit.scalar(1.0 / (2 * k + 1), t), arith.mulf(z2, series))
    near = arith.mulf(arith.addf(z, z), series)
    small = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), emit.scalar(0.5, t))
    return arith.select(small, near, math.log(arith.addf(one, x)))


def _log_twice(a: ir.Value) -> ir.Value:
    """``log(2 a)`` as ``log(a) + log 2`` (no overflow for the largest ``a``)."""
    return arith.addf(math.log(a), emit.scalar(pymath.log(2.0), a.type))


def sinh(x: ir.Value) -> ir.Value:
    """Its odd series ``x (1 + x^2 / 3! + x^4 / 5! + ...)`` for ``|x| < 1`` (6 terms reach
    f32's precision, 10 f64's); beyond, ``(t / 2) t - (1 / 2 / t) / t`` with ``t = exp(|x| /
    2)`` (no cancellation: the second term is at most 14% of the first), finite up to
    sinh's own overflow, with the sign of ``x``."""
    t = x.type
    a = math.absf(x)
    half = emit.scalar(0.5, t)
    x2 = arith.mulf(x, x)
    terms = 10 if _width(x) == 64 else 6
    series = emit.scalar(1.0 / pymath.factorial(2 * terms - 1), t)
    for k in range(terms - 2, -1, -1):
        series = arith.addf(emit.scalar(1.0 / pymath.factorial(2 * k + 1), t),
                            arith.mulf(x2, series))
    root = math.exp(arith.mulf(a, half))
    far = math.copysign(arith.subf(arith.mulf(arith.mulf(half, root), root),
                                   arith.divf(arith.divf(half, root), root)), x)
    small = arith.cmpf(arith.CmpFPredicate.OLT, a, emit.scalar(1.0, t))
    return arith.select(small, arith.mulf(x, series), far)


def cosh(x: ir.Value) -> ir.Value:
    """``(t / 2) t + (1 / 2 / t) / t`` with ``t = exp(|x| / 2)``: finite up to cosh's own
    overflow (``exp(|x|)`` overflows a little before it)."""
    t = x.type
    half = emit.scalar(0.5, t)
    root = math.exp(arith.mulf(math.absf(x), half))
    return arith.addf(arith.mulf(arith.mulf(half, root), root),
                      arith.divf(arith.divf(half, root), root))


def asinh(x: ir.Value) -> ir.Value:
    """``log1p(a + a^2 / (1 + sqrt(1 + a^2)))`` for ``a = |x|`` (``log(2 a)`` for large
    ``a``), with the sign of ``x``."""
    t = x.type
    a = math.absf(x)
    one = emit.scalar(1.0, t)
    a2 = arith.mulf(a, a)
    near = log1p(arith.addf(a, arith.divf(a2, arith.addf(one, math.sqrt(
        arith.addf(one, a2))))))
    large = arith.cmpf(arith.CmpFPredicate.OGT, a, emit.scalar(LARGE[_width(x)], t))
    return math.copysign(arith.select(large, _log_twice(a), near), x)


def acosh(x: ir.Value) -> ir.Value:
    """``log1p(u + sqrt(u (x + 1)))`` with ``u = x - 1`` (exact for x near 1);
    ``log(2 x)`` for large ``x``; NaN below 1 (the square root of a negative)."""
    t = x.type
    one = emit.scalar(1.0, t)
    u = arith.subf(x, one)
    near = log1p(arith.addf(u, math.sqrt(arith.mulf(u, arith.addf(x, one)))))
    large = arith.cmpf(arith.CmpFPredicate.OGT, x, emit.scalar(LARGE[_width(x)], t))
    return arith.select(large, _log_twice(x), near)


def atanh(x: ir.Value) -> ir.Value:
    """``log1p(2 a / (1 - a)) / 2`` for ``a = |x|``, with the sign of ``x``: inf at 1, NaN
    beyond (``log1p`` of a value below -1)."""
    t = x.type
    a = math.absf(x)
    ratio = arith.divf(arith.addf(a, a), arith.subf(emit.scalar(1.0, t), a))
    return math.copysign(arith.mulf(emit.scalar(0.5, t), log1p(ratio)), x)


__all__ = ["acosh", "asinh", "atanh", "cosh", "log1p", "sinh"]
