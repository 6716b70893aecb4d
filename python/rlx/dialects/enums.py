"""Enum attribute values shared by HIR and MIR (lowercase strings in the text format)."""

from __future__ import annotations

from dataclasses import dataclass

from rlx.ir.types import DType

FLOAT_TYPES = frozenset({DType.F32, DType.F16, DType.BF16})
INDEX_TYPES = frozenset({DType.F32, DType.I32, DType.I64})
"""Token ids / row indices: RLX encodes them as f32 (truncated toward zero); ints also work."""

ACTIVATIONS = (
    "gelu", "gelu_approx", "silu", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
    "neg", "abs", "sin", "cos", "tan", "atan", "round", "erf", "softplus",
)
"""Unary activations (spec 3.1). ``gelu`` is the exact erf form; ``round`` is half-to-even;
``softplus`` is ``log(1 + exp(x))`` (Qwen3.5's DeltaNet decay; not in RLX's list)."""

LINEAR_ACTIVATIONS = ("none", *ACTIVATIONS)
BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")
MASK_KINDS = ("none", "causal", "sliding_window", "custom", "bias")
ROPE_STYLES = ("neox", "gptj")
FUSION_POLICIES = ("direct", "fusable", "for_autodiff")
DTYPE_NAMES = tuple(d.value for d in DType)


def mask_has_operand(mask: str) -> bool:
    """Custom and bias masks are tensors given as an extra operand."""
    return mask in ("custom", "bias")


@dataclass(frozen=True)
class QuantScheme:
    """A ``dequant_matmul`` weight format.

    GGUF schemes take ``[x, w]`` with ``w`` the raw bytes of a GGML tensor, one row per
    output feature (``tensor<N x ROWBYTES x i8>``, ``y = x Wᵀ``). Legacy schemes take
    ``[x, w_q, scale, zp]`` with ``w_q`` laid out ``[K, N]`` (``y = x W``).
    """

    name: str
    gguf: bool
    block_elems: int
    block_bytes: int
    ggml_type: int | None = None

    def row_bytes(self, k: int) -> int:
        return k // self.block_elems * self.block_bytes


QUANT_SCHEMES: dict[str, QuantScheme] = {
    s.name: s
    for s in (
        QuantScheme("gguf_f16", True, 1, 2, 1),
        QuantScheme("gguf_q4_0", True, 32, 18, 2),
        QuantScheme("gguf_q4_1", True, 32, 20, 3),
        QuantScheme("gguf_q5_0", True, 32, 22, 6),
        QuantScheme("gguf_q5_1", True, 32, 24, 7),
        QuantScheme("gguf_q8_0", True, 32, 34, 8),
        QuantScheme("gguf_q2_k", True, 256, 84, 10),
        QuantScheme("gguf_q3_k", True, 256, 110, 11),
        QuantScheme("gguf_q4_k", True, 256, 144, 12),
        QuantScheme("gguf_q5_k", True, 256, 176, 13),
        QuantScheme("gguf_q6_k", True, 256, 210, 14),
        QuantScheme("gguf_q8_k", True, 256, 292, 15),
        QuantScheme("gguf_bf16", True, 1, 2, 30),
        # Legacy schemes: block_elems is the default block size along K.
        QuantScheme("int8", False, 32, 32),
        QuantScheme("nvfp4", False, 16, 8),
    )
}


def scheme_display(scheme: str, block_size: int | None) -> str:
    """The scheme as shown in default labels: ``gguf_q4_k``, ``int8/32``, ``nvfp4/16``."""
    if QUANT_SCHEMES[scheme].gguf or block_size is None:
        return scheme
    return f"{scheme}/{block_size}"
