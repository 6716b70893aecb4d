"""The house rules of DESIGN.md sections 4 and 5 that a machine can check, read statically
(``ast``) from ``python/rlx/**`` (nothing is imported):

- floors: imports point down (``FLOORS``), also those inside functions;
- no import cycle between modules (imports run at import time: module level, class bodies,
  ``try`` blocks; not those inside functions or under ``if TYPE_CHECKING``). An edge goes to
  the module an import names (``from rlx.a import b`` is an edge to ``rlx.a.b`` when that is
  a module, else to ``rlx.a``); the implicit import of a parent package is not an edge, so a
  package ``__init__`` may import its own modules;
- each op family has its stem in the dialects, the lowering, ``lit_tests/`` and ``tests/``;
- no module over ``MAX_MODULE_LINES`` lines, no function over ``MAX_FUNCTION_LINES``, unless
  it says why with a ``# long: <reason>`` comment (the line before the ``def`` or its first
  decorator; for a module, one of its first ``MODULE_MARKER_LINES`` lines).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import rlx
import rlx.lowering
from rlx.dialects import mir_module
from rlx.ir.diagnostics import LoweringError

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "python"
PACKAGE = SOURCE / "rlx"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("rlx.ir",),
    ("rlx.dialects",),
    ("rlx.lowering", "rlx.reference"),
    ("rlx.cache", "rlx.weights", "rlx.gpu_targets", "rlx.transients"),
    ("rlx.compiler", "rlx.runtime"),
    ("rlx.gguf", "rlx.encoding"),
    ("rlx.models", "rlx.importers", "rlx.debug", "rlx.tokenizer"),
    ("rlx.speculative",),
    ("rlx.generate",),
    ("rlx.serve", "rlx.tools"),
    ("rlx",),
)
"""The floors, lowest first; a unit is ``rlx.X`` (a module or a subpackage with everything
under it), ``rlx`` alone is the package's ``__init__`` (the public API, on top). A unit imports
its own modules and the units of lower floors only: units on one floor are beside each other
and do not import each other (``reference`` beside ``lowering`` uses only ``dialects`` and
``ir``; ``runtime`` beside ``compiler`` imports without ``iree.compiler``). ``rlx.weights``
is the weight loader ``runtime`` uses: on the floor under it. ``rlx.gguf``
reads weight files and saves them through ``runtime``: under the models that read
checkpoints with it. ``rlx.debug`` compiles and runs modules to find a bad op: beside the
models and importers, under the tools. ``rlx.cache`` (compiled vmfbs on disk) sits
right under the compiler that consults it. ``rlx.tokenizer`` reads a model's vocabulary (GGUF
metadata through ``rlx.gguf``): beside the models, under the generation loop.
``rlx.gpu_targets`` (the GPU names IREE knows, checked before a compile) sits under the
compiler. ``rlx.transients`` (caller-owned transient memory: the size checks a compile adds,
the buffer a call is given) sits under both the compiler and the runtime. ``rlx.encoding``
(a model compiled with its weights' planes encoded ahead of time, then
loaded) uses the compiler and the runtime: beside ``rlx.gguf``, under the generation loop,
the server and speculative decoding that load models through it.
``rlx.speculative`` (speculative decoding on a model's module) is under ``rlx.generate``,
which dispatches to it."""

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MODULE_MARKER_LINES = 5
LONG_MARKER = re.compile(r"#.*\blong:\s*\S")

PENDING: dict[str, str] = {
    # Files over the limits while a change in flight splits them; empty on main. The test
    # fails on an entry that no longer needs to be here.
}
"""Modules (``path``) and functions (``path::qualified.name``) allowed over the limits."""

FAMILY_DIRS = {
    "dialects": ("python/rlx/dialects/hir", "python/rlx/dialects/mir"),
    "lowering": ("python/rlx/lowering/hir_to_mir", "python/rlx/lowering/mir_to_linalg"),
}
"""Where op families live: each module (or package) here is one family, by its stem."""
NOT_FAMILIES = {"__init__", "dialect", "table"}
"""Modules of those directories that are infrastructure (the dialect object, the lowering
table), not a family."""
STEM_PLACES = {
    "dialects": ("python/rlx/dialects/hir/{}.py", "python/rlx/dialects/mir/{}.py"),
    "lowering": ("python/rlx/lowering/hir_to_mir/{}.py",
                 "python/rlx/lowering/hir_to_mir/{}/__init__.py",
                 "python/rlx/lowering/mir_to_linalg/{}.py",
                 "python/rlx/lowering/mir_to_linalg/{}/__init__.py"),
    "lit_tests": ("lit_tests/hir/{}.mlir", "lit_tests/hir_to_mir/{}.mlir",
                  "lit_tests/mir_to_linalg/{}.mlir"),
    "tests": ("tests/numerics/test_{}.py", "tests/test_{}.py"),
}
"""Where each family's stem must appear (one of the paths per place)."""
STEM_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("contraction", "tests"): "MIR matmuls: their numerics are the linear family's "
                              "(tests/numerics/test_linear.py), which lowers to them",
    ("fused", "tests"): "fused MIR ops: their numerics are the linear and norm families' "
                        "(tests/numerics/test_linear.py, test_norm.py)",
    ("decode_attention", "dialects"): "kernel module: rlx_mir.attention's llvm-cpu decode "
                                      "kernel, not an op family",
    ("decode_attention", "tests"): "kernel module: numerics in tests/numerics/"
                                   "test_attention.py (test_decode_attention_kernel)",
    ("prefill_attention", "dialects"): "kernel module: rlx_mir.attention's llvm-cpu "
                                       "prefill kernel, not an op family",
    ("prefill_attention", "tests"): "kernel module: numerics in tests/numerics/"
                                    "test_attention.py (test_prefill_attention_kernel)",
    ("prefill_rows", "dialects"): "kernel module: rlx_mir.attention's llvm-cpu prefill "
                                  "kernel for heads up to 128 wide, not an op family",
    ("prefill_rows", "tests"): "kernel module: numerics in tests/numerics/test_attention.py "
                               "(test_prefill_attention_kernel)",
    ("gdn_kernel", "dialects"): "kernel module: rlx_mir.gated_delta_net's llvm-cpu "
                                "in-place decode step, not an op family",
    ("gdn_kernel", "tests"): "kernel module: numerics in tests/numerics/test_recurrent.py "
                             "(test_gated_delta_net_in_place_step_matches_qwen3_next)",
    ("executable", "dialects"): "the hand-written kernels' shared executable skeleton, not "
                                "an op family",
    ("executable", "lit_tests"): "its text is checked by the kernels' lit tests "
                                 "(decode_attention.mlir, prefill_attention.mlir, "
                                 "gemv_kernels.mlir)",
    ("executable", "tests"): "exercised by every kernel test (test_attention.py, "
                             "test_quant.py)",
    ("float8", "dialects"): "rlx_mir.cast's lowering to and from the 8-bit floats, not an "
                            "op family (rlx_mir.cast is the elementwise family's)",
    ("float8", "lit_tests"): "checked in lit_tests/mir_to_linalg/elementwise.mlir (@float8)",
    ("float8", "tests"): "numerics in tests/numerics/test_elementwise.py "
                         "(test_float8_casts, test_e8m0_casts)",
    ("hyperbolic", "dialects"): "the lowering of rlx_mir.activation's sinh / cosh / asinh / "
                                "acosh / atanh, not an op family (the elementwise family's)",
    ("hyperbolic", "lit_tests"): "checked in lit_tests/mir_to_linalg/elementwise.mlir "
                                 "(@math_functions)",
    ("hyperbolic", "tests"): "numerics in tests/numerics/test_elementwise.py "
                             "(test_elementwise, test_f64_math_functions)",
}
"""(stem, place) pairs that are allowed to be missing, and why."""


# --------------------------------------------------------------------------------------
# Reading the package
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    runs_at_import: bool
    """False inside a function or under ``if TYPE_CHECKING``."""


@cache
def modules() -> dict[str, Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out[name] = Module(name, path, is_package)
    return out


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(mod: Module, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The rlx modules an import statement names."""
    known = modules()
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "rlx"]
    base = node.module or ""
    if node.level:
        package = mod.package.split(".")
        package = package[:len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    if base.split(".")[0] != "rlx":
        return []
    targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    return list(dict.fromkeys(targets))


def _walk(mod: Module, node: ast.AST, runs: bool) -> Iterator[Import]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            for target in _targets(mod, child):
                yield Import(mod.name, target, child.lineno, runs)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(mod, child, False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(mod, ast.Module(body=[stmt], type_ignores=[]), False)
            for stmt in child.orelse:
                yield from _walk(mod, ast.Module(body=[stmt], type_ignores=[]), runs)
        else:
            yield from _walk(mod, child, runs)


@cache
def imports() -> tuple[Import, ...]:
    return tuple(imp for mod in modules().values() for imp in _walk(mod, tree(mod.path), True))


def unit(name: str) -> str:
    return ".".join(name.split(".")[:2])


def floor(name: str) -> int | None:
    return next((i for i, units in enumerate(FLOORS) if unit(name) in units), None)


def _where(imp: Import) -> str:
    return f"{modules()[imp.source].rel}:{imp.line}"


# --------------------------------------------------------------------------------------
# (a) floors
# --------------------------------------------------------------------------------------


def test_every_module_has_a_floor() -> None:
    missing = sorted({unit(m) for m in modules() if floor(m) is None})
    assert not missing, f"units with no floor: {missing}; add each to FLOORS in {__file__}"


def test_imports_point_down() -> None:
    bad = []
    for imp in imports():
        here, there = floor(imp.source), floor(imp.target)
        if here is None or there is None or unit(imp.source) == unit(imp.target):
            continue
        if there >= here:
            kind = "beside it" if there == here else "above it"
            lazy = "" if imp.runs_at_import else " (inside a function or TYPE_CHECKING)"
            bad.append(f"{_where(imp)}: {imp.source} (floor {here}: {', '.join(FLOORS[here])})"
                       f" imports {imp.target} (floor {there}: {', '.join(FLOORS[there])}, "
                       f"{kind}){lazy}")
    assert not bad, ("a lower floor never imports a higher one, not even lazily inside a "
                     "function (DESIGN.md section 4):\n" + "\n".join(bad))


def test_tests_do_not_import_benchmarks() -> None:
    """What tests and benchmarks share lives in tests/ (or the package): benchmarks are
    measurements, not fixtures."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(tree(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {n}" for n in names
                    if n.split(".")[0] == "benchmarks"]
    assert not bad, "tests import benchmarks/:\n" + "\n".join(bad)


def test_floor_check_sees_lazy_imports() -> None:
    """The walker finds an import inside a method body (what a lazy upward import looks
    like) and one under TYPE_CHECKING, and marks both as not run at import time."""
    mod = Module("rlx.dialects.example", PACKAGE / "dialects" / "example.py", False)
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from rlx.compiler import compile\n"
              "class A:\n    def f(self):\n        from rlx.lowering import PASSES\n"
              "from . import schema\n")
    found = list(_walk(mod, ast.parse(source), True))
    assert [(i.target, i.line, i.runs_at_import) for i in found] == [
        ("rlx.compiler", 3, False), ("rlx.lowering", 6, False),
        ("rlx.dialects.schema", 7, True)]
    assert floor("rlx.lowering.emit") > floor("rlx.dialects.example")


def test_lower_to_mir_goes_through_the_hook_the_lowering_installs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``HirModule.lower_to_mir`` (dialects) runs ``rlx.lowering.lower_to_mir`` without
    importing it; with nothing installed it says what is missing."""
    assert mir_module.mir_lowering() is rlx.lowering.lower_to_mir
    h = rlx.HirModule("m")
    h.set_outputs([h.mir("activation", [h.input("x", (2, 3))], kind="relu")])
    assert str(h.lower_to_mir()) == str(rlx.lowering.lower_to_mir(h))
    monkeypatch.setattr(mir_module, "_installed", [])
    with pytest.raises(LoweringError, match=r"HirModule.lower_to_mir: expected the hir-to-mir "
                       r"lowering that rlx.lowering installs when imported .* found none"):
        h.lower_to_mir()


# --------------------------------------------------------------------------------------
# (b) cycles
# --------------------------------------------------------------------------------------


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for imp in imports():
        if imp.runs_at_import and imp.target != imp.source and imp.target in graph:
            graph[imp.source].add(imp.target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_path_in(graph, c) for c in components]


def _path_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (module-level imports):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_cycle_check_reports_the_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]


# --------------------------------------------------------------------------------------
# (c) op family stems
# --------------------------------------------------------------------------------------


def families(root: Path = ROOT) -> dict[str, str]:
    """Family stem -> the directory it was found in."""
    out: dict[str, str] = {}
    for dirs in FAMILY_DIRS.values():
        for d in dirs:
            for child in sorted((root / d).iterdir()):
                stem = child.stem if child.suffix == ".py" else child.name
                is_family = child.suffix == ".py" or (child / "__init__.py").is_file()
                if is_family and stem not in NOT_FAMILIES:
                    out.setdefault(stem, d)
    return out


def _has(root: Path, stem: str, place: str) -> bool:
    return any((root / p.format(stem)).is_file() for p in STEM_PLACES[place])


def missing_stems(root: Path = ROOT) -> list[str]:
    missing = []
    for stem, found_in in sorted(families(root).items()):
        for place, patterns in STEM_PLACES.items():
            if not _has(root, stem, place) and (stem, place) not in STEM_EXCEPTIONS:
                missing.append(f"family '{stem}' ({found_in}) has no {place} file: expected "
                               f"one of {', '.join(p.format(stem) for p in patterns)}")
    return missing


def test_every_family_has_its_stem_everywhere() -> None:
    missing = missing_stems()
    assert not missing, ("one module per op family at every level; its lit test and "
                         "numerics test share its stem (DESIGN.md section 5.1):\n"
                         + "\n".join(missing))


def test_stem_exceptions_are_needed() -> None:
    stale = [f"{stem} / {place}" for stem, place in STEM_EXCEPTIONS
             if stem not in families() or _has(ROOT, stem, place)]
    assert not stale, f"STEM_EXCEPTIONS entries with nothing to excuse: {stale}"


def test_stem_check_takes_a_package_and_names_what_is_missing(tmp_path: Path) -> None:
    """A lowering family may be a package (``mir_to_linalg/quant/``); a family without its
    lit test is reported by stem and place."""
    for d in (*FAMILY_DIRS["dialects"], *FAMILY_DIRS["lowering"]):
        (tmp_path / d).mkdir(parents=True)
    files = ["python/rlx/dialects/hir/quant.py", "python/rlx/dialects/hir/dialect.py",
             "python/rlx/lowering/mir_to_linalg/quant/__init__.py",
             "python/rlx/lowering/mir_to_linalg/table.py", "lit_tests/hir/quant.mlir",
             "tests/numerics/test_quant.py", "python/rlx/dialects/mir/norm.py",
             "python/rlx/lowering/mir_to_linalg/norm.py", "tests/numerics/test_norm.py"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    assert set(families(tmp_path)) == {"quant", "norm"}
    assert missing_stems(tmp_path) == [
        "family 'norm' (python/rlx/dialects/mir) has no lit_tests file: expected one of "
        "lit_tests/hir/norm.mlir, lit_tests/hir_to_mir/norm.mlir, "
        "lit_tests/mir_to_linalg/norm.mlir"]


# --------------------------------------------------------------------------------------
# (d) module and function length
# --------------------------------------------------------------------------------------


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                yield name, child
            yield from _functions(child, name + ".")
        else:
            yield from _functions(child, prefix)


def _marked(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    before = {node.lineno - 2, first - 2}
    return any(i >= 0 and LONG_MARKER.search(lines[i]) for i in before)


def overlong() -> dict[str, str]:
    """``path`` / ``path::function`` -> what is over the limit, for unmarked code."""
    out = {}
    for mod in modules().values():
        lines = mod.path.read_text().splitlines()
        if len(lines) > MAX_MODULE_LINES and not any(
                LONG_MARKER.search(line) for line in lines[:MODULE_MARKER_LINES]):
            out[mod.rel] = f"module of {len(lines)} lines"
        for name, node in _functions(tree(mod.path)):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and not _marked(lines, node):
                out[f"{mod.rel}::{name}"] = f"{length} lines"
    return out


def test_modules_and_functions_are_short() -> None:
    bad = [f"{where}: {what}" for where, what in sorted(overlong().items())
           if where not in PENDING]
    assert not bad, (f"over {MAX_MODULE_LINES} lines a module / {MAX_FUNCTION_LINES} a "
                     "function: split it by job, or say why it is long with a "
                     "'# long: <reason>' comment on the line before its def (a module: in "
                     f"its first {MODULE_MARKER_LINES} lines):\n" + "\n".join(bad))


def test_pending_entries_are_needed() -> None:
    stale = sorted(set(PENDING) - set(overlong()))
    assert not stale, f"PENDING entries now within the limits (remove them): {stale}"


@pytest.mark.parametrize(("source", "marked"), [
    ("def f():\n" + "    x = 1\n" * 60, False),
    ("# long: one table\ndef f():\n" + "    x = 1\n" * 60, True),
    ("# long: one table\n@cache\ndef f():\n" + "    x = 1\n" * 60, True),
    ("# not long\ndef f():\n" + "    x = 1\n" * 60, False),
])
def test_length_check_reads_the_marker(source: str, marked: bool) -> None:
    lines = source.splitlines()
    (name, node), = _functions(ast.parse(source))
    assert isinstance(node, ast.FunctionDef)
    assert name == "f"
    assert (node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES
    assert _marked(lines, node) is marked
