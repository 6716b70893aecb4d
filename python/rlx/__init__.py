"""rlx: block-level ML models as MLIR (``rlx_hir`` / ``rlx_mir``), compiled with IREE.

Importing ``rlx`` imports ``rlx.lowering``, which installs what ``HirModule.lower_to_mir``
runs (the dialects never import the lowering themselves).

Without the compiler (an install with ``iree-base-runtime`` and numpy alone, to deploy a
compiled model) ``rlx`` imports only what runs a vmfb: :mod:`rlx.runtime`, :mod:`rlx.gguf`,
:mod:`rlx.tokenizer` (which imports ``tokenizers`` / ``jinja2`` only when used),
the errors and :class:`DType`; the names that build or compile models raise an ImportError
that says so. Python runs this file before any submodule (``import rlx.runtime`` too), so
the compiler-side imports are made only when ``iree.compiler`` is installed.
"""

from importlib.util import find_spec
from typing import Any

from rlx import gguf as gguf
from rlx import runtime as runtime
from rlx import tokenizer as tokenizer
from rlx.ir.diagnostics import BuildError as BuildError
from rlx.ir.diagnostics import CompileError as CompileError
from rlx.ir.diagnostics import LoweringError as LoweringError
from rlx.ir.diagnostics import ModelImportError as ModelImportError
from rlx.ir.diagnostics import ParseError as ParseError
from rlx.ir.diagnostics import RlxError as RlxError
from rlx.ir.diagnostics import RunError as RunError
from rlx.ir.diagnostics import VerifyError as VerifyError
from rlx.ir.diagnostics import WeightError as WeightError
from rlx.ir.dtypes import DType as DType


def _has_compiler() -> bool:
    try:
        return find_spec("iree.compiler") is not None
    except ModuleNotFoundError:  # no ``iree`` package at all
        return False


HAS_COMPILER = _has_compiler()
"""Whether ``iree-base-compiler`` is installed (else rlx is the runtime alone)."""
COMPILER_NAMES = ("lowering", "models", "compile", "check_numerics", "HirModule", "HirValue",
                  "MirModule", "load_hir", "generate", "TensorInfo")
"""The names of the full install, absent from a runtime-only one."""

if HAS_COMPILER:
    from rlx import lowering as lowering
    from rlx import models as models
    from rlx.compiler import compile as compile
    from rlx.debug import check_numerics as check_numerics
    from rlx.dialects.builder import HirModule as HirModule
    from rlx.dialects.builder import HirValue as HirValue
    from rlx.dialects.builder import MirModule as MirModule
    from rlx.dialects.builder import load_hir as load_hir
    from rlx.generate import generate as generate
    from rlx.ir.types import TensorInfo as TensorInfo


def __getattr__(name: str) -> Any:
    """A compiler-side name in a runtime-only install: say what is missing."""
    if name in COMPILER_NAMES:
        raise ImportError(f"rlx.{name} needs the compiler, and this install has the IREE "
                          "runtime alone (pip install iree-base-compiler==3.13.0; a compiled "
                          "vmfb runs without it: rlx.runtime.load)")
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")


__version__ = "0.1.0"
