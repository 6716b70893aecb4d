"""rlx: block-level ML models as MLIR (``rlx_hir`` / ``rlx_mir``), compiled with IREE.

Importing ``rlx`` imports ``rlx.lowering``, which installs what ``HirModule.lower_to_mir``
runs (the dialects never import the lowering themselves).
"""

from rlx import gguf as gguf
from rlx import lowering as lowering
from rlx import models as models
from rlx import runtime as runtime
from rlx import tokenizer as tokenizer
from rlx.compiler import compile as compile
from rlx.debug import check_numerics as check_numerics
from rlx.dialects.builder import HirModule as HirModule
from rlx.dialects.builder import HirValue as HirValue
from rlx.dialects.builder import MirModule as MirModule
from rlx.dialects.builder import load_hir as load_hir
from rlx.generate import generate as generate
from rlx.ir.diagnostics import BuildError as BuildError
from rlx.ir.diagnostics import CompileError as CompileError
from rlx.ir.diagnostics import LoweringError as LoweringError
from rlx.ir.diagnostics import ModelImportError as ModelImportError
from rlx.ir.diagnostics import ParseError as ParseError
from rlx.ir.diagnostics import RlxError as RlxError
from rlx.ir.diagnostics import RunError as RunError
from rlx.ir.diagnostics import VerifyError as VerifyError
from rlx.ir.diagnostics import WeightError as WeightError
from rlx.ir.types import DType as DType
from rlx.ir.types import TensorInfo as TensorInfo

__version__ = "0.1.0"
