"""What the torch importer returns: the module, its weights and a report (the fields of
:class:`rlx.importers.onnx.OnnxImport`, without needing the ``onnx`` package)."""

from __future__ import annotations

import os
from collections import Counter
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
    """The module path the nodes share (``model.layers.0``)."""


@dataclass
class TorchReport:
    """What the importer did with each node of the program."""

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
        def counts(c: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"

        lines = [f"{self.source}: {self.nodes} ATen nodes (torch.export)",
                 f"  blocks recognized: {len(self.blocks)} ({counts(self.block_counts())})"]
        lines += [f"    {b.kind} \"{b.label}\" <- {len(b.nodes)} nodes: {', '.join(b.nodes)}"
                  for b in self.blocks]
        lines += [f"  computed from sizes and weights at import: {sum(self.folded.values())} "
                  f"({counts(self.folded)})",
                  f"  converted to MIR ops: {sum(self.converted.values())} "
                  f"({counts(self.converted)})",
                  f"  weights: {self.params} ({self.param_bytes / 2**20:.1f} MiB)"]
        return "\n".join(lines)


@dataclass
class TorchImport:
    """An imported program: the HIR module, its weights (``rlx.runtime.load(...,
    params=result.params)``) and the report."""

    module: HirModule
    params: dict[str, np.ndarray]
    report: TorchReport

    def save(self, hir_path: str | Path, params_path: str | Path) -> None:
        """Write the HIR text and the weights (``.irpa``), each renamed into place only
        once both are written."""
        from rlx.runtime import save_params

        hir_path, params_path = Path(hir_path), Path(params_path)
        if params_path.suffix != ".irpa":
            raise ModelImportError(f"{params_path}: error: weights are written as .irpa "
                                   "(IREE parameter archive)")
        tmp_hir = hir_path.with_name(f".{hir_path.name}.tmp")
        tmp_params = params_path.with_name(f".{params_path.stem}.tmp.irpa")
        try:
            tmp_hir.write_text(str(self.module))
            save_params(self.params, tmp_params)
        except OSError as e:
            tmp_hir.unlink(missing_ok=True)
            tmp_params.unlink(missing_ok=True)
            raise ModelImportError(f"error: cannot write the import: {e.strerror or e}"
                                   ) from None
        os.replace(tmp_hir, hir_path)
        os.replace(tmp_params, params_path)


__all__ = ["Block", "TorchImport", "TorchReport"]
