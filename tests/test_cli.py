"""The command-line tools: canonical output, one error line, exit code 1, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hir_zoo import build

ROOT = Path(__file__).resolve().parent.parent


def run_tool(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"rlx.tools.{tool}", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT)


def test_opt_prints_canonical_text(tmp_path: Path) -> None:
    text = str(build("swiglu"))
    src = tmp_path / "ffn.hir"
    src.write_text(text)
    proc = run_tool("opt", str(src))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == text
    out = tmp_path / "out.hir"
    assert run_tool("opt", str(src), "-o", str(out)).returncode == 0
    assert out.read_text() == text
    assert run_tool("opt", "-", stdin=text).stdout == text


def test_opt_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    src = tmp_path / "bad.hir"
    src.write_text(str(build("swiglu")).replace("tensor<32x16xf32>) -> tensor<?x16xf32>",
                                                "tensor<32x16xf32>) -> tensor<?x15xf32>"))
    out = tmp_path / "out.hir"
    proc = run_tool("opt", str(src), "-o", str(out))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr
    assert not out.exists(), "no partial output on error"


def test_opt_missing_file() -> None:
    proc = run_tool("opt", "no/such/file.hir")
    assert proc.returncode == 1
    assert proc.stderr.startswith("no/such/file.hir: error: cannot read file")


def test_opt_mir_stage_rejects_hir_ops(tmp_path: Path) -> None:
    src = tmp_path / "m.hir"
    src.write_text(str(build("norms")))
    proc = run_tool("opt", "--stage=mir", str(src))
    assert proc.returncode == 1
    assert "expected an op of rlx_mir.* or func.return" in proc.stderr


def test_shipped_examples_verify() -> None:
    examples = sorted((ROOT / "examples").glob("*.hir"))
    assert examples
    for path in examples:
        proc = run_tool("opt", str(path))
        assert proc.returncode == 0, (path, proc.stderr)


def test_tiny_llama_example_runs() -> None:
    """The README's main job, smaller: build, compile for llvm-cpu, generate, check."""
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "tiny_llama.py"),
                           "--layers", "1"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "generated ids:" in proc.stdout
    assert "max |rlx - numpy reference|" in proc.stdout
