"""Reading and writing rlx modules as MLIR text (generic op form).

MLIR itself parses and prints; this module only decides which locations the canonical text
shows (labels, nothing else) and gives labelled ops their source position when text is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from iree.compiler import ir

from rlx.ir.context import new_context
from rlx.ir.diagnostics import ParseError
from rlx.ir.locations import downcast, label_of

_UNKNOWN_LOC = re.compile(r" loc\(unknown\)(?=[),\n]|$)", re.MULTILINE)
_NAME_LOC = re.compile(r'loc\(\s*("(?:[^"\\]|\\.)*")\s*\)')


def walk_ops(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every op nested in ``op`` (not ``op`` itself), in textual order."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from walk_ops(child.operation)


def _block_args(op: ir.Operation) -> Iterator[ir.BlockArgument]:
    for region in op.regions:
        for block in region.blocks:
            yield from block.arguments


def print_module(module: ir.Module) -> str:
    """The canonical text: generic rlx ops, labels as ``loc("...")``, no other locations."""
    with module.context:
        clone = module.operation.clone()
        try:
            clone.location = ir.Location.unknown()
            for op in [clone, *walk_ops(clone)]:
                for arg in _block_args(op):
                    arg.set_location(ir.Location.unknown())
                if op is clone:
                    continue
                label = label_of(op.location)
                op.location = ir.Location.name(label) if label is not None else (
                    ir.Location.unknown())
            text = clone.get_asm(enable_debug_info=True, use_local_scope=True)
        finally:
            clone.erase()
    text = _UNKNOWN_LOC.sub("", text)
    return text if text.endswith("\n") else text + "\n"


def _mlir_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _op_position(text: str, at: int) -> tuple[int, int]:
    """1-based (line, col) of the op whose trailing location starts at offset ``at``.

    The op is the last statement line (first non-blank char ``%`` or ``"``) at or before
    ``at``; the column is that of the op name, as MLIR reports it.
    """
    line_start = text.rfind("\n", 0, at) + 1
    while True:
        stripped = text[line_start:].lstrip(" \t")
        if stripped[:1] in ('%', '"') or line_start == 0:
            break
        line_start = text.rfind("\n", 0, line_start - 1) + 1
    line = text.count("\n", 0, line_start) + 1
    line_end = text.find("\n", line_start)
    body = text[line_start: line_end if line_end >= 0 else len(text)]
    quote = body.find('"')
    col = quote if quote >= 0 else len(body) - len(body.lstrip(" \t"))
    return line, col + 1


def _code_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans of ``text`` outside string literals and ``//`` comments."""
    i, start, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            yield start, i
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            start = i
        elif text.startswith("//", i):
            yield start, i
            i = text.find("\n", i)
            if i < 0:
                return
            start = i
        else:
            i += 1
    yield start, n


def anchor_labels(text: str, source: str) -> str:
    """Give every bare ``loc("label")`` its op's source position as a child location."""
    out: list[str] = []
    last = 0
    for start, end in _code_spans(text):
        pos = text.find("loc(", start, end)
        while pos >= 0:
            m = _NAME_LOC.match(text, pos)
            if m is not None:
                line, col = _op_position(text, pos)
                out.append(text[last:pos])
                out.append(f"loc({m.group(1)}({_mlir_string(source)}:{line}:{col}))")
                last = m.end()
            pos = text.find("loc(", pos + 4, end)
    out.append(text[last:])
    return "".join(out)


def _rename_source(loc: ir.Location, source: str) -> ir.Location:
    if isinstance(loc, ir.FileLineColLoc) and loc.filename == "-":
        return ir.Location.file(source, loc.start_line, loc.start_col)
    return loc


def parse_module(text: str, source: str = "<string>",
                 context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text with MLIR's own parser; malformed text raises :class:`ParseError`."""
    ctx = context if context is not None else new_context()
    anchored = anchor_labels(text, source)
    with ctx:
        try:
            module = ir.Module.parse(anchored)
        except ir.MLIRError as e:
            raise ParseError(_format_diagnostics(e, source)) from None
        module.operation.location = _rename_source(module.operation.location, source)
        for op in walk_ops(module.operation):
            op.location = _rename_source(op.location, source)
            for arg in _block_args(op):
                arg.set_location(_rename_source(arg.location, source))
    return module


def parse_file(path: str | Path, context: ir.Context | None = None) -> ir.Module:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ParseError(f"{p}: error: cannot read file: {e}") from None
    return parse_module(text, str(p), context)


def _format_diagnostics(e: ir.MLIRError, source: str) -> str:
    lines = []
    for diag in e.error_diagnostics:
        lines.append(_format_one(diag, source, "error"))
        lines.extend(_format_one(note, source, "note") for note in diag.notes)
    return "\n".join(lines) if lines else f"{source}: error: {e}"


def _format_one(diag: ir.DiagnosticInfo, source: str, kind: str) -> str:
    loc = downcast(diag.location)
    where = source
    if isinstance(loc, ir.FileLineColLoc):
        name = source if loc.filename == "-" else loc.filename
        where = f"{name}:{loc.start_line}:{loc.start_col}"
    return f"{where}: {kind}: {diag.message}"
