"""The compile pipeline: HIR -> MIR -> linalg -> IREE vmfb, per target.

``rlx.compile(module_or_path, target=...)`` runs ``hir-to-mir`` (by the module's fusion
policy), ``mir-to-linalg`` (with the target's lowering choices), checks nothing ``rlx_*`` is
left, verifies the module with MLIR, and runs ``iree-compile`` with the target's flags.
A failing IREE compile saves the module, names the HIR op (label and position) IREE
rejected, prints the command that reproduces it, and leaves no output file.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iree.compiler import ir
from iree.compiler.tools.binaries import find_tool

from rlx.cache import CompileCache
from rlx.cache import resolve as resolve_cache
from rlx.dialects import verify_module
from rlx.dialects.builder import HirModule
from rlx.dialects.hir_module import narrow_positions, unsigned_positions
from rlx.gpu_targets import (
    HOPPER_AND_LATER,
    KNOWN_GPU_TARGETS,
    check_gpu_target,
    hopper_device_target,
)
from rlx.ir.diagnostics import CompileError, RlxError
from rlx.ir.dispatches import DispatchCounts, counts_of
from rlx.ir.locations import label_of, source_of
from rlx.ir.text import parse_file, parse_module, print_module, walk_ops
from rlx.ir.types import TensorInfo
from rlx.lowering import lower_hir_to_mir, lower_mir_to_linalg
from rlx.lowering.cpu_features import (
    AVX2_CPUS,
    AVX512_CPUS,
    VNNI_CPUS,
    batched_q8_gemv_k_of,
    int_dot_of,
    prefetch_bytes_of,
    prefetch_half_of,
    prefill_columns_of,
    vector_bits_of,
)
from rlx.lowering.exports import add_exports
from rlx.lowering.registry import (
    ACTIVATION_QUANTS,
    MAX_PREFETCH,
    PREFILL_COLUMNS,
    LoweringOptions,
    prefetch_ok,
)
from rlx.transients import compile_checked
from rlx.weights import ENCODED_SCOPE

TARGETS = ("llvm-cpu", "vulkan", "cuda", "rocm")
EMITS = ("hir", "mir", "linalg", "vmfb")
HOIST_GROWTH_FLAG = "--iree-opt-const-expr-max-size-increase-threshold"
"""An IREE flag rlx's lowering reads from ``extra_flags`` (``LoweringOptions.hoist_growth``)."""


ENCODER_FLAGS = ("--iree-parameter-encoder-mode=overlay",
                 f"--iree-parameter-encoder-output-scope={ENCODED_SCOPE}")
"""iree-compile flags of a module compiled with ``encode_parameters`` (the output file is
added per compile): only the transformed weights are encoded, the others stay in the
weights' own scope."""
ENCODER_SUFFIX = "-encoder"
"""The compile cache key of a module's encoder: the module's key and this."""


ABI_FLAGS = (
    # Each function is exported twice over one body (rlx.lowering.exports): ``f`` with
    # IREE's synchronous ABI, which iree.runtime and iree-run-module call the ordinary way,
    # and ``f$async`` with its coarse-fences ABI (inputs, wait fence, signal fence), which
    # returns once the call is queued: rlx.runtime's Function.submit queues call n + 1
    # while the device runs call n (a pipelined greedy decode). Indirect command buffers
    # bind buffers when the queued call runs, not when it is recorded: call n + 1 is
    # recorded while call n is still allocating the results n + 1 reads, which a direct
    # binding rejects ("transient buffer has not been committed").
    "--iree-hal-force-indirect-command-buffers",
)


@dataclass(frozen=True)
class TargetConfig:
    """How one target is compiled; every field has the DESIGN.md default."""

    target: str = "llvm-cpu"
    cpu: str = "host"
    vulkan_target: str = "llvmpipe"
    cuda_arch: str = "sm_80"
    rocm_arch: str = "gfx942"
    opt_level: str = "O3"
    data_tiling: bool | None = None
    attention: str | None = None
    compute_barriers: bool | None = None
    gemv_kernels: bool | None = None
    prefill_kernels: bool | None = None
    attention_kernel: bool | None = None
    activation_quant: str | None = None
    gemv_prefetch: int | None = None
    prefill_columns: int | None = None
    encode_parameters: bool = False
    caller_transients: bool = False
    extra_flags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise CompileError(f"error: unknown target {self.target!r} (expected one of "
                               f"{', '.join(TARGETS)})")
        for name in ("gemv_kernels", "prefill_kernels", "attention_kernel"):
            if getattr(self, name) and self.target != "llvm-cpu":
                raise CompileError(f"error: {name}=True: rlx's hand-written kernels are "
                                   f"llvm-cpu code, the target is {self.target!r}")
        if self.encode_parameters and self.target != "llvm-cpu":
            raise CompileError(f"error: encode_parameters=True: the weights' planes are "
                               f"encoded ahead of time for llvm-cpu; the target is "
                               f"{self.target!r}")
        if self.gemv_prefetch is not None and not prefetch_ok(self.gemv_prefetch):
            raise CompileError(f"error: gemv_prefetch: expected bytes, a multiple of 64 from 0 "
                               f"to {MAX_PREFETCH}, found {self.gemv_prefetch!r}")
        if self.prefill_columns is not None and self.prefill_columns not in PREFILL_COLUMNS:
            raise CompileError(f"error: prefill_columns: expected one of "
                               f"{', '.join(map(str, PREFILL_COLUMNS))}, found "
                               f"{self.prefill_columns!r}")
        if self.prefill_kernels and self.gemv_kernels is False:
            raise CompileError("error: prefill_kernels=True runs the GEMV kernels' bodies on "
                               "their planes; found gemv_kernels=False")
        if self.activation_quant is None:
            return
        if self.activation_quant not in ACTIVATION_QUANTS:
            raise CompileError(f"error: activation_quant: expected None or one of "
                               f"{', '.join(ACTIVATION_QUANTS)}, found "
                               f"{self.activation_quant!r}")
        if self.target != "llvm-cpu" or self.gemv_kernels is False:
            raise CompileError(f"error: activation_quant={self.activation_quant!r} runs in "
                               f"rlx's llvm-cpu GEMV kernels; found target {self.target!r}, "
                               f"gemv_kernels={self.gemv_kernels}")

    @property
    def lowering(self) -> LoweringOptions:
        """Decomposed attention on llvm-cpu (~50x faster than the fused op there) and
        Vulkan (SPIR-V cannot compile the fused op); fused on CUDA / ROCm."""
        default = "decomposed" if self.target in ("llvm-cpu", "vulkan") else "fused"
        cpu = self.target == "llvm-cpu"
        barriers = cpu if self.compute_barriers is None else self.compute_barriers
        tiling = cpu and self.data_tiling is not False
        kernels = cpu if self.gemv_kernels is None else self.gemv_kernels
        attention_kernel = cpu if self.attention_kernel is None else self.attention_kernel
        growth = [f.split("=", 1)[1] for f in self.extra_flags
                  if f.startswith(f"{HOIST_GROWTH_FLAG}=")]
        try:
            hoist = int(growth[-1]) if growth else LoweringOptions.hoist_growth
        except ValueError:
            raise CompileError(f"error: {HOIST_GROWTH_FLAG}: expected a byte count, found "
                               f"{growth[-1]!r}") from None
        return LoweringOptions(attention=self.attention or default, compute_barriers=barriers,
                               data_tiling=tiling, gemv_kernels=kernels,
                               prefill_kernels=kernels and self.prefill_kernels is not False,
                               attention_kernel=attention_kernel, target=self.target,
                               hoist_growth=hoist, separate_decode_dequant=(
                                   self.target == "vulkan" and self.vulkan_target == "llvmpipe"),
                               activation_quant=self.activation_quant,
                               int_dot=int_dot_of(self.cpu, self.extra_flags) if (
                                   self.activation_quant) else "portable",
                               vector_bits=vector_bits_of(self.cpu, self.extra_flags) if (
                                   self.target == "llvm-cpu" and kernels) else 256,
                               prefetch_bytes=self._prefetch_bytes(kernels),
                               prefetch_half=self.gemv_prefetch is not None or prefetch_half_of(
                                   self.cpu),
                               prefill_columns=self.prefill_columns or prefill_columns_of(
                                   self.cpu),
                               batched_q8_gemv_k=batched_q8_gemv_k_of(self.cpu) if (
                                   self.target == "llvm-cpu" and self.activation_quant) else 0,
                               caller_transients=self.caller_transients)

    def _prefetch_bytes(self, kernels: bool) -> int:
        """``LoweringOptions.prefetch_bytes``: ``gemv_prefetch``, else the CPU's
        (:func:`prefetch_bytes_of`); 0 without rlx's llvm-cpu kernels."""
        if self.target != "llvm-cpu" or not kernels:
            return 0
        return prefetch_bytes_of(self.cpu) if self.gemv_prefetch is None else self.gemv_prefetch

    @property
    def runtime_device(self) -> str:
        return {"llvm-cpu": "local-task", "vulkan": "vulkan", "cuda": "cuda",
                "rocm": "hip"}[self.target]

    def flags(self) -> list[str]:
        opt = [f"--iree-opt-level={self.opt_level}", *ABI_FLAGS]
        if self.target == "llvm-cpu":
            tiling = True if self.data_tiling is None else self.data_tiling
            flags = ["--iree-hal-target-device=local",
                     "--iree-hal-local-target-device-backends=llvm-cpu",
                     f"--iree-llvmcpu-target-cpu={self.cpu}", *opt,
                     f"--iree-opt-data-tiling={'true' if tiling else 'false'}",
                     # peel vector remainders: IREE's default leaves a matvec whose
                     # reduction tile does not divide its size scalar (Q8_0 GEMV with
                     # K = 576: 2.3 -> 16.2 GB/s); neutral on the blocks' benchmark
                     "--iree-llvmcpu-vector-pproc-strategy=peel"]
        elif self.target == "vulkan":
            flags = ["--iree-hal-target-device=vulkan",
                     f"--iree-vulkan-target={self.vulkan_target}", *opt]
        elif self.target == "cuda":
            flags = ([] if self.cuda_arch in HOPPER_AND_LATER
                     else ["--iree-hal-target-device=cuda",
                           f"--iree-cuda-target={self.cuda_arch}"]) + opt
        else:
            flags = ["--iree-hal-target-device=hip", f"--iree-rocm-target={self.rocm_arch}",
                     *opt]
        if self.encode_parameters:
            flags += list(ENCODER_FLAGS)
        return flags + list(self.extra_flags)




# --------------------------------------------------------------------------------------
# Loading and lowering
# --------------------------------------------------------------------------------------


@dataclass
class Lowered:
    """A module on its way through the pipeline, with what error messages need."""

    module: ir.Module
    hir_text: str
    source: str
    ops_by_position: dict[str, tuple[str | None, str]]


def _has_positions(module: ir.Module) -> bool:
    return all(source_of(op.location) is not None for op in walk_ops(module.operation)
               if op.name.startswith("rlx_"))


def load(module_or_path: HirModule | ir.Module | str | Path) -> Lowered:
    """A fresh, verified HIR module (the caller's module is never changed) whose ops all
    carry a source position: the user's file, or the canonical text when built in Python."""
    if isinstance(module_or_path, str | Path):
        path = Path(module_or_path)
        module = parse_file(path)
        verify_module(module, "hir")
        text, source = print_module(module), str(path)
        if not _has_positions(module):
            module = parse_module(path.read_text(), str(path))
    else:
        mlir = module_or_path.mlir if isinstance(module_or_path, HirModule) else module_or_path
        verify_module(mlir, "hir")
        text = print_module(mlir)
        name = ir.StringAttr(mlir.operation.attributes["sym_name"]).value if (
            "sym_name" in mlir.operation.attributes) else "module"
        source = f"{name}.hir"
        module = parse_module(text, source)
    positions = {}
    for op in walk_ops(module.operation):
        pos = source_of(op.location)
        if pos is not None and op.name.startswith("rlx_"):
            positions[pos] = (label_of(op.location), op.name)
    return Lowered(module, text, source, positions)


F64_TYPE = re.compile(r"[<x]f64>")  # a tensor of f64 (not a float attribute, typed f64)
KEEP_F64_FLAG = "--iree-input-demote-f64-to-f32=false"


def keep_f64(config: TargetConfig, lowered: Lowered) -> TargetConfig:
    """A module with f64 tensors computes in f64 on llvm-cpu: IREE demotes f64 to f32 by
    default, which would leave the module's f64 inputs and results read as f32 buffers of
    half their size. The GPU targets keep the demotion, so f64 is refused there."""
    if not F64_TYPE.search(lowered.hir_text):
        return config
    if config.target != "llvm-cpu":
        raise CompileError(f"error: {lowered.source}: f64 tensors compile for llvm-cpu only "
                           f"(IREE demotes f64 to f32 for {config.target}); cast the model's "
                           "f64 values to f32 for this target")
    if KEEP_F64_FLAG in config.extra_flags:
        return config
    return replace(config, extra_flags=(*config.extra_flags, KEEP_F64_FLAG))


def lower(lowered: Lowered, config: TargetConfig, stop: str = "linalg") -> None:
    """Run the passes up to ``stop`` (``"hir"``, ``"mir"`` or ``"linalg"``) in place."""
    if stop == "hir":
        return
    lower_hir_to_mir(lowered.module, config.lowering)
    if stop == "mir":
        return
    lower_mir_to_linalg(lowered.module, config.lowering)
    add_reflection(lowered.module)
    add_exports(lowered.module, transients=config.caller_transients)
    if config.target == "cuda" and config.cuda_arch in HOPPER_AND_LATER:
        with lowered.module.context:
            lowered.module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(
                f"[{hopper_device_target(config.cuda_arch)}]")


def add_reflection(module: ir.Module) -> None:
    """Input names and weights of each function, readable from the vmfb at load time."""
    params = {}
    for op in walk_ops(module.operation):
        if op.name == "util.global":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name.startswith("param.") and "initial_value" in op.attributes:
                t = TensorInfo.from_mlir(ir.TypeAttr(op.attributes["type"]).value)
                params[name.removeprefix("param.")] = [list(t.shape), str(t.dtype)]
    with module.context:
        for op in module.body.operations:
            op = op.operation
            if op.name != "func.func":
                continue
            names = []
            if "arg_attrs" in op.attributes:
                for i, a in enumerate(ir.ArrayAttr(op.attributes["arg_attrs"])):
                    d = ir.DictAttr(a)
                    names.append(ir.StringAttr(d["rlx.name"]).value if "rlx.name" in d
                                 else f"arg{i}")
            block = op.regions[0].blocks[0]
            types = [[list(t.shape), str(t.dtype)] for t in
                     (TensorInfo.from_mlir(a.type) for a in block.arguments)]
            refl = {"rlx.inputs": ir.StringAttr.get(json.dumps(names)),
                    "rlx.input_types": ir.StringAttr.get(json.dumps(types)),
                    "rlx.params": ir.StringAttr.get(json.dumps(params, sort_keys=True))}
            for side, key in (("inputs", "arg_attrs"), ("outputs", "res_attrs")):
                flagged = unsigned_positions(op, key)
                if flagged:
                    refl[f"rlx.unsigned_{side}"] = ir.StringAttr.get(json.dumps(flagged))
                narrow = narrow_positions(op, key)
                if narrow:
                    refl[f"rlx.narrow_{side}"] = ir.StringAttr.get(json.dumps(
                        {str(i): n for i, n in narrow.items()}))
            op.attributes["iree.reflection"] = ir.DictAttr.get(refl)


def lowered_text(module: ir.Module) -> str:
    """MLIR text for iree-compile: every op keeps its location (label + HIR position)."""
    return module.operation.get_asm(enable_debug_info=True)


# --------------------------------------------------------------------------------------
# IREE
# --------------------------------------------------------------------------------------

_DIAG = re.compile(r"^(?P<pos>[^\s:][^:]*:\d+:\d+): (?P<kind>error|warning|note): (?P<msg>.*)$")
_TARGET_ATTR = re.compile(r'(#hal\.executable\.target<"[^"]*", "[^"]*"), \{.*\}>')


def _explain(stderr: str, lowered: Lowered) -> list[str]:
    """IREE's error lines, each with the HIR label and op at its position."""
    lines = []
    for raw in stderr.splitlines():
        m = _DIAG.match(raw)
        if not m or m.group("kind") != "error":
            continue
        pos, msg = m.group("pos"), _TARGET_ATTR.sub(r"\1, {...}>", m.group("msg"))
        hit = lowered.ops_by_position.get(pos)
        if hit is not None:
            label, name = hit
            named = f'"{label}" ' if label else ""
            lines.append(f"{pos}: error: IREE rejected {named}({name}): {msg}")
        else:
            lines.append(f"{pos}: error: {msg}")
    return lines


def run_iree(lowered: Lowered, config: TargetConfig, output: Path | None,
             encoder: list[bytes] | None = None) -> bytes:
    """Compile with iree-compile; on failure save the module and raise a CompileError.
    With ``config.encode_parameters`` the parameter encoder IREE splits off is compiled
    too and appended to ``encoder`` (:mod:`rlx.encoding`; with ``output``, also written
    beside it as ``NAME.encoder.vmfb``)."""
    tool = find_tool("iree-compile")
    text = lowered_text(lowered.module)
    with tempfile.TemporaryDirectory(prefix="rlx-") as tmp:
        src = Path(tmp) / "module.mlir"
        dst = Path(tmp) / "module.vmfb"
        split = Path(tmp) / "encoder.mlir"
        src.write_text(text)
        splits = ([f"--iree-parameter-encoder-output-file={split}"]
                  if config.encode_parameters else [])
        flags = [*config.flags(), *splits]
        proc = (compile_checked(tool, src, flags, dst) if config.caller_transients else
                subprocess.run([tool, str(src), *flags, "-o", str(dst)], capture_output=True,
                               text=True))
        if proc.returncode == 0:
            data = dst.read_bytes()
            if splits:
                enc = compile_encoder(split, config.flags(), lowered.source)
                if encoder is not None:
                    encoder.append(enc)
                if output is not None and enc:      # nothing to encode: no encoder file
                    _write_atomic(output.with_suffix(".encoder.vmfb"), enc)
            if output is not None:
                _write_atomic(output, data)
            return data
    stem = (output.with_suffix("") if output is not None
            else Path(tempfile.mkdtemp(prefix="rlx-failed-")) / Path(lowered.source).stem)
    saved = stem.parent / f"{stem.name}.failed.mlir"
    saved_hir = stem.parent / f"{stem.name}.failed.hir"
    saved.write_text(text)
    saved_hir.write_text(lowered.hir_text)
    repro = shlex.join([tool, str(saved), *config.flags(), "-o",
                        str(stem.parent / f"{stem.name}.vmfb")])
    explained = _explain(proc.stderr, lowered) or [
        f"error: {line}" for line in proc.stderr.strip().splitlines()[:5]]
    raise CompileError("\n".join([
        f"{lowered.source}: error: IREE failed to compile for {config.target}",
        *explained,
        *_hints(proc.stderr, config),
        f"note: the module IREE compiled is saved as {saved} (the HIR as {saved_hir})",
        f"note: reproduce with: {repro}",
    ]))


def _hints(stderr: str, config: TargetConfig) -> list[str]:
    """What a user can do about an IREE failure that rlx knows."""
    if config.target == "vulkan" and "subgroup mma" in stderr.lower():
        # seen 2026-12-04: a LLaMA block's f16 prefill for ampere / turing / volta / rtx4090;
        # with pascal it compiled and matched PyTorch on an H200's Vulkan driver
        return [f"note: IREE 3.13's Vulkan targets for NVIDIA GPUs newer than Pascal list "
                f"CUDA's matrix instructions, which SPIR-V code cannot use, and some 16-bit "
                f"matmuls fail on them (--vulkan-target={config.vulkan_target}); "
                f"--vulkan-target=pascal, which lists none, compiles them for any NVIDIA GPU"]
    if config.caller_transients:
        return ["note: caller_transients: rlx compiles to --compile-to=stream, adds its size "
                "checks (rlx.transients), then --compile-from=stream; below, both at once"]
    return []


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CompileError(f"{path}: error: cannot write: {e.strerror or e}") from None


def dispatch_counts(module_or_path: HirModule | ir.Module | str | Path,
                    target: str = "llvm-cpu", **options: Any) -> DispatchCounts:
    """Count the dispatches one call of each public function runs (summed over functions)."""
    config = TargetConfig(target=target, **options)
    check_gpu_target(config)
    lowered = load(module_or_path)
    lower(lowered, config)
    text = lowered_text(lowered.module)
    counts = {}
    with tempfile.TemporaryDirectory(prefix="rlx-") as tmp:
        src = Path(tmp) / "module.mlir"
        src.write_text(text)
        for phase in ("flow", "stream"):
            proc = subprocess.run([find_tool("iree-compile"), str(src), *config.flags(),
                                   f"--compile-to={phase}"], capture_output=True, text=True)
            if proc.returncode != 0:
                raise CompileError(f"{lowered.source}: error: iree-compile --compile-to={phase}"
                                   f" failed: {proc.stderr.strip()[:2000]}")
            counts[phase] = proc.stdout
    return counts_of(counts["flow"], counts["stream"])


def compile_encoder(split: Path, flags: list[str], source: str) -> bytes:
    """The vmfb of the encoder module iree-compile split off into ``split`` (b"" when it
    wrote none, or one with nothing to encode), built with the main module's ``flags``."""
    if not split.is_file() or 'iree.encode.function = "encode"' not in split.read_text():
        return b""
    flags = [f for f in flags if not f.startswith("--iree-parameter-encoder")]
    with tempfile.TemporaryDirectory(prefix="rlx-") as tmp:
        dst = Path(tmp) / "encoder.vmfb"
        proc = subprocess.run([find_tool("iree-compile"), str(split), *flags, "-o", str(dst)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"{source}: error: IREE failed to compile the module's "
                               f"parameter encoder: {proc.stderr.strip()[:2000]}")
        return dst.read_bytes()


def _config(target: str, extra_flags: tuple[str, ...], options: dict[str, Any]
            ) -> TargetConfig:
    """The target configuration ``compile``'s keyword options ask for, checked."""
    known = set(TargetConfig.__dataclass_fields__) - {"target", "extra_flags"}
    unknown = set(options) - known
    if unknown:
        raise CompileError(f"error: unknown compile option(s) {', '.join(sorted(unknown))} "
                           f"(known: {', '.join(sorted(known))})")
    config = TargetConfig(target=target, extra_flags=extra_flags, **options)
    check_gpu_target(config)
    return config


def compile(
    module_or_path: HirModule | ir.Module | str | Path,
    target: str = "llvm-cpu",
    *,
    output: str | Path | None = None,
    emit: str = "vmfb",
    extra_flags: tuple[str, ...] | list[str] = (),
    cache: CompileCache | bool | str | Path | None = None,
    **options: Any,
) -> bytes | str:
    """Compile a HIR module (object, MLIR module or ``.hir`` path) for ``target``.

    Returns the vmfb bytes (``emit="vmfb"``) or the text of an earlier stage (``"hir"``,
    ``"mir"``, ``"linalg"``); with ``output`` it is also written there (atomically).
    ``options`` are :class:`TargetConfig` fields: ``cpu``, ``vulkan_target``,
    ``cuda_arch``, ``rocm_arch``, ``opt_level``, ``data_tiling``, ``attention``
    (``"decomposed"`` / ``"fused"``), ``compute_barriers``, ``gemv_kernels`` (llvm-cpu:
    decode GEMVs of Q8_0 / Q4_K, and of Q5_0 / Q4_0 / Q6_K within the hoisting threshold,
    through rlx's hand-written kernels; default on), ``prefill_kernels`` (llvm-cpu, with
    ``gemv_kernels``: a dequant_matmul of many rows, a prefill's, of F16 / BF16 / Q8_0 / Q5_0
    / Q4_0 / Q4_K / Q6_K weights through rlx's prefill kernels (an outer-product GEMM, or the
    batched kernel's body) on the decode kernel's planes, and, with ``prefill_columns`` 32, an
    f32 matmul of many rows on a parameter weight through the same GEMM; default on),
    ``attention_kernel``
    (llvm-cpu: f32 attention through rlx's hand-written kernels, one query against a KV
    cache (decode) or several (prefill), and ``gated_delta_net`` as one dispatch over the
    sequence; default on),
    ``activation_quant`` (llvm-cpu, default None; ``"q8"``: decode GEMVs' ``x`` quantized to
    int8 blocks, integer dot products as the CPU has them, :func:`int_dot_of`; prefill GEMMs
    too where it has AVX-512 VNNI), ``gemv_prefetch`` (llvm-cpu: bytes ahead that the decode
    GEMV kernels hint their weights into the cache; default from the CPU, 4096 on Intel and
    AMD Zen 4 / 5, 0 elsewhere), ``prefill_columns`` (llvm-cpu with AVX-512: 16 or 32, the
    rows of ``W`` a column block of the exact prefill GEMM holds; default from the CPU, 32 on
    Intel and AMD Zen 5, 16 elsewhere), ``encode_parameters`` (llvm-cpu, default False: the
    initializers that make the kernels' planes from the weights are split into an encoder
    module, written beside ``output`` as ``NAME.encoder.vmfb``, and the module reads their
    results from the parameter scope ``encoded``; :mod:`rlx.encoding` runs it once per
    model, :func:`compile_with_encoder` returns both), ``caller_transients`` (default False:
    each export takes the buffer its transients are suballocated from after its tensors,
    :mod:`rlx.transients`; ``rlx.generate``'s models on llvm-cpu take it).
    ``cache`` (vmfb only): a :class:`~rlx.cache.CompileCache`, ``True`` for the default
    directory or a directory path: a module compiled before with the same flags, rlx and
    IREE comes from there, and a new compile is stored (see :mod:`rlx.cache`).
    """
    if emit not in EMITS:
        raise CompileError(f"error: unknown emit stage {emit!r} (expected one of "
                           f"{', '.join(EMITS)})")
    config = _config(target, tuple(extra_flags), options)
    lowered = load(module_or_path)
    out = Path(output) if output is not None else None
    if emit != "vmfb":
        lower(lowered, config, stop=emit)
        text = lowered.hir_text if emit == "hir" else (
            print_module(lowered.module) if emit == "mir" else lowered_text(lowered.module))
        if out is not None:
            _write_atomic(out, text.encode())
        return text
    return _vmfb(lowered, keep_f64(config, lowered), resolve_cache(cache), out)[0]


def compile_with_encoder(module_or_path: HirModule | ir.Module | str | Path,
                         target: str = "llvm-cpu", *,
                         cache: CompileCache | bool | str | Path | None = None,
                         extra_flags: tuple[str, ...] | list[str] = (), **options: Any
                         ) -> tuple[bytes, bytes]:
    """:func:`compile` with ``encode_parameters=True``: the vmfb, and the vmfb of its
    parameter encoder (empty when the module has no weights to encode); see
    :mod:`rlx.encoding`. Both are cached together."""
    config = _config(target, tuple(extra_flags), {**options, "encode_parameters": True})
    lowered = load(module_or_path)
    return _vmfb(lowered, keep_f64(config, lowered), resolve_cache(cache), None)


def _vmfb(lowered: Lowered, config: TargetConfig, store: CompileCache | None,
          out: Path | None) -> tuple[bytes, bytes]:
    """The vmfb (from the cache, or compiled and stored) and its encoder's (b"" without
    ``encode_parameters``, or when there is nothing to encode)."""
    key = None if store is None else store.key(lowered.hir_text, config.flags(),
                                               vars(config.lowering))
    if store is not None and key is not None:
        enc = store.get(key + ENCODER_SUFFIX) if config.encode_parameters else b""
        hit = store.get(key) if enc is not None else None
        if hit is not None and enc is not None:
            if out is not None:
                _write_atomic(out, hit)
            return hit, enc
    lower(lowered, config)
    encoder: list[bytes] = []
    data = run_iree(lowered, config, out, encoder)
    if store is not None and key is not None:
        store.put(key, data)
        if config.encode_parameters:
            store.put(key + ENCODER_SUFFIX, encoder[0])
    return data, encoder[0] if encoder else b""


__all__ = [
    "AVX2_CPUS", "AVX512_CPUS", "EMITS", "ENCODER_FLAGS", "ENCODER_SUFFIX", "KNOWN_GPU_TARGETS",
    "TARGETS", "VNNI_CPUS", "DispatchCounts", "RlxError", "TargetConfig", "check_gpu_target",
    "compile", "compile_encoder", "compile_with_encoder", "dispatch_counts", "int_dot_of",
    "load", "lower", "lowered_text", "vector_bits_of"
]
