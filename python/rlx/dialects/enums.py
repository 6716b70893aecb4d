"""Enum attribute values shared by HIR and MIR (lowercase strings in the text format).

The ``dequant_matmul`` schemes (:data:`QUANT_SCHEMES`) are :mod:`rlx.ir.quant_formats`'
(plain data that the runtime-side :mod:`rlx.gguf` reads too), re-exported here.
"""

from __future__ import annotations

from rlx.ir.quant_formats import QUANT_SCHEMES as QUANT_SCHEMES
from rlx.ir.quant_formats import QuantScheme as QuantScheme
from rlx.ir.types import DType

FLOAT_TYPES = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64})
"""Float element types of the general ops. f64 computes in f64, on llvm-cpu only
(``rlx.compile`` refuses an f64 module for the GPU targets, where IREE demotes f64)."""
BLOCK_FLOAT_TYPES = frozenset({DType.F32, DType.F16, DType.BF16})
"""What the model blocks take (decoder layers, recurrences, RoPE, dequant matmuls,
sampling): their lowerings and kernels compute in f32 over f32 / f16 / bf16 storage."""
WORD_TYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})
"""Integer types an unsigned kind (``udiv``, ``ult``, a ``cast`` with ``unsigned``) reads:
MLIR's and LLVM's signless integers, whose signedness is the op's, not the type's."""
INDEX_TYPES = frozenset({DType.F32, DType.I32, DType.I64})
"""Token ids / row indices: RLX encodes them as f32 (truncated toward zero); ints also work."""

ACTIVATIONS = (
    "gelu", "gelu_approx", "silu", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
    "neg", "abs", "sin", "cos", "tan", "atan", "round", "erf", "softplus", "floor", "ceil",
    "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
)
"""Unary activations (spec 3.1). ``gelu`` is the exact erf form; ``round`` is half-to-even;
``softplus`` is ``log(1 + exp(x))`` (Qwen3.5's DeltaNet decay; not in RLX's list). ``floor``
to ``atanh`` are not in RLX's list either: the math functions ONNX models use (``Floor``,
``Ceil``, ``Asin``, ..., ``Atanh``), with C's (and numpy's) values, NaN outside the domain."""

LINEAR_ACTIVATIONS = ("none", *ACTIVATIONS)
UNSIGNED_BINARY_OPS = ("udiv", "urem", "umax", "umin")
"""Binary kinds that read integers as unsigned (arith's ``divui`` / ``remui`` / ``maxui`` /
``minui``; the other integer kinds compute the same bits either way). A ``udiv`` / ``urem``
by 0 divides by 1 (``a`` / 0): no trap."""
BITWISE_OPS = ("and", "or", "xor", "shl", "shr", "ushr")
"""Binary kinds on integers' bits (not in RLX's list): ``and`` / ``or`` / ``xor`` (i1 too),
and shifts of the left operand by the right one: ``shl``, ``shr`` (arithmetic, the sign
copied in), ``ushr`` (logical, zeros in). A shift by a count outside ``[0, bits)`` (a
negative count read as unsigned is one) shifts every bit out: 0, or for ``shr`` of a
negative value -1, where LLVM's shift would give poison."""
BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow", "rem", *UNSIGNED_BINARY_OPS,
              *BITWISE_OPS)
"""Binary kinds. Integer ``div`` truncates; ``rem`` is C's remainder, ``a - trunc(a / b) b``
(the sign of ``a``: ONNX ``Mod`` with ``fmod = 1``, ``torch.fmod``); an integer ``rem`` by 0
or -1 is 0 (no trap)."""
UNSIGNED_COMPARE_OPS = ("ult", "ule", "ugt", "uge")
"""Comparisons of integers read as unsigned (``eq`` / ``ne`` are the same either way)."""
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge", *UNSIGNED_COMPARE_OPS)
CAST_ROUND = ("up", "down", "nearest")
"""``cast``'s ``round`` to ``f8E8M0FNU`` (a power of two): ``up`` (absent: OCP MX's and
ONNX's default) to the power of two at or above ``|x|``, ``down`` at or below, ``nearest``
up when the f32 fraction's top bit is set (ONNX's rule: half rounds up)."""
CAST_UNSIGNED = ("source", "result", "both")
"""``cast``'s ``unsigned``: which side's integers are unsigned (absent: neither)."""
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")
SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")
"""How ``scatter`` combines an update with the element it lands on: ``none`` replaces it
(the last update wins where indices repeat), the others combine (ONNX's ``reduction``)."""
MASK_KINDS = ("none", "causal", "sliding_window", "custom", "bias", "causal_lengths")
"""Attention masks. ``causal_lengths`` is causal over a per-row key count (``mask [B]``
integer ``n_b``: row b's S queries sit at positions ``n_b - S .. n_b - 1`` and see the keys
up to their own): a KV cache preallocated to the context and filled to ``n_b`` keys."""
ROPE_STYLES = ("neox", "gptj")
FUSION_POLICIES = ("direct", "fusable", "for_autodiff")
DTYPE_NAMES = tuple(d.value for d in DType)


def mask_has_operand(mask: str) -> bool:
    """Custom, bias and causal_lengths masks are tensors given as an extra operand."""
    return mask in ("custom", "bias", "causal_lengths")


def scheme_display(scheme: str, block_size: int | None) -> str:
    """The scheme as shown in default labels: ``gguf_q4_k``, ``int8/32``, ``nvfp4/16``."""
    if QUANT_SCHEMES[scheme].gguf or block_size is None:
        return scheme
    return f"{scheme}/{block_size}"
