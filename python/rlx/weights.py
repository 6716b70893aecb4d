"""Weights: the one loader of every weight format rlx reads, checked against a module.

A module declares its weights (``rlx_hir.param``: name, shape, dtype; a vmfb lists them in
its ``rlx.params`` reflection); :func:`parameter_index` reads them from a dict of numpy
arrays or an ``.irpa``, ``.safetensors``, ``.gguf`` or ``.npz`` file into an
``iree.runtime.ParameterIndex`` (scope ``model``), checking names, sizes, and shapes and
dtypes where the format records them, before anything runs. ``rlx.runtime.load``,
``rlx-run --params`` and generation all go through it. :func:`save_params` writes ``.irpa``.
"""

from __future__ import annotations

import json
import mmap
import struct
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.ir.diagnostics import WeightError
from rlx.ir.dtypes import DType

PARAM_SCOPE = "model"
"""The scope of the weights' parameter names (``#flow.parameter.named<"model"::NAME>``):
``iree-run-module --parameters=model=w.irpa``."""
ParamSource = Mapping[str, np.ndarray] | str | Path | None
ENCODED_SCOPE = "encoded"
"""The scope of a module's weights encoded ahead of time (:mod:`rlx.encoding`): the main
module reads them from there, the others from :data:`PARAM_SCOPE`."""

IMPORT_ALIGNMENT = 64
"""IREE's CPU devices use a host array in place when it starts on a 64-byte boundary, and
copy any other for the module's lifetime (measured on llvm-cpu: a 256 MiB array 16 or 32
bytes past a boundary added 256 MiB resident after load, one on a boundary nothing). numpy
places large arrays 16 bytes past one: the arrays rlx builds (dequantized, concatenated,
transposed weights) come from :func:`aligned` and :func:`aligned_concat`."""


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialized C-contiguous array starting on an :data:`IMPORT_ALIGNMENT` boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + IMPORT_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % IMPORT_ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned(array: Any, dtype: Any = None) -> np.ndarray:
    """``array`` (as ``dtype``) C-contiguous on an :data:`IMPORT_ALIGNMENT` boundary: itself
    where it already is, else a copy."""
    a = np.asarray(array, dtype=dtype)
    if a.flags.c_contiguous and a.ctypes.data % IMPORT_ALIGNMENT == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def release_file_pages(arrays: Iterable[Any]) -> None:
    """Drop the resident pages of the arrays that view a read-only file mapping (a GGUF
    file's tensors, :meth:`rlx.gguf.GgufFile.raw`) once they have been read: a hint to the
    kernel (``MADV_DONTNEED``) that lowers the process's resident memory without changing
    any value, since a page read again is faulted back in from the file. Arrays of any other
    memory are left alone (on anonymous memory the same hint would zero them)."""
    if not hasattr(mmap, "MADV_DONTNEED"):            # not Linux / macOS: keep the pages
        return
    page = mmap.PAGESIZE
    for a in arrays:
        base = _mapping_of(a) if isinstance(a, np.ndarray) else None
        if not isinstance(a, np.ndarray) or not isinstance(base, mmap.mmap) or not a.nbytes:
            continue
        start = _offset_in(a, base)
        lo, hi = -(-start // page) * page, (start + a.nbytes) // page * page
        if hi > lo:
            try:
                base.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):                 # a closed map: nothing to drop
                pass


FILE_MAPS: weakref.WeakKeyDictionary[mmap.mmap, tuple[str, int, int, int]] = (
    weakref.WeakKeyDictionary())
"""Read-only file mappings whose views stand for the file's bytes (:func:`file_view`):
mapping -> (path, size, modification time in ns, inode) when it was mapped."""


def register_file_map(mapping: mmap.mmap, path: Path) -> None:
    """Record that ``mapping`` maps the file ``path`` read-only (a GGUF's tensors)."""
    st = path.stat()
    FILE_MAPS[mapping] = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def _mapping_of(a: np.ndarray) -> Any:
    base: Any = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def _offset_in(a: np.ndarray, mapping: mmap.mmap) -> int:
    """Where ``a``'s first byte lies in ``mapping`` (a view of it)."""
    return a.ctypes.data - np.frombuffer(mapping, np.uint8, count=1).ctypes.data


def file_view(a: Any) -> tuple[tuple[str, int, int, int], int, int] | None:
    """(the file, the byte offset, the byte length) when ``a`` is a contiguous view of a
    registered file mapping (:func:`register_file_map`), else None."""
    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
        return None
    base = _mapping_of(a)
    if not isinstance(base, mmap.mmap) or base not in FILE_MAPS or base.closed:
        return None
    return FILE_MAPS[base], _offset_in(a, base), a.nbytes


def aligned_concat(arrays: list[np.ndarray], axis: int) -> np.ndarray:
    """``np.concatenate(arrays, axis)`` into an :func:`aligned_empty` array."""
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    out = aligned_empty(tuple(shape), np.result_type(*arrays))
    np.concatenate(arrays, axis=axis, out=out)
    return out


@dataclass(frozen=True)
class ParamSpec:
    name: str
    shape: tuple[int, ...]
    dtype: DType

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * max(self.dtype.bits // 8, 1)



_SAFETENSORS_DTYPES = {"F32": DType.F32, "F16": DType.F16, "BF16": DType.BF16,
                       "F64": DType.F64, "I8": DType.I8, "U8": DType.I8, "I16": DType.I16,
                       "I32": DType.I32, "I64": DType.I64, "BOOL": DType.I1}
MAX_HEADER = 100 * 1024 * 1024


def read_safetensors_header(path: Path) -> dict[str, tuple[DType | None, tuple[int, ...], int]]:
    """name -> (dtype, shape, byte length) from a ``.safetensors`` header, bounds-checked
    against the file size (nothing is read past the file, nothing sized by the header)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise WeightError(f"{path}: error: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", raw)
        if n > min(size - 8, MAX_HEADER):
            raise WeightError(f"{path}: error: safetensors header length {n} runs past the "
                              f"end of the file ({size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise WeightError(f"{path}: error: corrupt safetensors header: {e}") from None
    if not isinstance(header, dict):
        raise WeightError(f"{path}: error: corrupt safetensors header (not a JSON object)")
    data_size = size - 8 - n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype_name, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            shape = tuple(int(s) for s in shape)
        except (KeyError, TypeError, ValueError):
            raise WeightError(f"{path}: error: tensor '{name}': corrupt header entry "
                              f"{info!r}") from None
        if not 0 <= begin <= end <= data_size:
            raise WeightError(f"{path}: error: tensor '{name}': data [{begin}, {end}) lies "
                              f"outside the file's {data_size} data bytes")
        out[name] = (_SAFETENSORS_DTYPES.get(dtype_name), shape, end - begin)
    return out


def _check_file_params(path: Path, specs: list[ParamSpec], entries: dict[str, int]) -> None:
    """Every declared weight is in the file with the right size (and dtype/shape when the
    format records them)."""
    header = read_safetensors_header(path) if path.suffix == ".safetensors" else {}
    for spec in specs:
        if spec.name not in entries:
            raise WeightError(f"{path}: error: weight '{spec.name}' (the module's "
                              f"{list(spec.shape)} {spec.dtype}) is not in the file")
        if spec.name in header:
            dtype, shape, _ = header[spec.name]
            if dtype != spec.dtype or shape != spec.shape:
                raise WeightError(f"{path}: error: weight '{spec.name}': expected "
                                  f"{list(spec.shape)} {spec.dtype}, found {list(shape)} "
                                  f"{dtype or 'an unsupported dtype'}")
        if entries[spec.name] != spec.nbytes:
            raise WeightError(f"{path}: error: weight '{spec.name}': expected {spec.nbytes} "
                              f"bytes ({list(spec.shape)} {spec.dtype}), found "
                              f"{entries[spec.name]}")


def _check_dict_params(params: Mapping[str, np.ndarray], specs: list[ParamSpec]) -> None:
    for spec in specs:
        if spec.name not in params:
            raise WeightError(f"error: weight '{spec.name}' ({list(spec.shape)} "
                              f"{spec.dtype}) is missing from the params dict")
        arr = np.asarray(params[spec.name])
        want = spec.dtype.numpy
        if tuple(arr.shape) != spec.shape or arr.dtype != want:
            raise WeightError(f"error: weight '{spec.name}': expected {list(spec.shape)} "
                              f"{want}, found {list(arr.shape)} {arr.dtype}")


WEIGHT_FORMATS = (".irpa", ".safetensors", ".gguf", ".npz")
"""Weight files ``parameter_index`` reads (besides a dict of numpy arrays)."""


def parameter_index(params: ParamSource, specs: list[ParamSpec], keep: list[Any]) -> Any:
    """The one weight loader (``rlx.runtime.load``, ``rlx-run --params``, generation): an
    ``iree.runtime.ParameterIndex`` of ``params`` (a dict of numpy arrays, or an ``.irpa``,
    ``.safetensors``, ``.gguf`` or ``.npz`` file), checked against the module's weights
    ``specs`` (names, and sizes, shapes and dtypes where the format records them) before
    anything runs. Arrays IREE reads in place are appended to ``keep``."""
    import iree.runtime as rt

    if params is None:
        names = ", ".join(s.name for s in specs)
        raise WeightError(f"error: the module needs weights ({names}); give them with params= "
                          "(Python) or --params (rlx-run)")
    if isinstance(params, str | Path):
        path = Path(params)
        if path.suffix not in WEIGHT_FORMATS:
            raise WeightError(f"{path}: error: unknown weight file format {path.suffix!r} "
                              f"(expected {', '.join(WEIGHT_FORMATS)})")
        if not path.is_file():
            raise WeightError(f"{path}: error: weight file not found")
        if path.suffix == ".npz":
            params = _read_npz(path)
    idx = rt.ParameterIndex()
    if isinstance(params, str | Path):
        path = Path(params)
        if path.suffix == ".safetensors":
            read_safetensors_header(path)  # bounds-checked before IREE sees the file
        try:
            idx.load(str(path))
        except (RuntimeError, ValueError, IndexError, OSError) as e:
            raise WeightError(f"{path}: error: cannot read weights: {e}") from None
        _check_file_params(path, specs, {k: v.length for k, v in idx.items()})
        return idx
    _check_dict_params(params, specs)
    for spec in specs:
        arr = np.ascontiguousarray(params[spec.name])
        keep.append(arr)
        idx.add_buffer(spec.name, arr)
    return idx


def encoded_index(path: str | Path) -> Any:
    """The ``ParameterIndex`` of an encoded archive (mapped, read-only)."""
    import iree.runtime as rt

    index = rt.ParameterIndex()
    try:
        index.load(str(path))
    except (RuntimeError, ValueError, IndexError, OSError) as e:
        raise WeightError(f"{path}: error: cannot read the encoded weights: {e}") from None
    return index


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError) as e:
        raise WeightError(f"{path}: error: cannot read a .npz archive: {e}") from None


def save_params(params: Mapping[str, np.ndarray], path: str | Path) -> None:
    """Write weights to an ``.irpa`` archive (dtype and shape recorded)."""
    import iree.runtime as rt

    idx = rt.ParameterIndex()
    for name, arr in params.items():
        rt.parameter_index_add_numpy_ndarray(idx, name, np.ascontiguousarray(arr))
    idx.create_archive_file(str(path))


__all__ = ["ENCODED_SCOPE", "FILE_MAPS", "IMPORT_ALIGNMENT", "MAX_HEADER", "PARAM_SCOPE",
           "WEIGHT_FORMATS", "ParamSource", "ParamSpec", "aligned", "aligned_concat",
           "aligned_empty", "encoded_index", "file_view", "parameter_index",
           "read_safetensors_header", "register_file_map", "release_file_pages", "save_params"]
