"""Import PyTorch programs as rlx HIR modules:
``rlx.importers.torch.import_program(torch.export.export(model, args, dynamic_shapes=...))``.

The program's user inputs become function inputs (dims torch.export keeps dynamic are
``?``), its parameters and buffers ``rlx_hir.param`` weights named by their module path,
its outputs the function results. Attention, RMSNorm, SwiGLU, RoPE, linear layers and whole
LLaMA decoder layers are recognized as HIR blocks (the block vocabulary of the ONNX
importer); every other ATen op becomes MIR ops. Ops are labelled with the module path they
come from (``model.layers.0.self_attn``). torch is imported only by this module.
"""

from __future__ import annotations

from rlx.dialects.builder import HirModule
from rlx.importers.torch_export.report import Block, TorchImport, TorchReport


def import_program(program: object, *, module: HirModule | None = None,
                   function: str = "main", blocks: bool = True, param_prefix: str = "",
                   source: str | None = None) -> TorchImport:
    """Import a ``torch.export.ExportedProgram`` into a new HIR module, or into function
    ``function`` of ``module``; returns the module, its weights (by name, for
    ``rlx.runtime.load(..., params=...)``) and a report of the blocks recognized.

    ``blocks=False`` converts op by op; ``param_prefix`` prefixes the weight names;
    ``source`` names the program in errors (default: the module's class name).
    """
    import torch

    from rlx.importers.torch_export.importer import ProgramImporter
    from rlx.ir.diagnostics import ModelImportError

    if not isinstance(program, torch.export.ExportedProgram):
        raise ModelImportError(f"error: import_program takes a torch.export.ExportedProgram "
                               f"(torch.export.export(model, args)), found "
                               f"{type(program).__name__}")
    source = source or "exported_program"
    h = HirModule(_identifier(source), function=function) if module is None \
        else module.function(function)
    importer = ProgramImporter(program, h, source, blocks=blocks, param_prefix=param_prefix)
    h.set_outputs(importer.run())
    return TorchImport(h, importer.params, importer.report)


def _identifier(raw: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in raw)
    return name if name and not name[0].isdigit() else f"m_{name}"


__all__ = ["Block", "TorchImport", "TorchReport", "import_program"]
