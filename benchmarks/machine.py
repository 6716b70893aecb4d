"""What every benchmark result records about the machine it ran on."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name with its family / model numbers and vector extensions
    (/proc/cpuinfo), else what ``platform`` knows: results from different CPUs of this
    project's machines go in different tables, and a VM may name only the vendor's line
    ("AMD EPYC" for a Zen 3 and a Zen 5 alike)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
            if not line.strip():                 # the first processor's block is enough
                break
    except OSError:
        pass
    name = info.get("model name")
    if not name:
        return platform.processor() or platform.machine()
    flags = set(info.get("flags", "").split())
    isa = [f for f in ("avx512f", "avx2") if f in flags][:1]
    isa += [f for f in ("avx512_vnni", "avx_vnni") if f in flags][:1]
    extra = ", ".join([f"family {info.get('cpu family', '?')} model {info.get('model', '?')}",
                       *isa])
    return f"{name} ({extra})"


def last_level_cache_bytes() -> int:
    """The largest CPU cache the kernel reports (sysfs; 0 if none): a benchmark that means
    to stream its data from DRAM sizes it past this (a 2-vCPU Intel Xeon VM of this project
    reports a 300 MiB L3, a Zen 4 one 32 MiB)."""
    sizes = [0]
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes)
