"""rlx.compile and rlx-compile: stages, targets, flags, and what a failing IREE compile
reports (the HIR label and position, the saved module, an exact reproducer)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from hir_zoo import build
from rlx.compiler import TargetConfig, hopper_device_target
from rlx.dialects.enums import QUANT_SCHEMES
from rlx.ir.diagnostics import CompileError

ROOT = Path(__file__).resolve().parent.parent
FFN = ROOT / "examples" / "ffn.hir"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlx.tools.compile", *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_emit_stages() -> None:
    h = build("swiglu")
    assert rlx.compile(h, emit="hir") == str(h)
    mir = rlx.compile(h, emit="mir")
    assert "rlx_mir.fused_swiglu" in mir
    assert "rlx_hir" not in mir
    linalg = rlx.compile(h, emit="linalg")
    assert 'util.global private @param.up = #flow.parameter.named<"model"::"up">' in linalg
    assert "rlx_" not in linalg.replace("rlx.name", "").replace("rlx.inputs", "").replace(
        "rlx.params", "").replace("rlx.fusion_policy", "")
    vmfb = rlx.compile(h)
    assert isinstance(vmfb, bytes)
    assert len(vmfb) > 1000


def test_compile_from_path_and_cli_stages(tmp_path: Path) -> None:
    out = tmp_path / "ffn.vmfb"
    data = rlx.compile(FFN, output=out)
    assert out.read_bytes() == data
    proc = cli(str(FFN), "--emit=mir")
    assert proc.returncode == 0, proc.stderr
    assert '"rlx_mir.fused_residual_rms_norm"' in proc.stdout
    proc = cli(str(FFN), "--target=vulkan", "-o", str(tmp_path / "vk.vmfb"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "vk.vmfb").stat().st_size > 0


def test_weights_are_not_in_the_vmfb() -> None:
    h = rlx.HirModule("big")
    x = h.input("x", (1, 512))
    h.set_outputs([h.linear(x, h.param("w", (512, 1024)))])
    vmfb = rlx.compile(h)
    assert len(vmfb) < 200_000, "a 2 MB weight must live in the parameter file"


def test_extra_flags_reach_iree(tmp_path: Path) -> None:
    h = build("norms")
    dump = tmp_path / "sources"
    rlx.compile(h, extra_flags=[f"--iree-hal-dump-executable-sources-to={dump}"])
    sources = sorted(dump.glob("*.mlir"))
    assert sources, "IREE dumped no executable sources: the extra flag did not reach it"
    assert sources[0].read_text().startswith("hal.executable public @main$async_dispatch_")
    with pytest.raises(rlx.CompileError, match="--iree-no-such-flag"):
        rlx.compile(h, extra_flags=["--iree-no-such-flag"])


def test_bad_options_are_clear_errors() -> None:
    h = build("norms")
    with pytest.raises(rlx.CompileError, match="unknown target 'tpu'"):
        rlx.compile(h, "tpu")
    with pytest.raises(rlx.CompileError, match="unknown emit stage 'asm'"):
        rlx.compile(h, emit="asm")
    with pytest.raises(rlx.CompileError, match=r"unknown compile option.*opt_lvl"):
        rlx.compile(h, opt_lvl="O3")
    with pytest.raises(rlx.LoweringError, match="attention lowering"):
        rlx.compile(h, attention="flash")


def attention_hir(tmp_path: Path) -> Path:
    h = rlx.HirModule("attn")
    q = h.input("q", (1, 8, 64))
    h.set_outputs([h.named("layers.3.attn", lambda h: h.attention(
        q, q, q, num_heads=4, head_dim=16, mask_kind="causal"))])
    path = tmp_path / "attn.hir"
    path.write_text(str(h))
    return path


def test_failing_iree_compile_names_the_op_and_reproduces(tmp_path: Path) -> None:
    """IREE 3.13 cannot compile iree_linalg_ext.attention for SPIR-V: forcing the fused
    lowering on Vulkan must fail with the HIR label, its position, the saved module and a
    command that fails the same way, and leave no output file."""
    src = attention_hir(tmp_path)
    out = tmp_path / "attn.vmfb"
    proc = cli(str(src), "--target=vulkan", "--attention=fused", "-o", str(out))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    line = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if "attention" in t)
    assert f'{src}:{line}:10: error: IREE rejected "layers.3.attn" (rlx_hir.attention)' in (
        proc.stderr)
    assert not out.exists()
    saved = tmp_path / "attn.failed.mlir"
    assert saved.exists()
    assert (tmp_path / "attn.failed.hir").exists()
    repro = next(t for t in proc.stderr.splitlines() if t.startswith("note: reproduce with: "))
    rerun = subprocess.run(shlex.split(repro.removeprefix("note: reproduce with: ")),
                           capture_output=True, text=True)
    assert rerun.returncode != 0
    assert f"{src}:{line}:10: error:" in rerun.stderr


def test_provenance_in_iree_diagnostics_for_builder_modules() -> None:
    h = rlx.HirModule("attn")
    q = h.input("q", (1, 8, 64))
    h.set_outputs([h.named("blk.attn", lambda h: h.attention(q, q, q, num_heads=4,
                                                             head_dim=16))])
    with pytest.raises(rlx.CompileError) as info:
        rlx.compile(h, "vulkan", attention="fused")
    msg = str(info.value)
    assert 'attn.hir:3:10: error: IREE rejected "blk.attn" (rlx_hir.attention)' in msg
    assert "(the HIR as " in msg


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
def test_cuda_compiles(arch: str) -> None:
    vmfb = rlx.compile(build("transformer_block"), "cuda", cuda_arch=arch)
    assert f".target {arch}".encode() in vmfb or arch.encode() in vmfb


@pytest.mark.parametrize(("target", "options"), [("cuda", {"cuda_arch": "sm_90"}),
                                               ("rocm", {"rocm_arch": "gfx942"})])
def test_gated_delta_net_heads_of_qwen35_compile_for_gpus(target: str, options: dict) -> None:
    """Heads of 64 and 128 (Qwen3.5's): their k.q reduction, scaled in its body, failed IREE
    3.13's reduction vector distribution on CUDA and ROCm ("failed to distribute")."""
    for dim in (64, 128):
        h = rlx.HirModule("gdn")
        q, k, v = (h.input(n, (1, None, 4, dim)) for n in "qkv")
        g, beta = h.input("g", (1, None, 4)), h.input("beta", (1, None, 4))
        h.set_outputs([h.gated_delta_net(q, k, v, g, beta, dim)])
        assert rlx.compile(h, target, **options)


@pytest.mark.parametrize(("target", "options"), [("cuda", {"cuda_arch": "sm_90"}),
                                               ("rocm", {"rocm_arch": "gfx942"})])
def test_sample_function_compiles_for_gpus(target: str, options: dict) -> None:
    """Every generating model carries ``sample``; at a real vocabulary (32000) its top-k
    search failed IREE 3.13's GPU reduction distribution and top-p's softmax sum never
    finished compiling, so no LLaMA model compiled for CUDA or ROCm (512 did)."""
    from rlx.models.sampling import add_sample_function

    h = rlx.HirModule("sample")
    add_sample_function(h, 32000, name="main")
    assert rlx.compile(h, target, **options)


@pytest.mark.parametrize(("target", "options"), [("cuda", {"cuda_arch": "sm_90"}),
                                               ("rocm", {"rocm_arch": "gfx942"})])
def test_batched_argmax_compiles_for_gpus(target: str, options: dict) -> None:
    """The batched decode's ``next``: an argmax of 4 rows of 49152 logits crashed IREE
    3.13's NVPTX instruction selection with the maximum fused into the index search."""
    h = rlx.HirModule("next")
    x = h.input("x", (4, 49152))
    h.set_outputs([h.mir("argmax", [x], axis=-1, keep_dim=False)])
    assert rlx.compile(h, target, **options)


@pytest.mark.parametrize(("target", "options"), [("cuda", {"cuda_arch": "sm_90"}),
                                               ("rocm", {"rocm_arch": "gfx942"})])
def test_causal_conv_of_dynamic_rows_and_length_compiles_for_gpus(target: str,
                                                                  options: dict) -> None:
    """rlx-serve's batched Qwen3.5 prefill: a dynamic batch and a dynamic length; the conv
    over [B, C, 1, W] failed IREE 3.13's CUDA codegen (LLVMGPU targets now take the frames
    as its height)."""
    h = rlx.HirModule("conv")
    y, frames = h.depthwise_conv1d_causal_carry(h.input("x", (None, None, 64)),
                                                h.param("w", (64, 1, 1, 4)),
                                                h.input("pad", (None, 3, 64)), 4)
    h.set_outputs([y, frames])
    assert rlx.compile(h, target, **options)


@pytest.mark.parametrize(("target", "options"), [("cuda", {"cuda_arch": "sm_90"}),
                                               ("rocm", {"rocm_arch": "gfx942"})])
def test_gated_delta_net_of_dynamic_rows_compiles_for_gpus(target: str, options: dict) -> None:
    """rlx-serve's batched Qwen3.5 prefill: a dynamic batch with its state carried; the
    step's two-result state read failed to bufferize on CUDA (on LLVMGPU: two reductions)."""
    h = rlx.HirModule("gdn")
    q, k, v = (h.input(n, (None, None, 4, 128)) for n in "qkv")
    g, beta = h.input("g", (None, None, 4)), h.input("beta", (None, None, 4))
    y, s = h.gated_delta_net_carry(q, k, v, g, beta, h.input("s", (None, 4, 128, 128)), 128)
    h.set_outputs([y, s])
    assert rlx.compile(h, target, **options)


def test_vulkan_fences_a_gathered_dequant() -> None:
    """A GGUF embedding's gathered rows, dequantized, then RMSNorm'd: on Vulkan the dequant
    is its own dispatch (fused into the norm's reduction over dynamic rows, IREE's SPIR-V
    codegen took minutes: a 1B Q8_0 model over 6 minutes, 14 s fenced)."""
    h = rlx.HirModule("embed")
    ids = h.input("ids", (1, None), "i32")
    table = h.param("embed", (64, QUANT_SCHEMES["gguf_q8_0"].row_bytes(256)), "i8")
    x = h.mir("dequant", [h.mir("gather", [table, ids], axis=0)], scheme="gguf_q8_0")
    h.set_outputs([h.rms_norm(x, h.param("g", (256,)), h.param("b", (256,)), 1e-5)])
    assert "compute_barrier" in rlx.compile(h, "vulkan", emit="linalg")


@pytest.mark.parametrize(("dtype", "fused"), [("f32", True), ("f16", False), ("bf16", False)])
def test_cuda_attention_is_fused_for_f32_only(dtype: str, fused: bool) -> None:
    """IREE's fused attention op computes wrong f16 results on CUDA (checked on an H200):
    16-bit attention is decomposed there; f32 keeps the fused op."""
    h = rlx.HirModule("attn")
    q = h.input("q", (1, None, 64), dtype)
    h.set_outputs([h.attention(q, q, q, num_heads=4, head_dim=16, mask_kind="causal")])
    text = rlx.compile(h, "cuda", emit="linalg")
    assert ("iree_linalg_ext.attention" in text) == fused


def test_vulkan_nvidia_mma_failure_names_the_way_out(tmp_path: Path) -> None:
    """16-bit attention (its f16 x f16 -> f32 score matmul) picks CUDA's mma.sync on IREE's
    Vulkan 'ampere' target and fails; the error says which target compiles it."""
    h = rlx.HirModule("proj")
    x = h.input("x", (1, 128, 2048), "f16")
    q = h.linear(x, h.param("wq", (2048, 2048), "f16"))
    h.set_outputs([h.attention(q, x, x, num_heads=32, head_dim=64, mask_kind="causal")])
    with pytest.raises(rlx.CompileError) as info:
        rlx.compile(h, "vulkan", vulkan_target="ampere", output=tmp_path / "p.vmfb")
    assert "--vulkan-target=pascal, which lists none, compiles them" in str(info.value)
    assert rlx.compile(h, "vulkan", vulkan_target="pascal")


def test_hopper_target_is_derived_from_sm89() -> None:
    text = hopper_device_target("sm_90")
    assert 'arch = "sm_90"' in text
    assert 'features = "+ptx84"' in text
    assert "sm_89" not in text


def test_rocm_compiles() -> None:
    vmfb = rlx.compile(build("attention_causal"), "rocm", rocm_arch="gfx942")
    assert b"rocm-hsaco-fb" in vmfb
    assert set(re.findall(rb"gfx[0-9a-f]+", vmfb)) == {b"gfx942"}


def test_target_defaults() -> None:
    cpu, vk, cuda = TargetConfig("llvm-cpu"), TargetConfig("vulkan"), TargetConfig("cuda")
    assert cpu.lowering.attention == "decomposed"
    assert cpu.lowering.compute_barriers
    assert "--iree-opt-data-tiling=true" in cpu.flags()
    assert "--iree-llvmcpu-target-cpu=host" in cpu.flags()
    # Peeling: without it IREE 3.13 leaves a matvec whose reduction tile does not divide
    # (a Q8_0 GEMV with K / 32 not a multiple of 4, e.g. K = 576) scalar, 7x slower.
    assert "--iree-llvmcpu-vector-pproc-strategy=peel" in cpu.flags()
    assert vk.lowering.attention == "decomposed"
    assert not vk.lowering.compute_barriers
    assert "--iree-vulkan-target=llvmpipe" in vk.flags()
    assert cuda.lowering.attention == "fused"
    assert TargetConfig("rocm").runtime_device == "hip"
    # decode GEMVs and decode attention through rlx's hand-written kernels: llvm-cpu only,
    # on by default there, off on request; asking for them on a GPU target is an error
    for name in ("gemv_kernels", "prefill_kernels", "attention_kernel"):
        assert getattr(cpu.lowering, name)
        assert not getattr(TargetConfig("llvm-cpu", **{name: False}).lowering, name)
        assert not getattr(vk.lowering, name)
        assert not getattr(cuda.lowering, name)
        with pytest.raises(CompileError, match=f"{name}=True: rlx's hand-written kernels are "
                                               "llvm-cpu code, the target is 'vulkan'"):
            TargetConfig("vulkan", **{name: True})
    # the prefill kernels run on the GEMV kernels' planes: off with them, an error if asked for
    assert not TargetConfig("llvm-cpu", gemv_kernels=False).lowering.prefill_kernels
    with pytest.raises(CompileError, match="prefill_kernels=True runs the GEMV kernels' "
                                           "bodies on their planes; found gemv_kernels=False"):
        TargetConfig("llvm-cpu", gemv_kernels=False, prefill_kernels=True)


def test_compiled_module_runs_with_named_inputs() -> None:
    vmfb = rlx.compile(FFN)
    rng = np.random.default_rng(0)
    params = {"norm.gamma": np.ones(64, np.float32), "norm.beta": np.zeros(64, np.float32),
              "ffn.up": rng.standard_normal((64, 256), np.float32),
              "ffn.gate": rng.standard_normal((64, 256), np.float32),
              "ffn.down": rng.standard_normal((256, 64), np.float32)}
    prog = rlx.runtime.load(vmfb, params=params)
    x = rng.standard_normal((3, 64), np.float32)
    assert prog.main.input_names == ["x", "residual"]
    np.testing.assert_array_equal(prog.main(x, x), prog.main(residual=x, x=x))
