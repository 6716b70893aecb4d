"""Compile a HIR module, run it on IREE, and compare with the numpy reference."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import iree.runtime as rt
import numpy as np
import pytest

import rlx
from rlx import compiler, reference, runtime
from rlx.ir.types import DType, TensorInfo
from rlx.reference.tolerance import assert_close

TARGETS = ["llvm-cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
DEVICE = {"llvm-cpu": "local-task", "vulkan": "vulkan"}


VULKAN_REQUIRED_ENV = "RLX_REQUIRE_VULKAN"
"""Set (to anything but "" or "0") by ``make test`` and so by CI: a Vulkan test without a
Vulkan device fails instead of skipping."""


@functools.cache
def vulkan_error() -> str | None:
    """Why IREE cannot create a Vulkan device in this process, or None when it can."""
    icd = os.environ.get("VK_DRIVER_FILES")
    drivers = f"VK_DRIVER_FILES={icd}" if icd else "the Vulkan loader's default drivers"
    try:
        rt.get_driver("vulkan").create_default_device()
    except (RuntimeError, ValueError) as e:
        return f"no Vulkan device through {drivers}: {e}"
    return None


def require_vulkan() -> None:
    """The one rule for Vulkan tests; tests/conftest.py applies it to every test marked
    ``vulkan`` before it runs. Without a device: a failure where ``RLX_REQUIRE_VULKAN`` is set,
    else a skip that says how to get a device or leave the Vulkan tests out."""
    error = vulkan_error()
    if error is None:
        return
    if os.environ.get(VULKAN_REQUIRED_ENV, "") not in ("", "0"):
        pytest.fail(f"{error} ({VULKAN_REQUIRED_ENV} is set: the Vulkan tests are required)",
                    pytrace=False)
    pytest.skip(f"{error} (Mesa lavapipe runs them on the CPU: apt-get install "
                "mesa-vulkan-drivers; pytest -m 'not vulkan' leaves them out)")


def require(target: str) -> None:
    """``require_vulkan`` for the target ``vulkan``; nothing for the others."""
    if target == "vulkan":
        require_vulkan()


def random_array(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator,
                 scale: float = 1.0) -> np.ndarray:
    if dtype == DType.I1:
        return rng.random(shape) < 0.7
    if dtype.is_int:
        return rng.integers(0, 8, size=shape).astype(dtype.numpy)
    data = (rng.standard_normal(shape) * scale).astype(np.float32)
    return reference.round_to(data, dtype) if dtype == DType.BF16 else data.astype(dtype.numpy)


def concrete(t: TensorInfo, dyn: int) -> tuple[int, ...]:
    return tuple(dyn if d is None else d for d in t.shape)


def make_inputs(h: rlx.HirModule, rng: np.random.Generator, dyn: int = 5,
                given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    given = dict(given or {})
    out = {}
    for name, v in zip(h.input_names, h.inputs, strict=True):
        out[name] = given.pop(name) if name in given else random_array(
            concrete(v.type, dyn), v.dtype, rng)
    assert not given, f"unknown inputs {sorted(given)}"
    return out


def make_params(h: rlx.HirModule, rng: np.random.Generator,
                given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    given = dict(given or {})
    out = {}
    for op in h.ops:
        if not op.name.endswith(".param"):
            continue
        from iree.compiler import ir

        name = ir.StringAttr(op.attributes["name"]).value
        t = TensorInfo.from_mlir(op.results[0].type)
        if name in given:
            out[name] = given[name]
        elif name not in out:
            fan_in = t.shape[0] if t.rank == 2 else 1
            out[name] = random_array(t.shape, t.dtype, rng, 1.0 / np.sqrt(fan_in))
    return out


def check_module(h: rlx.HirModule, target: str, *, seed: int = 0,
                 dyn: int | Sequence[int] = 5,
                 inputs: Mapping[str, np.ndarray] | None = None,
                 params: Mapping[str, np.ndarray] | None = None,
                 **options: object) -> list[np.ndarray]:
    """Compile ``h`` for ``target``, run it, compare every output with the reference;
    ``dyn``: the size of every dynamic dim, or several (one compile, a run at each); returns
    the last run's outputs."""
    sizes = [dyn] if isinstance(dyn, int) else list(dyn)
    rng = np.random.default_rng(seed)
    feeds = make_inputs(h, rng, sizes[0], inputs)
    weights = make_params(h, rng, params)
    vmfb = compiler.compile(h, target, **options)
    prog = runtime.load(vmfb, DEVICE[target], weights)
    for n, size in enumerate(sizes):
        if n:
            feeds = make_inputs(h, np.random.default_rng(seed), size, inputs)
        got = prog.main(**feeds)
        got = list(got) if isinstance(got, tuple) else [got]
        want = reference.evaluate(h, feeds, weights)
        at = f" (dynamic dims {size})" if len(sizes) > 1 else ""
        for i, (g, w, out) in enumerate(zip(got, want, h.outputs, strict=True)):
            assert_close(g, w, out.dtype, f"output #{i} ({out.label or out.op.name}){at}")
    return got


if __name__ == "__main__":
    # `make vulkan-check`, CI's first step: exit 1 naming the ICD file when IREE cannot
    # create a Vulkan device, before any test runs.
    problem = vulkan_error()
    if problem is not None:
        raise SystemExit(f"error: the Vulkan tests are required, and there is {problem}")
    print(f"Vulkan device created through VK_DRIVER_FILES={os.environ.get('VK_DRIVER_FILES')}")
