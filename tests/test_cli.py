"""The command-line tools: canonical output, one error line, exit code 1, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hir_zoo import build
from rlx.dialects.builder import HirModule
from rlx.dialects.enums import QUANT_SCHEMES

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


TWO_TYPES = """module @dup {
  func.func @main(%x: tensor<?x64xf32> {rlx.name = "x"}) -> tensor<?x256xf32> {
    %w = "rlx_hir.param"() {name = "w"} : () -> tensor<64x256xf32>
    %y = "rlx_hir.linear"(%x, %w) {activation = "none", has_bias = false} : (tensor<?x64xf32>, tensor<64x256xf32>) -> tensor<?x256xf32>
    return %y : tensor<?x256xf32>
  }
  func.func @decode(%x: tensor<1x256xf32> {rlx.name = "x"}) -> tensor<1x64xf32> {
    %w = "rlx_hir.param"() {name = "w"} : () -> tensor<256x64xf32>
    %y = "rlx_hir.linear"(%x, %w) {activation = "none", has_bias = false} : (tensor<1x256xf32>, tensor<256x64xf32>) -> tensor<1x64xf32>
    return %y : tensor<1x64xf32>
  }
}
"""  # noqa: E501


def test_opt_refuses_a_weight_declared_with_two_types(tmp_path: Path) -> None:
    """The verifier (not only the lowering) catches one weight name with two types, here in
    two functions, naming both positions."""
    src = tmp_path / "dup.hir"
    src.write_text(TWO_TYPES)
    proc = run_tool("opt", str(src))
    assert proc.returncode == 1
    assert proc.stderr == (
        f"{src}:8:10: error: 'rlx_hir.param': weight 'w': expected tensor<64x256xf32> (its "
        f"type where it is first declared, {src}:3:10), found tensor<256x64xf32>\n")


@pytest.mark.parametrize(("target", "flag", "known"), [
    ("cuda", "--cuda-arch=sm_bogus", "sm_80"), ("rocm", "--rocm-arch=gfx_bogus", "gfx942"),
    ("vulkan", "--vulkan-target=bogus", "llvmpipe")])
def test_compile_unknown_gpu_names_the_flag(target: str, flag: str, known: str,
                                            tmp_path: Path) -> None:
    """IREE reports an unknown CUDA arch as "missing GPU target" on every op, ROCm's as an
    unknown target, and crashes on Vulkan's: rlx-compile says which flag, and what IREE
    knows, before lowering anything."""
    out = tmp_path / "m.vmfb"
    proc = run_tool("compile", str(ROOT / "examples" / "ffn.hir"), f"--target={target}", flag,
                    "-o", str(out))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {flag} ("), proc.stderr
    assert f"IREE has no {target} target of that name; it knows " in proc.stderr
    assert f" {known}," in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_run_vmfb_for_another_target(tmp_path: Path) -> None:
    vmfb, weights = tmp_path / "ffn.vmfb", tmp_path / "w.npz"
    assert run_tool("compile", str(ROOT / "examples" / "ffn.hir"), "--target=vulkan", "-o",
                    str(vmfb)).returncode == 0
    shapes = {"norm.gamma": (64,), "norm.beta": (64,), "ffn.up": (64, 256),
              "ffn.gate": (64, 256), "ffn.down": (256, 64)}
    np.savez(weights, **{n: np.zeros(s, np.float32) for n, s in shapes.items()})
    proc = run_tool("run", str(vmfb), "--device", "local-task", "--params", str(weights))
    assert proc.returncode == 1
    assert proc.stderr == ("error: the module was compiled for vulkan (vulkan-spirv-fb), the "
                           "device is local-task (which runs llvm-cpu modules): load it on "
                           "vulkan, or compile it with target=llvm-cpu\n")


def test_compile_activation_quant_flag(tmp_path: Path) -> None:
    """``rlx-compile --activation-quant q8``: the decode GEMV takes the q8 kernel (its name
    says so), without the flag the exact one; for a GPU target it is one error line."""
    h = HirModule("q8")
    x = h.input("x", (1, 256))
    w = h.param("w", (16, QUANT_SCHEMES["gguf_q4_k"].row_bytes(256)), "i8")
    h.set_outputs([h.dequant_matmul(x, w, scheme="gguf_q4_k")])
    src = tmp_path / "q8.hir"
    src.write_text(str(h))
    q8 = run_tool("compile", "--emit=linalg", "--activation-quant", "q8", str(src))
    exact = run_tool("compile", "--emit=linalg", str(src))
    assert q8.returncode == 0, q8.stderr
    assert exact.returncode == 0, exact.stderr
    assert "@rlx_gemv_q4_k_16x256_q8" in q8.stdout
    assert "@rlx_gemv_q4_k_16x256::" in exact.stdout
    assert "_q8" not in exact.stdout
    gpu = run_tool("compile", "--target=vulkan", "--activation-quant", "q8", str(src))
    assert gpu.returncode == 1
    assert "Traceback" not in gpu.stderr
    assert gpu.stderr.count("error:") == 1, gpu.stderr
    assert "activation_quant" in gpu.stderr, gpu.stderr
