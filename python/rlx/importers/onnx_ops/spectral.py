"""ONNX's DFT: a discrete Fourier transform along one axis, as matmuls by the transform's
cosine and sine tables; STFT; and the windows and mel filter banks audio front ends take
(Hann, Hamming, Blackman; MelWeightMatrix).

The tables are built in the module from iotas, ``theta = 2 pi ((i o) mod N) / N`` for input
index ``i`` and output index ``o`` (the product reduced mod ``N`` in integers first, so the
angle stays small and exact in f32 for any length), so the signal's length may be a
run-time size: FNet's dynamo export transforms its hidden states along the sequence. Forward
``Y = (Xr + j Xi)(C - j S)``, inverse ``(Xr + j Xi)(C + j S) / N``; the one-sided forms are
RFFT (real input, the first ``N // 2 + 1`` outputs) and IRFFT (a one-sided spectrum in, the
full real signal out: rows ``0`` and ``N / 2`` once, the others twice, their imaginary
parts ignored, as numpy's ``irfft``). Computed in f32 (f64 for f64), O(N) operations per
output: exact to the f32 tolerance at the lengths models use.
"""

from __future__ import annotations

import math

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, is_static, normalize
from rlx.importers.onnx_ops.registry import (
    Node,
    Value,
    converter,
    dtype_of,
    folder,
    is_symbolic,
)
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import DType


def _axis(node: Node, rank: int) -> int:
    """The transform's axis, in ``[0, rank - 2]`` (the last dim holds real and imaginary)."""
    if node.opset >= 20:
        axis = int(np.asarray(node.const(2, "the axis")).reshape(-1)[0]) if node.has(2) else -2
    else:
        axis = int(node.attr("axis", 1))
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        node.fail(f"axis {axis} outside [{-rank}, -2] and [0, {rank - 2}] (input rank {rank}; "
                  "the last dim holds the real and imaginary parts)")
    return axis % rank


def _fit(node: Node, x: HirValue, length: SymDim) -> HirValue:
    """``x [..., M]`` cut or zero-padded to ``length`` along its last dim."""
    m = node.dims_of(x)[-1]
    if normalize(m - length) == 0:
        return x
    if not (is_static(m) and is_static(length)):
        node.fail(f"a dft_length ({length}) beside a signal of run-time length ({m}): rlx "
                  "cuts or pads a signal of known length only")
    r = len(x.shape)
    if int(length) < int(m):
        return node.mir("slice", [x], starts=[0] * r, sizes=[*([-1] * (r - 1)), int(length)],
                        strides=[1] * r)
    return node.mir("pad", [x], low=[0] * r, high=[*([0] * (r - 1)), int(length) - int(m)],
                    value=0.0)


def _tables(node: Node, rows: SymDim, cols: SymDim, n: SymDim, dtype: DType
            ) -> tuple[HirValue, HirValue]:
    """``cos`` and ``sin`` of ``2 pi ((i o) mod n) / n`` for ``i < rows``, ``o < cols``, in
    ``dtype`` (computed in f32: rlx's sine and cosine have no f64 form)."""
    i = reshape_to(node, node.sizes.iota(rows, DType.I64, node.fail), [rows, 1])
    o = reshape_to(node, node.sizes.iota(cols, DType.I64, node.fail), [1, cols])
    n64 = node.sizes.scalar(n, DType.I64, node.fail)
    io = node.mir("binary", [node.mir("binary", [i, o], kind="mul"), n64], kind="rem")
    step = node.mir("binary", [np.asarray(2 * math.pi, np.float32),
                               node.sizes.scalar(n, DType.F32, node.fail)], kind="div")
    theta = node.mir("binary", [node.cast(io, DType.F32), step], kind="mul")
    return (node.cast(node.mir("activation", [theta], kind="cos"), dtype),
            node.cast(node.mir("activation", [theta], kind="sin"), dtype))


def _parts(node: Node, x: HirValue, dims: list[SymDim], axis: int, work: DType
           ) -> tuple[list[HirValue], list[int]]:
    """The real (and imaginary) part of ``x`` in ``work``, each with the axis moved last
    (and a unit row dim before a 1-D signal: a matmul's lhs has rows); the permutation."""
    rank = len(dims)
    moved = [k for k in range(rank - 1) if k != axis] + [axis]
    parts = []
    for c in range(int(dims[-1])):
        p = node.mir("slice", [x], starts=[0] * (rank - 1) + [c], sizes=[-1] * (rank - 1) + [1],
                     strides=[1] * rank)
        p = node.as_tensor(reshape_to(node, node.cast(p, work), dims[:-1]))
        if moved != list(range(rank - 1)):
            p = node.known(node.mir("transpose", [p], perm=moved), [dims[k] for k in moved])
        if rank == 2:
            p = node.as_tensor(reshape_to(node, p, [1, *node.dims_of(p)]))
        parts.append(p)
    return parts, moved


def _lengths(node: Node, m: SymDim, irfft: bool, onesided: bool
             ) -> tuple[SymDim, SymDim, SymDim]:
    """The transform's length ``n`` (dft_length, or its default), the input entries it reads
    and the outputs it makes."""
    given = node.maybe_const(1) if node.has(1) else None
    if node.has(1) and given is None:
        node.fail("dft_length (input 1) is computed at run time: the output's length would "
                  "be a data-dependent shape")
    length = None if given is None else int(np.asarray(given).reshape(-1)[0])
    if length is not None and length <= 0:
        node.fail(f"dft_length {length}: expected a positive length")
    if irfft:
        n = normalize(2 * (m - 1)) if length is None else length
        return n, (normalize(m) if length is None else length // 2 + 1), n
    n = m if length is None else length
    return n, n, (normalize(n // 2 + 1) if onesided else n)


def _halves_twice(node: Node, parts: list[HirValue], rows: SymDim, n: SymDim, work: DType
                  ) -> list[HirValue]:
    """IRFFT: rows 0 and ``n / 2`` count once, the others twice (the half spectrum stands
    for both halves)."""
    i = node.sizes.iota(rows, DType.I64, node.fail)
    twice = node.mir("binary", [i, np.asarray(2, np.int64)], kind="mul")
    middle = node.mir("compare", [twice, node.sizes.scalar(n, DType.I64, node.fail)], kind="eq")
    edge = node.mir("where", [node.mir("compare", [i, np.asarray(0, np.int64)], kind="eq"),
                              np.asarray(True), middle])
    weight = node.mir("where", [edge, np.asarray(1, work.numpy), np.asarray(2, work.numpy)])
    return [node.mir("binary", [p, weight], kind="mul") for p in parts]


def _products(node: Node, parts: list[HirValue], cos: HirValue, sin: HirValue,
              inverse: bool, real_only: bool, work: DType) -> list[HirValue]:
    """``(Xr + j Xi)(C -+ j S)``: its real part, and its imaginary part unless
    ``real_only``."""
    sign = np.asarray(1.0 if inverse else -1.0, work.numpy)

    def mm(a: HirValue, t: HirValue) -> HirValue:
        return node.mir("matmul", [a, t])

    real = mm(parts[0], cos)
    imag = None if real_only else node.mir("binary", [mm(parts[0], sin), sign], kind="mul")
    if len(parts) == 2:
        xs = node.mir("binary", [mm(parts[1], sin), sign], kind="mul")
        real = node.mir("binary", [real, xs], kind="sub")         # Xr C - sign Xi S
        if imag is not None:
            imag = node.mir("binary", [imag, mm(parts[1], cos)], kind="add")
    return [real] if imag is None else [real, imag]


def _is_complex(node: Node, x: HirValue, dims: list[SymDim], shape: str, what: str) -> bool:
    """Whether ``x`` (``[..., 1]`` real or ``[..., 2]`` complex, float) is complex; else one
    error naming the node."""
    if len(dims) < 2 or not is_static(dims[-1]) or int(dims[-1]) not in (1, 2):
        node.fail(f"{what} {x.type}: expected [{shape}, 1] (real) or [{shape}, 2] (complex)")
    if not x.dtype.is_float:
        node.fail(f"input 0 is {x.dtype}; {node.op_type} takes a float {what}")
    return int(dims[-1]) == 2


def _stacked(node: Node, outs: list[HirValue], signal: list[SymDim]) -> HirValue:
    """The real (and imaginary) parts, each of sizes ``signal``, as ``[*signal, 1 or 2]``."""
    outs = [node.as_tensor(reshape_to(node, v, [*signal, 1])) for v in outs]
    return outs[0] if len(outs) == 1 else node.mir("concat", outs, axis=len(signal))


@converter("DFT", const_inputs=(1, 2), since=17)
def convert_dft(node: Node) -> list[Value]:
    x = node.tensor(0)
    dims = node.dims(0)
    rank = len(dims)
    complex_in = _is_complex(node, x, dims, "..., signal", "input")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    irfft = inverse and onesided
    if onesided and complex_in != irfft:
        node.fail("onesided: the forward transform (RFFT) takes a real signal, the inverse "
                  f"(IRFFT) a complex one; this input is {'complex' if complex_in else 'real'}")
    axis = _axis(node, rank)
    work = DType.F64 if x.dtype == DType.F64 else DType.F32
    parts, moved = _parts(node, x, dims, axis, work)
    n, rows, cols = _lengths(node, dims[axis], irfft, onesided)
    parts = [_fit(node, p, rows) for p in parts]
    if irfft:
        parts = _halves_twice(node, parts, rows, n, work)
    outs = _products(node, parts, *_tables(node, rows, cols, n, work), inverse, irfft, work)
    if inverse:
        scale = node.sizes.scalar(n, work, node.fail)
        outs = [node.mir("binary", [v, scale], kind="div") for v in outs]
    y = _stacked(node, outs, [dims[k] for k in moved[:-1]] + [cols])   # (no unit row dim)
    if moved != list(range(rank - 1)):
        back = [moved.index(k) for k in range(rank - 1)] + [rank - 1]
        y = node.mir("transpose", [y], perm=back)
    out_dims = [cols if k == axis else d for k, d in enumerate(dims[:-1])] + [len(outs)]
    return [node.known(node.cast(y, x.dtype), out_dims)]


def _frame_length(node: Node, m: SymDim) -> SymDim:
    """STFT's frame length: input 3, else the window's length, else the signal's."""
    given = node.maybe_const(3) if node.has(3) else None
    if node.has(3) and given is None:
        node.fail("frame_length (input 3) is computed at run time: the output's length "
                  "would be a data-dependent shape")
    window = node.dims(2) if node.has(2) else None
    if window is not None and len(window) != 1:
        node.fail(f"window {node.info(2)}: expected a 1-D tensor")
    length = (int(np.asarray(given).reshape(-1)[0]) if given is not None
              else window[0] if window is not None else m)
    if window is not None and normalize(window[0] - length) != 0:
        node.fail(f"a window of {window[0]} samples for frames of {length}")
    if is_static(length) and int(length) <= 0:
        node.fail(f"frame_length {length}: expected a positive length")
    return length


@converter("STFT", const_inputs=(1, 3), since=17)
def convert_stft(node: Node) -> list[Value]:
    """Frames ``x[f step + i]`` for ``i`` below the frame length, gathered (the last frame
    ends within the signal: ``frames = floor((m - length) / step) + 1``), times the window,
    then the DFT of each frame (:func:`_products`)."""
    x = node.tensor(0)
    dims = node.dims(0)
    complex_in = _is_complex(node, x, dims, "batch, length", "signal")
    if len(dims) != 3:
        node.fail(f"signal {x.type}: expected [batch, length, 1 or 2]")
    step = int(np.asarray(node.const(1, "the frame step")).reshape(-1)[0])
    if step <= 0:
        node.fail(f"frame_step {step}: expected a positive step")
    onesided = bool(node.attr("onesided", 1))
    if onesided and complex_in:
        node.fail("onesided: a complex signal has no one-sided transform")
    work = DType.F64 if x.dtype == DType.F64 else DType.F32
    batch, m = dims[0], dims[1]
    length = _frame_length(node, m)
    frames = normalize((m - length) // step + 1)
    if is_static(frames) and int(frames) <= 0:
        node.fail(f"frames of {length} samples in a signal of {m}: none fits")
    bins = normalize(length // 2 + 1) if onesided else length
    f = reshape_to(node, node.sizes.iota(frames, DType.I64, node.fail), [frames, 1])
    i = reshape_to(node, node.sizes.iota(length, DType.I64, node.fail), [1, length])
    # in bounds by construction: the largest index, (frames - 1) step + length - 1, is at
    # most m - 1 since frames - 1 = floor((m - length) / step)
    index = node.mir("binary", [node.mir("binary", [f, np.asarray(step, np.int64)], kind="mul"),
                                i], kind="add")
    parts, _ = _parts(node, x, dims, 1, work)
    parts = [node.known(node.mir("gather", [p, index], axis=1, batch_dims=0),
                        [batch, frames, length]) for p in parts]
    if node.has(2):
        window = node.cast(node.tensor(2), work)
        parts = [node.mir("binary", [p, window], kind="mul") for p in parts]
    outs = _products(node, parts, *_tables(node, length, bins, length, work), False, False,
                     work)
    y = _stacked(node, outs, [batch, frames, bins])
    return [node.known(node.cast(y, x.dtype), [batch, frames, bins, 2])]


# --------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------

WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
           "BlackmanWindow": (0.42, 0.5, 0.08)}
"""``w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)`` (ONNX's and torch's windows),
``N`` the size when ``periodic`` (the default), else the size less one."""


def _window_dtype(node: Node) -> np.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype

    return np.dtype(tensor_dtype_to_np_dtype(int(node.attr("output_datatype", 1))))


@folder(*WINDOWS)
def fold_window(node: Node, inputs: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """A window of a size known at import time, computed in float64. A symmetric window of
    one sample is ``[1]``, as torch's (its ``N`` is 0)."""
    if inputs[0] is None or is_symbolic(inputs[0]):
        return None
    size = int(np.asarray(inputs[0]).reshape(-1)[0])
    if size < 0:
        node.fail(f"size {size}: expected a size >= 0")
    a0, a1, a2 = WINDOWS[node.op_type]
    n = size if node.attr("periodic", 1) else size - 1
    theta = 2 * np.pi * np.arange(size, dtype=np.float64) / max(n, 1)
    w = a0 - a1 * np.cos(theta) + a2 * np.cos(2 * theta)
    return [(w if n else np.ones(size)).astype(_window_dtype(node))]


@converter(*WINDOWS, const_inputs=(0,), since=17)
def convert_window(node: Node) -> list[Value]:
    """A window whose size the model computes from a run-time size (``torch.hann_window(
    x.shape[-1])``): the same formula over an iota, in f32 (rlx's cosine has no f64 form),
    cast to the output type. ``theta`` stays within ``[0, 2 pi]`` (``n <= N``), so f32's
    cosine is within the f32 tolerance of the float64 folder's."""
    size = normalize(np.asarray(node.const(0, "the size")).reshape(-1)[0])
    dtype = dtype_of(np.zeros(0, _window_dtype(node)))
    if dtype is None:
        node.fail(f"output_datatype {node.attr('output_datatype', 1)}: no rlx element type")
    a0, a1, a2 = WINDOWS[node.op_type]
    n = size if node.attr("periodic", 1) else size - 1
    i = node.cast(node.sizes.iota(size, DType.I64, node.fail), DType.F32)
    step = node.mir("binary", [np.asarray(2 * math.pi, np.float32),
                               node.sizes.scalar(n, DType.F32, node.fail)], kind="div")
    theta = node.mir("binary", [i, step], kind="mul")
    w = node.mir("binary", [np.asarray(a0, np.float32), node.mir("binary", [
        np.asarray(a1, np.float32), node.mir("activation", [theta], kind="cos")], kind="mul")],
                 kind="sub")
    if a2:
        twice = node.mir("binary", [theta, np.asarray(2, np.float32)], kind="mul")
        w = node.mir("binary", [w, node.mir("binary", [
            np.asarray(a2, np.float32), node.mir("activation", [twice], kind="cos")],
            kind="mul")], kind="add")
    if not node.attr("periodic", 1):         # one sample: [1], as the folder (n = 0)
        n64 = node.sizes.scalar(n, DType.I64, node.fail)
        one = node.mir("compare", [n64, np.asarray(0, np.int64)], kind="eq")
        w = node.mir("where", [one, np.asarray(1, np.float32), w])
    return [node.known(node.cast(w, dtype), [size])]


def _mel_matrix(node: Node, values: list[np.ndarray]) -> np.ndarray:
    """ONNX's (and ONNX Runtime's) mel filter bank ``[dft_length // 2 + 1, num_mel_bins]``:
    ``num_mel_bins + 2`` edges evenly spaced in mel (``2595 log10(1 + f / 700)``) from the
    lower to the upper edge (the step is the span over ``num_mel_bins + 2``, as ONNX's
    reference and ONNX Runtime take it), each edge's spectrogram bin ``floor((dft_length +
    1) f / sample_rate)``, and triangles rising from bin ``i`` to ``i + 1`` and falling to
    ``i + 2`` (a triangle whose rise is 0 wide is 1 at its centre), in float64."""
    bins, dft, rate = (int(np.asarray(v).reshape(-1)[0]) for v in values[:3])
    lower, upper = (float(np.asarray(v).reshape(-1)[0]) for v in values[3:5])
    if bins < 1 or dft < 1 or rate < 1 or not 0 <= lower <= upper:
        node.fail(f"num_mel_bins {bins}, dft_length {dft}, sample_rate {rate}, edges "
                  f"{lower} .. {upper} Hz: expected positive counts and 0 <= lower <= upper")
    rows = dft // 2 + 1
    mel = 2595 * np.log10(1 + np.array([lower, upper]) / 700)
    edges = mel[0] + np.arange(bins + 2) * (mel[1] - mel[0]) / (bins + 2)
    at = np.floor((dft + 1) * (700 * (10 ** (edges / 2595) - 1)) / rate).astype(np.int64)
    if at[-1] >= rows:
        node.fail(f"the last edge below upper_edge_hertz {upper} falls in bin "
                  f"{int(at[-1])}, past the {rows} bins of a {dft}-point spectrum at "
                  f"{rate} Hz")
    out = np.zeros((rows, bins))
    for i in range(bins):
        lo, mid, hi = (int(v) for v in at[i:i + 3])
        j = np.arange(lo, mid + 1)
        out[lo:mid + 1, i] = (j - lo) / (mid - lo) if mid > lo else 0.0
        out[mid, i] = 1.0
        if hi > mid:
            j = np.arange(mid, hi)
            out[mid:hi, i] = (hi - j) / (hi - mid)
    return out.astype(_window_dtype(node))


@folder("MelWeightMatrix")
def fold_mel_weight_matrix(node: Node, inputs: list[np.ndarray | None]
                           ) -> list[np.ndarray] | None:
    if any(v is None or is_symbolic(v) for v in inputs[:5]):
        return None
    return [_mel_matrix(node, inputs[:5])]  # type: ignore[arg-type]


@converter("MelWeightMatrix", const_inputs=(0, 1, 2, 3, 4), since=17)
def convert_mel_weight_matrix(node: Node) -> list[Value]:
    """Only as a constant: its sizes are its values."""
    return [_mel_matrix(node, [node.static(i, w) for i, w in enumerate(
        ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
         "upper_edge_hertz"))])]
