"""The target CPU's vector features, as rlx's hand-written llvm-cpu kernels need them
(``LoweringOptions.int_dot``, ``LoweringOptions.vector_bits``): from ``/proc/cpuinfo`` for
``--iree-llvmcpu-target-cpu=host``, from the LLVM CPU name otherwise, plus what
``--iree-llvmcpu-target-cpu-features`` adds. An instruction the target lacks would fail
LLVM's instruction selection (or the machine at run time), so an unknown CPU gets the
portable forms."""

from __future__ import annotations

VNNI_CPUS = frozenset({
    "cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake", "rocketlake",
    "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "alderlake",
    "raptorlake", "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "pantherlake",
    "sierraforest", "grandridge", "clearwaterforest", "znver4", "znver5"})
"""LLVM CPU names with ``vpdpbusd`` (AVX-512 VNNI or AVX-VNNI)."""
AVX2_CPUS = frozenset({"haswell", "broadwell", "skylake", "skylake-avx512", "cannonlake",
                       "znver1", "znver2", "znver3", "x86-64-v3", "x86-64-v4"})
"""LLVM CPU names with AVX2 but without ``vpdpbusd``."""
CPU_FEATURES_FLAG = "--iree-llvmcpu-target-cpu-features"


def _cpuinfo(key: str) -> str:
    """The first ``key`` line's value in ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _host_flags() -> set[str]:
    """The x86 feature flags of this machine's CPU (``/proc/cpuinfo``; empty elsewhere)."""
    return set(_cpuinfo("flags").split())


AVX512_CPUS = frozenset({
    "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
    "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
    "graniterapids", "graniterapids-d", "znver4", "znver5", "x86-64-v4"})
"""LLVM CPU names with AVX-512F."""


def _named_features(extra_flags: tuple[str, ...]) -> set[str]:
    """The ``+feature`` names of ``--iree-llvmcpu-target-cpu-features`` in the flags."""
    return {f.lstrip("+") for flag in extra_flags if flag.startswith(f"{CPU_FEATURES_FLAG}=")
            for f in flag.split("=", 1)[1].split(",") if f.startswith("+")}


def vector_bits_of(cpu: str, extra_flags: tuple[str, ...]) -> int:
    """The widest vectors rlx's hand-written kernels use on llvm-cpu ``cpu``
    (``LoweringOptions.vector_bits``): 512 where it has AVX-512F (``/proc/cpuinfo`` for
    ``host``, the LLVM CPU name otherwise, ``+avx512f`` in the features flag), else 256.
    Their 16-lane vectors would otherwise be split in two by LLVM (correct, not faster)."""
    if "avx512f" in _named_features(extra_flags):
        return 512
    if cpu == "host":
        return 512 if "avx512f" in _host_flags() else 256
    return 512 if cpu in AVX512_CPUS else 256


INTEL_PREFETCH_BYTES = 4096
"""How far ahead the decode GEMV kernels hint their weights on an Intel CPU
(:func:`prefetch_bytes_of`): on the Xeon of family 6 model 207, ``M = 1`` kernels streaming
from DRAM ran at 13-18 GB/s without hints and at 16-28 GB/s with them (Q8_0 1.5-1.9x, F16
1.5x, Q4_K 1.6x, Q6_K 1.1-1.4x); 2 and 8 KiB ahead were within a few percent of 4
(benchmarks/README.md, "Prefetch hints on the Intel Xeon")."""
INTEL_CPUS = frozenset((VNNI_CPUS | AVX2_CPUS | AVX512_CPUS) - {
    "znver1", "znver2", "znver3", "znver4", "znver5", "x86-64-v3", "x86-64-v4"})
"""LLVM CPU names of Intel cores among those rlx names."""


def _intel(cpu: str) -> bool:
    """Whether llvm-cpu ``cpu`` is an Intel core: ``GenuineIntel`` in ``/proc/cpuinfo`` for
    ``host``, else an Intel LLVM CPU name (:data:`INTEL_CPUS`)."""
    return _cpuinfo("vendor_id") == "GenuineIntel" if cpu == "host" else cpu in INTEL_CPUS


def _amd_avx512(cpu: str, name: str, family: str) -> bool:
    """Whether llvm-cpu ``cpu`` is the AMD core of LLVM CPU ``name``: that name, or for
    ``host`` an ``AuthenticAMD`` CPU of ``family`` with AVX-512F."""
    if cpu != "host":
        return cpu == name
    return (_cpuinfo("vendor_id") == "AuthenticAMD" and _cpuinfo("cpu family") == family
            and "avx512f" in _host_flags())


def _zen4(cpu: str) -> bool:
    """Whether llvm-cpu ``cpu`` is an AMD Zen 4 core: ``znver4``, or for ``host`` an AMD CPU
    of family 25 with AVX-512F (family 25 without it is Zen 3)."""
    return _amd_avx512(cpu, "znver4", "25")


def _zen5(cpu: str) -> bool:
    """Whether llvm-cpu ``cpu`` is an AMD Zen 5 core: ``znver5``, or for ``host`` an AMD CPU
    of family 26 with AVX-512F."""
    return _amd_avx512(cpu, "znver5", "26")


def prefetch_bytes_of(cpu: str) -> int:
    """``LoweringOptions.prefetch_bytes`` for llvm-cpu ``cpu``: :data:`INTEL_PREFETCH_BYTES` on
    an Intel CPU and on AMD Zen 4 and Zen 5, 0 (no hints) elsewhere (Zen 3 is unmeasured).
    Measured on whole decodes (``benchmarks/decode_options.py``, interleaved rounds, medians;
    benchmarks/README.md, "Prefetch hints on Zen 4" and "... on Zen 5"):

    - Zen 4 (AMD EPYC family 25 model 17, 2026-12-07): Qwen3.5-0.8B Q4_K_M q8 44.3 -> 46.8
      and 37.5 -> 40.8 tok/s, Llama-1B Q4_K_M q8 38.4 -> 40.5, the 135M Q8_0 model +2-3%; its
      F16 / BF16 kernels keep none (:func:`prefetch_half_of`). Hints 512-2048 bytes ahead of
      one Q4_K ``q8`` GEMV were within noise there.
    - Zen 5 (family 26 model 2, 2026-12-07): Llama-1B Q4_K_M q8 52.8 -> 59.4, exact 48.7 ->
      57.5, Q8_0 39.6 -> 50.0 tok/s; F16 level (21.8 / 21.7); 2 and 8 KiB ahead 57.5 and
      58.9 against 4 KiB's 59.3 (q8)."""
    return INTEL_PREFETCH_BYTES if _intel(cpu) or _zen4(cpu) or _zen5(cpu) else 0


def prefetch_half_of(cpu: str) -> bool:
    """``LoweringOptions.prefetch_half`` for llvm-cpu ``cpu``: False on AMD Zen 4, where the
    hints slowed the F16 decode (Qwen3.5-0.8B F16, 5 interleaved rounds: 21.2 tok/s without,
    19.5 with; its 2 bytes a weight stream at this VM's bandwidth either way), True elsewhere
    (on the Intel Xeon the F16 kernel gained 1.5x from them)."""
    return not _zen4(cpu)


ZEN4_BATCHED_Q8_GEMV_K = 1536
"""``LoweringOptions.batched_q8_gemv_k`` on AMD Zen 4 (:func:`batched_q8_gemv_k_of`): there a
batched decode step of 8 rows in the ``q8`` mode ran 15-20% faster with the 135M model's GEMVs
(``K`` 576 and 1536) in the batched q8 GEMV's passes of 4 rows than in the integer GEMM
(``benchmarks/batch_step.py --batch 8 --activation-quant q8``, medians of 40 steps, 16.2 -
16.9 ms against 19.2 - 20.3), level with Qwen3.5-0.8B's (``K = 1024``: 92 - 93 against 89.5 -
92 ms), and 10% slower with the 1B model's ``K = 2048`` (123 - 124 against 111 - 113 ms):
benchmarks/README.md, "Batched steps of 8 rows on Zen 4"."""


ZEN5_BATCHED_Q8_GEMV_K = 2048
"""``LoweringOptions.batched_q8_gemv_k`` on AMD Zen 5 (:func:`batched_q8_gemv_k_of`): there the
batched q8 GEMV in passes of 4 rows was the faster 8-row step at every ``K`` it could take
(AMD EPYC family 26 model 2, 2026-12-07, ``benchmarks/batch_step.py --batch 8 --busy 8
--activation-quant q8 --prompt 40``, the forms alternated, step medians): 135M Q8_0 (``K``
576, 1536) 18.2 / 16.5 ms in the integer GEMM, 12.0 / 12.6 in the GEMV; 1B Q8_0 (``K``
2048 in the GEMV, 5632 in the GEMM either way: 8 rows of it are past the GEMV's stack,
``M K <= 16384``) 88.6 / 82.9 ms, 72.5 / 76.0 with the GEMV. Unlike Zen 4, where the 1B
model's ``K = 2048`` was 10% slower in the GEMV."""


def batched_q8_gemv_k_of(cpu: str) -> int:
    """``LoweringOptions.batched_q8_gemv_k`` for llvm-cpu ``cpu``: :data:`ZEN4_BATCHED_Q8_GEMV_K`
    on AMD Zen 4, :data:`ZEN5_BATCHED_Q8_GEMV_K` on Zen 5, 0 elsewhere (on the Intel Xeon
    the integer GEMM was the faster 8-row step of the 135M model, benchmarks/README.md,
    "The batched q8 GEMV")."""
    if _zen5(cpu):
        return ZEN5_BATCHED_Q8_GEMV_K
    return ZEN4_BATCHED_Q8_GEMV_K if _zen4(cpu) else 0


WIDE_PREFILL_COLUMNS = 32
"""``LoweringOptions.prefill_columns`` on an Intel CPU and on AMD Zen 5 (both with AVX-512;
:func:`prefill_columns_of`). The exact prefill GEMMs took less time in column blocks of 32
than of 16 (benchmarks/README.md, "A wider prefill tile on the Intel Xeon" and "Prefetch
hints, the wide prefill tile and f32 GEMMs on Zen 5"):

- on the Xeon of family 6 model 207, 14-19% less at 128 rows (F16 / Q8_0 / Q4_K / Q6_K,
  2048 x 5632 and 5632 x 2048);
- on Zen 5 (AMD EPYC family 26 model 2, 2026-12-07, ``benchmarks/llama.py --modes
  exact/16,exact/32``), whole prefills of 128 and 512 tokens 3-15% faster: 1B F16 158 -> 181
  and 170 -> 179 tok/s, Q8_0 171 -> 183 and 174 -> 186, Q4_K_M 177 -> 187 and 175 -> 191;
  the 135M rows 6-11%. With 32 columns f32 prefill matmuls on parameter weights take rlx's
  column-block GEMM instead of IREE's ``mmt4d`` (:mod:`.mir_to_linalg.quant.f32_matmul`):
  alone, one GEMM at a time, ``mmt4d`` was level or ahead on Zen 5 (``benchmarks/f32_gemm.py``),
  but in the blocks suite (``python -m benchmarks --prefill-columns 32``, 9 rounds) the SwiGLU
  FFN took 8.70 -> 6.64 ms and the LLaMA prefill block 9.22 -> 8.04 ms, as on Intel."""


def prefill_columns_of(cpu: str) -> int:
    """``LoweringOptions.prefill_columns`` for llvm-cpu ``cpu``: :data:`WIDE_PREFILL_COLUMNS`
    on an Intel CPU and on AMD Zen 5, 16 elsewhere: the 16 x 16 tile was the one measured on
    AMD Zen 3 / 4 (Zen 4's AVX-512 runs on 256-bit units; the wider tile is unmeasured there:
    ``TargetConfig(prefill_columns=32)`` tries it). Used on 512-bit vectors only."""
    return WIDE_PREFILL_COLUMNS if _intel(cpu) or _zen5(cpu) else 16


def int_dot_of(cpu: str, extra_flags: tuple[str, ...]) -> str:
    """The block dot product the ``q8`` GEMV kernels use on llvm-cpu ``cpu``
    (``LoweringOptions.int_dot``): ``"vnni"`` where the CPU has ``vpdpbusd`` (AVX-512 VNNI or
    AVX-VNNI), ``"avx2"`` (``vpmaddubsw`` + ``vpmaddwd``) where it has AVX2, else
    ``"portable"``. From ``/proc/cpuinfo`` for ``host``, from the LLVM CPU name otherwise;
    ``--iree-llvmcpu-target-cpu-features=+avx512vnni`` (``+avxvnni``, ``+avx2``) in the extra
    flags adds to it. An intrinsic the target lacks would fail LLVM's instruction selection,
    so an unknown CPU gets the portable form."""
    features = _named_features(extra_flags)
    if cpu == "host":
        host = _host_flags()
        features |= {"avx512vnni" for f in host if f == "avx512_vnni" and "avx512vl" in host}
        features |= {f.replace("avx_vnni", "avxvnni") for f in host & {"avx_vnni", "avx2"}}
    elif cpu in VNNI_CPUS:
        features.add("avxvnni")
    elif cpu in AVX2_CPUS:
        features.add("avx2")
    if features & {"avx512vnni", "avxvnni"}:
        return "vnni"
    return "avx2" if "avx2" in features else "portable"


__all__ = ["AVX2_CPUS", "AVX512_CPUS", "CPU_FEATURES_FLAG", "VNNI_CPUS", "WIDE_PREFILL_COLUMNS",
           "int_dot_of", "prefetch_bytes_of", "prefill_columns_of", "vector_bits_of"]
