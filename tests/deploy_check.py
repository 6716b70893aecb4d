"""Run by tests/test_deploy.py with the Python of a fresh venv that has ``iree-base-runtime``,
numpy and rlx (``--no-deps``) alone: loads a vmfb the full install compiled, with its weights
from each kind of source, calls it every way, and checks the results and that nothing
imported the compiler. ``python deploy_check.py DIR`` (DIR: what the test wrote); prints
``deploy check passed`` or raises.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(work: Path) -> None:
    try:
        import iree.compiler  # noqa: F401
    except ImportError:
        pass
    else:
        raise AssertionError("iree.compiler is importable: this venv is not runtime-only")

    import rlx
    import rlx.gguf
    import rlx.runtime

    assert not rlx.HAS_COMPILER
    assert "iree.compiler" not in sys.modules
    assert "site-packages" in Path(rlx.__file__).parts, f"rlx from {rlx.__file__}, not the venv"
    message = ""
    try:
        rlx.compile  # noqa: B018
    except ImportError as e:
        message = str(e)
    assert "needs the compiler" in message, f"rlx.compile in a runtime-only install: {message}"

    vmfb = work / "module.vmfb"
    x = np.load(work / "x.npy")
    want = np.load(work / "want.npy")
    gguf = rlx.gguf.load(work / "weights.gguf")
    npz = np.load(work / "weights.npz")
    sources = {
        "numpy dict": {k: npz[k] for k in npz.files},
        ".irpa": work / "weights.irpa",
        ".safetensors": work / "weights.safetensors",
        ".gguf path": work / "weights.gguf",
        "rlx.gguf params_for": gguf.params_for(vmfb),
    }
    for what, params in sources.items():
        program = rlx.runtime.load(vmfb, "local-task", params)
        calls = {
            "call": program.main(x),
            "by name": program.main(x=x),
            "on_device": program.main.on_device(x).numpy(),
            "submit": program.main.submit(program.upload(x)).numpy(),
        }
        for how, got in calls.items():
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"weights from {what}, {how}")
    assert "iree.compiler" not in sys.modules
    print("deploy check passed")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
