"""What the torch importer returns: the module, its weights and a report (the fields of
:mod:`rlx.importers.result`, shared with the ONNX importer, which needs ``onnx``)."""

from __future__ import annotations

from dataclasses import dataclass

from rlx.importers.result import Block, Imported, Report, counts


@dataclass
class TorchReport(Report):
    """What the importer did with each node of the program."""

    def summary(self) -> str:
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
class TorchImport(Imported):
    """An imported program: the HIR module, its weights (``rlx.runtime.load(...,
    params=result.params)``) and the report."""

    report: TorchReport


__all__ = ["Block", "TorchImport", "TorchReport"]
