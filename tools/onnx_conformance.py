"""Run ONNX's own node tests through rlx (import, compile for llvm-cpu, run, compare) and
write ``docs/onnx-coverage.md``.

    python tools/onnx_conformance.py                         # every op; writes the table
    python tools/onnx_conformance.py --ops Conv,Gemm --no-write -v

The node tests are ONNX's backend tests ``onnx/backend/test/data/node/<case>/`` (a model
plus ``test_data_set_*/input_*.pb`` and ``output_*.pb``). The onnx 1.23 wheel ships the
generators of that directory (``onnx.backend.test.case.node``) rather than the files; this
runs the generators (what ``backend-test-tools generate-data`` writes to disk), or reads the
directory where it exists.

Inputs that a node reads as a shape argument (Reshape's shape, Slice's starts, the axes of
a reduction, ...) are bound as initializers, as real models hold them and as onnx-mlir's
test runner does; data inputs stay run-time inputs. A case is ``passed`` when every output
matches (the tolerance of ``rlx.reference.tolerance`` for its element type; exact for
integers and bool; NaN and inf positions equal), ``unsupported`` when the importer
refuses it with a reason, and ``failed`` otherwise (compile error, run error, mismatch,
crash). Cases of one op are compiled together, one function each.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import re
import sys
import time
import traceback
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

import rlx
from rlx.importers.onnx import import_model
from rlx.importers.onnx_ops import (
    CONVERTERS,
    ONNX_DTYPES,
    RUNTIME_DTYPES,
    onnx_dtype_name,
    why_unsupported,
)
from rlx.ir.diagnostics import ModelImportError
from rlx.ir.types import DType
from rlx.reference.tolerance import TOLERANCES, max_error

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "onnx-coverage.md"
TARGET_OPS = (
    "MatMul Gemm Add Sub Mul Div Pow Sqrt Reciprocal Exp Log Tanh Sigmoid Relu Gelu Erf "
    "Softmax LogSoftmax ReduceMean ReduceSum ReduceMax Transpose Reshape Flatten Squeeze "
    "Unsqueeze Concat Split Slice Gather Expand Where Equal Less Greater Cast Shape "
    "ConstantOfShape Range Conv MaxPool AveragePool GlobalAveragePool BatchNormalization "
    "LayerNormalization Einsum CumSum Clip ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum "
    "And Neg Max Sin Cos IsNaN GreaterOrEqual LessOrEqual Identity Constant GatherElements "
    "GatherND Trilu HardSigmoid HardSwish GlobalMaxPool Resize ConvTranspose LSTM GRU "
    "QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger Pad "
    "InstanceNormalization GroupNormalization MeanVarianceNormalization LpNormalization "
    "PRelu Elu Selu Mish Softsign Softplus DepthToSpace ArgMax ArgMin Hardmax OneHot "
    "ScatterND ScatterElements"
).split()
"""The ops transformer and CNN inference needs (issue 9), the sum-based reductions a
sentence embedder's pooling exports to (ReduceL2 for the unit norm), and every other op of
the importer corpus (tests/importers: the exported BERT, ViT, Whisper encoder, GPT-2 and
LLaMA steps, CNNs, upsamplers, an image restorer, index_put / scatter_add exports, LSTM /
GRU models, Magika, and ONNX Runtime's dynamic and QDQ quantizations): every test of these
must pass or be explained."""
HAND_ROUNDED = {"test_averagepool_2d_ceil_last_window_starts_on_pad"}
"""Cases whose expected output ONNX's case generator writes by hand to 4 decimals (0.1511
for (0.8580 + 0.0786 + 0.2692 + 0.1537) / 9 = 0.151056): compared with the tolerance of
ONNX's own backend-test runner (``ONNX_RUNNER_TOLERANCE``), not rlx's f32 one."""
ONNX_RUNNER_TOLERANCE = (1e-3, 1e-7)
"""(rtol, atol): ``onnx.backend.test.runner``'s defaults."""
EXPLAINED: dict[str, str] = {}
EXPLAINED.update({
    name: "rows whose every key is masked: ONNX returns zeros, rlx's attention averages the "
          "values (RLX's semantics: masked scores are -1e9, never -inf, so no row is empty)"
    for name in ("test_attention_causal_boolmask_nan_robustness",
                 "test_attention_23_boolmask_fullymasked_row_nan_robustness")})
EXPLAINED.update({
    f"test_resize_downsample_scales_{m}_align_corners":
        "ONNX's reference evaluator divides by the unfloored output width n * scale (2.4 for "
        "0.6 of 4); the spec's text (length_resized), ONNX Runtime and PyTorch's "
        "align_corners=True divide by the output length (2), as rlx does: rlx equals ORT and "
        "torch.nn.functional.interpolate exactly on this case"
    for m in ("linear", "cubic")})
EXPLAINED.update({
    "test_identity_sequence": "a sequence input: rlx imports tensors only",
    "test_identity_opt": "an optional input: rlx imports tensors only",
})
"""Cases that do not pass, with the reason behind the importer's or the comparison's
message; it goes into the table."""


@dataclass
class Case:
    name: str
    op: str
    model: onnx.ModelProto
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]]
    expanded: bool = False


@dataclass
class Result:
    case: str
    op: str
    status: str  # passed / failed / unsupported
    reason: str = ""


@dataclass
class Prepared:
    case: Case
    function: str
    inputs: list[list[np.ndarray]]
    params: dict[str, np.ndarray]
    module_text: str = ""
    outputs: list[list[np.ndarray]] = field(default_factory=list)


# --------------------------------------------------------------------------------------
# Collecting the node tests
# --------------------------------------------------------------------------------------


def _data_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def _read_dir(path: Path) -> tuple[onnx.ModelProto, list]:
    model = onnx.load(str(path / "model.onnx"))
    sets = []
    for ds in sorted(path.glob("test_data_set_*")):
        def read(kind: str, ds: Path = ds) -> list[np.ndarray]:
            files = sorted(ds.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
            return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]

        sets.append((read("input"), read("output")))
    return model, sets


def collect(ops: set[str] | None) -> list[Case]:
    """Node test cases of ``ops`` (all when None), each tagged with the op it tests."""
    raw: list[tuple[str, onnx.ModelProto, list]] = []
    data = _data_dir()
    if data.is_dir():
        for d in sorted(data.iterdir()):
            model, sets = _read_dir(d)
            raw.append((d.name, model, sets))
    else:
        from onnx.backend.test.case import node as node_cases

        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            for c in node_cases.collect_testcases():
                raw.append((c.name, c.model, [(list(i), list(o)) for i, o in c.data_sets]))
    single = {name: m.graph.node[0].op_type for name, m, _ in raw if len(m.graph.node) == 1}
    cases = []
    for name, model, sets in raw:
        base = re.sub(r"_expanded(_ver\d+)?$", "", name)
        op = single.get(name) or single.get(base)
        if op is None or (ops is not None and op not in ops):
            continue
        sets = [([_array(x) for x in i], [_array(y) for y in o]) for i, o in sets]
        cases.append(Case(name, op, model, sets, expanded=name != base))
    return cases


def _array(x: object) -> np.ndarray:
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    try:
        return np.asarray(x)
    except ValueError:  # a sequence or map value: kept opaque (the importer refuses it)
        box = np.empty(1, dtype=object)
        box[0] = x
        return box


# --------------------------------------------------------------------------------------
# Preparing (import) and checking
# --------------------------------------------------------------------------------------


def shape_arguments(model: onnx.ModelProto) -> set[str]:
    """Graph inputs some node reads as an import-time argument (a converter's
    ``const_inputs``), directly or through the nodes that compute it: Range's function body
    (its ``_expanded`` cases) computes a Loop's trip count from Range's own start, limit
    and delta, which the Range cases bind. The walk stops at ``Shape`` and ``Size``, which
    read a tensor's sizes, not its values."""
    producer = {out: node for node in model.graph.node for out in node.output}
    inputs = {i.name for i in model.graph.input}
    todo: list[str] = []
    for node in model.graph.node:
        conv = CONVERTERS.get(node.op_type)
        if conv is None:
            continue
        todo += [node.input[i] for i in conv.const_inputs
                 if i < len(node.input) and node.input[i]]
    out: set[str] = set()
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            out.add(name)
        node = producer.get(name)
        if node is not None and node.op_type not in ("Shape", "Size"):
            todo += [i for i in node.input if i]
    return out


def _unsupported_input(model: onnx.ModelProto, bound: set[str]) -> str | None:
    for inp in model.graph.input:
        if inp.name in bound or not inp.type.HasField("tensor_type"):
            continue
        elem = inp.type.tensor_type.elem_type
        dtype = ONNX_DTYPES.get(elem)
        if dtype is None or dtype not in RUNTIME_DTYPES:
            name = onnx_dtype_name(elem)
            return f"input '{inp.name}' is {name}: {why_unsupported(name)}"
    return None


def _runtime_array(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype.name == "bfloat16" else x


def prepare(case: Case, function: str, h: rlx.HirModule | None) -> Prepared | Result:
    """Import ``case`` into function ``function`` of ``h`` (a new module when None)."""
    bound_names = shape_arguments(case.model)
    names = [i.name for i in case.model.graph.input]
    first_inputs = case.data_sets[0][0]
    bound = {n: first_inputs[k] for k, n in enumerate(names)
             if n in bound_names and k < len(first_inputs)}
    for inputs, _ in case.data_sets[1:]:
        for k, n in enumerate(names):
            if n in bound and not np.array_equal(inputs[k], bound[n]):
                return Result(case.name, case.op, "unsupported",
                              f"data sets differ in the shape argument '{n}'")
    bad = _unsupported_input(case.model, set(bound))
    if bad is not None:
        return Result(case.name, case.op, "unsupported", bad)
    try:
        imported = import_model(case.model, module=h, function=function, bind=bound,
                                param_prefix=f"{function}.", source=f"{case.name}.onnx")
    except ModelImportError as e:
        status = "failed" if e.__cause__ is not None else "unsupported"
        why = f": {EXPLAINED[case.name]}" if case.name in EXPLAINED else ""
        return Result(case.name, case.op, status, _short(str(e)) + why)
    except Exception as e:  # an importer crash is a failure, reported with its cause
        return Result(case.name, case.op, "failed", f"import crashed: {_crash(e)}")
    runtime_inputs = [[_runtime_array(x) for k, x in enumerate(inputs)
                       if k < len(names) and names[k] not in bound]
                      for inputs, _ in case.data_sets]
    return Prepared(case, function, runtime_inputs, imported.params,
                    outputs=[o for _, o in case.data_sets])


def _short(message: str) -> str:
    line = message.splitlines()[0]
    return re.sub(r"^\S+\.onnx: error: ", "", line)


def _crash(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {e} ({Path(frame.filename).name}:{frame.lineno})"


def compare(got: np.ndarray, want: np.ndarray,
            tolerance: tuple[float, float] | None = None) -> str | None:
    """None when ``got`` matches ``want`` (within ``tolerance`` (rtol, atol) when given,
    else rlx's tolerance of the element type); else what differs."""
    if want.dtype.name == "bfloat16":
        want = want.astype(np.float32)
        got = np.asarray(got).view(np.uint16).astype(np.uint32) << 16
        got = got.view(np.float32)
        dtype = DType.BF16
    else:
        got = np.asarray(got)
        dtype = ONNX_DTYPES.get(onnx.helper.np_dtype_to_tensor_dtype(want.dtype), None)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if dtype not in TOLERANCES:
        if got.dtype != want.dtype or not np.array_equal(got, want):
            bad = int(np.sum(got != want)) if got.dtype == want.dtype else got.size
            return f"{bad} of {want.size} elements differ ({got.dtype} vs {want.dtype})"
        return None
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan = np.isnan(w)
    if not np.array_equal(np.isnan(g), nan):
        return "NaN positions differ"
    special = np.isinf(w)
    if not np.array_equal(g[special], w[special]) or np.any(np.isinf(g[~special & ~nan])):
        return "inf positions differ"
    special |= nan
    rtol, atol = TOLERANCES[dtype] if tolerance is None else tolerance
    err, scale = max_error(g[~special], w[~special])
    if err > atol + rtol * scale:
        return f"max error {err:.3g} > {atol + rtol * scale:.3g} ({dtype})"
    return None


def _outputs(out: object) -> list[np.ndarray]:
    return list(out) if isinstance(out, tuple) else [out]  # type: ignore[list-item]


def run_prepared(batch: list[Prepared], h: rlx.HirModule) -> list[Result]:
    """Compile ``h`` (the functions of ``batch``) once and check every case."""
    params = {k: v for p in batch for k, v in p.params.items()}
    vmfb = rlx.compile(h, "llvm-cpu")
    program = rlx.runtime.load(vmfb, "local-task", params)
    results = []
    for p in batch:
        fn = program[p.function]
        tolerance = ONNX_RUNNER_TOLERANCE if p.case.name in HAND_ROUNDED else None
        problems = []
        for inputs, expected in zip(p.inputs, p.outputs, strict=True):
            got = _outputs(fn(*inputs))
            if len(got) != len(expected):
                problems.append(f"{len(got)} outputs, expected {len(expected)}")
                continue
            problems += [f"output {k}: {m}" for k, (g, w) in enumerate(zip(got, expected,
                                                                           strict=True))
                         if (m := compare(g, w, tolerance)) is not None]
        status = "failed" if problems else "passed"
        reason = "; ".join(problems[:2])
        if problems and p.case.name in EXPLAINED:
            reason = f"{reason}: {EXPLAINED[p.case.name]}"
        results.append(Result(p.case.name, p.case.op, status, reason))
    return results


def run_cases(cases: Sequence[Case], *, verbose: bool = False) -> list[Result]:
    """Every case, one compiled module per op (each case alone when the batch fails)."""
    by_op: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_op[c.op].append(c)
    results: list[Result] = []
    for op, op_cases in sorted(by_op.items()):
        start = time.time()
        op_results = _run_op(op, op_cases)
        results += op_results
        if verbose:
            counts = Counter(r.status for r in op_results)
            print(f"{op:22s} {dict(counts)}  {time.time() - start:.1f}s", file=sys.stderr)
            for r in op_results:
                if r.status != "passed":
                    print(f"    {r.status:11s} {r.case}: {r.reason}", file=sys.stderr)
    return results


def _module_name(op: str) -> str:
    return "onnx_" + re.sub(r"\W", "_", op)


def _run_op(op: str, cases: list[Case]) -> list[Result]:
    results: list[Result] = []
    importable: list[Case] = []
    for case in cases:  # a scratch import first: a failed import leaves a partial function
        prepared = prepare(case, "main", None)
        if isinstance(prepared, Result):
            results.append(prepared)
        else:
            importable.append(case)
    if not importable:
        return results
    h = rlx.HirModule(_module_name(op))
    batch = [prepare(case, f"c{k}", h) for k, case in enumerate(importable)]
    try:
        return results + run_prepared(batch, h)  # type: ignore[arg-type]
    except Exception as e:  # a compile or run failure of any kind
        if len(batch) == 1:
            return [*results, Result(importable[0].name, op, "failed", _short(str(e)))]
    for case in importable:  # the batch failed: find which case, each in its own module
        single = rlx.HirModule(_module_name(op))
        again = prepare(case, "c0", single)
        try:
            results += run_prepared([again], single)  # type: ignore[list-item]
        except Exception as e:  # a compile or run failure of any kind
            results.append(Result(case.name, op, "failed", _short(str(e))))
    return results


# --------------------------------------------------------------------------------------
# The coverage table
# --------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    from importlib.metadata import version

    return (f"{cpu}, {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, onnx {onnx.__version__}, "
            f"iree-base-compiler {version('iree-base-compiler')}")


def _table(ops: Sequence[str], per: dict[str, Counter[str]], *, reason: dict[str, str] | None
           = None) -> list[str]:
    head = "| ONNX op | tests | passed | failed | unsupported |"
    lines = [head + (" why not passing (first case) |" if reason is not None else ""),
             "|---|---:|---:|---:|---:|" + ("---|" if reason is not None else "")]
    total: Counter[str] = Counter()
    for op in ops:
        c = per.get(op, Counter())
        total.update(c)
        why = f" {reason.get(op, '')} |" if reason is not None else ""
        lines.append(f"| {op} | {sum(c.values())} | {c['passed']} | {c['failed']} | "
                     f"{c['unsupported']} |{why}")
    lines.append(f"| **total** | {sum(total.values())} | {total['passed']} | "
                 f"{total['failed']} | {total['unsupported']} |" + (" |" if reason is not None
                                                                    else ""))
    return lines


def write_table(results: Sequence[Result], command: str, seconds: float,
                path: Path = DOC) -> str:
    """The coverage document: the ops the issue lists (every case not passing, with its
    reason), then every other op that has node tests."""
    per: dict[str, Counter[str]] = defaultdict(Counter)
    first_reason: dict[str, str] = {}
    for r in results:
        per[r.op][r.status] += 1
        if r.status != "passed":
            first_reason.setdefault(r.op, f"{r.status}: {r.reason}".replace("|", "/"))
    others = sorted(op for op in per if op not in TARGET_OPS)
    lines = [
        "# ONNX node-test coverage",
        "",
        "ONNX's own node tests (`onnx/backend/test/data/node`, generated from the case "
        "generators shipped in the onnx package) imported with `rlx.importers.onnx`, "
        "compiled for llvm-cpu and run; every output compared with the test's expected "
        "output (tolerances of `rlx.reference.tolerance`; exact for integers and bool; "
        f"ONNX's own runner tolerance for {', '.join(f'`{n}`' for n in sorted(HAND_ROUNDED))}"
        ", whose expected output ONNX writes by hand to 4 decimals). "
        "Inputs a node reads as shape arguments are bound as initializers; data inputs stay "
        "run-time inputs. `unsupported`: the importer refuses the case with one error "
        "naming the reason; `failed`: a wrong result or a compile / run error. `_expanded` "
        "cases (the op's function body) count under the op.",
        "",
        f"Regenerate: `{command}` (writes this file; `--ops A,B --no-write -v` for a few "
        "ops). CI runs one case per op of the first table: "
        "`tests/importers/test_onnx_conformance.py`.",
        "",
        f"Machine: {machine()}. Run: {datetime.date.today().isoformat()}, "
        f"{seconds / 60:.1f} min.",
        "",
        "## The ops of transformer and CNN inference and of the importer corpus",
        "",
        "Every case of these ops passes but those listed below the table: element types "
        "rlx rejects (strings: one error naming the node) and the cases given with their "
        "reason. Unsigned integers are the signless integers of their width, read as "
        "unsigned by the ops that care; the 8-bit floats E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ "
        "and E8M0 are storage (cast to and from them, move them); the types narrower than "
        "a byte (int4, uint4, int2, uint2, E2M1) are held as their values (in i8; E2M1 in "
        "E4M3FN), cast to and from and moved, with ml_dtypes' arrays at the runtime "
        "boundary.",
        "",
        *_table(TARGET_OPS, per),
        "",
        "### Cases not passing, and why",
        "",
    ]
    for op in TARGET_OPS:
        bad = [r for r in results if r.op == op and r.status != "passed"]
        if not bad:
            continue
        lines.append(f"- **{op}**")
        lines += [f"  - `{r.case}`: {r.status}: {r.reason}" for r in bad]
    if others:
        lines += ["", "## Every other op with node tests", "", *_table(others, per,
                                                                    reason=first_reason)]
    text = "\n".join(lines).rstrip() + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="comma-separated op types (default: every op with tests)")
    p.add_argument("--no-write", action="store_true", help="do not write docs/onnx-coverage.md")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    ops = set(args.ops.split(",")) if args.ops else None
    start = time.time()
    results = run_cases(collect(ops), verbose=args.verbose)
    counts = Counter(r.status for r in results)
    print(f"{len(results)} cases: {dict(counts)} in {time.time() - start:.0f}s")
    if not args.no_write:
        if ops is not None:
            p.error("--ops runs part of the suite: add --no-write (the table lists all ops)")
        write_table(results, "python tools/onnx_conformance.py", time.time() - start)
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
