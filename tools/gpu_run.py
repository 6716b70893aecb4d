"""Run an rlx GPU bundle (``tools/gpu_bundle.py``) on the machine that has the GPU: numerics of
every module on every device, and the speed of the LLaMA block and the decode GEMVs against
PyTorch eager on the same shapes.

    python3 tools/gpu_run.py BUNDLE --out DIR [--devices cuda,vulkan] [--repeat 20]

Needs Python with numpy (and torch for the speed comparison); nothing is compiled here and
``iree.compiler`` is never imported. The bundle's ``iree-base-runtime`` wheel is installed into
a temporary folder (``pip --no-index --no-deps --target``) unless the bundle has none, and
``rlx.runtime`` is imported from this checkout's ``python/``. For Vulkan the loader
(``libvulkan.so.1``) is unpacked from the bundle's ``.deb`` files when the system has none
(the runner must then be root), and NVIDIA's ICD file is used when the loader finds no
driver on its own.

Each module of the bundle was compiled per target; each ``check`` case has inputs and
float64 reference outputs (weights in the bundle, or generated here from a seed: the same
numbers the bundle tool computed them from) and passes when ``max|got - want| <= atol +
rtol * max|want|`` with the reference's tolerance for the output's dtype. Each ``time`` case
is timed (median of ``--repeat`` calls after warm-ups; per call with its results waited for,
and pipelined: ``--repeat`` calls queued with ``submit``, then waited for) with weights made
here, and compared with the same computation in PyTorch eager (CUDA when torch sees a GPU,
else CPU), whose float64 result is also its numerics check. Reports: ``DIR/gpu.json`` and
``DIR/gpu.md``. Exit status 1 when a module failed its check, 0 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "manifest.json"
BUNDLE_VERSION = 1
DEVICES = {"cuda": "cuda", "vulkan": "vulkan", "llvm-cpu": "local-task"}
"""Bundle target -> rlx.runtime device."""
NVIDIA_ICD = Path("/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json")
SCALE_FIELDS = {"gguf_q8_0": (34, {0: 0.01}), "gguf_q4_0": (18, {0: 0.01}),
                "gguf_q4_k": (144, {0: 0.01, 2: 0.002}), "gguf_q5_k": (176, {0: 0.01, 2: 0.002}),
                "gguf_q6_k": (210, {208: 0.01})}
"""Block bytes and f16 scale fields (byte offset -> value; ggml's ``block_*``: ``d``, and
``dmin`` where there is one, Q6_K's ``d`` last) of the bundle's GGUF weights: random bytes
elsewhere, sane scales there (here for the timed GEMVs, in the bundle tool for its checks)."""


# --------------------------------------------------------------------------------------
# Weights and inputs that are made, not stored (the bundle tool uses the same functions)
# --------------------------------------------------------------------------------------


def seeded_array(shape: tuple[int, ...], dtype: str, seed: int, name: str,
                 scheme: str | None = None) -> np.ndarray:
    """Deterministic data for a weight or input: GGUF blocks (random bytes, sane f16
    scales), norm-like vectors near 1, matrices N(0, 1/fan_in), in ``dtype``."""
    rng = np.random.default_rng([seed, *name.encode()])
    if scheme is not None:
        block, fields = SCALE_FIELDS[scheme]
        raw = rng.integers(0, 256, (*shape[:-1], shape[-1] // block, block), dtype=np.uint8)
        for at, value in fields.items():
            raw[..., at:at + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
        return raw.reshape(shape).view(np.int8)
    if dtype in ("i8", "i32", "i64"):
        return rng.integers(0, 8, shape).astype({"i8": np.int8, "i32": np.int32,
                                                  "i64": np.int64}[dtype])
    np_dtype = np.float16 if dtype == "f16" else np.float32
    if len(shape) == 1:
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(np_dtype)
    fan_in = shape[-2] if len(shape) >= 2 else 1
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np_dtype)


def rope_tables(positions: range, head_dim: int, dtype: str, theta: float = 10000.0
                ) -> tuple[np.ndarray, np.ndarray]:
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    np_dtype = np.float16 if dtype == "f16" else np.float32
    return np.cos(angles).astype(np_dtype), np.sin(angles).astype(np_dtype)


def time_inputs(case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The inputs of a timed case (made from its seed)."""
    spec, seed = case["time"], case["seed"]
    if spec["kind"] == "gemv":
        return {"x": seeded_array((1, spec["k"]), "f32", seed, "x") * 4}
    c, dtype, seq, past = spec["config"], spec["dtype"], spec["seq"], spec["past"]
    cos, sin = rope_tables(range(past, past + seq), c["head_dim"], dtype)
    feeds = {"x": seeded_array((1, seq, c["hidden"]), dtype, seed, "x") * 4, "cos": cos,
             "sin": sin}
    if past:
        kv = c["kv_heads"] * c["head_dim"]
        feeds["k_past"] = seeded_array((1, past, kv), dtype, seed, "k_past") * 16
        feeds["v_past"] = seeded_array((1, past, kv), dtype, seed, "v_past") * 16
    return feeds


# --------------------------------------------------------------------------------------
# Setting up: the runtime wheel, the Vulkan loader, the environment
# --------------------------------------------------------------------------------------


def install_runtime(bundle: Path, notes: list[str]) -> None:
    """Put the bundle's iree-base-runtime wheel (if any) first on sys.path, then rlx."""
    wheels = sorted((bundle / "wheels").glob("*.whl"))
    if wheels:
        site = Path(tempfile.mkdtemp(prefix="rlx-gpu-site-"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--target", str(site), *map(str, wheels)], check=True)
        sys.path.insert(0, str(site))
        notes.append(f"installed {', '.join(w.name for w in wheels)} into {site}")
    sys.path.insert(0, str(ROOT / "python"))


def prepare_vulkan(bundle: Path, notes: list[str]) -> None:
    """A Vulkan loader (unpacked from the bundle's .debs when the system has none) and,
    where the loader would find no driver, NVIDIA's ICD file."""
    if ctypes.util.find_library("vulkan") is None:
        debs = sorted((bundle / "debs").glob("*.deb"))
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), "/"], check=True)
        if debs:
            subprocess.run(["ldconfig"], check=False)
            # loaded by path now, so IREE's dlopen("libvulkan.so.1") finds it whatever the
            # loader cache this process mapped before ldconfig says
            for lib in sorted(Path("/usr/lib").glob("*/libvulkan.so.1"))[:1]:
                ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        notes.append(f"no Vulkan loader on the system: unpacked {[d.name for d in debs]}")
    if "VK_DRIVER_FILES" not in os.environ and "VK_ICD_FILENAMES" not in os.environ and (
            NVIDIA_ICD.is_file()):
        os.environ["VK_DRIVER_FILES"] = str(NVIDIA_ICD)
        notes.append(f"VK_DRIVER_FILES={NVIDIA_ICD}")


def _command(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"({' '.join(cmd)}: {e})"
    return (proc.stdout or proc.stderr).strip()


def devices(rt: Any, targets: list[str]) -> dict[str, Any]:
    """The devices IREE's driver of each target sees (names: Vulkan on lavapipe says so)."""
    out: dict[str, Any] = {}
    for target in targets:
        try:
            found = rt.get_driver(DEVICES[target]).query_available_devices()
            out[target] = [d.get("name") for d in found]
        except (RuntimeError, ValueError) as e:
            out[target] = f"no {DEVICES[target]} device: {e}"
    return out


def environment(torch: Any, targets: list[str]) -> dict[str, Any]:
    import iree.runtime as rt
    from iree.runtime import version

    env: dict[str, Any] = {
        "python": platform.python_version(), "numpy": np.__version__,
        "iree_runtime": f"{version.VERSION} ({rt.__file__})",
        "iree_drivers": rt.query_available_drivers(),
        "iree_devices": devices(rt, targets),
        "gpu": _command(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                         "--format=csv,noheader"]),
        "cpu": cpu_model(),
        "vk_driver_files": os.environ.get("VK_DRIVER_FILES"),
    }
    if torch is not None:
        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        env["torch_device"] = torch_device(torch)
    return env


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torch_device(torch: Any) -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------------------
# Checks and timings
# --------------------------------------------------------------------------------------


def within(got: np.ndarray, want: np.ndarray, tol: tuple[float, float] | None
           ) -> tuple[bool, float, float]:
    """(passes, max abs error, bound): the reference's rule; exact without a tolerance."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if g.shape != w.shape:
        return False, float("inf"), 0.0
    err = float(np.max(np.abs(g - w), initial=0.0))
    if tol is None:
        return err == 0.0, err, 0.0
    rtol, atol = tol
    bound = atol + rtol * float(np.max(np.abs(w), initial=0.0))
    finite = bool(np.all(np.isfinite(g)) == np.all(np.isfinite(w)))
    return finite and err <= bound, err, bound


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def case_weights(rt: Any, bundle: Path, case: dict[str, Any], vmfb: Path
                 ) -> dict[str, np.ndarray]:
    """The bundle's weights of a case, or (timed cases) weights made from its seed."""
    if case.get("weights"):
        with np.load(bundle / case["weights"]) as z:
            return {k: z[k] for k in z.files}
    schemes = case.get("schemes", {})
    return {s.name: seeded_array(s.shape, str(s.dtype), case["seed"], s.name,
                                 schemes.get(s.name)) for s in rt.read_param_specs(vmfb)}


def check_case(rt: Any, bundle: Path, case: dict[str, Any], target: str) -> dict[str, Any]:
    """Run every input set of a check case; compare each output with its reference."""
    vmfb = bundle / case["vmfb"][target]
    program = rt.load(vmfb, DEVICES[target], case_weights(rt, bundle, case, vmfb))
    fn = program[case.get("function", "main")]
    worst: dict[str, Any] = {"ok": True, "outputs": 0}
    for run in case["runs"]:
        with np.load(bundle / run["inputs"]) as z:
            feeds = {k: z[k] for k in z.files}
        with np.load(bundle / run["want"]) as z:
            wants = [z[f"out{i}"] for i in range(len(z.files))]
        got = _outputs(fn(**feeds))
        for i, (g, w, dtype) in enumerate(zip(got, wants, case["out_dtypes"], strict=True)):
            tol = case["tolerances"].get(dtype)
            ok, err, bound = within(g, w, tol)
            worst["outputs"] += 1
            if not ok or (worst["ok"] and err > worst.get("err", -1)):
                worst.update(ok=worst["ok"] and ok, err=err, bound=bound,
                             where=f"{run['inputs']} output #{i} ({dtype})")
    return worst


def median_s(fn: Callable[[], Any], repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def rlx_timing(program: Any, fn: Any, feeds: dict[str, np.ndarray], repeat: int
               ) -> tuple[dict[str, float], list[np.ndarray]]:
    """Per-call latency (results waited for) and pipelined time per call (``repeat``
    submits, then the last waited for), inputs already on the device."""
    dev = {k: program.upload(v) for k, v in feeds.items()}

    def call() -> list[Any]:
        return [t.wait() for t in _outputs(fn.on_device(**dev))]

    latency = median_s(call, repeat)

    def pipelined() -> None:
        outs = [fn.submit(**dev) for _ in range(repeat)]
        for out in outs:
            for t in _outputs(out):
                t.wait()

    per_call = median_s(pipelined, 3, warmup=1) / repeat
    return {"latency_ms": latency * 1e3, "pipelined_ms": per_call * 1e3}, [
        np.asarray(t) for t in _outputs(fn(**feeds))]


def torch_timing(torch: Any, fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    dev = torch_device(torch)

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    def call() -> None:
        fn()
        sync()

    latency = median_s(call, repeat)

    def pipelined() -> None:
        for _ in range(repeat):
            fn()
        sync()

    return {"latency_ms": latency * 1e3,
            "pipelined_ms": median_s(pipelined, 3, warmup=1) / repeat * 1e3}


def torch_block(torch: Any, w: dict[str, Any], feeds: dict[str, Any], c: dict[str, Any]
                ) -> list[Any]:
    """The LLaMA block of ``gpu_bundle.block_module`` in PyTorch eager (weights ``[in, out]``;
    NeoX RoPE over the whole head; GQA; causal, the queries the last positions)."""
    nn = torch.nn.functional
    hd, nh, nkv, eps = c["head_dim"], c["heads"], c["kv_heads"], c["eps"]
    x, cos, sin = feeds["x"], feeds["cos"], feeds["sin"]

    def norm(v: Any, g: Any) -> Any:
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * g

    def rope(v: Any, heads: int) -> Any:
        v = v.unflatten(-1, (heads, hd))
        a, b = v[..., :hd // 2], v[..., hd // 2:]
        cs, sn = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat([a * cs - b * sn, b * cs + a * sn], -1).flatten(-2)

    n1 = norm(x, w["ln1"])
    q, k, v = rope(n1 @ w["q"], nh), rope(n1 @ w["k"], nkv), n1 @ w["v"]
    if "k_past" in feeds:
        k, v = torch.cat([feeds["k_past"], k], 1), torch.cat([feeds["v_past"], v], 1)
    s, sk = q.shape[1], k.shape[1]
    qh = q.unflatten(-1, (nh, hd)).transpose(1, 2)
    kh = k.unflatten(-1, (nkv, hd)).transpose(1, 2).repeat_interleave(nh // nkv, 1)
    vh = v.unflatten(-1, (nkv, hd)).transpose(1, 2).repeat_interleave(nh // nkv, 1)
    mask = torch.ones(s, sk, dtype=torch.bool, device=x.device).tril(sk - s)
    a = nn.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    x1 = x + a.transpose(1, 2).flatten(-2) @ w["o"]
    n2 = norm(x1, w["ln2"])
    y = x1 + (nn.silu(n2 @ w["gate"]) * (n2 @ w["up"])) @ w["down"]
    return [y, k, v] if "k_past" in feeds else [y]


def time_case(rt: Any, torch: Any, bundle: Path, case: dict[str, Any], target: str,
              repeat: int) -> dict[str, Any]:
    """rlx's time for the case; PyTorch's on the same shapes and weights, and the error of
    rlx's outputs against PyTorch's float64 result (block) or the float64 product (GEMV)."""
    vmfb = bundle / case["vmfb"][target]
    weights = case_weights(rt, bundle, case, vmfb)
    program = rt.load(vmfb, DEVICES[target], weights)
    feeds = time_inputs(case)
    out: dict[str, Any] = {"rlx": None, "torch": None}
    out["rlx"], got = rlx_timing(program, program[case.get("function", "main")], feeds, repeat)
    if torch is None:
        return out
    spec = case["time"]
    dev = torch_device(torch)
    dtype = {"f16": torch.float16, "f32": torch.float32}[spec.get("dtype", "f32")]
    if spec["kind"] == "gemv":
        want = [gemv_reference(weights["w"], feeds["x"], spec["scheme"])]
        wt = torch.randn(spec["n"], spec["k"], dtype=torch.float16, device=dev)
        xt = torch.randn(1, spec["k"], dtype=torch.float16, device=dev)
        out["torch"] = torch_timing(torch, lambda: xt @ wt.T, repeat)
        out["torch_note"] = "f16 [N, K] weight (PyTorch has no GGUF kernel)"
    else:
        wt = {k: torch.from_numpy(v).to(dev, dtype) for k, v in weights.items()}
        ft = {k: torch.from_numpy(v).to(dev, dtype) for k, v in feeds.items()}
        out["torch"] = torch_timing(torch, lambda: torch_block(torch, wt, ft, spec["config"]),
                                    repeat)
        w64 = {k: v.double() for k, v in wt.items()}
        f64 = {k: v.double() for k, v in ft.items()}
        want = [t.cpu().numpy() for t in torch_block(torch, w64, f64, spec["config"])]
    tol = case["tolerances"].get(spec.get("dtype", "f32"))
    checks = [within(g, w, tol) for g, w in zip(got, want, strict=True)]
    out["ok"] = all(c[0] for c in checks)
    out["err"], out["bound"] = max(c[1] for c in checks), min(c[2] for c in checks)
    return out


def gemv_reference(raw: np.ndarray, x: np.ndarray, scheme: str) -> np.ndarray:
    """float64 ``x W^T`` of a Q8_0 or Q4_K weight (ggml's block formulas)."""
    rows = raw.shape[0]
    b = raw.view(np.uint8).reshape(rows, -1, SCALE_FIELDS[scheme][0])
    if scheme == "gguf_q8_0":
        d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
        w = d[..., None] * b[..., 2:].view(np.int8).astype(np.float64)
    else:
        d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)[..., None]
        dmin = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float64)[..., None]
        s = b[..., 4:16].astype(np.int64)
        sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | ((s[..., 0:4] >> 6) << 4)],
                            -1)
        mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)],
                            -1)
        qs = b[..., 16:].reshape(rows, -1, 4, 32).astype(np.int64)
        q = np.stack([qs & 15, qs >> 4], 3).reshape(rows, -1, 8, 32)
        w = d[..., None] * sc[..., None] * q - dmin[..., None] * mn[..., None]
    return np.asarray(x, np.float64) @ w.reshape(rows, -1).T


# --------------------------------------------------------------------------------------
# The run and its reports
# --------------------------------------------------------------------------------------


def _guarded(what: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One case's result, or its error (a failing module never stops the run)."""
    try:
        return what()
    except Exception as e:  # any failure is a result to report
        lines = traceback.format_exception_only(type(e), e)
        return {"ok": False, "error": "".join(lines).strip()[:2000]}


def run_bundle(bundle: Path, manifest: dict[str, Any], targets: list[str], repeat: int,
               torch: Any, on_row: Callable[[list[dict[str, Any]]], None]
               ) -> list[dict[str, Any]]:
    """Every case on every target; ``on_row`` gets the results so far after each case (the
    reports are rewritten then, so a run stopped at its time limit still leaves them)."""
    import rlx.runtime as rt

    results: list[dict[str, Any]] = []
    for target in targets:
        for case in manifest["cases"]:
            row: dict[str, Any] = {"case": case["name"], "target": target, "kind": case["kind"]}
            if target in case.get("compile_errors", {}):
                row.update(ok=False, error="compile: " + case["compile_errors"][target])
            elif case["kind"] == "model":
                import gpu_models

                row.update(_guarded(lambda c=case, t=target: gpu_models.run_model(
                    rt, bundle, c, t, DEVICES[t], torch, within)))
            elif case["kind"] == "check":
                row.update(_guarded(lambda c=case, t=target: check_case(rt, bundle, c, t)))
            else:
                row.update(_guarded(lambda c=case, t=target: time_case(rt, torch, bundle, c, t,
                                                                       repeat)))
            print(_line(row), flush=True)
            results.append(row)
            on_row(results)
    return results


def _line(row: dict[str, Any]) -> str:
    status = "ok" if row.get("ok") else "FAIL"
    if "error" in row:
        return f"{row['target']:8s} {row['case']:40s} FAIL {row['error'].splitlines()[-1]}"
    text = f"{row['target']:8s} {row['case']:40s} {status}"
    if row["kind"] == "model":
        text += (f" tokens {row['tokens_same']}/{row['tokens']} as on the CPU, logits err "
                 f"{row['err']:.3g} (bound {row['bound']:.3g})")
        for side in ("rlx", "torch"):
            if row.get(side):
                text += (f" {side} prefill {row[side]['prefill_tok_s']:.0f} tok/s, decode "
                         f"{row[side]['decode_tok_s']:.1f} tok/s")
        return text
    if "err" in row:
        text += f" err {row['err']:.3g} (bound {row['bound']:.3g})"
    for side in ("rlx", "torch"):
        if row.get(side):
            text += f" {side} {row[side]['latency_ms']:.3f} / {row[side]['pipelined_ms']:.3f} ms"
    return text


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = ["# rlx on a GPU", "", f"Bundle: {report['bundle']} (made {report['made']}, "
             f"rlx {report['rlx_commit']})", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += [f"- flags {t}: `{' '.join(f)}`" for t, f in report["flags"].items()]
    lines += [f"- note: {n}" for n in report["notes"]]
    checks = [r for r in report["results"] if r["kind"] == "check"]
    lines += ["", "## Numerics", "", "| target | case | result | max error | bound |",
              "|---|---|---|---|---|"]
    for r in checks:
        res = "ok" if r.get("ok") else "FAIL: " + r.get("error", r.get("where", "")).replace(
            "|", "/").replace("\n", " ")[:300]
        lines.append(f"| {r['target']} | {r['case']} | {res} | {r.get('err', '')} | "
                     f"{r.get('bound', '')} |")
    models = [r for r in report["results"] if r["kind"] == "model"]
    if models:
        lines += ["", "## Whole models (tok/s; PyTorch: the same shape, f16 weights)", "",
                  "| target | model | tokens as on the CPU | logits error / bound | rlx prefill "
                  "| rlx decode | torch prefill | torch decode |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in models:
            if "error" in r:
                lines.append(f"| {r['target']} | {r['case']} | FAIL: "
                             f"{r['error'].splitlines()[-1][:200]} | | | | | |")
                continue
            a, b = r["rlx"], r.get("torch") or {}
            lines.append(
                f"| {r['target']} | {r['case']} | {r['tokens_same']} / {r['tokens']} | "
                f"{r['err']:.3g} / {r['bound']:.3g} | {a['prefill_tok_s']:.0f} | "
                f"{a['decode_tok_s']:.1f} | {b.get('prefill_tok_s', float('nan')):.0f} | "
                f"{b.get('decode_tok_s', float('nan')):.1f} |")
    lines += ["", "## Speed (ms; latency: one call waited for / pipelined: per call of "
              "queued calls)", "",
              "| target | case | rlx latency | rlx pipelined | torch latency | torch pipelined "
              "| torch / rlx (pipelined) | numerics |", "|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        if r["kind"] != "time":
            continue
        if "error" in r:
            lines.append(f"| {r['target']} | {r['case']} | FAIL: "
                         f"{r['error'].splitlines()[-1][:200]} | | | | | |")
            continue
        a, b = r["rlx"], r.get("torch") or {}
        ratio = (f"{b['pipelined_ms'] / a['pipelined_ms']:.2f}" if b else "")
        num = (f"{'ok' if r.get('ok') else 'FAIL'} ({r['err']:.3g} / {r['bound']:.3g})"
               if "err" in r else "")
        lines.append(f"| {r['target']} | {r['case']} | {a['latency_ms']:.3f} | "
                     f"{a['pipelined_ms']:.3f} | {b.get('latency_ms', float('nan')):.3f} | "
                     f"{b.get('pipelined_ms', float('nan')):.3f} | {ratio} | {num} |")
    return "\n".join(lines) + "\n"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--devices", help="targets to run, comma-separated (default: the bundle's)")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args(argv)
    manifest = json.loads((args.bundle / MANIFEST).read_text())
    if manifest.get("version") != BUNDLE_VERSION:
        raise SystemExit(f"error: {args.bundle}: bundle version {manifest.get('version')}, "
                         f"this runner reads {BUNDLE_VERSION}")
    targets = args.devices.split(",") if args.devices else list(manifest["targets"])
    notes: list[str] = []
    install_runtime(args.bundle, notes)
    if "vulkan" in targets:
        prepare_vulkan(args.bundle, notes)
    torch = _torch()
    report = {"bundle": str(args.bundle), "made": manifest["made"],
              "rlx_commit": manifest["rlx_commit"], "environment": environment(torch, targets),
              "flags": {t: manifest["targets"][t]["flags"] for t in targets}, "notes": notes,
              "results": []}
    args.out.mkdir(parents=True, exist_ok=True)

    def write(results: list[dict[str, Any]]) -> None:
        report["results"] = results
        (args.out / "gpu.json").write_text(json.dumps(report, indent=1, default=str))
        (args.out / "gpu.md").write_text(markdown(report))

    write([])
    results = run_bundle(args.bundle, manifest, targets, args.repeat, torch, write)
    failed = [r for r in results if not r.get("ok")]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
