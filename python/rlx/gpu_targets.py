"""GPU target names: the ones IREE 3.13 accepts per target, the Hopper / Blackwell CUDA
descriptions rlx builds from IREE's sm_89 one, and the check that names a GPU IREE does not
know before a model is compiled for it (:func:`rlx.compiler.compile`)."""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from iree.compiler.tools.binaries import find_tool

from rlx.ir.diagnostics import CompileError

HOPPER_AND_LATER = {"sm_90": "+ptx84", "sm_90a": "+ptx84", "sm_100": "+ptx86",
                    "sm_100a": "+ptx86", "sm_103": "+ptx86", "sm_103a": "+ptx86"}


@functools.cache
def _cuda_sm89_target() -> str:
    """The ``#hal.device.target`` IREE 3.13 builds for sm_89 (its newest CUDA entry)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.mlir"
        src.write_text("func.func @f(%a: tensor<1xf32>) -> tensor<1xf32> {\n"
                       "  return %a : tensor<1xf32>\n}\n")
        proc = subprocess.run([find_tool("iree-compile"), str(src),
                               "--iree-hal-target-device=cuda", "--iree-cuda-target=sm_89",
                               "--compile-to=flow"], capture_output=True, text=True)
    m = re.search(r"#hal\.device\.target<.*?> : !hal\.device", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise CompileError("error: could not read IREE's sm_89 CUDA target description "
                           f"(needed for Hopper/Blackwell): {proc.stderr.strip()}")
    return m.group(0)


def hopper_device_target(arch: str) -> str:
    """IREE 3.13 has no sm_90 / sm_100 entry ("missing GPU target"): reuse the sm_89 target
    description with the arch and PTX version replaced (iree-toolchain.md, section 2)."""
    text = _cuda_sm89_target()
    text = text.replace('arch = "sm_89"', f'arch = "{arch}"')
    return re.sub(r'features = "\+ptx\d+"', f'features = "{HOPPER_AND_LATER[arch]}"', text)


_NVIDIA = ("sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87",
           "sm_89", "sm_120", "pascal", "volta", "turing", "ampere", "ada", "a100", "rtx3070",
           "rtx3070ti", "rtx3080", "rtx3080ti", "rtx3090", "rtx3090ti", "rtx4080", "rtx4090")
_AMD = ("gfx908", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1103", "gfx1150",
        "gfx1151", "gfx1200", "gfx1201", "gfx1250", "cdna1", "cdna2", "mi100", "mi210", "mi250",
        "mi250x", "mi300a", "mi300x", "mi308x", "mi325x", "mi350x", "mi355x", "rx7700xt",
        "rx7800xt", "rx7900xt", "rx7900xtx", "rx9060xt", "rx9070", "rx9070xt", "r9700", "v710",
        "w7700", "w7800", "w7900", "phoenix", "strix-point", "strix-halo")
_VULKAN_ONLY = ("llvmpipe", "cdna3", "cdna4", "rdna1", "rdna2", "rdna3", "rdna4", "gfx1010",
                "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031", "gfx1032", "gfx1033",
                "gfx1034", "gfx1035", "gfx1036", "gfx1102", "valhall", "valhall1", "valhall2",
                "valhall3", "valhall4", "mali-g57", "mali-g77", "mali-g78", "mali-g310",
                "mali-g510", "mali-g615", "mali-g710", "mali-g715", "adreno",
                "adreno-NNN (e.g. adreno-750)", "vp_android_baseline_2022")
KNOWN_GPU_TARGETS = {"cuda": _NVIDIA + tuple(HOPPER_AND_LATER), "rocm": _AMD,
                     "vulkan": _VULKAN_ONLY + _NVIDIA + _AMD}
"""GPU names IREE 3.13 accepts per target (each tried with iree-compile; for cuda with
rlx's Hopper / Blackwell descriptions). A name not listed is tried once on a trivial module
(IREE also takes e.g. any ``rtx40*``), so the list is only where the error message and the
check come from, never a limit."""
GPU_OPTIONS = {"cuda": ("cuda_arch", "--cuda-arch"), "rocm": ("rocm_arch", "--rocm-arch"),
               "vulkan": ("vulkan_target", "--vulkan-target")}


@functools.cache
def _iree_accepts(target: str, flags: tuple[str, ...]) -> bool:
    """Whether iree-compile builds a trivial module with ``flags`` (a GPU name IREE does
    not know fails there in a second, where a model fails per op, or crashes on Vulkan)."""
    with tempfile.TemporaryDirectory(prefix="rlx-") as tmp:
        src = Path(tmp) / "probe.mlir"
        src.write_text("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                       "  %b = arith.addf %a, %a : tensor<4xf32>\n"
                       "  return %b : tensor<4xf32>\n}\n")
        proc = subprocess.run([find_tool("iree-compile"), str(src), *flags, "-o",
                               str(Path(tmp) / "probe.vmfb")], capture_output=True, text=True)
    return proc.returncode == 0


def check_gpu_target(config: Any) -> None:
    """Fail on a GPU name IREE does not know, naming the option and listing the names it
    knows (IREE itself reports it as "missing GPU target" on every op, or crashes)."""
    if config.target not in GPU_OPTIONS:
        return
    field_name, flag = GPU_OPTIONS[config.target]
    name = getattr(config, field_name)
    known = KNOWN_GPU_TARGETS[config.target]
    if name in known or _iree_accepts(config.target, tuple(config.flags())):
        return
    hopper = (f"; rlx adds {', '.join(HOPPER_AND_LATER)} from IREE's sm_89 description"
              if config.target == "cuda" else "")
    raise CompileError(f"error: {flag}={name} ({field_name}={name!r}): IREE has no "
                       f"{config.target} target of that name; it knows "
                       f"{', '.join(n for n in known if n not in HOPPER_AND_LATER)}{hopper}")


__all__ = ["GPU_OPTIONS", "HOPPER_AND_LATER", "KNOWN_GPU_TARGETS", "check_gpu_target",
           "hopper_device_target"]
