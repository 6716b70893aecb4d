# rlx developer commands. `make test` is what CI runs (.ci/run); `make demo` is the main job.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The Vulkan tests run on Mesa lavapipe (the vulkan target defaults to llvmpipe code) and
# `make test` requires them: without a Vulkan device it fails, it does not skip them. Without
# one, `$(BIN)/python -m pytest -m "not vulkan"` runs the other tests.
VK_DRIVER_FILES ?= $(firstword $(wildcard /usr/share/vulkan/icd.d/lvp_icd.*.json))
export VK_DRIVER_FILES

# pytest workers (pytest-xdist; 0: the tests run in the pytest process, one at a time).
# IREE's compiler, its local-task runtime and lavapipe each use every core, so on CI's 2
# cores two workers only fight over them: the whole suite took 1299 s in one process
# against 1341-1608 s with -n 2 on the same 2-vCPU machine (2026-12-02; every test 2.8x
# slower beside another). On a larger machine, PYTEST_WORKERS=N (--dist loadfile keeps a
# file's module-scoped compiled fixtures in one worker).
PYTEST_WORKERS ?= 0

.PHONY: help venv lint lit vulkan-check pytest test demo clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torchvision (for tests/importers/test_onnx_torchvision.py) goes into a directory of its own,
# not site-packages: PyPI's wheel is the CUDA build, which does not import beside the CPU
# torch, and transformers imports any installed torchvision (see torchvision_export.py).
TORCHVISION_SITE := $(VENV)/torchvision-site
TORCHVISION := $(TORCHVISION_SITE)/torchvision-0.28.0.dist-info

$(TORCHVISION): $(BIN)/python
	$(BIN)/pip install -q --no-deps --upgrade --target $(TORCHVISION_SITE) \
	  torchvision==0.28.0 pillow==13.0.0

venv: $(BIN)/python $(TORCHVISION)  ## create .venv and install rlx with its test extras
	$(BIN)/pip install -q -e '.[test]'

lint: venv  ## ruff
	$(BIN)/ruff check python tests tools lit_tests benchmarks examples

lit: venv  ## FileCheck tests of the tools and the IRDL dialect files
	$(BIN)/lit -q lit_tests

vulkan-check: venv  ## fail unless IREE creates a Vulkan device through VK_DRIVER_FILES
	$(BIN)/python tests/numerics/harness.py

pytest: vulkan-check  ## numerics (llvm-cpu and Vulkan), API, CLI and error tests
	RLX_REQUIRE_VULKAN=1 $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile \
	  --durations=40

test: lint lit pytest  ## everything CI runs

demo: venv  ## the main job: build, compile (llvm-cpu) and run the tiny LLaMA example
	$(BIN)/python examples/tiny_llama.py

clean:  ## remove build and test outputs
	rm -rf _lit_out .pytest_cache build python/*.egg-info
