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
