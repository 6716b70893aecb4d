"""Shared pytest setup: the repository root on sys.path for the test helpers, the one
rule for tests marked ``vulkan`` (harness.require_vulkan: a failure without a Vulkan device
where RLX_REQUIRE_VULKAN is set, as ``make test`` and CI set it), and a compile cache of
the session's own (``RLX_CACHE_DIR`` in a temporary folder, inherited by the CLI
subprocesses): nothing a test compiles lands in the user's cache, nothing there feeds a
test."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "numerics"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT))

_CACHE = tempfile.TemporaryDirectory(prefix="rlx-test-cache-")
os.environ["RLX_CACHE_DIR"] = _CACHE.name


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("vulkan") is None:
        return
    from harness import require_vulkan

    require_vulkan()
