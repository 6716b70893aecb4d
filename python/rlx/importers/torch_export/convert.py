"""The ATen converter table and :class:`Op`, what a converter reads a node through.

A converter is ``convert_<op>(op) -> Value | list[Value]``, registered with
``@converter("aten_packet", ...)`` right above its body. It reads the node's arguments
through :class:`Op` (run-time tensors as HIR values, weights and folded values as numpy
arrays, sizes as ints or sympy expressions) and builds MIR ops through the ``HirModule``
escape hatch. The semantics are ATen's (the PyTorch documentation of each op); no code is
shared with rlx's lowering or its numpy reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch
from torch.fx import Node

from rlx.dialects.builder import HirModule, HirValue
from rlx.importers.dims import SizeSource, SymDim, is_static, same
from rlx.importers.torch_export.program import TORCH_DTYPES, ProgramView, functional_name
from rlx.importers.views import gathered_reshape
from rlx.ir.types import DType

if TYPE_CHECKING:
    from rlx.importers.torch_export.importer import ProgramImporter

Value = HirValue | np.ndarray
ConvertFn = Callable[["Op"], "Value | Sequence[Value]"]

CONVERTERS: dict[str, ConvertFn] = {}


def converter(*names: str) -> Callable[[ConvertFn], ConvertFn]:
    def register(fn: ConvertFn) -> ConvertFn:
        for name in names:
            if name in CONVERTERS:
                raise ValueError(f"ATen op {name} has two converters")
            CONVERTERS[name] = fn
        return fn

    return register


def rlx_dtype(dtype: torch.dtype, fail: Callable[[str], NoReturn]) -> DType:
    found = TORCH_DTYPES.get(dtype)
    if found is None:
        fail(f"element type {str(dtype).removeprefix('torch.')}: the torch importer's "
             "run-time tensors are f32 / f16 / bf16 / i1 / i8 / i16 / i32 / i64 (f64 models "
             "go through the ONNX importer, on llvm-cpu; unsigned and complex types do not "
             "exist in rlx)")
    return found


class Op:
    """One FX node being converted."""

    def __init__(self, importer: ProgramImporter, node: Node) -> None:
        self.importer = importer
        self.node = node

    @property
    def h(self) -> HirModule:
        return self.importer.h

    @property
    def g(self) -> ProgramView:
        return self.importer.g

    @property
    def sizes(self) -> SizeSource:
        return self.importer.sizes

    def fail(self, message: str) -> NoReturn:
        self.importer.fail(self.node, message)

    @property
    def name(self) -> str:
        """The ATen op's name (``add`` for ``aten.add.Tensor``; an in-place ``add_`` is
        converted as ``add``)."""
        return functional_name(self.node)

    # -- arguments -----------------------------------------------------------------------
    def raw(self, i: int, name: str, default: Any = None) -> Any:
        return ProgramView.arg(self.node, i, name, default)

    def value(self, x: Any) -> Any:
        """An argument with nodes replaced by their values (inside lists too)."""
        if isinstance(x, Node):
            return self.importer.value(x)
        if isinstance(x, list | tuple):
            return [self.value(e) for e in x]
        return x

    def arg(self, i: int, name: str, default: Any = None) -> Any:
        return self.value(self.raw(i, name, default))

    def tensor(self, i: int, name: str = "self") -> HirValue:
        return self.as_tensor(self.arg(i, name), self.raw(i, name))

    def as_tensor(self, v: Any, source: Any = None, like: HirValue | None = None) -> HirValue:
        """A run-time tensor: weights and folded values are materialized; a number becomes
        a 0-d constant of ``like``'s element type."""
        if isinstance(v, HirValue):
            return v
        if isinstance(v, np.ndarray):
            name = source.name if isinstance(source, Node) else None
            return self.importer.materialize(v, source if isinstance(source, Node) else None,
                                             name, self.node)
        if isinstance(v, bool | int | float) and like is not None:
            return self.h.constant(self.scalar(v, like.dtype), like.dtype)
        self.fail(f"expected a tensor, found {v!r}")

    def scalar(self, v: float | int | bool, dtype: DType) -> np.ndarray:
        if dtype == DType.I1:
            return np.asarray(bool(v))
        if dtype == DType.BF16:
            return np.asarray(v, np.float32).astype(self.importer.np_dtype(dtype))
        return np.asarray(v).astype(dtype.numpy)

    def out_dtype(self) -> DType:
        return rlx_dtype(self.g.dtype(self.node) or torch.float32, self.fail)

    # -- sizes ---------------------------------------------------------------------------
    def dims(self, v: Value) -> list[SymDim]:
        return self.importer.dims_of(v)

    def out_dims(self) -> list[SymDim]:
        return self.g.dims(self.node)

    def static_shape(self, dims: Sequence[SymDim]) -> list[int]:
        """Sizes as an rlx shape attribute; a dynamic one is an error."""
        if not all(is_static(d) for d in dims):
            self.fail(f"sizes {[str(d) for d in dims]} must be static here")
        return [int(d) for d in dims]

    # -- building ------------------------------------------------------------------------
    def mir(self, op: str, inputs: Sequence[Any], **attrs: Any) -> HirValue:
        like = next((v for v in inputs if isinstance(v, HirValue)), None)
        return self.h.mir(op, [self.as_tensor(v, like=like) for v in inputs], **attrs)

    def cast(self, v: HirValue, dtype: DType) -> HirValue:
        return v if v.dtype == dtype else self.h.mir("cast", [v], to=str(dtype))

    def reshape(self, x: HirValue, dims: Sequence[SymDim]) -> HirValue:
        """``x`` reshaped to ``dims``: dynamic sizes copied from ``x``'s equal dims
        (``-2 - k``), at most one other inferred (``-1``)."""
        x_dims = self.dims(x)
        if len(x_dims) == len(dims) and all(same(a, b) for a, b in zip(x_dims, dims,
                                                                     strict=True)):
            return x
        new: list[int] = []
        used: set[int] = set()
        for d in dims:
            if is_static(d):
                new.append(int(d))
                continue
            k = next((k for k, xd in enumerate(x_dims) if k not in used and x.shape[k] is None
                      and same(xd, d)), None)
            if k is None:
                new.append(-1)
            else:
                used.add(k)
                new.append(-2 - k)
        rest = [k for k in range(len(x_dims)) if k not in used and x.shape[k] is None]
        if new.count(-1) > 1 or (rest and -1 not in new):
            if new.count(-1) + len(used) > 1:
                origin = self.importer.reshaped_from.get(x.value)
                if origin is not None:  # flattened, then viewed back: view the original
                    return self.reshape(origin, dims)
                where = f"a reshape of {x.type} to {[str(d) for d in dims]}"
                return self.importer.known(gathered_reshape(self, x, dims, where), list(dims))
            new = [-1 if n <= -2 else n for n in new]
        y = self.h.mir("reshape", [x], new_shape=new)
        self.importer.reshaped_from[y.value] = x
        return self.importer.known(y, list(dims))


__all__ = ["CONVERTERS", "ConvertFn", "Op", "Value", "converter", "rlx_dtype"]
