"""The README's examples run as written and print what it shows.

"From Python": its Python blocks run in order in one scope (rlx.runtime, then the same vmfb
through plain ``iree.runtime``), each printing exactly the text block after it, and its shell
block (``iree-run-module`` / ``iree-benchmark-module`` on the files they wrote) runs with the
output shown. "From the command line": every command runs, ending with ``rlx-run`` and
``iree-run-module`` on the tiny LLaMA (one layer instead of two, to keep CI short), and the
two agree."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"```(python|sh|text)\n(.*?)```", re.S)


def section(title: str) -> list[tuple[str, str]]:
    """(kind, text) of the fenced blocks under ``## title``, in order."""
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return BLOCK.findall(text[start:end if end >= 0 else None])


def commands(block: str) -> list[list[str]]:
    """The commands of a shell block (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def run(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run a README command: rlx tools as ``python -m``, IREE's tools from the venv."""
    tool, args = words[0], words[1:]
    if tool.startswith("rlx-"):
        module = {"rlx-opt": "opt", "rlx-compile": "compile", "rlx-run": "run"}[tool]
        argv = [sys.executable, "-m", f"rlx.tools.{module}", *args]
    elif tool == "python":
        argv = [sys.executable, *args]
    else:
        argv = [str(BIN / tool), *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd)


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = section("From Python")
    assert [kind for kind, _ in blocks][:7] == ["python", "python", "text", "python", "text",
                                               "sh", "text"]
    scope: dict[str, object] = {}
    for i, (kind, text) in enumerate(blocks):
        if kind != "python":
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(text, f"{README}:block{i}", "exec"), scope)
        following = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
        if following[0] == "text":
            assert printed.getvalue() == following[1], f"block {i} printed other text"
    out = scope["out"]
    assert isinstance(out, np.ndarray)
    assert out.shape == (3, 64)
    shown = blocks[6][1]
    for words in commands(blocks[5][1]):
        proc = run(words, tmp_path)
        assert proc.returncode == 0, (words, proc.stderr)
        if words[0] == "iree-run-module":
            assert proc.stdout.splitlines()[:2] == shown.splitlines()[:2]
            row = re.search(r"3x64xf32=\[([-\d.e ]+)\.\.\.\]", proc.stdout)
            assert row is not None, proc.stdout
            first = [float(v) for v in row.group(1).split()]
            np.testing.assert_allclose(first, out[0, :4], rtol=1e-5)
            assert f"3x64xf32=[{row.group(1)}..." in shown, "README shows another result"
        else:
            assert "BM_main/process_time/real_time" in proc.stdout
    # the weightless example the other two ways: rlx.runtime and iree-run-module
    x = np.log(np.arange(1, 9, dtype=np.float32)).reshape(2, 4)
    want = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(rlx.runtime.load("softmax.vmfb").main(x), want, rtol=1e-6)
    np.save("s.npy", x)
    proc = run(["iree-run-module", "--module=softmax.vmfb", "--device=local-task",
                "--input=@s.npy", "--output=@so.npy"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load("so.npy"), want, rtol=1e-6)


def test_readme_command_line_example_runs(tmp_path: Path) -> None:
    blocks = section("From the command line")
    assert blocks[0][0] == "sh"
    results = {}
    for words in commands(blocks[0][1]):
        if words[0] == "python":
            words = [words[0], str(ROOT / words[1]), "--layers", "1", *words[2:]]
        proc = run(words, tmp_path)
        assert proc.returncode == 0, (words, proc.stderr)
        results[words[0]] = proc.stdout
    # rlx-run prints each output's shape and values, iree-run-module its own form: the
    # greedy token (output 1) is the same, and so through plain iree.runtime
    token = re.search(r"output 1: int32\[1, 1\]\n\[\[(\d+)\]\]", results["rlx-run"])
    assert token is not None, results["rlx-run"]
    assert f"1x1xi32=[{token.group(1)}]" in results["iree-run-module"]
    import iree.runtime as ireert

    config = ireert.Config("local-task")
    index = ireert.ParameterIndex()
    index.load(str(tmp_path / "tiny.irpa"))
    ctx = ireert.SystemContext(config=config, vm_modules=[
        ireert.create_io_parameters_module(config.vm_instance,
                                           index.create_provider(scope="model")),
        ireert.VmModule.mmap(config.vm_instance, str(tmp_path / "tiny.vmfb"))])
    feeds = [np.load(tmp_path / f"{n}.npy") for n in ("ids", "cos", "sin", "last")]
    out = ctx.modules.llama.prefill(*feeds)
    assert int(out[1].to_host()[0, 0]) == int(token.group(1))
