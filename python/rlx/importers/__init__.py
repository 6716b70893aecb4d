"""Model importers: ONNX files to rlx HIR modules (:mod:`rlx.importers.onnx`)."""
