"""Model importers: ONNX files (:mod:`rlx.importers.onnx`) and ``torch.export`` programs
(:mod:`rlx.importers.torch`) to rlx HIR modules."""
