"""ONNX data-movement and shape ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat, Split, Expand, Tile (Pad, DepthToSpace, SpaceToDepth: :mod:`.layout`;
Slice and Gather: :mod:`.indexing`; the ops folded at import time that make values,
Constant, ConstantOfShape, Range: :mod:`.constant`).

Shape arguments (Reshape's shape, Slice's starts, ...) must be known at import time; they
may hold dynamic sizes (sympy expressions, :mod:`rlx.importers.dims`, from ``Shape`` of a
``?``-shaped tensor): a reshape keeps the input's dynamic dims (copied) and infers at most
one more, an expand to a dynamic size broadcasts against a tensor of that size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import sympy

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize, same, shape_vector
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    folder,
    is_symbolic,
    normalize_axes,
)
from rlx.importers.views import gathered_reshape
from rlx.ir.types import Dim

FOLD_MAX_ELEMENTS = 1 << 22
"""Larger results of Expand / ConstantOfShape / Range / Tile stay runtime ops."""


def symbolic(dims: Sequence[SymDim]) -> np.ndarray:
    """A shape vector: int64 when every entry is known, else an object array."""
    return shape_vector(dims)


def empty(node: Node, dims: Sequence[SymDim | None], like: HirValue) -> np.ndarray:
    """The (constant) result of an op whose output has no elements."""
    if not all(isinstance(d, int | np.integer) for d in dims):
        node.fail(f"an empty result with dynamic dims {list(dims)}")
    return np.zeros([int(d) for d in dims], dtype=np.asarray(node.scalar(0, like)).dtype)


def reshape_to(node: Node, x: HirValue, dims: Sequence[SymDim | None]) -> Value:
    """``x`` reshaped to ``dims`` (None: unknown): dynamic sizes that are the input's
    dynamic dims are copied from it (``-2 - k``); one more may be inferred. When ``x`` is
    itself a reshape of a tensor whose dims fit better (flattened, then viewed back: a
    reshape of a reshape is one reshape), that tensor is reshaped instead."""
    if any(d is not None and is_static(d) and int(d) == 0 for d in dims):
        return empty(node, dims, x)
    dims = [None if d is None else node.sizes.renamed(normalize(d)) for d in dims]
    origins = node.importer.reshaped_from
    source: HirValue | None = x
    new: list[int] | None = None
    while source is not None:
        new = _reshape_attr(node, source, dims)
        if new is not None:
            break
        source = origins.get(source.value)
    if new is None or source is None:
        aliased = _aliased_reshape(node, x, dims)
        if aliased is not None:
            return aliased
        split = _split_reshape(node, x, dims)
        return split if split is not None else _gathered_reshape(node, x, dims)
    if new == [-2 - k if source.shape[k] is None else source.shape[k]
               for k in range(len(source.shape))]:
        return source
    y = node.mir("reshape", [source], new_shape=new)
    origins[y.value] = source
    y_dims = node.dims_of(y)
    return node.known(y, [y_d if d is None else normalize(d)
                          for d, y_d in zip(dims, y_dims, strict=True)])


def _aliased_reshape(node: Node, x: HirValue, dims: Sequence[SymDim | None]
                     ) -> HirValue | None:
    """A reshape whose target names a model's dim ``d`` where ``x`` has, on the same axis,
    a dynamic dim ``e`` of another name: GPT-2's ``attention_mask.view(batch, -1)``, its
    ``batch`` read from ``input_ids``, which the dynamo exporter (``Dim.AUTO``) gives a
    size of its own, so that the ``-1`` is ``floor(e s / d)``. Taken as ``d = e``, the
    reshape is one rlx says (here, none at all); ``d = e`` is checked at run time by a
    broadcast of ``x`` against a ruler of ``d`` on that axis (a dynamic dim is never
    stretched: sizes that differ fail the call naming the node before anything runs, where
    ONNX Runtime would reshape, or fail at the next op that meets both). None where no
    such pairing makes the reshape one that rlx says."""
    x_dims = node.dims_of(x)
    sizes = node.sizes
    subs = {d: e for i, (d, e) in enumerate(zip(dims, x_dims, strict=False))
            if sizes.is_models(d) and sizes.is_models(e) and d != e and x.shape[i] is None
            and not any(same(d, xd) for xd in x_dims) and sizes.can_build(d)}
    if not subs or any(d is None for d in dims):
        return None
    target = [normalize(sympy.simplify(sympy.sympify(d).xreplace(subs))) for d in dims]
    if not same(math.prod(target), math.prod(x_dims)) or _reshape_attr(node, x, target) is None:
        return None
    for axis, d in enumerate(dims[:len(x_dims)]):
        if d in subs:
            ruler = node.mir("reshape", [node.sizes.ruler(d, node.fail)],
                             new_shape=[-1 if a == axis else 1 for a in range(len(x_dims))])
            x = node.known(node.mir("where", [ruler, x, x]), x_dims)
    return reshape_to(node, x, target)


def _split_reshape(node: Node, x: HirValue, dims: Sequence[SymDim | None]) -> HirValue | None:
    """A reshape that splits input dims, each into consecutive target dims whose product it
    is (``[B, 3, 2 h, 2 w] -> [B, 3, h, 2, w, 2]``: the dynamo exporter's pixel_unshuffle),
    with one dynamic size in each split: one ``rlx_mir.reshape`` a split, each copying the
    other dims and inferring its one size (checked at run time to divide whole); or None
    where the target is not such a split."""
    if any(d is None for d in dims):
        return None
    x_dims, target = node.dims_of(x), [normalize(d) for d in dims]  # type: ignore[arg-type]
    groups: list[list[SymDim]] = []
    at = 0
    for xd in x_dims:
        group: list[SymDim] = []
        while at < len(target) and not (group and same(math.prod(group), xd)):
            group.append(target[at])
            at += 1
        if not group or not same(math.prod(group), xd) or sum(
                not is_static(d) for d in group) > 1:
            return None
        groups.append(group)
    if at != len(target):
        return None
    y = x                                      # split up to group g, the rest as x's
    for g, group in enumerate(groups):
        if len(group) > 1:
            current = [d for grp in groups[:g] for d in grp] + list(x_dims[g:])
            new = [-2 - k if not is_static(d) else int(d) for k, d in enumerate(current)]
            lo = len(current) - len(x_dims) + g
            new[lo:lo + 1] = [int(d) if is_static(d) else -1 for d in group]
            y = node.known(node.mir("reshape", [y], new_shape=new),
                           [*current[:lo], *group, *current[lo + 1:]])
    return y


def _gathered_reshape(node: Node, x: HirValue, dims: Sequence[SymDim | None]) -> HirValue:
    """A reshape to several dynamic sizes that are not the input's dims (``[B S, 64]`` to
    ``[B, S, 64]``): :func:`rlx.importers.views.gathered_reshape`."""
    where = f"reshape of {x.type} to {[str(d) for d in dims]}"
    if any(d is None for d in dims):
        node.fail(f"{where}: sizes not known at import time")
    target = [normalize(d) for d in dims]  # type: ignore[arg-type]
    return node.known(gathered_reshape(node, x, target, where), target)


def _reshape_attr(node: Node, x: HirValue, dims: Sequence[SymDim | None]
                  ) -> list[int] | None:
    """``new_shape`` of a reshape of ``x`` to ``dims``, or None when rlx's reshape cannot
    say it (dynamic sizes that are neither the input's dims nor one inferred size)."""
    x_dims = node.dims_of(x)
    new: list[int] = []
    used: set[int] = set()
    free = 0
    for d in dims:
        if d is not None and is_static(d):
            new.append(int(d))
            continue
        k = next((k for k, xd in enumerate(x_dims) if d is not None and k not in used
                  and x.shape[k] is None and same(xd, d)), None)
        if k is None:
            free += 1
            new.append(-1)
            continue
        used.add(k)
        new.append(-2 - k)
    uncopied_dynamic = [k for k in range(len(x.shape)) if k not in used and
                        x.shape[k] is None]
    if free > 1 or (free == 0 and uncopied_dynamic):
        if free + len(used) > 1:
            return None
        new = [-1 if n <= -2 else n for n in new]
    return new


# --------------------------------------------------------------------------------------
# Shape, Size
# --------------------------------------------------------------------------------------


def clamp_range(start: int, end: int | None, n: int) -> tuple[int, int]:
    end = n if end is None else end
    start, end = (s + n if s < 0 else s for s in (start, end))
    return min(max(start, 0), n), min(max(end, 0), n)


@converter("Shape")
def convert_shape(node: Node) -> list[Value]:
    dims = node.dims(0)
    start, end = clamp_range(node.attr("start", 0), node.attr("end"), len(dims))
    return [symbolic(dims[start:end])]


@folder("Shape")
def fold_shape(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    if inputs[0] is None:
        return None
    start, end = clamp_range(node.attr("start", 0), node.attr("end"), inputs[0].ndim)
    return [np.asarray(inputs[0].shape[start:end], dtype=np.int64)]


@converter("Size")
def convert_size(node: Node) -> list[Value]:
    return [shape_vector([math.prod(node.dims(0))]).reshape(())]


@folder("Size")
def fold_size(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    return None if inputs[0] is None else [np.asarray(inputs[0].size, dtype=np.int64)]


# --------------------------------------------------------------------------------------
# Reshapes
# --------------------------------------------------------------------------------------


def reshape_dims(node: Node, x_shape: Sequence[SymDim], shape: np.ndarray,
                 allowzero: bool) -> list[SymDim]:
    """ONNX Reshape's target: 0 copies the input dim (unless ``allowzero``), one -1 is
    the element count over the others (a size expression when dynamic)."""
    out: list[SymDim] = []
    for i, s in enumerate(shape):
        s = normalize(s)
        if not is_static(s):
            out.append(s)
        elif s == 0 and not allowzero:
            if i >= len(x_shape):
                node.fail(f"shape {list(shape)}: entry {i} copies a dim the input lacks")
            out.append(x_shape[i])
        else:
            out.append(int(s))
    if sum(1 for d in out if is_static(d) and d == -1) > 1:
        node.fail(f"shape {list(shape)}: at most one -1")
    if not any(is_static(d) and d == -1 for d in out):
        return out
    at = next(i for i, d in enumerate(out) if is_static(d) and d == -1)
    known = math.prod(d for i, d in enumerate(out) if i != at)
    total = math.prod(x_shape)
    if is_static(known) and is_static(total):
        if known == 0 or int(total) % int(known):
            node.fail(f"cannot reshape {list(x_shape)} to {list(shape)}")
        out[at] = int(total) // int(known)
        return out
    quotient = sympy.simplify(sympy.sympify(total) / sympy.sympify(known))
    if not (quotient.is_integer or quotient.is_Integer):
        # not whole for every input size (pixel_unshuffle's H / 2 over a dynamic H): the
        # reshape keeps its -1, whose size rlx_mir.reshape checks at run time to divide
        # whole (a size relation: an odd H fails the call naming the node, it reads nothing)
        quotient = sympy.floor(quotient)
    out[at] = normalize(quotient)
    return out


@converter("Reshape", const_inputs=(1,), since=5)
def convert_reshape(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = reshape_dims(node, node.dims(0), node.const(1, "the new shape"),
                        bool(node.attr("allowzero", 0)))
    return [reshape_to(node, x, dims)]


@folder("Reshape")
def fold_reshape(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, shape = inputs[0], inputs[1]
    if x is None or shape is None or is_symbolic(shape):
        return None
    dims = [int(s) if int(s) != 0 or node.attr("allowzero", 0) else x.shape[i]
            for i, s in enumerate(shape)]
    return [x.reshape(dims)]


def _flatten_dims(node: Node, dims: Sequence[SymDim]) -> list[SymDim]:
    rank = len(dims)
    axis = node.attr("axis", 1)
    if not -rank <= axis <= rank:
        node.fail(f"axis {axis} outside [{-rank}, {rank}]")
    if axis < 0:
        axis += rank
    return [normalize(math.prod(dims[:axis])), normalize(math.prod(dims[axis:]))]


@converter("Flatten")
def convert_flatten(node: Node) -> list[Value]:
    x = node.tensor(0)
    return [reshape_to(node, x, _flatten_dims(node, node.dims(0)))]


@folder("Flatten")
def fold_flatten(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    return None if x is None else [x.reshape(_flatten_dims(node, list(x.shape)))]


def _axes(node: Node, rank: int, inputs: Sequence[np.ndarray | None] | None = None,
          since: int = 13) -> list[int] | None:
    """Axes from the attribute (before ``since``) or input 1 (None: not given)."""
    if node.version < since:
        axes = node.ints("axes")
    elif inputs is not None:
        axes = None if len(inputs) < 2 or inputs[1] is None else [int(a) for a in inputs[1]]
    else:
        axes = [int(a) for a in node.static(1, "the axes")] if node.has(1) else None
    return None if axes is None else normalize_axes(node, axes, rank)


def _squeezed(node: Node, dims: Sequence[SymDim], axes: list[int] | None
              ) -> list[SymDim]:
    if axes is None:
        if not all(isinstance(d, int | np.integer) for d in dims):
            node.fail("squeezing every 1-dim of a tensor with dynamic dims")
        return [d for d in dims if d != 1]
    for a in axes:
        if is_static(dims[a]) and dims[a] != 1:
            node.fail(f"axis {a} has size {dims[a]}, not 1")
    return [d for i, d in enumerate(dims) if i not in axes]


def _unsqueezed(node: Node, dims: Sequence[SymDim], axes: list[int] | None
                ) -> list[SymDim]:
    if axes is None:
        node.fail("the axes are required")
    out = list(dims)
    for a in sorted(axes):
        out.insert(a, 1)
    return out


@converter("Squeeze", const_inputs=(1,))
def convert_squeeze(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = node.dims(0)
    return [reshape_to(node, x, _squeezed(node, dims, _axes(node, len(dims))))]


@converter("Unsqueeze", const_inputs=(1,))
def convert_unsqueeze(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = node.dims(0)
    n_axes = len(node.ints("axes") or []) if node.version < 13 else len(
        node.static(1, "the axes"))
    return [reshape_to(node, x, _unsqueezed(node, dims, _axes(node, len(dims) + n_axes)))]


@folder("Squeeze", "Unsqueeze")
def fold_squeeze(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    if x is None or (node.version >= 13 and len(inputs) > 1 and inputs[1] is not None
                     and is_symbolic(inputs[1])):
        return None
    if node.op_type == "Squeeze":
        return [x.reshape(_squeezed(node, x.shape, _axes(node, x.ndim, inputs)))]
    n_axes = len(node.ints("axes") or []) if node.version < 13 else (
        0 if len(inputs) < 2 or inputs[1] is None else len(inputs[1]))
    dims = _unsqueezed(node, x.shape, _axes(node, x.ndim + n_axes, inputs))
    return [x.reshape(dims)]


# --------------------------------------------------------------------------------------
# Transpose, Concat, Split
# --------------------------------------------------------------------------------------


def _perm(node: Node, rank: int) -> list[int]:
    perm = node.ints("perm") or list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        node.fail(f"perm {perm} is not a permutation of 0..{rank - 1}")
    return perm


@converter("Transpose")
def convert_transpose(node: Node) -> list[Value]:
    x = node.tensor(0)
    perm = _perm(node, len(x.shape))
    if perm == list(range(len(perm))):
        return [x]
    return [node.mir("transpose", [x], perm=perm)]


@folder("Transpose")
def fold_transpose(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x = inputs[0]
    return None if x is None else [np.transpose(x, _perm(node, x.ndim))]


@converter("Concat", since=4)
def convert_concat(node: Node) -> list[Value]:
    values = [node.tensor(i) for i in range(node.n_inputs) if node.has(i)]
    axis = normalize_axes(node, [node.attr("axis")], len(values[0].shape), "axis")[0]
    values = [v for v in values if v.shape[axis] != 0] or values[:1]
    if len(values) == 1:
        return [values[0]]
    return [node.mir("concat", values, axis=axis)]


@folder("Concat")
def fold_concat(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    arrays = [a for a in inputs if a is not None]
    if len(arrays) != len([i for i in range(node.n_inputs) if node.has(i)]):
        return None
    out = np.concatenate(arrays, axis=node.attr("axis"))
    return [out if any(is_symbolic(a) for a in arrays) else out.astype(arrays[0].dtype)]


def split_sizes(node: Node, dim: Dim, n_out: int) -> list[int]:
    if node.version >= 13 and node.has(1):
        sizes = [int(s) for s in node.static(1, "the split sizes")]
    elif node.version < 13 and node.ints("split"):
        sizes = node.ints("split") or []
    elif dim is None:
        node.fail("an even split of a dynamic dim")
    elif node.attr("num_outputs") is not None:
        chunk = -(-dim // node.attr("num_outputs"))
        sizes = [min(chunk, dim - i * chunk) for i in range(node.attr("num_outputs"))]
    else:
        if dim % n_out:
            node.fail(f"dim {dim} does not split evenly into {n_out} outputs")
        sizes = [dim // n_out] * n_out
    if len(sizes) != n_out or (dim is not None and sum(sizes) != dim):
        node.fail(f"split sizes {sizes} for {n_out} outputs of dim {dim}")
    return sizes


@converter("Split", const_inputs=(1,))
def convert_split(node: Node) -> list[Value]:
    x = node.tensor(0)
    axis = normalize_axes(node, [node.attr("axis", 0)], len(x.shape), "axis")[0]
    sizes = split_sizes(node, x.shape[axis], len(node.proto.output))
    outs: list[Value] = []
    start = 0
    for size in sizes:
        if size == x.shape[axis]:
            outs.append(x)
        elif size == 0:
            outs.append(empty(node, [0 if a == axis else d for a, d in enumerate(x.shape)],
                              x))
        else:
            part = node.mir("narrow", [x], axis=axis, start=start, len=size)
            outs.append(node.known(part, [size if a == axis else d
                                          for a, d in enumerate(node.dims(0))]))
        start += size
    return outs


# --------------------------------------------------------------------------------------
# Expand, Tile
# --------------------------------------------------------------------------------------


def expand_dims(node: Node, x_dims: Sequence[SymDim], shape: np.ndarray) -> list[SymDim]:
    """ONNX Expand's bidirectional broadcast of ``x_dims`` and ``shape``: the result's
    sizes (a dynamic dim against a size it cannot be compared with is kept, and checked
    equal when the module runs)."""
    target = [normalize(s) for s in shape.reshape(-1)]
    rank = max(len(x_dims), len(target))
    xs = [1] * (rank - len(x_dims)) + list(x_dims)
    ss = [1] * (rank - len(target)) + target
    out: list[SymDim] = []
    for i, (d, s) in enumerate(zip(xs, ss, strict=True)):
        if is_static(s) and s == 1:
            out.append(d)
        elif (is_static(d) and d == 1) or same(d, s):
            out.append(s)
        elif is_static(d) and is_static(s):
            node.fail(f"cannot broadcast dim {i} of {[str(x) for x in x_dims]} to {s}")
        else:
            out.append(d if is_static(d) else s)
    return out


@converter("Expand", const_inputs=(1,), since=8)
def convert_expand(node: Node) -> list[Value]:
    x = node.tensor(0)
    x_dims = node.dims(0)
    out = expand_dims(node, x_dims, node.const(1, "the shape"))
    if len(out) == len(x_dims) and all(same(a, b) for a, b in zip(out, x_dims, strict=True)):
        return [x]
    return [node.known(node.sizes.broadcast(x, x_dims, out, node.fail), out)]


@folder("Expand")
def fold_expand(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, shape = inputs[0], inputs[1]
    if x is None or shape is None or is_symbolic(shape):
        return None
    out = np.broadcast_shapes(x.shape, tuple(int(s) for s in shape))
    if math.prod(out) > FOLD_MAX_ELEMENTS:
        return None
    return [np.broadcast_to(x, out).copy()]


@converter("Tile", const_inputs=(1,), since=6)
def convert_tile(node: Node) -> list[Value]:
    """``[d0, d1] x [r0, r1]``: reshape to ``[1, d0, 1, d1]``, expand to
    ``[r0, d0, r1, d1]``, reshape to ``[r0 d0, r1 d1]``; a dim repeated once is left as it
    is. Dims and repeats may be sizes known only when the module runs (a repeat computed
    from a Shape: YOSO's and CANINE's ``repeat`` over the sequence), so each step is
    the reshape or broadcast of those sizes (:func:`reshape_to`, ``sizes.broadcast``)."""
    x = node.tensor(0)
    x_dims = node.dims(0)
    reps = [normalize(r) for r in node.const(1, "the repeats").reshape(-1)]
    if len(reps) != len(x_dims):
        node.fail(f"tiling {x.type} by {len(reps)} repeats: needs one repeat per dim")
    if any(is_static(r) and int(r) < 0 for r in reps):
        node.fail(f"tiling by negative repeats {[str(r) for r in reps]}")
    if all(is_static(r) and int(r) == 1 for r in reps):
        return [x]
    split: list[SymDim] = []   # x with a unit dim before each repeated one
    grown: list[SymDim] = []   # the broadcast's target
    merged: list[SymDim] = []  # the result
    for d, r in zip(x_dims, reps, strict=True):
        if is_static(r) and int(r) == 1:
            split.append(d)
            grown.append(d)
            merged.append(d)
        else:
            split += [1, d]
            grown += [r, d]
            merged.append(normalize(r * d))
    y = reshape_to(node, x, split)
    y = node.known(node.sizes.broadcast(y, split, grown, node.fail), grown)
    return [reshape_to(node, y, merged)]


@folder("Tile")
def fold_tile(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    x, reps = inputs[0], inputs[1]
    if x is None or reps is None or is_symbolic(reps) or is_symbolic(x):
        return None
    if x.size * math.prod(int(r) for r in reps) > FOLD_MAX_ELEMENTS:
        return None
    return [np.tile(x, [int(r) for r in reps])]
