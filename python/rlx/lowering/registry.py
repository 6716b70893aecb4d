"""Lowering tables: one per conversion, one rule per op, applied as MLIR rewrite patterns.

A rule is ``lower_<op>(ctx, op) -> list[Value]``, registered by decorator right above its
body; ``op`` is the source op read through its schema (operands and attributes by name).
The table's wrapper does the cross-cutting work once: it enters the op's position and
location (so every op a rule builds carries the source op's label and source position),
checks the number and types of the results, and replaces the op. A table whose output
leaves the rlx dialects (``size_checks``: mir-to-linalg) also re-runs the op's verifier
and emits a run-time check for every size relation it could not decide statically
(:mod:`rlx.lowering.guards`), so no rule reads past a buffer when dynamic sizes disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from iree.compiler import ir
from iree.compiler import rewrite as rw

from rlx.dialects.schema import Decoded, Dialect, decode
from rlx.ir.diagnostics import LoweringError
from rlx.ir.locations import describe
from rlx.ir.text import walk_ops
from rlx.lowering import emit, guards

ATTENTION_LOWERINGS = ("decomposed", "fused")
ACTIVATION_QUANTS = ("q8",)
"""Numerics modes for quantized GEMVs and GEMMs (``LoweringOptions.activation_quant``)."""
ACTIVATION_QUANT_HELP = (
    "llvm-cpu: GEMVs of Q8_0 / Q5_0 / Q4_0 / Q6_K / Q4_K weights with x quantized to int8 "
    "blocks of 32 and integer dot products, llama.cpp's numerics (batched steps of Q8_0 / "
    "Q5_0 / Q4_0 too; on AVX-512 VNNI CPUs prefill GEMMs and Q4_K's batched steps); "
    "default: exact f32")
"""The ``--activation-quant`` option's help, one text for every tool that takes it."""
INT_DOTS = ("vnni", "avx2", "portable")
"""How an integer-dot kernel multiplies 8-bit blocks (``LoweringOptions.int_dot``)."""


LLVMGPU_TARGETS = ("cuda", "rocm")
"""The targets IREE compiles through its LLVMGPU codegen. IREE 3.13's reduction distribution
and bufferization there fail on forms the other backends take, so some rules fence or
reshape their work on these (:attr:`LoweringOptions.llvmgpu`): the sampling filters and
argmax, the causal conv, the Gated DeltaNet step and its ``k·q``."""


PREFILL_COLUMNS = (16, 32)
"""The column blocks the exact prefill GEMM takes (``LoweringOptions.prefill_columns``)."""
MAX_PREFETCH = 1 << 16
"""The farthest ahead (bytes) ``LoweringOptions.prefetch_bytes`` may hint."""


def prefetch_ok(value: object) -> bool:
    """Whether ``value`` is a prefetch distance the GEMV kernels take: an int, a multiple of
    64 (a cache line) from 0 to :data:`MAX_PREFETCH` (``TargetConfig.gemv_prefetch`` and
    ``LoweringOptions.prefetch_bytes`` check it alike)."""
    return (isinstance(value, int) and not isinstance(value, bool) and value % 64 == 0
            and 0 <= value <= MAX_PREFETCH)


@dataclass(frozen=True)
class LoweringOptions:
    """Per-target lowering choices (rlx.compiler picks the defaults for each target).

    ``attention``: ``"decomposed"`` (batch matmul, softmax, batch matmul; measured ~50x
    faster than the fused op on llvm-cpu, and the only form SPIR-V compiles) or ``"fused"``
    (``iree_linalg_ext.attention``). ``compute_barriers``: insert
    ``iree_tensor_ext.compute_barrier.start`` where IREE would otherwise fuse attention
    outputs or residual sums into a matmul's data-tiling encoding (llvm-cpu).
    ``data_tiling``: IREE will data-tile matmuls (llvm-cpu default); some barriers are then
    needed for correct results, whatever ``compute_barriers`` says.
    """

    attention: str = "decomposed"
    compute_barriers: bool = True
    data_tiling: bool = False
    gemv_kernels: bool = False
    """Decode GEMVs (M = 1) of Q8_0 / Q4_K (and Q5_0 / Q4_0 / Q6_K: ``hoist_growth``) weights
    through rlx's hand-written llvm-cpu kernels (``mir_to_linalg.gemv_kernels``) instead of
    the fused dequant + matvec; llvm-cpu only (``TargetConfig`` refuses it for other
    targets)."""
    prefill_kernels: bool = True
    """With ``gemv_kernels``: a ``dequant_matmul`` of many rows of ``x`` (``M`` dynamic or
    above the batched kernels' 8: a prefill) of F16 / BF16, Q8_0 / Q5_0 / Q4_0, Q4_K or Q6_K
    weights runs the batched kernel's body over the decode kernel's planes, its rows taken a
    block at a time (:mod:`.mir_to_linalg.quant.gemv_batched`), instead of dequantizing the whole
    weight into IREE's data-tiled matmul on every call; with ``prefill_columns`` 32 and 512-bit
    vectors, an f32 ``matmul`` of many rows on a parameter weight runs the column-block GEMM
    (:mod:`.mir_to_linalg.quant.f32_matmul`) instead of IREE's data-tiled one."""
    attention_kernel: bool = False
    """f32 attention through rlx's hand-written llvm-cpu kernels: one query against the
    cache (``mir_to_linalg.decode_attention``, one dispatch instead of seven) or several
    (``mir_to_linalg.prefill_attention``, no score buffer); and the linear attention
    (``gated_delta_net``) as one dispatch that walks the sequence with its state updated in
    place (``mir_to_linalg.gdn_kernel``); llvm-cpu only (``TargetConfig`` refuses it for
    other targets)."""
    target: str = "llvm-cpu"
    """The compile target, for rules whose best (or only correct) form differs by backend."""
    separate_decode_dequant: bool = False
    """Vulkan: a decode-shaped (M = 1) ``dequant_matmul`` dequantizes in a dispatch of its own
    too, like a prefill (``quant.rule.separate_dequant``), instead of inside the matvec.
    ``rlx.compiler`` sets it for the ``llvmpipe`` Vulkan target (lavapipe, a CPU): there the
    fused matvec of rows 512 or more wide did not finish in minutes."""
    activation_quant: str | None = None
    """``"q8"``: llvm-cpu decode GEMVs (M = 1) of Q8_0 / Q5_0 / Q4_0 / Q6_K / Q4_K weights quantize
    ``x`` to int8 blocks of 32 (one f32 scale each, ggml's ``q8_0`` rounding) and multiply
    with integer dot products (``mir_to_linalg.quant.gemv_q8``): a numerics mode of its own,
    not dequant_matmul's f32 result (its error bound: benchmarks/README.md, "Integer-dot
    decode"). Prefill GEMMs of those weights (``M`` dynamic, a workgroup of whole column
    blocks of 16 rows) run the integer GEMM of ``mir_to_linalg.quant.gemm_q8`` with the same
    quantization of ``x`` where ``int_dot`` is ``"vnni"`` on 512-bit vectors or
    ``"portable"``; on AVX2 they stay the f32 product. None (default): the exact f32
    kernels."""
    int_dot: str = "portable"
    """The instructions of the ``q8`` kernels' block dot product, from the target CPU's
    features (``TargetConfig``): ``"vnni"`` (``vpdpbusd``, AVX-512 VNNI or AVX-VNNI),
    ``"avx2"`` (``vpmaddubsw`` + ``vpmaddwd``) or ``"portable"`` (plain ``vector`` code);
    the three give the same i32 sums."""
    vector_bits: int = 256
    """The widest vectors rlx's hand-written llvm-cpu kernels use (``TargetConfig``: 512
    where the target CPU has AVX-512F, else 256): the batched decode GEMVs multiply with 16
    f32 lanes at 512 (:mod:`.mir_to_linalg.quant.gemv_batched`)."""
    prefetch_bytes: int = 0
    """How far ahead (bytes) the ``M = 1`` decode GEMV kernels hint their weight planes into
    the cache (``TargetConfig``: 4096 on Intel CPUs and AMD Zen 4 / 5, 0 elsewhere;
    ``gemv_prefetch`` overrides it): :func:`.mir_to_linalg.quant.gemv_text.prefetch_ahead`."""
    prefetch_half: bool = True
    """Whether the F16 / BF16 decode kernels hint too (``TargetConfig``: not on AMD Zen 4,
    where a Qwen3.5-0.8B F16 decode ran 19.5 tok/s with the hints and 21.2 without, while
    the quantized forms gained: :func:`.cpu_features.prefetch_half_of`)."""
    prefill_columns: int = 16
    """Rows of ``W`` a column block of the exact prefill GEMM holds on 512-bit vectors
    (:mod:`.mir_to_linalg.quant.gemm_prefill`): 16 (one vector of outputs a row of ``x``,
    16 rows a pass) or 32 (two, 8 rows a pass: fewer loads per FMA). ``TargetConfig``
    picks it from the target CPU (:func:`.cpu_features.prefill_columns_of`)."""
    batched_q8_gemv_k: int = 0
    """In the ``q8`` mode, a batched decode step of more than 4 rows of Q8_0 / Q5_0 / Q4_0
    weights runs the batched q8 GEMV in passes of 4 rows instead of the integer GEMM where
    ``K`` is at most this (0: never; :func:`.mir_to_linalg.quant.gemv_kernels.batched_int8`).
    ``TargetConfig`` picks it from the target CPU (:func:`.cpu_features.batched_q8_gemv_k_of`:
    1536 on AMD Zen 4 and 2048 on Zen 5, where it was measured faster)."""
    hoist_growth: int = 1 << 20
    """The most bytes by which IREE lets a computation on parameters grow their data and
    still hoists it into initializers (``--iree-opt-const-expr-max-size-increase-threshold``,
    1 MiB by default; ``TargetConfig`` reads it from the extra flags): lowerings whose
    repacking grows a weight use it only within this."""
    caller_transients: bool = False
    """Each export takes a ``!hal.buffer`` after its tensors that IREE suballocates the
    call's transients from (:mod:`rlx.lowering.exports`, :mod:`rlx.transients`), instead of
    allocating them per call; ``rlx.runtime`` keeps one such buffer per function."""

    def decode_prefetch(self, half: bool) -> int:
        """A decode kernel's hint distance: :attr:`prefetch_bytes`, or 0 for an F16 / BF16
        one (``half``) without :attr:`prefetch_half`."""
        return self.prefetch_bytes if self.prefetch_half or not half else 0

    @property
    def llvmgpu(self) -> bool:
        """Whether IREE compiles this target through its LLVMGPU codegen
        (:data:`LLVMGPU_TARGETS`), whose faults some rules work around."""
        return self.target in LLVMGPU_TARGETS

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_LOWERINGS:
            raise LoweringError(f"attention lowering: expected one of "
                                f"{', '.join(ATTENTION_LOWERINGS)}, found {self.attention!r}")
        if self.activation_quant not in (None, *ACTIVATION_QUANTS):
            raise LoweringError(f"activation_quant: expected None or one of "
                                f"{', '.join(ACTIVATION_QUANTS)}, found "
                                f"{self.activation_quant!r}")
        if self.int_dot not in INT_DOTS:
            raise LoweringError(f"int_dot: expected one of {', '.join(INT_DOTS)}, found "
                                f"{self.int_dot!r}")
        if not prefetch_ok(self.prefetch_bytes):
            raise LoweringError(f"prefetch_bytes: expected a multiple of 64 from 0 to "
                                f"{MAX_PREFETCH}, found {self.prefetch_bytes!r}")
        if isinstance(self.batched_q8_gemv_k, bool) or not isinstance(
                self.batched_q8_gemv_k, int) or self.batched_q8_gemv_k < 0:
            raise LoweringError(f"batched_q8_gemv_k: expected a non-negative integer, found "
                                f"{self.batched_q8_gemv_k!r}")
        if self.prefill_columns not in PREFILL_COLUMNS:
            raise LoweringError(f"prefill_columns: expected one of "
                                f"{', '.join(map(str, PREFILL_COLUMNS))}, found "
                                f"{self.prefill_columns!r}")


@dataclass
class LoweringContext:
    """What a rule may use besides its op: options, the module's fusion policy, pass state."""

    options: LoweringOptions
    policy: str
    module: ir.Module
    state: dict[str, Any] = field(default_factory=dict)


Rule = Callable[[LoweringContext, Decoded], list[ir.Value]]


class LoweringTable:
    """The rules of one conversion (``hir_to_mir``, ``mir_to_linalg``)."""

    def __init__(self, name: str, source: Dialect, *, size_checks: bool = False) -> None:
        self.name = name
        self.source = source
        self.size_checks = size_checks
        """Emit run-time checks of the sizes each op's verifier left undecided (the table
        that lowers out of the rlx dialects, where the rules rely on them)."""
        self.rules: dict[str, Rule] = {}

    def register(self, op: str) -> Callable[[Rule], Rule]:
        if op not in self.source.ops:
            raise ValueError(f"{self.name}: '{self.source.name}.{op}' is not an op of the "
                             "source dialect")

        def add(rule: Rule) -> Rule:
            if op in self.rules:
                raise ValueError(f"{self.name}: a rule for '{self.source.name}.{op}' is "
                                 "registered twice")
            self.rules[op] = rule
            return rule

        return add

    def missing(self) -> set[str]:
        """Ops of the source dialect without a rule."""
        return set(self.source.ops) - set(self.rules)

    def _pattern(self, name: str, rule: Rule, ctx: LoweringContext
                 ) -> Callable[[ir.OpView, rw.PatternRewriter], bool]:
        schema = self.source.ops[name]

        def apply(op_view: ir.OpView, rewriter: rw.PatternRewriter) -> bool:
            op = op_view.operation
            decoded = decode(schema, op, check=self.size_checks)
            with rewriter.ip, op.location:
                guards.check_sizes(decoded)
                values = rule(ctx, decoded)
                values = self._match_results(op, values)
            rewriter.replace_op(op, values)
            return False

        return apply

    def _match_results(self, op: ir.Operation, values: list[ir.Value]) -> list[ir.Value]:
        if len(values) != len(op.results):
            raise LoweringError(f"{describe(op.location)}: {self.name} rule for '{op.name}' "
                                f"returned {len(values)} values for {len(op.results)} results")
        out = []
        for i, (v, r) in enumerate(zip(values, op.results, strict=True)):
            if v.type != r.type:
                if emit.elem(v) != emit.elem(r) or emit.rank(v) != emit.rank(r.type):
                    raise LoweringError(
                        f"{describe(op.location)}: {self.name} rule for '{op.name}' result "
                        f"#{i}: expected {r.type}, found {v.type}")
                v = emit.cast_tensor(v, r.type)
            out.append(v)
        return out

    def run(self, module: ir.Module, ctx: LoweringContext) -> None:
        """Rewrite every source-dialect op; any op left over is an error naming it."""
        with module.context:
            patterns = rw.RewritePatternSet()
            for name, rule in self.rules.items():
                patterns.add(f"{self.source.name}.{name}", self._pattern(name, rule, ctx))
            rw.apply_patterns_and_fold_greedily(module, patterns.freeze())
        for op in walk_ops(module.operation):
            if op.name.startswith(f"{self.source.name}."):
                registered = ", ".join(sorted(self.rules))
                raise LoweringError(f"{describe(op.location)}: error: no {self.name} rule for "
                                    f"'{op.name}' (registered: {registered})")


def leftover_rlx_ops(module: ir.Module) -> list[ir.Operation]:
    """Ops of the rlx dialects still in ``module``."""
    return [op for op in walk_ops(module.operation) if op.name.startswith("rlx_")]


def check_lowered(module: ir.Module) -> None:
    """Raise a LoweringError naming (by label and position) every rlx op left."""
    left = leftover_rlx_ops(module)
    if not left:
        return
    names = "; ".join(f"'{op.name}' at {describe(op.location)}" for op in left[:10])
    more = f" (and {len(left) - 10} more)" if len(left) > 10 else ""
    raise LoweringError(f"error: {len(left)} rlx op(s) left before IREE: {names}{more}")

