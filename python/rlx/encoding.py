"""Weights encoded ahead of time: the planes rlx's kernels read, computed once per model and
weights and kept in a parameter archive beside the compile cache, instead of at every load.

A quantized or F16 weight reaches rlx's llvm-cpu kernels as planes (:mod:`rlx.lowering.
mir_to_linalg.quant.gemv_planes`): the file's bytes repacked into the order a kernel reads.
They are computed by generics that read only the parameter, so IREE hoists them into
initializers, which run every time the module loads. Loading a model therefore held the
file's pages (read in place) and the planes made from them at once: the peak resident
memory was about twice the file (1B F16: 4.1 GB for a 2.2 GB file), and every start paid
for the repacking again.

IREE's parameter encoder does that work once (``--iree-parameter-encoder-output-file``,
mode ``overlay``): ``iree-compile`` splits the initializers that transform parameters into
a module of their own, and the main module reads their results as parameters of the scope
:data:`ENCODED_SCOPE`. :func:`compile_model` compiles both (cached together,
:func:`rlx.compiler.compile_with_encoder`); :func:`load_compiled` runs the encoder once
into an ``.irpa`` under the cache directory (``params/``, named by the module's and the
weights' digests, :func:`encoded_path`), and loads the main module with the weights and
that archive, which IREE maps and uses in place: a load reads only the pages a call
touches, as llama.cpp's mmap does, and there is no repacking at start. The planes are
the same bytes the initializers made (the same dispatches compute them), so results are
bit-identical (the tests compare the two loads' logits).

What identifies the weights (:func:`weights_fingerprint`): arrays that view a file mapping
registered by :func:`rlx.weights.register_file_map` (a GGUF's tensors) by the file's path,
size, modification time and inode and the view's place in it; any other array by a SHA-256
of its bytes, up to :data:`MAX_HASHED` bytes in all (more: the model is loaded the old way,
with initializers, rather than hashing gigabytes at every start). A file rewritten in
place with the same size and modification time is not noticed (as ``make`` would not).

The encoder runs as IREE's ``iree-encode-parameters`` tool does (that tool is not in the
Python wheels): ``indices`` lists the archive's entries, an archive of that layout is
created and opened for writing, and ``encode`` (coarse fences) fills it from the weights
through the ``steps`` it is given. An archive whose entries do not match what the encoder
declares (truncated, another version) is encoded again; it is written to a temporary file
and renamed, so a concurrent load never maps a partial one. One with the right entries is
trusted as it is: checking its bytes would read them all at every start.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.compiler import ENCODER_FLAGS, ENCODER_SUFFIX, compile_encoder
from rlx.ir.diagnostics import RunError, WeightError
from rlx.weights import (
    ENCODED_SCOPE,
    PARAM_SCOPE,
    encoded_index,
    file_view,
    release_file_pages,
)

MAX_HASHED = 256 * 1024 * 1024
"""The most bytes of weights, other than views of a registered file, that
:func:`weights_fingerprint` hashes (about 0.2 s); beyond it the model loads with its
initializers."""
ENCODE_FUNCTIONS = ("indices", "steps", "encode")
ENV_VAR = "RLX_ENCODE_PARAMETERS"
"""``0`` turns the encoding off where ``encode_parameters`` is not given (a disk that cannot
hold a second copy of the weights; the test suite, whose models each load once, so each
start would encode, and test the encoding in tests/test_encoding.py)."""


LIMIT_VAR = "RLX_ENCODED_CACHE_GB"
"""The most GiB the encoded archives under ``params/`` may hold (default
:data:`DEFAULT_LIMIT_GB`; ``0``: no bound). Before an archive is written, the least
recently used others are removed until it fits (:func:`make_room`)."""
DEFAULT_LIMIT_GB = 32.0
"""Each model and set of compile options has an archive about the size of its weights (a 3B
F16 model's: 7 GB), so without a bound a few benchmark runs filled a 250 GB disk's free
space (60 GB of archives on 2026-12-07, the next write failing)."""


def limit_bytes() -> int | None:
    """:data:`LIMIT_VAR` in bytes, None for no bound; a value that is not a number is one
    clear error."""
    raw = os.environ.get(LIMIT_VAR, "").strip()
    try:
        gb = float(raw) if raw else DEFAULT_LIMIT_GB
    except ValueError:
        gb = math.nan
    if not 0 <= gb < math.inf:                      # NaN, negative or infinite
        raise RunError(f"error: {LIMIT_VAR}={raw!r}: expected a size in GiB (0: no bound)")
    return None if gb == 0 else int(gb * 2**30)


def make_room(path: Path, size: int, limit: int | None) -> list[Path]:
    """Remove the least recently used archives beside ``path`` (``*.irpa`` of its
    directory; a use touches an archive's modification time, :func:`encode`) until they
    and ``size`` more bytes fit in ``limit`` bytes; never ``path`` itself. A process that
    still maps a removed archive keeps reading it (the file lives until it is unmapped).
    Returns the removed paths."""
    if limit is None or not path.parent.is_dir():
        return []
    others = []
    for p in path.parent.glob("*.irpa"):
        try:
            st = p.stat()
        except OSError:
            continue
        if p != path:
            others.append((st.st_mtime, st.st_size, p))
    total = size + sum(n for _, n, _ in others)
    removed = []
    for _, n, p in sorted(others):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        removed.append(p)
        total -= n
    return removed


def weights_fingerprint(weights: Mapping[str, np.ndarray]) -> str | None:
    """A digest that changes when any weight does (see the module docstring), or None when
    more than :data:`MAX_HASHED` bytes would have to be hashed."""
    digest = hashlib.sha256()
    hashed = 0
    for name in sorted(weights):
        a = np.asarray(weights[name])
        digest.update(f"{name}\0{a.shape}\0{a.dtype.str}\0".encode())
        where = file_view(a)
        if where is not None:
            digest.update(repr(where).encode())
            continue
        hashed += a.nbytes
        if hashed > MAX_HASHED:
            return None
        digest.update(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


def encoded_path(directory: Path, vmfb: bytes, fingerprint: str) -> Path:
    """Where the encoded weights of ``vmfb`` for weights ``fingerprint`` are kept."""
    key = hashlib.sha256(hashlib.sha256(vmfb).digest() + fingerprint.encode()).hexdigest()
    return Path(directory) / "params" / f"{key}.irpa"


def _functions(module: Any) -> dict[str, Any]:
    out = {}
    for name in module.function_names:
        fn = module.lookup_function(name)
        kind = fn.reflection.get("iree.encode.function")
        if kind in ENCODE_FUNCTIONS:
            out[kind] = fn
    missing = [k for k in ENCODE_FUNCTIONS if k not in out]
    if missing:
        raise RunError(f"error: the parameter encoder module has no {', '.join(missing)} "
                       "function")
    return out


def _entries(listing: Any) -> dict[str, tuple[int, bytes | None]]:
    """``indices``' result: key -> (length, the pattern of a splat entry or None for a data
    one) of each entry of the encoded scope (IREE's layout: ``[[scope, [entry, ...]],
    ...]``, an entry ``[1, key, metadata, length, alignment]`` or ``[0, key, metadata,
    length, pattern, pattern length]``)."""
    import iree.runtime as rt

    out = {}
    scopes = listing.get_as_list(0)
    for i in range(scopes.size):
        scope = scopes.get_as_list(i)
        name = bytes(scope.get_as_object(0, rt.VmBuffer)).decode()
        entries = scope.get_as_list(1)
        for j in range(entries.size):
            entry = entries.get_as_list(j)
            kind, key = entry.get_variant(0), entry.get_as_object(1, rt.VmBuffer)
            if name != ENCODED_SCOPE or kind not in (0, 1):
                raise RunError(f"error: the parameter encoder declares an entry rlx does not "
                               f"write (scope {name!r}, type {kind})")
            pattern = None if kind == 1 else (entry.get_variant(4) % 2**64).to_bytes(
                8, "little")[:entry.get_variant(5)]
            out[bytes(key).decode()] = (entry.get_variant(3), pattern)
    return out


def _call(context: Any, fn: Any, args: Any = None) -> Any:
    import iree.runtime as rt

    results = rt.VmVariantList(1)
    try:
        context.vm_context.invoke(fn, args or rt.VmVariantList(0), results)
    except (RuntimeError, ValueError) as e:
        raise RunError(f"error: encoding the weights failed: {e}") from None
    return results


def encode(encoder: bytes, vmfb: bytes, path: Path, device: str, params: Any) -> bool:
    """Make ``path``, the encoded weights of ``vmfb`` from ``params``, unless a file with
    the entries its ``encoder`` declares is there; whether it encoded."""
    import iree.runtime as rt

    from rlx.runtime import _config, parameter_index, read_param_specs

    config = _config(device)
    module = rt.VmModule.copy_buffer(config.vm_instance, encoder)
    fns = _functions(module)
    keep: list[Any] = []
    weights = parameter_index(params, read_param_specs(vmfb), keep)

    def context(*providers: Any) -> Any:
        io = rt.create_io_parameters_module(config.vm_instance,
                                            weights.create_provider(scope=PARAM_SCOPE),
                                            *providers)
        return rt.SystemContext(vm_modules=[io, module], config=config)

    entries = _entries(_call(context(), fns["indices"]))
    if _current(path, entries):
        return False
    make_room(path, sum(n for n, _ in entries.values()), limit_bytes())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        layout = rt.ParameterIndex()
        for key, (length, pattern) in entries.items():
            if pattern is None:
                layout.add_buffer(key, np.zeros(length, np.uint8))  # zero pages: not resident
            else:
                layout.add_splat(key, pattern, length)
        target = rt.ParameterIndex()
        _write_archive(layout, tmp, target, path, sum(n for n, _ in entries.values()))
        del layout
        ctx = context(target.create_provider(scope=ENCODED_SCOPE))
        steps = _call(ctx, fns["steps"])
        semaphore = config.device.create_semaphore(0)
        done = rt.HalFence.create_at(semaphore, 1)
        args = rt.VmVariantList(3)
        args.push_list(steps.get_as_list(0))
        args.push_ref(rt.HalFence(1))
        args.push_ref(done)
        _call(ctx, fns["encode"], args)
        try:
            done.wait()
        except (RuntimeError, ValueError) as e:
            raise RunError(f"error: encoding the weights failed: {e}") from None
        del ctx, target
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        release_file_pages(keep)
    return True


def _current(path: Path, entries: dict[str, tuple[int, bytes | None]]) -> bool:
    """Whether the archive at ``path`` holds the entries the encoder declares, with their
    sizes (then it is marked recently used, the last to go in :func:`make_room`)."""
    if not path.is_file():
        return False
    try:
        found = {k: v.length for k, v in encoded_index(path).items()}
    except WeightError:
        return False
    if found != {k: length for k, (length, _) in entries.items()}:
        return False
    os.utime(path)
    return True


def _write_archive(layout: Any, tmp: str, target: Any, path: Path, size: int) -> None:
    """Lay out the archive the encoder writes into; a failed write (a full disk) is one
    error naming the file, the size and what to do, not IREE's status as a traceback."""
    try:
        layout.create_archive_file(tmp, 0, target)
    except (RuntimeError, IndexError, OSError) as e:  # IREE's status: UNKNOWN, OUT_OF_RANGE
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RunError(f"error: {path}: writing the encoded weights ({size / 2**20:.0f} MiB) "
                       f"failed: {first}; free space under {path.parent}, or load with "
                       "encode_parameters=False (RLX_ENCODE_PARAMETERS=0)") from None


@dataclass(frozen=True)
class CompiledModel:
    """A model's module compiled by :func:`compile_model`: the vmfb, its encoder's vmfb
    (b"": the planes are made by initializers at load) and the archive the encoded
    weights go to (None when there is no encoder)."""

    vmfb: bytes
    encoder: bytes = b""
    encoded: Path | None = None


def compile_model(module: Any, weights: Mapping[str, np.ndarray], target: str, cache: Any,
                  **options: Any) -> CompiledModel:
    """Compile a model's ``module`` through the compile cache ``cache``. On llvm-cpu with a
    cache the weights' planes are to be encoded ahead of time (the module docstring);
    ``encode_parameters=False`` (default: :data:`ENV_VAR` set to ``0`` makes it False), no
    cache, or weights that cannot be fingerprinted cheaply keep the planes in
    initializers. On llvm-cpu the model's functions take caller-owned transients
    (``caller_transients``, :mod:`rlx.transients`: rlx's runtime is their caller) unless
    ``options`` say otherwise; GPU targets keep IREE's own allocation (its queue-ordered
    allocas pool device memory there, and IREE 3.13's emplacement fails on Qwen3.5's Vulkan
    module: "operand #1 does not dominate this use")."""
    from rlx.cache import resolve
    from rlx.compiler import compile, compile_with_encoder

    store = resolve(cache)
    options = {"caller_transients": target == "llvm-cpu", **options}
    wanted = options.pop("encode_parameters", None)
    if wanted is None:
        wanted = os.environ.get(ENV_VAR, "1") != "0"
    fingerprint = (weights_fingerprint(weights)
                   if wanted and store is not None and target == "llvm-cpu" else None)
    if fingerprint is None or store is None:
        return CompiledModel(compile(module, target, cache=store, **options))  # type: ignore[arg-type]
    vmfb, encoder = compile_with_encoder(module, target, cache=store, **options)
    return CompiledModel(vmfb, encoder, encoded_path(store.directory, vmfb, fingerprint)
                         if encoder else None)


def load_compiled(compiled: CompiledModel, weights: Mapping[str, np.ndarray], device: str
               ) -> tuple[Any, bool]:
    """Load ``compiled`` with ``weights`` on ``device``, encoding them first when its
    archive is not there yet: (the :class:`rlx.runtime.Program`, whether it encoded)."""
    from rlx import runtime

    if compiled.encoded is None:
        return runtime.load(compiled.vmfb, device, weights), False
    done = encode(compiled.encoder, compiled.vmfb, compiled.encoded, device, weights)
    return runtime.load(compiled.vmfb, device, weights, encoded=compiled.encoded), done


__all__ = ["DEFAULT_LIMIT_GB", "ENCODED_SCOPE", "ENCODER_FLAGS", "ENCODER_SUFFIX", "ENV_VAR",
           "LIMIT_VAR", "MAX_HASHED", "CompiledModel", "compile_encoder", "compile_model",
           "encode", "encoded_index", "encoded_path", "limit_bytes", "load_compiled",
           "make_room", "weights_fingerprint"]  # ENCODED_SCOPE, ENCODER_FLAGS, ENCODER_SUFFIX,
# compile_encoder and encoded_index are re-exported
