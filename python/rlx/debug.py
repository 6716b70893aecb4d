"""The NaN / Inf localizer: which op, by label, first produced a non-finite value.

``check_numerics(module, inputs, params)`` lowers the module to MIR, makes every MIR op's
results extra outputs of the function (a debug variant: nothing fuses across them), compiles
and runs it, then walks the ops in program order. The first op with a NaN or Inf in a result
is reported with its label and source position (from the HIR op it was lowered from) and
classified: the *culprit* when all its operands are finite, else a propagator of a
non-finite function input or weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from rlx import compiler, runtime
from rlx.dialects.builder import HirModule
from rlx.ir.diagnostics import RlxError
from rlx.ir.locations import label_of, source_of

HINTS = {
    "log": "the input reaches zero or a negative value: floor it (max(x, tiny))",
    "sqrt": "the input is negative: clamp it, or add eps before the root",
    "rsqrt": "the input is zero or negative: raise eps / clamp it",
    "div": "the denominator reaches zero: guard it",
    "pow": "a negative base with a fractional exponent, or an overflow: check the base",
    "exp": "exp overflows f32 above ~88: subtract the row max first",
    "softmax": "a row of -inf scores: use a finite mask fill (rlx uses -1e9)",
}


@dataclass(frozen=True)
class Finding:
    """The first op whose result holds a NaN or an Inf."""

    op_name: str
    label: str | None
    source: str | None
    result: int
    kind: str  # "NaN" or "Inf"
    index: tuple[int, ...]
    culprit: bool
    bad_operands: tuple[str, ...]
    hint: str | None
    weight: str | None = None

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        named = f' "{self.label}"' if self.label else ""
        if self.weight is not None:
            return (f"{where}error: the weight '{self.weight}' holds {self.kind} at index "
                    f"{list(self.index)} (check the parameter file)")
        first = (f"{where}error: {self.kind} first appears in result #{self.result} of "
                 f"'{self.op_name}'{named} at index {list(self.index)}")
        if self.culprit:
            tail = "; its operands are all finite, so this op produced it"
            return first + tail + (f" (hint: {self.hint})" if self.hint else "")
        return first + f"; it came in through {', '.join(self.bad_operands)}"


def _kind_and_index(a: np.ndarray) -> tuple[str, tuple[int, ...]] | None:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return None
    bad = ~np.isfinite(a)
    if not bad.any():
        return None
    flat = int(np.flatnonzero(bad.reshape(-1))[0])
    idx = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    return ("NaN" if np.isnan(a[idx]) else "Inf"), idx


def _hint(op: ir.Operation) -> str | None:
    short = op.name.split(".", 1)[1]
    if short in ("activation", "binary"):
        kind = ir.StringAttr(op.attributes["kind"]).value
        return HINTS.get(kind)
    return HINTS.get(short)


def _function(module: ir.Module, name: str | None) -> ir.Operation:
    funcs = [op.operation for op in module.body.operations]
    if name is None:
        return funcs[0]
    for func in funcs:
        if ir.StringAttr(func.attributes["sym_name"]).value == name:
            return func
    raise RlxError(f"error: no function '{name}'")


def _expose(func: ir.Operation) -> tuple[int, list[tuple[ir.Operation, int]]]:
    """Append every MIR op result of ``func`` to its results; return the number of its own
    results and the (op, result #) of each appended one, in program order."""
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    ret = ops[-1]
    exposed = [(op, i) for op in ops[:-1] for i in range(len(op.results))]
    values = [*ret.operands, *(op.results[i] for op, i in exposed)]
    n_outputs = len(ret.operands)
    with func.context, ir.Location.unknown():
        ir.Operation.create("func.return", operands=values, ip=ir.InsertionPoint(ret))
        ret.erase()
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [v.type for v in values]))
    return n_outputs, exposed


@dataclass(frozen=True)
class _Step:
    op_name: str
    label: str | None
    source: str | None
    result: int
    hint: str | None
    operands: list[tuple[str, int]]  # ("op", exposed index) or ("arg", argument index)
    weight: str | None


def _steps(func: ir.Operation, exposed: list[tuple[ir.Operation, int]]) -> list[_Step]:
    args = {a: j for j, a in enumerate(func.regions[0].blocks[0].arguments)}
    producer = {op.results[i]: k for k, (op, i) in enumerate(exposed)}
    steps = []
    for op, i in exposed:
        operands = [("op", producer[v]) if v in producer else ("arg", args[v])
                    for v in op.operands]
        weight = (ir.StringAttr(op.attributes["name"]).value if op.name.endswith(".param")
                  else None)
        steps.append(_Step(op.name, label_of(op.location), source_of(op.location), i,
                           _hint(op), operands, weight))
    return steps


def check_numerics(module_or_path: HirModule | ir.Module | str | Path,
                   inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                   params: runtime.ParamSource = None, *, target: str = "llvm-cpu",
                   function: str | None = None, **options: Any) -> Finding | None:
    """Run the debug variant; the first non-finite result, or None if there is none."""
    from rlx.lowering import lower_mir_to_linalg

    config = compiler.TargetConfig(target=target, **options)
    lowered = compiler.load(module_or_path)
    compiler.lower(lowered, config, stop="mir")
    func = _function(lowered.module, function)
    fname = ir.StringAttr(func.attributes["sym_name"]).value
    n_outputs, exposed = _expose(func)
    steps = _steps(func, exposed)
    lower_mir_to_linalg(lowered.module, config.lowering)
    compiler.add_reflection(lowered.module)
    vmfb = compiler.run_iree(lowered, config, None)
    fn = runtime.load(vmfb, config.runtime_device, params)[fname]
    if isinstance(inputs, Mapping):
        out = fn(**inputs)
        arg_values = [np.asarray(inputs[n]) for n in fn.input_names]
    else:
        out = fn(*inputs)
        arg_values = [np.asarray(v) for v in inputs]
    values = (list(out) if isinstance(out, tuple) else [out])[n_outputs:]
    for k, step in enumerate(steps):
        found = _kind_and_index(values[k])
        if found is None:
            continue
        bad = []
        for j, (kind, ref) in enumerate(step.operands):
            if kind == "op" and _kind_and_index(values[ref]) is not None:
                bad.append(f"operand #{j} (from '{steps[ref].op_name}')")
            elif kind == "arg" and _kind_and_index(arg_values[ref]) is not None:
                bad.append(f"operand #{j} (function input '{fn.input_names[ref]}')")
        return Finding(step.op_name, step.label, step.source, step.result, found[0], found[1],
                       not bad, tuple(bad), step.hint if not bad else None, step.weight)
    return None


__all__ = ["Finding", "check_numerics"]
