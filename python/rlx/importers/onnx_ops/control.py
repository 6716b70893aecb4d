"""ONNX control flow: ``If`` and ``Loop``, imported into rlx's one static path (rlx compiles
no run-time branching): an ``If`` on a condition known at import time inlines its branch, on a
run-time condition selects between both; a ``Loop`` whose trip count is known at import time
is unrolled."""

from __future__ import annotations

import numpy as np
from onnx import GraphProto

from rlx.importers.dims import is_static
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import DType

MAX_UNROLL = 256
"""The most iterations of a ``Loop`` rlx unrolls (each a copy of the body in the module)."""


@converter("If")
def convert_if(node: Node) -> list[Value]:
    """A condition known at import time (a check on static sizes, as TorchScript exports
    write them): the branch it picks, inlined. A condition computed at run time: both
    branches inlined and each output selected (``where``) by the condition, which is what an
    ``If`` computes where its branches are pure (ONNX's are: no side effects) and give
    outputs of one type and shape; branches whose outputs differ in element type, rank or a
    static size are refused (rlx compiles one path: the output's shape must not depend on
    the condition), and dynamic sizes of the two are checked equal at run time (``where``'s
    size checks). Both branches run, so a run-time check in either (a size relation rlx
    checks before a kernel reads) applies whichever is taken."""
    cond = node.maybe_const(0)
    if cond is not None:
        if cond.size != 1:
            node.fail(f"condition of shape {list(cond.shape)}: expected one boolean")
        branch = node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
        return _branch(node, branch)
    if node.value(0) is not None and not isinstance(node.value(0), np.ndarray):
        info = node.info(0)
        if info.dtype != DType.I1 or any(d != 1 for d in info.shape):
            node.fail(f"condition {info.dtype.value} of shape {list(info.shape)}: expected one "
                      "boolean")
    else:                                        # a shape vector holding dynamic sizes
        node.const(0, "the condition")
        node.fail("condition: expected one boolean, found a shape vector")
    taken = _branch(node, node.attrs["then_branch"])
    other = _branch(node, node.attrs["else_branch"])
    c = node.tensor(0)
    outs: list[Value] = []
    for k, (a, b) in enumerate(zip(taken, other, strict=True)):
        ta, tb = node.as_tensor(a), node.as_tensor(b)
        da, db = node.dims_of(a), node.dims_of(b)
        if ta.type.dtype != tb.type.dtype or len(da) != len(db) or any(
                not _same_size(x, y) for x, y in zip(da, db, strict=True)):
            node.fail(f"output {k} ('{node.proto.output[k]}'): the branches give "
                      f"{ta.type.dtype.value} {da} and {tb.type.dtype.value} {db}; a condition "
                      "known only at run time needs branches of one element type and shape "
                      "(rlx computes both and selects)")
        flag = node.reshape(c, [1] * len(da)) if len(da) != c.type.rank else c
        outs.append(node.known(node.mir("where", [flag, ta, tb]), da))
    return outs


def _branch(node: Node, graph: GraphProto) -> list[Value]:
    """The outputs of ``graph``, one of ``node``'s branches, inlined."""
    outs = node.importer.inline(node, graph)
    if len(outs) != len(node.proto.output):
        node.fail(f"the branch has {len(outs)} outputs; the node {len(node.proto.output)}")
    return outs


@converter("Loop", const_inputs=(0, 1))
def convert_loop(node: Node) -> list[Value]:
    """A ``Loop`` whose trip count ``M`` is known at import time (a ``for`` over a constant
    range, as ``torch.jit.script`` exports it) and whose condition stays known (absent, or
    a constant that the body keeps constant): the body unrolled, iteration ``i`` reading
    ``i`` as its iteration number and the previous iteration's loop-carried values; the
    scan outputs stacked along a new first axis. A trip count or a condition computed at
    run time (a ``while`` on the data, a length read from the input) is one error naming the
    node: the count of iterations would be a data-dependent shape. At most
    :data:`MAX_UNROLL` iterations."""
    body: GraphProto = node.attrs["body"]
    trip = node.maybe_const(0) if node.has(0) else None
    if node.has(0) and trip is None:
        node.fail("the trip count (input 0) is computed at run time: rlx unrolls a Loop whose "
                  "trip count is known at import time")
    go = node.maybe_const(1) if node.has(1) else np.asarray(True)
    if go is None:
        node.fail("the condition (input 1) is computed at run time: rlx unrolls a Loop whose "
                  "iterations are known at import time")
    if trip is None:
        node.fail("no trip count: a Loop that only a condition ends is not unrolled")
    count = int(np.asarray(trip).reshape(-1)[0])
    if count > MAX_UNROLL:
        node.fail(f"trip count {count}: rlx unrolls at most {MAX_UNROLL} iterations")
    carried = [node.value(i) for i in range(2, node.n_inputs)]
    n_carried, n_scan = len(carried), len(body.output) - 1 - len(carried)
    if len(body.input) != 2 + n_carried or n_scan < 0 or \
            len(node.proto.output) != n_carried + n_scan:
        node.fail(f"the body has {len(body.input)} inputs and {len(body.output)} outputs for "
                  f"{n_carried} loop-carried values and {len(node.proto.output)} node outputs")
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    values = node.importer.values
    for i in range(count):
        if not bool(np.asarray(go).reshape(-1)[0]):
            break
        node.importer.forget(body)               # the last iteration's values by these names
        values[body.input[0].name] = np.asarray(i, np.int64)
        values[body.input[1].name] = np.asarray(True)
        for inp, v in zip(body.input[2:], carried, strict=True):
            values[inp.name] = v
        outs = node.importer.inline(node, body)
        go = outs[0]
        if not isinstance(go, np.ndarray):
            node.fail(f"iteration {i}: the body's condition is computed at run time (a loop "
                      "that the data ends): rlx unrolls a Loop whose iterations are known at "
                      "import time")
        carried = list(outs[1:1 + n_carried])
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
    return [*carried, *(_stacked(node, k, parts) for k, parts in enumerate(scans))]


def _stacked(node: Node, k: int, parts: list[Value]) -> Value:
    """Scan output ``k``'s values of the iterations, stacked along a new first axis."""
    if not parts:
        node.fail(f"scan output {k}: no iteration ran, so its shape is unknown")
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.stack(parts)                   # type: ignore[arg-type]
    dims = node.dims_of(parts[0])
    rows = [reshape_to(node, node.as_tensor(p), [1, *node.dims_of(p)]) for p in parts]
    out = rows[0] if len(rows) == 1 else node.mir("concat", rows, axis=0)
    return node.known(out, [len(parts), *dims])


def _same_size(a: object, b: object) -> bool:
    """Whether two branch outputs' sizes may be one: equal numbers, or either dynamic (then
    ``where`` checks them equal at run time; a dynamic dim is never stretched), but a 1
    beside a dynamic size (``where`` would stretch the 1: another shape than the branch's)."""
    if is_static(a) and is_static(b):
        return int(a) == int(b)                  # type: ignore[call-overload]
    return not ((is_static(a) and int(a) == 1) or (is_static(b) and int(b) == 1))  # type: ignore
