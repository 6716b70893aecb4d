"""``rlx.gguf``: GGUF weight files (llama.cpp's format) for rlx models.

``rlx.gguf.load(path)`` reads the header of a ``.gguf`` file (format constants and GGML type
sizes from :mod:`rlx.ir.quant_formats`: it needs numpy alone, no compiler and no ``gguf``
package) and lists its tensors with their GGML types, the ``dequant_matmul`` scheme each
maps to and their shapes. Weights come out as numpy views of the file (memory-mapped, no
copy):

- GGML block types and F16 / BF16 tensors as the tensor's **raw bytes** ``[..., ROWBYTES]``
  ``int8``: exactly the ``w`` operand of ``dequant_matmul(scheme="gguf_...")`` (``[N, K]``
  weights, one row per output feature). The repacking that the fused dequant needs happens
  inside the compiled module (IREE runs it once, at load), so nothing is converted here.
- F32 (and I8 / I16 / I32 / I64 / F64) tensors as plain arrays of their numpy shape.

``GgufFile.params_for(module)`` picks and checks the weights a compiled (or HIR) module
declares; ``save_irpa`` writes them to an ``.irpa``. IREE also reads ``.gguf`` files as
parameter archives, so ``rlx.runtime.load(vmfb, params="model.gguf")`` works directly when
the module's weight names are the file's tensor names.

The header is untrusted input: every count, length, shape and offset is checked against the
file size before anything is read or allocated (nothing is read past the end of the file,
and no allocation is sized by a header field), and every problem is one
:class:`~rlx.ir.diagnostics.WeightError` naming the file and the tensor or key.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.ir.diagnostics import WeightError
from rlx.ir.dtypes import DType
from rlx.ir.quant_formats import (
    ALIGNMENT_KEY,
    GGML_TYPES,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    QUANT_SCHEMES,
)
from rlx.weights import register_file_map

MAX_DIMS = 4
"""GGML_MAX_DIMS."""
MAX_STRING = 1 << 20
"""Longest key / string value accepted in the metadata (1 MiB)."""

_PLAIN_DTYPES = {"F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
                 "I32": np.int32, "I64": np.int64}
"""GGML types stored as plain little-endian arrays (no blocks)."""
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                   10: "<Q", 11: "<q", 12: "<d"}
"""GGUF metadata value types (GGUFValueType) with a fixed-size encoding -> struct format."""
_STRING, _ARRAY = 8, 9


def scheme_of(type_name: str) -> str | None:
    """The ``dequant_matmul`` scheme of a GGML type name (``"Q4_K"`` -> ``"gguf_q4_k"``)."""
    name = f"gguf_{type_name.lower()}"
    return name if name in QUANT_SCHEMES else None


@dataclass(frozen=True)
class GgufTensor:
    """One tensor of a GGUF file.

    ``shape`` is numpy order (GGML's dims reversed: a ``[N, K]`` weight has ``ne0 = K``);
    ``raw_shape`` is the shape of its bytes as ``dequant_matmul`` takes them
    (``[..., ROWBYTES]``); ``offset`` is absolute in the file.
    """

    name: str
    type_name: str
    ggml_type: int
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    block_elems: int
    block_bytes: int

    @property
    def scheme(self) -> str | None:
        return scheme_of(self.type_name)

    @property
    def row_bytes(self) -> int:
        return self.shape[-1] // self.block_elems * self.block_bytes

    @property
    def raw_shape(self) -> tuple[int, ...]:
        return (*self.shape[:-1], self.row_bytes)

    @property
    def plain_dtype(self) -> np.dtype | None:
        """The numpy dtype of a tensor stored as a plain array (F32, I32, ...), else None."""
        dt = _PLAIN_DTYPES.get(self.type_name)
        return None if dt is None else np.dtype(dt)

    def describe(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        scheme = f" -> {self.scheme}" if self.scheme else ""
        return f"{self.name}: {self.type_name}{scheme} [{shape}] ({self.nbytes} bytes)"


class _Cursor:
    """Bounds-checked little-endian reads from the file's bytes."""

    def __init__(self, data: memoryview | bytes, path: Path) -> None:
        self.data = data
        self.pos = 0
        self.path = path

    def fail(self, msg: str) -> WeightError:
        return WeightError(f"{self.path}: error: {msg}")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"truncated or corrupt file: {what} needs {n} bytes at offset "
                            f"{self.pos}, the file has {len(self.data)}")

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", what))

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", what))

    def string(self, what: str) -> str:
        n = self.u64(f"{what} length")
        if n > MAX_STRING:
            raise self.fail(f"{what}: string of {n} bytes (corrupt header; at most "
                            f"{MAX_STRING} accepted)")
        self.need(n, what)
        raw = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what}: not valid UTF-8 (corrupt header)") from None

    def count(self, what: str, min_item_bytes: int) -> int:
        """A u64 element count, bounded by what the rest of the file could hold."""
        n = self.u64(what)
        left = len(self.data) - self.pos
        if n * min_item_bytes > left:
            raise self.fail(f"{what} = {n} cannot fit in the {left} bytes left in the file "
                            "(truncated or corrupt)")
        return n

    def value(self, vtype: int, what: str) -> Any:
        if vtype in _SCALAR_FORMATS:
            return self.unpack(_SCALAR_FORMATS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            raise self.fail(f"{what}: unknown metadata value type {vtype}")
        etype = self.u32(f"{what} element type")
        if etype in _SCALAR_FORMATS:
            fmt = _SCALAR_FORMATS[etype]
            size = struct.calcsize(fmt)
            n = self.count(f"{what} length", size)
            arr = np.frombuffer(self.data, dtype=np.dtype(fmt), count=n, offset=self.pos)
            self.pos += n * size
            return arr.copy()
        if etype == _STRING:
            n = self.count(f"{what} length", 8)
            return [self.string(f"{what}[{i}]") for i in range(n)]
        raise self.fail(f"{what}: unsupported array element type {etype}")


class GgufFile:
    """A parsed GGUF file: ``metadata``, ``tensors`` (name -> :class:`GgufTensor`), and the
    tensors' data as read-only numpy views of the memory-mapped file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise WeightError(f"{self.path}: error: GGUF file not found")
        self._file = self.path.open("rb")
        size = self.path.stat().st_size
        self._map: mmap.mmap | None = None
        self._data: memoryview | bytes = b""
        if size:
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            register_file_map(self._map, self.path)
            self._data = memoryview(self._map)
        self.size = size
        self.metadata: dict[str, Any] = {}
        self.tensors: dict[str, GgufTensor] = {}
        try:
            self._parse()
        except BaseException:
            self.close()
            raise

    # -- parsing --------------------------------------------------------------------------

    def _parse(self) -> None:
        c = _Cursor(self._data, self.path)
        magic = c.u32("magic")
        if magic != GGUF_MAGIC:
            raise c.fail(f"not a GGUF file (magic {magic:#010x}, expected "
                         f"{GGUF_MAGIC:#010x} 'GGUF')")
        self.version = c.u32("version")
        if self.version not in (2, 3):
            raise c.fail(f"unsupported GGUF version {self.version} (expected 2 or 3)")
        n_tensors = c.count("tensor count", 8 + 4 + 8 + 4 + 8)
        n_kv = c.count("metadata count", 8 + 4)
        for i in range(n_kv):
            key = c.string(f"metadata key #{i}")
            if key in self.metadata:
                raise c.fail(f"metadata key '{key}' appears twice")
            vtype = c.u32(f"metadata '{key}' type")
            self.metadata[key] = c.value(vtype, f"metadata '{key}'")
        alignment = self.metadata.get(ALIGNMENT_KEY, GGUF_DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise c.fail(f"metadata 'general.alignment' = {alignment!r}: expected a power "
                         "of two")
        self.alignment = alignment
        infos = [self._tensor_info(c, i) for i in range(n_tensors)]
        data_start = -(-c.pos // alignment) * alignment
        self.data_offset = data_start
        for name, type_name, ggml_type, shape, rel in infos:
            self._add_tensor(c, name, type_name, ggml_type, shape, rel)

    def _tensor_info(self, c: _Cursor, i: int) -> tuple[str, str, int, tuple[int, ...], int]:
        name = c.string(f"tensor #{i} name")
        n_dims = c.u32(f"tensor '{name}' dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise c.fail(f"tensor '{name}': {n_dims} dimensions (expected 1 to {MAX_DIMS})")
        dims = [c.u64(f"tensor '{name}' dim {d}") for d in range(n_dims)]
        ggml_type = c.u32(f"tensor '{name}' type")
        rel = c.u64(f"tensor '{name}' offset")
        if ggml_type not in GGML_TYPES:
            raise c.fail(f"tensor '{name}': unknown GGML type {ggml_type}")
        type_name = GGML_TYPES[ggml_type].name
        if any(d <= 0 for d in dims):
            raise c.fail(f"tensor '{name}': dims {dims} (every dim must be positive)")
        return name, type_name, ggml_type, tuple(reversed(dims)), rel

    def _add_tensor(self, c: _Cursor, name: str, type_name: str, ggml_type: int,
                    shape: tuple[int, ...], rel: int) -> None:
        if name in self.tensors:
            raise c.fail(f"tensor '{name}' appears twice")
        elems, block_bytes = GGML_TYPES[ggml_type].block_elems, GGML_TYPES[ggml_type].block_bytes
        if shape[-1] % elems:
            raise c.fail(f"tensor '{name}': {type_name} rows hold blocks of {elems} elements, "
                         f"but a row has {shape[-1]}")
        rows = 1
        for d in shape[:-1]:
            rows *= d
        nbytes = rows * (shape[-1] // elems) * block_bytes
        if rel % self.alignment:
            raise c.fail(f"tensor '{name}': data offset {rel} is not a multiple of the "
                         f"alignment {self.alignment}")
        start = self.data_offset + rel
        if start + nbytes > self.size:
            raise c.fail(f"tensor '{name}': data [{start}, {start + nbytes}) runs past the end "
                         f"of the file ({self.size} bytes; truncated?)")
        self.tensors[name] = GgufTensor(name, type_name, ggml_type, shape, start, nbytes,
                                        elems, block_bytes)

    # -- data -----------------------------------------------------------------------------

    def tensor(self, name: str) -> GgufTensor:
        if name not in self.tensors:
            raise WeightError(f"{self.path}: error: no tensor '{name}' in the file "
                              f"({len(self.tensors)} tensors)")
        return self.tensors[name]

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes ``[..., ROWBYTES]`` as ``int8`` (a view of the file)."""
        t = self.tensor(name)
        if self._map is None:
            raise WeightError(f"{self.path}: error: tensor '{name}': the file is empty")
        arr = np.frombuffer(self._map, dtype=np.int8, count=t.nbytes, offset=t.offset)
        return arr.reshape(t.raw_shape)

    def raw_led(self, name: str, alignment: int) -> tuple[np.ndarray, int]:
        """The tensor's bytes as a view of the file that starts on the ``alignment``-byte
        boundary at or before them, and how many bytes (the lead) come before the tensor's
        own: :meth:`raw` where that is 0, else a flat ``int8`` view. An ``rlx_hir.param``
        with that ``lead`` reads the tensor from a view IREE uses in place
        (:data:`rlx.weights.IMPORT_ALIGNMENT`). The lead's bytes are the file's own (its
        header or the tensor before): a tensor's data lies past the header, so the view
        never starts before the mapping (checked)."""
        view = self.raw(name)
        lead = view.ctypes.data % alignment
        return (view, 0) if not lead else (self.raw_with_lead(name, lead), lead)

    def raw_with_lead(self, name: str, lead: int) -> np.ndarray:
        """The tensor's bytes and the ``lead`` bytes of the file before them, flat ``int8``
        (the parameter entry of an ``rlx_hir.param`` with that ``lead``)."""
        t = self.tensor(name)
        self.raw(name)                             # the file is mapped
        if not 0 <= lead <= t.offset:              # a tensor's data lies past the header
            raise WeightError(f"{self.path}: error: tensor '{name}' starts {t.offset} bytes "
                              f"into the file: no {lead} bytes before it")
        assert self._map is not None
        return np.frombuffer(self._map, dtype=np.int8, count=lead + t.nbytes,
                             offset=t.offset - lead)

    def array(self, name: str) -> np.ndarray:
        """A plain tensor (F32, F64, I8 ... I64) as its numpy dtype and shape; F16 as
        float16 and BF16 as float32 values."""
        t = self.tensor(name)
        raw = self.raw(name)
        if t.plain_dtype is not None:
            return raw.view(t.plain_dtype).reshape(t.shape)
        if t.type_name == "F16":
            return raw.view(np.float16).reshape(t.shape)
        if t.type_name == "BF16":
            bits = raw.view(np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(t.shape)
        raise WeightError(f"{self.path}: error: tensor '{name}' is {t.type_name}, a block "
                          f"format: use raw('{name}') (the dequant_matmul operand)")

    def weight(self, name: str) -> np.ndarray:
        """The array rlx modules take for this tensor: raw bytes for the formats
        ``dequant_matmul`` reads (block formats, F16, BF16), plain arrays otherwise."""
        t = self.tensor(name)
        if t.plain_dtype is not None:
            return self.array(name)
        if t.scheme is None:
            raise WeightError(f"{self.path}: error: tensor '{name}' is {t.type_name}, which "
                              "rlx cannot dequantize (schemes: "
                              f"{', '.join(s for s in QUANT_SCHEMES if s.startswith('gguf_'))})")
        return self.raw(name)

    def weights(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """:meth:`weight` for ``names`` (default: every tensor)."""
        return {n: self.weight(n) for n in (self.tensors if names is None else names)}

    def params_for(self, module: Any, rename: Mapping[str, str] | None = None
                   ) -> dict[str, np.ndarray]:
        """The weights a module declares, checked: ``module`` is a HIR module, a vmfb
        (bytes / path) or a loaded :class:`rlx.runtime.Program`. ``rename`` maps a module
        weight name to a tensor name (default: the same name)."""
        rename = dict(rename or {})
        out = {}
        for pname, (shape, dtype) in _declared_weights(module).items():
            tname = rename.get(pname, pname)
            if tname not in self.tensors:
                raise WeightError(f"{self.path}: error: weight '{pname}' ({list(shape)} "
                                  f"{dtype}) has no tensor '{tname}' in the file")
            out[pname] = self._matching(tname, pname, shape, dtype)
        return out

    def _matching(self, tname: str, pname: str, shape: tuple[int, ...], dtype: DType
                  ) -> np.ndarray:
        t = self.tensors[tname]
        candidates: list[np.ndarray] = []
        if t.scheme is not None:
            candidates.append(self.raw(tname))
            if len(shape) == 1 and 0 < shape[0] - t.nbytes <= t.offset:   # a param's lead
                candidates.append(self.raw_with_lead(tname, shape[0] - t.nbytes))
        if t.plain_dtype is not None or t.type_name in ("F16", "BF16"):
            candidates.append(self.array(tname))
        for arr in candidates:
            if tuple(arr.shape) == tuple(shape) and arr.dtype == dtype.numpy:
                return arr
        found = f"{t.type_name} {list(t.shape)}"
        if t.scheme is not None:
            found += f" ({t.scheme} bytes {list(t.raw_shape)} i8)"
        named = f"weight '{pname}' (tensor '{tname}')" if tname != pname else f"weight '{pname}'"
        raise WeightError(f"{self.path}: error: {named}: the module expects {list(shape)} "
                          f"{dtype}, the file has {found}")

    def save_irpa(self, path: str | Path, names: Iterable[str] | None = None) -> None:
        """Write :meth:`weights` (all tensors, or ``names``) to an ``.irpa`` archive."""
        from rlx.runtime import save_params

        save_params(self.weights(names), path)

    def describe(self) -> str:
        """One line per tensor: name, GGML type, scheme, shape, bytes."""
        return "\n".join(t.describe() for t in self.tensors.values())

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Release the mapping (arrays handed out before keep it alive)."""
        if isinstance(self._data, memoryview):
            self._data.release()
        self._data = b""
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # numpy views still use it; it goes when they do
        self._file.close()

    def __enter__(self) -> GgufFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GgufFile({str(self.path)!r}, {len(self.tensors)} tensors)"


def _declared_weights(module: Any) -> dict[str, tuple[tuple[int, ...], DType]]:
    """name -> (shape, dtype) of the weights a vmfb / Program / HIR module declares (a
    vmfb or a Program needs the runtime alone; a HIR module, the compiler)."""
    from rlx.runtime import Program, read_param_specs

    if isinstance(module, Program):
        return {s.name: (s.shape, s.dtype) for s in module.param_specs()}
    if isinstance(module, bytes | bytearray | str | Path):
        data = Path(module).read_bytes() if isinstance(module, str | Path) else bytes(module)
        return {s.name: (s.shape, s.dtype) for s in read_param_specs(data)}
    return _hir_weights(module)


def _hir_weights(module: Any) -> dict[str, tuple[tuple[int, ...], DType]]:
    """The ``rlx_hir.param`` ops of a HIR module (imports the compiler's IR bindings)."""
    from iree.compiler import ir

    from rlx.dialects.builder import HirModule
    from rlx.ir.types import TensorInfo

    if not isinstance(module, HirModule):
        raise WeightError(f"error: params_for: expected a HIR module, a vmfb (bytes or path) "
                          f"or a loaded rlx.runtime.Program, found {type(module).__name__}")
    out = {}
    for op in module.ops:
        if op.name.endswith(".param"):
            t = TensorInfo.from_mlir(op.results[0].type)
            shape = tuple(d for d in t.shape if d is not None)
            out[ir.StringAttr(op.attributes["name"]).value] = (shape, t.dtype)
    return out


def load(path: str | Path) -> GgufFile:
    """Parse a ``.gguf`` file's header (bounds-checked); tensors are read on demand."""
    return GgufFile(path)


__all__ = ["GgufFile", "GgufTensor", "load", "scheme_of"]
