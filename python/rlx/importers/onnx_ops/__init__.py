"""ONNX op converters, one module per op family, and what they share.

The tables (``CONVERTERS``, ``FOLDERS``) and what converters share (:class:`Node`, the dtype
maps) are :mod:`rlx.importers.onnx_ops.registry`; importing a family module registers its
converters and folders there, so this package imports every family.
"""

from rlx.importers.onnx_ops import (
    activations,
    attention,
    constant,
    contraction,
    contrib,
    control,
    conv,
    elementwise,
    indexing,
    layout,
    norm,
    qlinear,
    quantize,
    recurrent,
    reduction,
    resize,
    select,
    shape,
    spectral,
)
from rlx.importers.onnx_ops.registry import (
    CONVERTERS,
    FLOAT8_OPS,
    FOLDERS,
    NARROW_ONNX,
    ONNX_DTYPES,
    RUNTIME_DTYPES,
    UNSIGNED,
    UNSIGNED_OPS,
    Converter,
    ConvertFn,
    FoldFn,
    Node,
    Value,
    converter,
    dtype_of,
    folder,
    is_symbolic,
    normalize_axes,
    np_dtype,
    onnx_dtype_name,
    why_unsupported,
)

FAMILIES = (activations, attention, constant, contraction, contrib, control, conv,
            elementwise, indexing, layout, norm, qlinear, quantize, recurrent, reduction, resize,
            select, shape, spectral)

__all__ = ["CONVERTERS", "FAMILIES", "FLOAT8_OPS", "FOLDERS", "NARROW_ONNX", "ONNX_DTYPES",
           "RUNTIME_DTYPES", "UNSIGNED", "UNSIGNED_OPS", "ConvertFn", "Converter", "FoldFn",
           "Node", "Value", "converter", "dtype_of", "folder", "is_symbolic", "normalize_axes",
           "np_dtype", "onnx_dtype_name", "why_unsupported"]
