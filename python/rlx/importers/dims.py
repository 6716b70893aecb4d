"""Symbolic sizes, shared by the importers: dims known only when the module runs, as sympy
expressions over named sizes (``batch``, ``seq``, ``s0 + s1``), and tensors built to those
sizes at run time.

An exported model computes with its own sizes: ``Shape(x)`` gathered, added, compared and
concatenated into the target of a ``Reshape`` / ``Expand``, the limit of a ``Range`` (torch
``arange(seq)``), the shape of a ``ConstantOfShape`` (an LSTM's zero state). The importers
fold that arithmetic at import time over :data:`SymDim` values, so equal sizes are known to be
equal (``seq`` of ``input_ids`` is ``seq`` of ``attention_mask``), and MIR ops get static
attributes where they need them.

Where a value has to *take* a dynamic size (broadcast a ``[1, S]`` table to ``[B, S]``, an
``arange(S)``, zeros of ``[layers, B, H]``), :class:`SizeSource` builds it from a tensor that
has that size as one of its dims (a *source*): a 1-D boolean "ruler" of that length (a
compare of the source's slice with itself), broadcast against with ``where(ruler, x, x)``
(every dtype; NaN compares unequal, but both branches are ``x``), counted by ``iota``.
Sums of sizes concatenate rulers, products broadcast them; sizes that are neither
(``Min(64, s)``, a floor division) cannot be built and say so. A size as data (``Shape``
gathered and computed with) is ``rlx_mir.dim`` of its source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NoReturn

import numpy as np
import sympy

from rlx.dialects.builder import HirModule, HirValue
from rlx.ir.types import DType

SymDim = int | sympy.Expr
"""A size: a Python int when static, else a sympy expression over positive integer
symbols."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_FUNCTIONS = {"Min": sympy.Min, "Max": sympy.Max, "floor": sympy.floor,
              "ceiling": sympy.ceiling, "Mod": sympy.Mod, "FloorDiv": lambda a, b: a // b,
              "CeilDiv": lambda a, b: -(-a // b)}


def symbol(name: str) -> sympy.Symbol:
    """The size named ``name`` (a positive integer: dims of 0 are static)."""
    return sympy.Symbol(name, integer=True, positive=True)


def parse_dim(text: str) -> SymDim | None:
    """A ``dim_param`` as a size: a name (``batch``), or an expression of names as
    torch.export writes them (``s0 + s1``, ``Min(64, s)``, ``2*s``); None when it does not
    parse (another exporter's free text)."""
    names = {n: symbol(n) for n in _IDENT.findall(text) if n not in _FUNCTIONS}
    try:
        expr = sympy.sympify(text, locals={**names, **_FUNCTIONS})
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError, AttributeError):
        return None
    if not isinstance(expr, sympy.Expr) or expr.free_symbols - set(names.values()):
        return None
    return normalize(expr)


def normalize(d: object) -> SymDim:
    """Integers as Python ints, everything else as a sympy expression."""
    if isinstance(d, int | np.integer):
        return int(d)
    if isinstance(d, sympy.Expr):
        return int(d) if d.is_Integer else d
    raise TypeError(f"not a size: {d!r}")


def is_static(d: object) -> bool:
    return isinstance(d, int | np.integer) or (isinstance(d, sympy.Expr) and d.is_Integer)


def static_or_none(d: SymDim) -> int | None:
    return int(d) if is_static(d) else None


def same(a: SymDim, b: SymDim) -> bool:
    """Known equal (a difference that simplifies to 0)."""
    if is_static(a) and is_static(b):
        return int(a) == int(b)
    return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0


def shape_vector(dims: Sequence[SymDim]) -> np.ndarray:
    """An ONNX-style shape vector: int64 when every entry is static, else an object array
    of ints and sympy expressions."""
    dims = [normalize(d) for d in dims]
    if all(isinstance(d, int) for d in dims):
        return np.asarray(dims, dtype=np.int64).reshape(len(dims))
    out = np.empty(len(dims), dtype=object)
    for i, d in enumerate(dims):
        out[i] = d
    return out


def tidy(arr: np.ndarray) -> np.ndarray:
    """An object array of sizes whose entries all turned out static, as int64 (a
    ``chunk`` of a static width computed through a dynamic shape)."""
    if arr.dtype != object:
        return arr
    flat = [normalize(v) if isinstance(v, int | np.integer | sympy.Expr) else v
            for v in arr.reshape(-1)]
    if all(isinstance(v, int) for v in flat):
        return np.asarray(flat, dtype=np.int64).reshape(arr.shape)
    if all(isinstance(v, bool | np.bool_) for v in flat):
        return np.asarray(flat, dtype=bool).reshape(arr.shape)
    out = np.empty(arr.shape, dtype=object)
    for i, v in enumerate(flat):
        out.reshape(-1)[i] = v
    return out


def _quotient(d: SymDim) -> tuple[SymDim, int] | None:
    """``(n, k)`` when ``d`` is ``floor(n / k)`` (or ``ceiling(m / k)``, as ``floor((m + k -
    1) / k)``) for an integer ``k > 1``: the sizes a chunk of a dynamic axis computes; else
    None."""
    if not isinstance(d, sympy.floor | sympy.ceiling):
        return None
    num, den = sympy.fraction(sympy.together(d.args[0]))
    if not (den.is_Integer and int(den) > 1):
        return None
    k = int(den)
    return normalize(sympy.expand(num + (k - 1 if isinstance(d, sympy.ceiling) else 0))), k


class SizeSource:
    """Builds tensors of run-time sizes into ``h`` from registered sources: a symbol's
    source is a value of the module that has it as dim ``axis``. ``fail`` raises the
    caller's error (naming its node) when a size cannot be built."""

    def __init__(self, h: HirModule) -> None:
        self.h = h
        self.sources: dict[sympy.Expr, tuple[HirValue, int]] = {}
        self._rulers: dict[tuple[object, int], HirValue] = {}
        self.names: dict[SymDim, SymDim] = {}
        """Sizes that are not polynomials in the model's dims (a strided convolution's
        ``floor((h - 1) / 2) + 1``), each as a symbol of its own (the importer's); and
        sizes :meth:`unify` found equal to a model's dim, as that dim."""
        self._made: set[sympy.Symbol] = set()
        """The symbols the importer made: :meth:`name`'s and :meth:`unnamed`'s."""
        self._unnamed = 0

    def name(self, d: SymDim) -> SymDim:
        """A size that is not a polynomial in the model's dims (a strided convolution's
        ``floor((h - 1) / 2) + 1``, as torch.export writes it) as a symbol of its own (the
        same one wherever it appears), so sizes computed from it (``2 * that``) stay sums
        and products that rlx can build from a tensor that has it."""
        if is_static(d) or d.is_polynomial(*d.free_symbols):  # type: ignore[union-attr]
            return d
        if d not in self.names:
            self.names[d] = symbol(f"({d})")
            self._made.add(self.names[d])
        return self.names[d]

    def unnamed(self, value: str, axis: int) -> sympy.Symbol:
        """A size of its own for dim ``axis`` of ``value``, which nothing names (a dynamic
        slice's length)."""
        self._unnamed += 1
        s = symbol(f"{value}[{axis}]:{self._unnamed}")
        self._made.add(s)
        return s

    def is_models(self, d: SymDim) -> bool:
        """``d`` is one of the model's own dims (a graph input's named size), not a
        symbol the importer made."""
        return isinstance(d, sympy.Symbol) and d not in self._made

    def unify(self, shapes: Sequence[Sequence[SymDim]]) -> None:
        """Dynamic sizes that meet on one axis of an elementwise op are equal whenever it
        runs (rlx's broadcast stretches no dynamic dim, and checks so at run time): where
        one is a model's dim and the others symbols the importer made (``Min(2048, s)``,
        torch.export's length of GPT-Neo's causal-mask slice; an unnamed length), those
        are the dim from here on (:meth:`renamed` rewrites them in the sizes the model
        computes later: GPT-Neo views the residual sum as ``[-1, s, d]``)."""
        rank = max((len(x) for x in shapes), default=0)
        for axis in range(rank):
            sizes = {x[axis - (rank - len(x))] for x in shapes if axis >= rank - len(x)}
            dims = [d for d in sizes if isinstance(d, sympy.Symbol)]
            plain = [d for d in dims if d not in self._made]
            if len(plain) != 1 or len(sizes) != len(dims):
                continue
            for d in dims:
                if d == plain[0]:
                    continue
                for e, n in list(self.names.items()):
                    if n == d:
                        self.names[e] = plain[0]    # the expression, named from here on
                self.names[d] = plain[0]            # the old name, inside later sizes

    def renamed(self, d: SymDim) -> SymDim:
        """``d`` in terms of :attr:`names`: their expressions replaced by their symbols
        (``floor(4 (F - 1) / (F - 1))``, a size the dynamo exporter computes from a
        convolution's output length ``F - 1``, is 4), or a named size plus an integer ``k``
        (a Range over that length less one) its symbol ``+ k``; else ``d``."""
        if is_static(d) or d in self.sources or not self.names:
            return d
        if d in self.names:
            return self.names[d]
        swapped = d.xreplace(self.names)          # type: ignore[union-attr]
        if swapped != d:
            return normalize(sympy.simplify(swapped))
        for e, name in self.names.items():
            k = sympy.simplify(d - e)
            if k.is_Integer:
                return normalize(name + k)
        return d

    def note(self, value: HirValue, dims: Sequence[SymDim]) -> None:
        """``value`` has ``dims``: it becomes the source of every dynamic size among them
        that has none yet (a symbol, or an expression such as a strided convolution's
        ``floor((h - 1) / 2) + 1``, built from no other way)."""
        for axis, d in enumerate(dims):
            if not is_static(d) and d not in self.sources and value.shape[axis] is None:
                self.sources[d] = (value, axis)

    def can_build(self, d: SymDim) -> bool:
        if is_static(d):
            return True
        assert isinstance(d, sympy.Expr)
        if d in self.sources or isinstance(d, sympy.Symbol):
            return d in self.sources
        if isinstance(d, sympy.Add | sympy.Mul):
            return all(self.can_build(normalize(a)) for a in d.args)
        if (factors := _power(d)) is not None:
            return self.can_build(factors[0])
        if (parts := _remainder(d)) is not None:
            return self.can_build(parts[0])
        if (parts := _quotient(d)) is not None:
            return self.can_build(parts[0])
        return False

    # -- rulers ----------------------------------------------------------------------
    def ruler(self, d: SymDim, fail: Callable[[str], NoReturn]) -> HirValue:
        """A 1-D ``i1`` tensor of length ``d`` (all true)."""
        d = normalize(d)
        if isinstance(d, int):
            return self.h.constant(np.ones(d, bool), DType.I1)
        key = (d, 0)
        if key in self._rulers:
            return self._rulers[key]
        named = self.renamed(d)
        if isinstance(d, sympy.Symbol) or d in self.sources:
            out = self._symbol_ruler(d, fail)
        elif named != d:
            out = self.ruler(named, fail)
        elif isinstance(d, sympy.Add) and d.as_coeff_Add()[0] < 0:
            # ``n - c`` (a convolution's output length less one, the length of a Range over
            # it): ``n``'s ruler less its last ``c`` entries (the slice checks ``n >= c``
            # at run time)
            c, rest = d.as_coeff_Add()
            out = self.h.mir("slice", [self.ruler(normalize(rest), fail)], starts=[0],
                             sizes=[-1 + int(c)], strides=[1])
        elif isinstance(d, sympy.Add):
            parts = [self.ruler(normalize(a), fail) for a in d.args]
            out = self.h.mir("concat", parts, axis=0)
        elif isinstance(d, sympy.Mul):
            out = self._product_ruler([normalize(a) for a in d.args], fail)
        elif (factors := _power(d)) is not None:
            out = self._product_ruler(factors, fail)
        elif (parts := _remainder(d)) is not None:
            # a mod k (Longformer's padding to a multiple of its window): the last
            # a - k floor(a / k) entries of a's ruler, bounds computed at run time
            a, k = parts
            start = self.scalar(normalize(k * sympy.floor(sympy.sympify(a) / k)), DType.I64,
                                fail)
            out = self.h.mir("dynamic_slice", [self.ruler(a, fail), start,
                                               self.scalar(a, DType.I64, fail)], axis=0)
        elif (parts := _quotient(d)) is not None:
            # floor(num / k) = ceil((num - k + 1) / k): every k-th entry of that ruler (a
            # Funnel Transformer's pooled length ceil(s / 2), which Expand asks for)
            num, k = parts
            out = self.h.mir("slice", [self.ruler(normalize(num - (k - 1)), fail)],
                             starts=[0], sizes=[-1], strides=[k])
        else:
            fail(f"a tensor of run-time size {d} (rlx builds sizes that are sums, products, "
                 "floor / ceiling quotients and remainders of the model's dims)")
        self._rulers[key] = out
        return out

    def _symbol_ruler(self, d: sympy.Expr, fail: Callable[[str], NoReturn]) -> HirValue:
        src = self.sources.get(d)
        if src is None:
            fail(f"the run-time size {d} has no tensor to take it from")
        value, axis = src
        rank = len(value.shape)
        line = value
        if rank > 1:
            sizes = [-1 if a == axis else 1 for a in range(rank)]
            line = self.h.mir("slice", [value], starts=[0] * rank, sizes=sizes,
                              strides=[1] * rank)
            line = self.h.mir("reshape", [line], new_shape=[-1])
        return self._all_true(line)

    def _all_true(self, line: HirValue) -> HirValue:
        """A ``[n]`` all-true tensor of ``line``'s length: ``x >= lowest`` for integers,
        ``x == x or x != x`` for floats (NaN included). Not ``x == x`` for integers: IREE
        folds that to a splat and then loses the dynamic size of a reduction over it."""
        if line.dtype == DType.I1:
            ne = self.h.mir("compare", [line, self._bool(False)], kind="ne")
            return self.h.mir("where", [ne, ne, self.h.mir("compare", [line, self._bool(
                False)], kind="eq")])
        if not line.dtype.is_float:
            lowest = np.iinfo(line.dtype.numpy).min
            return self.h.mir("compare", [line, self.h.constant(
                np.asarray(lowest, line.dtype.numpy), line.dtype)], kind="ge")
        eq = self.h.mir("compare", [line, line], kind="eq")
        ne = self.h.mir("compare", [line, line], kind="ne")
        return self.h.mir("where", [eq, eq, ne])

    def _bool(self, v: bool) -> HirValue:
        return self.h.constant(np.asarray(v), DType.I1)

    def _product_ruler(self, factors: list[SymDim], fail: Callable[[str], NoReturn]
                       ) -> HirValue:
        grid: HirValue | None = None
        n = len(factors)
        for i, f in enumerate(factors):
            r = self.ruler(f, fail)
            shape = [1] * n
            shape[i] = -1 if not is_static(f) else int(f)
            r = self.h.mir("reshape", [r], new_shape=shape) if n > 1 else r
            grid = r if grid is None else self.h.mir("where", [grid, r, grid])
        assert grid is not None
        return self.h.mir("reshape", [grid], new_shape=[-1])

    # -- tensors of run-time sizes -----------------------------------------------------
    def broadcast(self, x: HirValue, x_dims: Sequence[SymDim], target: Sequence[SymDim],
                  fail: Callable[[str], NoReturn]) -> HirValue:
        """``x`` (of sizes ``x_dims``) broadcast to ``target`` (numpy rules, right-aligned;
        a dim of ``x`` that is not 1 must be the target's)."""
        rank = len(target)
        offset = rank - len(x_dims)
        if offset < 0:
            fail(f"broadcasting rank {len(x_dims)} to rank {rank}")
        static_target: list[int] = []
        grow: list[int] = []
        for i, t in enumerate(target):
            src = x_dims[i - offset] if i >= offset else 1
            if is_static(t):
                static_target.append(int(t))
            elif not is_static(src) and same(src, t):
                static_target.append(-1)
            elif is_static(src) and int(src) == 1:
                static_target.append(1)
                grow.append(i)
            elif not is_static(src):  # two sizes only the run time compares
                static_target.append(-1)
                grow.append(i)
            else:
                fail(f"broadcasting a dim of size {src} to {t}")
        y = x
        if static_target != list(x.shape) or offset:
            y = self.h.mir("expand", [x], target_shape=static_target)
        for i in grow:
            r = self.ruler(target[i], fail)
            shape = [1] * rank
            shape[i] = -1
            r = self.h.mir("reshape", [r], new_shape=shape) if rank > 1 else r
            # not where(r, y, y): IREE 3.13 folds that select and the broadcast goes wrong
            y = self.h.mir("where", [r, y, self._zero(y.dtype)])
        return y

    def _zero(self, dtype: DType) -> HirValue:
        return self.h.constant(np.zeros((), dtype.numpy if dtype != DType.I1 else bool),
                               dtype)

    def full(self, value: np.ndarray, target: Sequence[SymDim],
             fail: Callable[[str], NoReturn]) -> HirValue:
        """A tensor of ``target`` sizes filled with the scalar ``value``."""
        dtype = DType.parse(value.dtype) if value.dtype != bool else DType.I1
        one = self.h.constant(np.asarray(value).reshape(()), dtype)
        return self.broadcast(one, [], target, fail)

    def iota(self, d: SymDim, dtype: DType, fail: Callable[[str], NoReturn]) -> HirValue:
        """``[0, 1, ..., d - 1]`` of element type ``dtype`` (integer or float)."""
        out = self.h.mir("iota", [self.ruler(d, fail)], axis=0)
        return out if dtype == DType.I64 else self.h.mir("cast", [out], to=str(dtype))

    def scalar(self, d: SymDim, dtype: DType, fail: Callable[[str], NoReturn]) -> HirValue:
        """A 0-d tensor holding the size ``d`` (data computed from a size): a symbol is
        its source's ``dim``, sums and products of symbols add and multiply those."""
        d = normalize(d)
        if isinstance(d, int):
            return self._scalar(d, dtype)
        key = (d, 1)
        if key not in self._rulers:
            self._rulers[key] = self._size(d, fail)
        n = self._rulers[key]
        return n if dtype == DType.I64 else self.h.mir("cast", [n], to=str(dtype))

    def _size(self, d: SymDim, fail: Callable[[str], NoReturn]) -> HirValue:
        if is_static(d):
            return self._scalar(int(d), DType.I64)
        if isinstance(d, sympy.Symbol) or d in self.sources:
            src = self.sources.get(d)
            if src is None:
                fail(f"the run-time size {d} has no tensor to take it from")
            return self.h.mir("dim", [src[0]], axis=src[1])
        folds = {sympy.Add: "add", sympy.Mul: "mul", sympy.Min: "min", sympy.Max: "max"}
        kind = next((k for t, k in folds.items() if isinstance(d, t)), None)
        if kind is not None:  # a sum, product, minimum or maximum of sizes, left to right
            out = None
            for a in d.args:
                v = self._size(normalize(a), fail)
                out = v if out is None else self.h.mir("binary", [out, v], kind=kind)
            assert out is not None
            return out
        if (factors := _power(d)) is not None:
            out = self._size(factors[0], fail)
            for f in factors[1:]:
                out = self.h.mir("binary", [out, self._size(f, fail)], kind="mul")
            return out
        if (parts := _quotient(d)) is not None:
            num, k = parts  # num >= 0, a size: the integer division floors it
            return self.h.mir("binary", [self._size(num, fail), self._scalar(k, DType.I64)],
                              kind="div")
        if (parts := _remainder(d)) is not None:
            # a mod k of a size a >= 0: the remainder of the integer division
            a, k = parts
            return self.h.mir("binary", [self._size(a, fail), self._scalar(k, DType.I64)],
                              kind="rem")
        fail(f"the run-time size {d} as data (rlx computes sizes that are sums, products, "
             "minima, floor / ceiling quotients and remainders of the model's dims)")

    def _scalar(self, v: int, dtype: DType) -> HirValue:
        np_type = dtype.numpy
        return self.h.constant(np.asarray(v, dtype=np_type), dtype)


def _remainder(d: SymDim) -> tuple[SymDim, int] | None:
    """``(a, k)`` when ``d`` is ``a mod k`` for an integer ``k > 0``, else None."""
    if isinstance(d, sympy.Mod) and d.args[1].is_Integer and int(d.args[1]) > 0:
        return normalize(d.args[0]), int(d.args[1])
    return None


def _power(d: SymDim) -> list[SymDim] | None:
    """``s ** k`` (a positive whole ``k``: the ``s x s`` scores of an einsum over a dynamic
    sequence, flattened) as its ``k`` factors, else None."""
    if isinstance(d, sympy.Pow) and d.exp.is_Integer and 1 < int(d.exp) <= 4:
        return [normalize(d.base)] * int(d.exp)
    return None


__all__ = ["SizeSource", "SymDim", "is_static", "normalize", "parse_dim", "same",
           "shape_vector", "static_or_none", "symbol", "tidy"]
