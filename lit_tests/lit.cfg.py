"""lit configuration: FileCheck tests of rlx-opt / rlx-compile and the IRDL dialect files."""

import os
import shutil
import sys

import lit.formats
from iree.compiler.tools.binaries import find_tool

config.name = "rlx"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir", ".hir", ".test"]  # noqa: F821
config.excludes = ["lit.cfg.py", "Inputs"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
root = os.path.dirname(config.test_source_root)  # noqa: F821
config.test_exec_root = os.path.join(root, "_lit_out")  # noqa: F821

bindir = os.path.dirname(sys.executable)
filecheck = shutil.which("filecheck") or os.path.join(bindir, "filecheck")
subs = [
    ("%rlx-opt", f"{sys.executable} -m rlx.tools.opt"),
    ("%rlx-compile", f"{sys.executable} -m rlx.tools.compile"),
    ("%rlx-run", f"{sys.executable} -m rlx.tools.run"),
    ("%rlx-import-onnx", f"{sys.executable} -m rlx.tools.import_onnx"),
    ("%python", sys.executable),
    ("%iree-opt", find_tool("iree-opt")),
    ("%iree-compile", find_tool("iree-compile")),
    ("%hir_irdl", os.path.join(root, "dialects", "rlx_hir.irdl.mlir")),
    ("%mir_irdl", os.path.join(root, "dialects", "rlx_mir.irdl.mlir")),
    ("%examples", os.path.join(root, "examples")),
    ("FileCheck", filecheck),
]
config.substitutions.extend(subs)  # noqa: F821
config.environment["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")  # noqa: F821
for var in ("HOME", "PYTHONPATH", "VK_DRIVER_FILES", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
