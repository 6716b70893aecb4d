"""What an importer returns, for every importer (ONNX, torch.export): the blocks it
recognized, the report of what it did with each node, and the imported module with its
weights (``save`` writes both or neither)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlx.dialects.builder import HirModule
from rlx.ir.diagnostics import ModelImportError


@dataclass(frozen=True)
class Block:
    """Nodes imported as one HIR block."""

    kind: str
    label: str
    nodes: tuple[str, ...]
    scope: str = ""
    """The module path the nodes come from, where the exporter recorded it."""


@dataclass
class Report:
    """What an importer did with each node; each importer's subclass writes ``summary``."""

    source: str
    nodes: int = 0
    folded: Counter[str] = field(default_factory=Counter)
    converted: Counter[str] = field(default_factory=Counter)
    blocks: list[Block] = field(default_factory=list)
    params: int = 0
    param_bytes: int = 0

    def block_counts(self) -> Counter[str]:
        return Counter(b.kind for b in self.blocks)

    def summary(self) -> str:
        raise NotImplementedError


def counts(c: Counter[str]) -> str:
    """``"kind n, kind n"`` in name order, or ``"none"``."""
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"


def unique_name(prefix: str, name: str, taken: Mapping[str, object]) -> str:
    """``prefix + name``, or with ``.2``, ``.3``, ... appended until it is not in
    ``taken`` (a weight name each importer gives once)."""
    pname, k = f"{prefix}{name}", 1
    while pname in taken:
        k += 1
        pname = f"{prefix}{name}.{k}"
    return pname


@dataclass
class Imported:
    """An imported model: the HIR module, its weights (``rlx.runtime.load(...,
    params=result.params)``), and the report."""

    module: HirModule
    params: dict[str, np.ndarray]
    report: Report

    def save(self, hir_path: str | Path, params_path: str | Path | None = None) -> None:
        """Write the HIR text and the weights (``.irpa``); both or neither: each is written
        to a temporary file first and only renamed into place once both are complete."""
        from rlx.runtime import save_params

        hir_path = Path(hir_path)
        if self.params and params_path is None:
            raise ModelImportError(f"{hir_path}: error: the model has {len(self.params)} "
                                   "weights; give a parameter file (--params-out)")
        staged: list[tuple[Path, Path]] = []
        try:
            tmp_hir = hir_path.with_name(f".{hir_path.name}.tmp")
            tmp_hir.write_text(str(self.module))
            staged.append((tmp_hir, hir_path))
            if params_path is not None:
                params_path = Path(params_path)
                if params_path.suffix != ".irpa":
                    raise ModelImportError(f"{params_path}: error: weights are written as "
                                           ".irpa (IREE parameter archive)")
                tmp_params = params_path.with_name(f".{params_path.stem}.tmp.irpa")
                save_params(self.params, tmp_params)
                staged.append((tmp_params, params_path))
        except OSError as e:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise ModelImportError(f"error: cannot write the import: {e.strerror or e}"
                                   ) from None
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        for tmp, final in staged:
            os.replace(tmp, final)


__all__ = ["Block", "Imported", "Report", "counts", "unique_name"]
