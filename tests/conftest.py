"""Shared pytest setup: the repository root on sys.path for the test helpers, the one
rule for tests marked ``vulkan`` (harness.require_vulkan: a failure without a Vulkan device
where RLX_REQUIRE_VULKAN is set, as ``make test`` and CI set it), and a compile cache of
the run's own (``RLX_CACHE_DIR`` in a temporary folder, shared by the xdist workers and
inherited by the CLI subprocesses): nothing a test compiles lands in the user's cache,
nothing there feeds a test. Weights are not encoded ahead of time unless a test asks
(``RLX_ENCODE_PARAMETERS=0``, below)."""

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

# One cache for the whole run: the pytest process that starts first (the xdist controller,
# which loads this file before it spawns its workers) makes the folder and names it in the
# environment the workers and their CLI subprocesses inherit; the folder goes when that
# process exits. A module two test files compile (the tiny LLaMA of the examples, the
# README and the CLI tests) is then compiled once per run, not once per worker.
_SHARED = "RLX_TEST_SESSION_CACHE"
if _SHARED not in os.environ:
    _CACHE = tempfile.TemporaryDirectory(prefix="rlx-test-cache-")
    os.environ[_SHARED] = _CACHE.name
os.environ["RLX_CACHE_DIR"] = os.environ[_SHARED]
# Models load through their initializers here: each test's model loads about once, so the
# weights' ahead-of-time encoding (rlx.encoding) would add its encoder's compile (~1 s)
# and run to nearly every test. tests/test_encoding.py turns it on and checks that the
# two loads give the same bits, and the CLI cache test checks the default.
os.environ["RLX_ENCODE_PARAMETERS"] = "0"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("vulkan") is None:
        return
    from harness import require_vulkan

    require_vulkan()


# The files whose tests take longest (summed durations of a CI run, 2026-12-01, heaviest
# first): ``make test`` runs files whole on 2 xdist workers (``--dist loadfile``), which take
# the files in collection order, and these sit at the end of it (tests/test_models*.py); one
# of them started last kept one worker busy for minutes after the other had run out of work.
# Started first, the light files fill the gaps at the end instead. Only the order changes.
HEAVIEST_FIRST = (
    "test_models_qwen35.py", "test_models_gguf.py", "test_quant.py", "test_generate.py",
    "test_fuzz_builders.py", "test_block.py", "test_models.py", "test_onnx_conformance.py",
    "test_readme.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(HEAVIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
