"""The compiled-model cache: vmfbs kept on disk, keyed by everything that changes them.

``rlx.compile(..., cache=CompileCache())`` (and ``rlx.generate`` / ``rlx-generate`` by
default) looks a module up before compiling it and stores what it compiled. The key is a
SHA-256 of the HIR text, the target's ``iree-compile`` flags and lowering options, a digest
of rlx's own source files (its version in ``__init__.py`` included: a changed lowering is a
new key even at the same version), the IREE compiler's version and revision, and the host
CPU (model and feature flags: ``--iree-llvmcpu-target-cpu=host`` code is for this CPU).

Where: ``$RLX_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/rlx`` (``~/.cache/rlx`` when
``XDG_CACHE_HOME`` is unset or not absolute, as the XDG base directory spec says), in a
``vmfb/`` folder. An entry is a header (magic, payload length, the payload's SHA-256) and
the vmfb; one that does not check out (truncated, corrupt, another format) is reported with
a warning, removed and compiled again. Entries are written to a temporary file in the same
folder and renamed into place, so concurrent processes filling one entry each rename a
complete file and a reader never sees a partial one.

A module compiled with ``encode_parameters`` has a second entry, its parameter encoder
(``KEY-encoder``), and the weights it encoded are kept beside the vmfbs in ``params/``, one
``.irpa`` per module and weights (:mod:`rlx.encoding`: about the size of the weights, made
once). Deleting the directory, or any file in it, is safe: what is missing is made again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_VAR = "RLX_CACHE_DIR"
MAGIC = b"RLXVMFB1"
HEADER = struct.Struct("<8sQ32s")
"""magic, payload length, SHA-256 of the payload."""


def default_dir() -> Path:
    """``$RLX_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlx``, else ``~/.cache/rlx``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "rlx"


def _host_cpu() -> str:
    """The CPU a ``--iree-llvmcpu-target-cpu=host`` build is for: its model and feature
    flags (a cache directory shared between machines must not mix their code)."""
    import platform

    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    lines.append(line.strip())
                if not line.strip() and lines:
                    break
    except OSError:
        pass
    return hashlib.sha256("\n".join([platform.machine(), *lines]).encode()).hexdigest()


@functools.cache
def versions() -> dict[str, str]:
    """The digest of rlx's source files, the IREE compiler's version and revision."""
    import iree.compiler.version as iree_version

    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return {"rlx_source": digest.hexdigest(), "host_cpu": _host_cpu(),
            "iree": iree_version.VERSION, "iree_revision": json.dumps(
                getattr(iree_version, "REVISIONS", {}), sort_keys=True)}


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


@dataclass
class CompileCache:
    """vmfbs on disk under ``directory / "vmfb"``; see the module docstring."""

    directory: Path = field(default_factory=default_dir)
    hits: int = 0
    misses: int = 0

    @property
    def folder(self) -> Path:
        return Path(self.directory) / "vmfb"

    def key(self, module_text: str, flags: list[str], options: Mapping[str, Any]) -> str:
        """The entry name of a module compiled with ``flags`` and lowering ``options``."""
        blob = json.dumps({"module": module_text, "flags": list(flags),
                           "options": {k: repr(v) for k, v in sorted(options.items())},
                           "versions": versions()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.vmfb"

    def get(self, key: str) -> bytes | None:
        """The cached vmfb, or None (missing; corrupt ones are removed with a warning)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self.misses += 1
            return None
        except OSError as e:
            _warn(f"cannot read the compile cache entry {path}: {e.strerror or e}; compiling")
            self.misses += 1
            return None
        problem = _check(data)
        if problem is not None:
            _warn(f"compile cache entry {path} is {problem}; compiling again")
            path.unlink(missing_ok=True)
            self.misses += 1
            return None
        self.hits += 1
        return data[HEADER.size:]

    def put(self, key: str, vmfb: bytes) -> None:
        """Store atomically (temp file + rename); a cache that cannot be written warns."""
        header = HEADER.pack(MAGIC, len(vmfb), hashlib.sha256(vmfb).digest())
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(header)
                    f.write(vmfb)
                os.replace(tmp, self.path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            _warn(f"cannot write the compile cache in {self.folder}: {e.strerror or e}")


def _check(data: bytes) -> str | None:
    """Why an entry is unusable, or None."""
    if len(data) < HEADER.size:
        return f"truncated ({len(data)} bytes, shorter than its header)"
    magic, length, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        return "not an rlx cache entry (wrong magic)"
    if len(data) - HEADER.size != length:
        return f"truncated ({len(data) - HEADER.size} of {length} bytes)"
    if hashlib.sha256(memoryview(data)[HEADER.size:]).digest() != digest:
        return "corrupt (checksum mismatch)"
    return None


def resolve(cache: CompileCache | bool | str | Path | None) -> CompileCache | None:
    """``True``: the default directory; a path: that directory; ``False`` / None: none."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return CompileCache()
    if isinstance(cache, CompileCache):
        return cache
    return CompileCache(Path(cache))


__all__ = ["ENV_VAR", "CompileCache", "default_dir", "resolve", "versions"]
