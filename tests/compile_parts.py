"""Compile an importer fixture's models as a few HIR modules at once, and call their
functions by name as if they were one module.

``iree-compile`` runs a module mostly on one core (MobileNetV3's: ``user`` 17.3 s, ``real``
16.6 s). The fixtures split their models into :data:`PARTS` modules of about equal size and
compile them in threads: each thread waits on its own ``iree-compile`` process (the lowering
before it is Python, and takes turns under the GIL). Alone on a 2-vCPU VM the biggest
fixtures took half their time (51-55 s -> 24-25 s); in a whole CI run, where the runtime,
ONNX Runtime and torch keep both cores busy much of the time, 5-14 s less each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import rlx

PARTS = 2
"""Modules a fixture's models are split into: CI's cores."""


def split(sizes: Mapping[str, int], parts: int = PARTS) -> list[list[str]]:
    """``sizes``' keys in at most ``parts`` groups of about equal total size (largest first,
    each into the group with the least so far), every group non-empty."""
    groups: list[list[str]] = [[] for _ in range(min(parts, len(sizes)))]
    totals = [0] * len(groups)
    for key in sorted(sizes, key=lambda k: -sizes[k]):
        i = totals.index(min(totals))
        groups[i].append(key)
        totals[i] += sizes[key]
    return groups


class Programs:
    """Loaded modules by the function names they hold: ``programs[key]`` is function
    ``key`` of the module it was compiled into."""

    def __init__(self, owners: dict[str, Any]) -> None:
        self._owners = owners

    def __getitem__(self, key: str) -> Any:
        return self._owners[key][key]


def compile_parts(parts: Sequence[tuple[rlx.HirModule, Mapping[str, np.ndarray],
                                        Sequence[str]]]) -> Programs:
    """Compile each ``(module, parameters, function names)`` for llvm-cpu, all at once, load
    each with its parameters: its functions by name."""
    with ThreadPoolExecutor(max(1, len(parts))) as pool:
        vmfbs = list(pool.map(lambda part: rlx.compile(part[0], "llvm-cpu"), parts))
    owners: dict[str, Any] = {}
    for (_, params, keys), vmfb in zip(parts, vmfbs, strict=True):
        program = rlx.runtime.load(vmfb, "local-task", dict(params))
        owners.update({key: program for key in keys})
    return Programs(owners)
