"""MIR data-movement ops: reshape, transpose, narrow, dynamic_slice, slice, pad, concat,
expand, gather, write_rows (an in-place row update, a KV cache's), barrier; and the sizes of
a tensor as data: dim, iota."""

from __future__ import annotations

import math

from rlx.dialects import checks
from rlx.dialects.enums import INDEX_TYPES, SCATTER_REDUCTIONS
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import (
    Check,
    bool_attr,
    enum_attr,
    float_attr,
    int_attr,
    ints_attr,
    variadic,
)
from rlx.ir.types import Dim, DType, TensorInfo, dims_compatible, merge_dim

ROW_INDEX_TYPES = frozenset({DType.I32, DType.I64})
"""``write_rows``' slot and row indices (integers only: a cache position is no token id)."""


@MIR.op("reshape", operands=["x"],
        attrs=[ints_attr("new_shape", "sizes; at most one -1 (inferred); -2 - k copies "
                         "input dim k")])
def reshape(c: Check) -> list[TensorInfo]:
    """Row-major reshape (``Op::Reshape``); one ``-1`` entry is inferred (dynamic when the
    input is), and an entry ``-2 - k`` is input dim ``k`` (``-2``: dim 0, ``-3``: dim 1):
    how a reshape keeps several dynamic dims (``[?, ?, 512] -> [-2, -3, 8, 64]``).

    Example::

        %y = "rlx_mir.reshape"(%x) {new_shape = array<i64: -1, 8, 64>}
            : (tensor<?x512xf32>) -> tensor<?x8x64xf32>
    """
    x = c["x"]
    new = list(c.attr("new_shape"))
    copied = [-2 - d for d in new if d <= -2]
    if new.count(-1) > 1 or 0 in new or any(k >= x.rank for k in copied) or len(
            set(copied)) != len(copied):
        c.fail("attribute 'new_shape'", f"sizes > 0, at most one -1, -2 - k for an input "
               f"dim k < {x.rank} (each at most once)", str(new))
    if copied:
        return [x.with_shape(_copying_reshape(c, x, new, copied))]
    known = math.prod(d for d in new if d != -1)
    total = x.numel
    if total is None:
        c.numel("x", known, f"the elements of new_shape {new}", multiple=-1 in new)
        out: list[Dim] = [None if d == -1 else d for d in new]
        return [x.with_shape(out)]
    if -1 in new:
        if total % known:
            c.fail("attribute 'new_shape'", f"sizes whose product divides {total} (the "
                   "input's element count)", str(new))
        new[new.index(-1)] = total // known
    elif known != total:
        c.fail("attribute 'new_shape'", f"{total} elements (as the input {x})",
               f"{known} elements in {new}")
    return [x.with_shape(new)]


def _copying_reshape(c: Check, x: TensorInfo, new: list[int], copied: list[int]
                     ) -> list[Dim]:
    """A reshape that copies input dims: the other entries hold the other input dims'
    elements; a ``-1`` among them is their quotient (static sizes must divide: dynamic
    ones are carried whole into it)."""
    rest = [d for k, d in enumerate(x.shape) if k not in copied]
    static_rest = math.prod(d for d in rest if d is not None)
    known = math.prod(d for d in new if d > 0)
    if -1 not in new and None in rest:
        c.fail("operand 'x'", "static dims besides those new_shape copies (or a -1 to "
               "carry them)", str(x))
    dynamic = [k for k, d in enumerate(x.shape) if k not in copied and d is None]
    if -1 in new and static_rest % known and len(dynamic) == 1:
        # the one dynamic dim carries the rest: d * static_rest must divide by known
        c.multiple("x", dynamic[0], known // math.gcd(known, static_rest),
                   f"the elements of new_shape {new} besides the copied dims")
    elif (static_rest % known if -1 in new else static_rest != known):
        c.fail("attribute 'new_shape'", f"sizes besides the copied dims that hold the "
               f"{static_rest} static elements of the other dims of {x}", str(new))
    inferred = None if dynamic else static_rest // known
    return [x.shape[-2 - d] if d <= -2 else (inferred if d == -1 else d) for d in new]


@MIR.op("transpose", operands=["x"], attrs=[ints_attr("perm", "result dim i = input dim "
                                                       "perm[i]")])
def transpose(c: Check) -> list[TensorInfo]:
    """Permute dims (``Op::Transpose``): result dim ``i`` is input dim ``perm[i]``.

    Example::

        %y = "rlx_mir.transpose"(%x) {perm = array<i64: 0, 2, 1>}
            : (tensor<2x8x64xf32>) -> tensor<2x64x8xf32>
    """
    x = c["x"]
    perm = list(c.attr("perm"))
    if sorted(perm) != list(range(x.rank)):
        c.fail("attribute 'perm'", f"a permutation of 0..{x.rank - 1}", str(perm))
    return [x.with_shape(x.shape[p] for p in perm)]


@MIR.op("narrow", operands=["x"],
        attrs=[int_attr("axis"), int_attr("start", "first index; negative counts from the "
                                          "end of the axis (numpy)"),
               int_attr("len")])
def narrow(c: Check) -> list[TensorInfo]:
    """Contiguous slice ``x[..., start : start + len, ...]`` along ``axis`` (``Op::Narrow``).

    A negative ``start`` counts from the end (``x[..., size + start : size + start + len]``,
    ``len <= -start``): the last frames of a dynamic axis, e.g. a causal convolution's
    carried state (RLX's narrow takes ``start >= 0`` only).

    Example::

        %y = "rlx_mir.narrow"(%x) {axis = 1 : i64, len = 64 : i64, start = 64 : i64}
            : (tensor<4x128xf32>) -> tensor<4x64xf32>
    """
    x = c["x"]
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    start, length = c.attr("start"), c.non_negative("len")
    size = x.shape[axis]
    if start < 0:
        if length > -start:
            c.fail("attributes 'start', 'len'", f"len <= -start (a slice of the last "
                   f"{-start} entries)", f"start {start}, len {length}")
        if size is not None and -start > size:
            c.fail("attribute 'start'", f"-start <= {size} (dim {axis} of {x})", str(start))
        c.at_least("x", axis, -start, f"-start = {-start} (entries counted from the end)")
    else:
        if size is not None and start + length > size:
            c.fail("attributes 'start', 'len'", f"start + len <= {size} (dim {axis} of {x})",
                   f"{start} + {length}")
        c.at_least("x", axis, start + length, f"start + len = {start} + {length}")
    shape = list(x.shape)
    shape[axis] = length
    return [x.with_shape(shape)]


@MIR.op("dynamic_slice", operands=["x", "start", "end"], attrs=[int_attr("axis")])
def dynamic_slice(c: Check) -> list[TensorInfo]:
    """``x[..., start : end, ...]`` along ``axis`` with bounds computed at run time (0-d
    ``i64`` tensors), clamped as ONNX ``Slice`` clamps: ``s = clamp(start, 0, n)``, ``e =
    clamp(end, s, n)`` (``n`` the size of the axis), ``e - s`` entries; never a read outside
    ``x``. The importers' slice of a dynamic axis whose bounds are sizes the model computes
    (a ``chunk`` of a dynamic sequence: ``ceil(S / k)`` rows, the last piece shorter).

    Example::

        %y = "rlx_mir.dynamic_slice"(%x, %s, %e) {axis = 1 : i64}
            : (tensor<2x?x8xf32>, tensor<i64>, tensor<i64>) -> tensor<2x?x8xf32>
    """
    x = c["x"]
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    for name in ("start", "end"):
        c.rank(name, 0)
        c.dtype(name, {DType.I64})
    shape = list(x.shape)
    shape[axis] = None
    return [x.with_shape(shape)]


@MIR.op("slice", operands=["x"],
        attrs=[ints_attr("starts", "first index read, per axis"),
               ints_attr("sizes", "result size per axis; -1 - k: up to k before the end"),
               ints_attr("strides", "step per axis, non-zero (negative reads backwards)")])
def slice_(c: Check) -> list[TensorInfo]:
    """Strided slice over every axis: ``y[i0, i1, ...] = x[s0 + i0 t0, s1 + i1 t1, ...]``.

    One entry per axis in ``starts``, ``sizes`` and ``strides`` (``t``). A negative stride
    reads backwards from ``start``; a size of ``-1 - k`` (a positive stride) reads from
    ``start`` to ``k`` elements before the end of the axis, ``x[start : dim - k : t]``
    (``-1``: the rest of the axis), ``ceil((dim - start - k) / t)`` entries, which may be
    dynamic. Every index read lies inside the input (ONNX ``Slice`` after its clamping
    rules, resolved by the importer).

    Example::

        %y = "rlx_mir.slice"(%x) {sizes = array<i64: -2, 3>, starts = array<i64: 1, 7>,
              strides = array<i64: 1, -2>} : (tensor<?x8xf32>) -> tensor<?x3xf32>
    """
    x = c["x"]
    starts, sizes, strides = (list(c.attr(n)) for n in ("starts", "sizes", "strides"))
    if not len(starts) == len(sizes) == len(strides) == x.rank:
        c.fail("attributes 'starts', 'sizes', 'strides'", f"{x.rank} entries each (the "
               "rank of 'x')", f"{len(starts)}, {len(sizes)}, {len(strides)}")
    shape: list[Dim] = []
    for axis, (start, size, stride, dim) in enumerate(zip(starts, sizes, strides, x.shape,
                                                          strict=True)):
        if size < 0:
            shape.append(_to_end(c, axis, start, -1 - size, stride, dim))
            continue
        if stride == 0:
            c.fail(f"axis {axis}", "a size >= 0 (or -1 - k) and a non-zero stride",
                   f"size {size}, stride {stride}")
        last = start + (size - 1) * stride
        if size and (min(start, last) < 0 or (dim is not None and max(start, last) >= dim)):
            c.fail(f"axis {axis}", f"indices inside [0, {'?' if dim is None else dim}) "
                   f"(dim {axis} of {x})", f"{start} .. {last} (stride {stride})")
        if size and dim is None and stride < 0:
            c.fail(f"axis {axis}", "a static dim for a negative stride", str(x))
        if size:
            c.at_least("x", axis, max(start, last) + 1, f"slice indices {start} .. {last}")
        shape.append(size)
    return [x.with_shape(shape)]


def _to_end(c: Check, axis: int, start: int, k: int, stride: int, dim: Dim) -> Dim:
    """The size of ``x[start : dim - k : stride]`` along ``axis`` (a positive stride):
    ``ceil((dim - start - k) / stride)``; its last index read, ``start + (size - 1) *
    stride``, is below ``dim - k``."""
    if start < 0 or stride < 1:
        c.fail(f"axis {axis}", "start >= 0 and a positive stride for a size up to the end "
               "(-1 - k)", f"start {start}, stride {stride}")
    if dim is not None and start + k > dim:
        c.fail(f"axis {axis}", f"start + k <= {dim} (the size of dim {axis})",
               f"start {start}, k {k}")
    c.at_least("x", axis, start + k, f"a slice from {start} to {k} before the end")
    return None if dim is None else -(-(dim - start - k) // stride)


@MIR.op("pad", operands=["x"],
        attrs=[ints_attr("low", "elements added before each axis"),
               ints_attr("high", "elements added after each axis"),
               float_attr("value", "the fill value (converted to the element type)",
                          default=0.0)])
def pad(c: Check) -> list[TensorInfo]:
    """Constant padding (ONNX ``Pad`` in ``constant`` mode): ``low[i]`` elements before and
    ``high[i]`` after axis ``i``, filled with ``value``.

    Example::

        %y = "rlx_mir.pad"(%x) {high = array<i64: 0, 2>, low = array<i64: 0, 1>,
              value = 0.0 : f32} : (tensor<?x8xf32>) -> tensor<?x11xf32>
    """
    x = c["x"]
    low, high = list(c.attr("low")), list(c.attr("high"))
    if len(low) != x.rank or len(high) != x.rank or min(low + high, default=0) < 0:
        c.fail("attributes 'low', 'high'", f"{x.rank} sizes >= 0 each (the rank of 'x')",
               f"low {low}, high {high}")
    return [x.with_shape(None if d is None else d + lo + hi
                         for d, lo, hi in zip(x.shape, low, high, strict=True))]


@MIR.op("concat", operands=[variadic("inputs")], attrs=[int_attr("axis")])
def concat(c: Check) -> list[TensorInfo]:
    """Concatenate along ``axis`` (``Op::Concat``); other dims must agree.

    Example::

        %y = "rlx_mir.concat"(%a, %b) {axis = 1 : i64}
            : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x256xf32>
    """
    if not c.variadic:
        c.fail("operands", "at least 1", "0")
    first = c.variadic[0]
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), first.rank)
    shape = list(first.shape)
    total: Dim = 0
    for i, t in enumerate(c.variadic):
        c.expect(t.dtype == first.dtype and t.rank == first.rank, f"operand #{i}",
                 f"rank {first.rank} and element type {first.dtype} (as operand #0)", str(t))
        for d in range(first.rank):
            if d == axis:
                continue
            c.expect(dims_compatible(shape[d], t.shape[d]), f"operand #{i} dim {d}",
                     f"{shape[d]} (as operand #0)", str(t))
            shape[d] = merge_dim(shape[d], t.shape[d])
            c.dim(f"#{i}", d, c.ref("#0", d), "concat: the dims off the axis agree")
        size = t.shape[axis]
        total = None if total is None or size is None else total + size
    shape[axis] = total
    return [first.with_shape(shape)]


@MIR.op("expand", operands=["x"],
        attrs=[ints_attr("target_shape", "-1 keeps the (right-aligned) input dim")])
def expand(c: Check) -> list[TensorInfo]:
    """Broadcast to ``target_shape`` (``Op::Expand``, numpy rules; ``-1`` keeps the input
    dim, which may be dynamic).

    Example::

        %y = "rlx_mir.expand"(%b) {target_shape = array<i64: 4, 128>}
            : (tensor<128xf32>) -> tensor<4x128xf32>
    """
    x = c["x"]
    target = list(c.attr("target_shape"))
    if len(target) < x.rank or any(d < -1 or d == 0 for d in target):
        c.fail("attribute 'target_shape'", f"at least {x.rank} sizes > 0 or -1", str(target))
    offset = len(target) - x.rank
    out: list[Dim] = []
    for i, d in enumerate(target):
        src = x.shape[i - offset] if i >= offset else 1
        if d == -1:
            if i < offset:
                c.fail("attribute 'target_shape'", "-1 only over input dims", str(target))
            out.append(src)
            continue
        if src not in (1, None, d):
            c.fail(f"operand 'x' dim {i - offset}", f"1 or {d} (broadcast to {target})",
                   str(x))
        if src is None:     # a dynamic dim is not stretched: it must be the target size
            c.dim("x", i - offset, d, f"broadcast to {target}")
        out.append(d)
    return [x.with_shape(out)]


@MIR.op("gather", operands=["table", "indices"],
        attrs=[int_attr("axis", default=0),
               int_attr("batch_dims", "leading dims shared by table and indices",
                        default=0)])
def gather(c: Check) -> list[TensorInfo]:
    """Take slices along ``axis`` (``Op::Gather``, ONNX / ``tf.gather`` semantics):
    ``y = table[:axis] + indices[batch_dims:] + table[axis + 1:]``.

    With ``batch_dims = 0`` (RLX's op) every index selects from the whole table; with
    ``batch_dims = b`` the first ``b`` dims of table and indices are shared, so
    ``y[i0, j, ...] = table[i0, indices[i0, j], ...]`` (a per-batch row pick). Indices may
    be f32-encoded (truncated toward zero, as in RLX) or integers; they are clamped to
    ``[0, table.shape[axis] - 1]``.

    Example::

        %e = "rlx_mir.gather"(%embed, %ids) {axis = 0 : i64, batch_dims = 0 : i64}
            : (tensor<1000x64xf32>, tensor<1x?xf32>) -> tensor<1x?x64xf32>
    """
    table = c.min_rank("table", 1)
    c.dtype("indices", INDEX_TYPES)
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), table.rank)
    idx = c["indices"]
    batch = c.attr("batch_dims")
    if not 0 <= batch <= min(axis, idx.rank):
        c.fail("attribute 'batch_dims'", f"a value in 0..{min(axis, idx.rank)} (<= axis and "
               "the indices' rank)", str(batch))
    for d in range(batch):
        c.dim("indices", d, c.ref("table", d), f"table dim {d} (a batch dim)")
    c.at_least("table", axis, 1, "indices are clamped into the axis, which must not be "
               "empty")
    return [table.with_shape((*table.shape[:axis], *idx.shape[batch:],
                              *table.shape[axis + 1:]))]


@MIR.op("write_rows", operands=["cache", "new", "slot", "pos"])
def write_rows(c: Check) -> list[TensorInfo]:
    """``cache`` with ``T`` rows of one slot replaced per write: for ``n = 0 .. N-1`` in
    order, ``cache[slot[n], pos[n] + t, :] = new[n, t, :]`` for ``t < T``.

    Operands: ``cache [B, C, D]`` (``B`` slots of ``C`` rows), ``new [N, T, D]`` of the
    cache's element type, ``slot [N]`` and ``pos [N]`` (integers, read on the device: a
    KV cache written at each sequence's own position without the host reading it). A write
    that overlaps an earlier one wins. Out-of-range indices never write outside the cache:
    ``slot`` is clamped into ``[0, B - 1]`` and each row ``pos[n] + t`` into
    ``[0, C - 1]`` (the rows past the end all land on row ``C - 1``, the last one kept),
    as ``gather`` clamps its indices. rlx's, not RLX's (whose decode concatenates).

    Example::

        %k = "rlx_mir.write_rows"(%cache, %new, %slot, %pos)
            : (tensor<8x256x64xf32>, tensor<8x1x64xf32>, tensor<8xi32>, tensor<8xi32>)
            -> tensor<8x256x64xf32>
    """
    cache = c.rank("cache", 3)
    c.rank("new", 3)
    c.same_dtype("cache", "new")
    c.dim("new", 2, c.ref("cache", 2), "a row of the cache")
    for name in ("slot", "pos"):
        c.dtype(name, ROW_INDEX_TYPES)
        c.rank(name, 1)
        c.dim(name, 0, c.ref("new", 0), "one per write (dim 0 of 'new')")
    return [cache]


@MIR.op("scatter", operands=["data", "indices", "updates"],
        attrs=[enum_attr("reduction", SCATTER_REDUCTIONS, default="none")])
def scatter(c: Check) -> list[TensorInfo]:
    """``data`` with slices replaced or combined at the positions ``indices`` name (ONNX
    ``ScatterND``; rlx's, not RLX's): ``indices [*B, K]`` holds ``K``-coordinate positions
    into ``data``'s first ``K`` dims, ``updates [*B, *data.shape[K:]]`` one slice each. For
    each position in row-major order, ``out[idx] = update`` (``none``) or ``combine(out[idx],
    update)`` (``add``, ``mul``, ``max``, ``min``). A negative coordinate counts from the end
    of its dim (``+ dim``), and every coordinate is then clamped into ``[0, dim - 1]``: no
    index a caller passes writes outside ``data`` (an index still out of range lands on the
    dim's first or last slice, as ``gather`` clamps).

    Example::

        %y = "rlx_mir.scatter"(%data, %idx, %upd) {reduction = "add"}
            : (tensor<8x4xf32>, tensor<?x1xi64>, tensor<?x4xf32>) -> tensor<8x4xf32>
    """
    data = c.min_rank("data", 1)
    c.dtype("indices", ROW_INDEX_TYPES)
    idx = c.min_rank("indices", 1)
    k = idx.shape[-1]
    if k is None or not 1 <= k <= data.rank:
        c.fail("operand 'indices'", f"a static last dim in 1..{data.rank} (data's rank)",
               str(idx.type))
    c.same_dtype("data", "updates")
    if data.dtype == DType.I1:
        c.fail("operand 'data'", "a float or integer tensor", "i1")
    batch = idx.rank - 1
    c.rank("updates", batch + data.rank - k)
    for axis in range(batch):  # checked at run time where dynamic (rlx.lowering.guards)
        c.dim("updates", axis, c.ref("indices", axis), f"indices' batch dim {axis}")
    for j in range(k, data.rank):
        c.dim("updates", batch + j - k, c.ref("data", j), f"a slice of data (its dim {j})")
    return [data]


@MIR.op("dim", operands=["x"], attrs=[int_attr("axis")])
def dim(c: Check) -> list[TensorInfo]:
    """The size of dim ``axis`` of ``x`` as a 0-d ``i64`` tensor (ONNX ``Shape`` /
    ``Size`` data, torch's ``sym_size``): only ``x``'s shape is read, not its elements.

    Example::

        %n = "rlx_mir.dim"(%x) {axis = 1 : i64} : (tensor<?x?xi64>) -> tensor<i64>
    """
    x = c["x"]
    checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    return [TensorInfo((), DType.I64)]


@MIR.op("iota", operands=["x"], attrs=[int_attr("axis")])
def iota(c: Check) -> list[TensorInfo]:
    """``[0, 1, ..., n - 1]`` as a 1-D ``i64`` tensor, ``n`` the size of dim ``axis`` of
    ``x`` (ONNX ``Range`` from 0 by 1, torch's ``arange``): only ``x``'s shape is read.

    Example::

        %i = "rlx_mir.iota"(%x) {axis = 1 : i64} : (tensor<?x?xf32>) -> tensor<?xi64>
    """
    x = c["x"]
    axis = checks.normalize_axis(c, "axis", c.attr("axis"), x.rank)
    return [TensorInfo((x.shape[axis],), DType.I64)]


@MIR.op("barrier", operands=["x"], attrs=[
    bool_attr("always", "a barrier on every target (absent: only where matmuls are "
              "data-tiled or compute barriers are on)", optional=True)])
def barrier(c: Check) -> list[TensorInfo]:
    """``x`` unchanged; where the target data-tiles matmuls (llvm-cpu) it is a point IREE
    does not fuse across (``iree_tensor_ext.compute_barrier.start``). rlx's, not RLX's:
    for a producer IREE would otherwise fuse into a matmul's operand encoding and then fail
    to compile (a per-head RMSNorm reshaped into a projection's input, Qwen3.5's gated
    norm before ``out_proj``). With ``always``, on every target: ONNX
    ``DynamicQuantizeLinear``'s whole-tensor min / max, which IREE 3.13 fails to compile
    on llvm-cpu and Vulkan alike when fused with a producer over dynamic dims.

    Example::

        %y = "rlx_mir.barrier"(%x) : (tensor<1x?x64xf32>) -> tensor<1x?x64xf32>
    """
    return [c["x"]]
