"""The skeleton of rlx's hand-written kernels: one ``stream.executable`` each, written as MLIR
text in the ``vector`` / ``scf`` / ``memref`` dialects (no linalg: IREE's CPU backend lowers
the body to LLVM as written), called with ``flow.dispatch``.

Shared by the decode GEMV kernels (:mod:`.quant.gemv_kernels`) and the decode attention
kernel (:mod:`.decode_attention`). A kernel object has a ``symbol`` and a ``text()``; its
text is :func:`executable_text`: the export (its workgroup count from the dispatch's
workload), and one ``func.func`` whose arguments are the dispatch's operands in order
(tensors as ``!stream.binding``\\ s, each viewed as a memref by a
``stream.binding.subspan``; ``index`` operands as they are), then the kernel's body. The
lowering :func:`record`\\ s every kernel it dispatched to, and :func:`declare_executables`
inserts their executables into the module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from iree.compiler import ir

from rlx.ir.text import walk_ops
from rlx.lowering.registry import LoweringContext

STATE_KEY = "kernel_executables"
"""``LoweringContext.state`` key: symbol -> every hand-written kernel the lowering dispatched
to (:func:`declare_executables` inserts them)."""

V16 = "vector<16xf32>"
I16 = "vector<16xi32>"


class HandWritten(Protocol):
    """A hand-written kernel: one executable per symbol."""

    @property
    def symbol(self) -> str: ...

    def text(self) -> str: ...


def f32_bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def f32_literal(v: float) -> str:
    """An exact f32 literal (MLIR reads a hex integer as the float's bits)."""
    return f"0x{f32_bits(v):08X}"


def memref(shape: Sequence[int | str], element: str) -> str:
    """``memref<AxBx...xelement>`` (``"?"`` for a dynamic dim)."""
    return f"memref<{'x'.join(map(str, shape))}x{element}>"


class Text:
    """Lines of MLIR with a running indent."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def block(self, head: str) -> Text:
        self(head + " {")
        self.depth += 1
        return self

    def end(self, tail: str = "}") -> None:
        self.depth -= 1
        self(tail)

    def otherwise(self) -> None:
        """Close an ``scf.if``'s then-region and open its else-region."""
        self.end("} else {")
        self.depth += 1


@dataclass(frozen=True)
class Binding:
    """A tensor operand (or the result) of the dispatch, viewed in the kernel as ``%name``
    of type ``memref``, with SSA values ``dims`` (the kernel's arguments) for its dynamic
    dims."""

    name: str
    memref: str
    dims: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scalar:
    """An ``index`` operand of the dispatch (a push constant), the kernel's ``%name``."""

    name: str


Body = Callable[[Text], None]


Count = Callable[[Text], str]
"""Writes the lines that compute a workgroup count from the kernel's arguments; returns
the SSA name of that count."""


def executable_text(symbol: str, args: Sequence[Binding | Scalar], body: Body,
                    workgroups: int | Count, per_workgroup: int = 1) -> str:
    """The ``stream.executable`` of one kernel: ``args`` in dispatch operand order (the
    result last); the workload ``%n`` runs ``ceildiv(n, per_workgroup)`` workgroups, and
    ``body`` (``%c0``, ``%c1`` and the workgroup id ``%wg`` defined) runs in those whose id
    is below ``workgroups``, the count the kernel was written for (see :func:`_guard`): a
    constant, or one the kernel computes from its arguments (a dynamic workload)."""
    t = Text()
    t.block(f"stream.executable private @{symbol}")
    # export and function named as the executable: IREE links every llvm-cpu executable
    # into one library, where two functions named alike collide
    t.block(f"stream.executable.export public @{symbol} workgroups(%n: index) "
            "-> (index, index, index)")
    count = "%n"
    if per_workgroup != 1:
        t(f"%x = affine.apply affine_map<()[s0] -> (s0 ceildiv {per_workgroup})>()[%n]")
        count = "%x"
    t("%c1 = arith.constant 1 : index")
    t(f"stream.return {count}, %c1, %c1 : index, index, index")
    t.end()
    t.block("builtin.module")
    bindings = [a for a in args if isinstance(a, Binding)]
    params = ", ".join(f"%b{bindings.index(a)}: !stream.binding" if isinstance(a, Binding)
                       else f"%{a.name}: index" for a in args)
    t.block(f"func.func @{symbol}({params})")
    t("%c0 = arith.constant 0 : index")
    t("%c1 = arith.constant 1 : index")
    for i, b in enumerate(bindings):
        dims = f"{{{', '.join(b.dims)}}}" if b.dims else ""
        t(f"%{b.name} = stream.binding.subspan %b{i}[%c0] : !stream.binding -> "
          f"{b.memref}{dims}")
    _guard(t, workgroups, body)
    t("return")
    t.end()
    t.end()
    t.end()
    return "\n".join(t.lines)


def _guard(t: Text, workgroups: int | Count, body: Body) -> None:
    """``body`` inside ``scf.if %wg < workgroups``. A kernel's loads are in bounds for the
    workgroup ids its dispatch launches (each kernel writes down why); the workgroup count
    is IREE's to compute from the export, and a workgroup past the last that IREE ever
    launched (a count rounded up, a distribution that pads) touches nothing. Its cost: the
    x86 code IREE 3.13 emits for the Q8_0 1536 x 576 and Q4_K 4096 x 4096 GEMV kernels
    with and without it is the same instructions (loops unchanged) but a compare and a
    branch at entry, once per workgroup."""
    t("%wg = hal.interface.workgroup.id[0] : index")
    if isinstance(workgroups, int):
        t(f"%wg_count = arith.constant {workgroups} : index")
        count = "%wg_count"
    else:
        count = workgroups(t)
    t(f"%wg_in = arith.cmpi ult, %wg, {count} : index")
    t.block("scf.if %wg_in")
    body(t)
    t.end()


def record(ctx: LoweringContext, kern: HandWritten) -> None:
    """Note that the lowering dispatched to ``kern`` (one executable per symbol)."""
    ctx.state.setdefault(STATE_KEY, {})[kern.symbol] = kern


def declare_executables(module: ir.Module, ctx: LoweringContext) -> None:
    """Insert the executables the lowering dispatched to at the top of ``module``."""
    kernels: dict[str, HandWritten] = ctx.state.get(STATE_KEY, {})
    if not kernels:
        return
    with module.context:
        first = module.body.operations[0]
        for kern in kernels.values():
            parsed = ir.Module.parse(kern.text())
            where = ir.Location.name(kern.symbol)        # not the parser's "-":line:col
            for op in walk_ops(parsed.operation):
                op.location = where
            for op in list(parsed.body.operations):
                op.operation.move_before(first)


__all__ = ["I16", "STATE_KEY", "V16", "Binding", "HandWritten", "Scalar", "Text",
           "declare_executables", "executable_text", "f32_bits", "f32_literal", "memref",
           "record"]
