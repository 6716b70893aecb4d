"""Labels and source positions, both carried as MLIR locations.

A HIR label (``named``, ``label_nodes_since``, a block's default label) is a ``NameLoc``:
``loc("layers.0.attn")``. When a module is read from text, the label gets the op's source
position as its child: ``loc("layers.0.attn"("model.hir":12:5))``; ops without a label keep
MLIR's own ``loc("model.hir":12:5)``. Lowering copies the location of a HIR op onto every op
it produces, so both survive down to the IR IREE compiles.
"""

from __future__ import annotations

from collections.abc import Iterator

from iree.compiler import ir


def downcast(loc: ir.Location) -> ir.Location:
    """The typed location (diagnostics hand out plain ``Location`` objects)."""
    if type(loc) is ir.Location:
        return ir.Location.from_attr(loc.attr)
    return loc


def _walk(loc: ir.Location) -> Iterator[ir.Location]:
    loc = downcast(loc)
    yield loc
    if isinstance(loc, ir.NameLoc):
        yield from _walk(loc.child_loc)
    elif isinstance(loc, ir.FusedLoc):
        for inner in loc.locations:
            yield from _walk(inner)
    elif isinstance(loc, ir.CallSiteLoc):
        yield from _walk(loc.callee)


def label_of(loc: ir.Location) -> str | None:
    """The first label (NameLoc) inside ``loc``, or None."""
    for inner in _walk(loc):
        if isinstance(inner, ir.NameLoc):
            return inner.name_str
    return None


def source_of(loc: ir.Location) -> str | None:
    """The first ``file:line:col`` inside ``loc``, or None."""
    for inner in _walk(loc):
        if isinstance(inner, ir.FileLineColLoc):
            return f"{inner.filename}:{inner.start_line}:{inner.start_col}"
    return None


def label_loc(label: str | None, source: ir.Location | None = None) -> ir.Location:
    """The location of an op with ``label`` (needs an active context)."""
    if label is None:
        return source if source is not None else ir.Location.unknown()
    if source is None or isinstance(source, ir.UnknownLoc):
        return ir.Location.name(label)
    return ir.Location.name(label, childLoc=source)


def relabel(loc: ir.Location, label: str) -> ir.Location:
    """``loc`` with its label replaced by ``label``, keeping any source position."""
    for inner in _walk(loc):
        if isinstance(inner, ir.FileLineColLoc):
            return ir.Location.name(label, childLoc=inner)
    return ir.Location.name(label)


def describe(loc: ir.Location) -> str:
    """``file:line:col "label"`` (either part may be absent) for error messages."""
    source = source_of(loc)
    label = label_of(loc)
    parts = [p for p in (source, f'"{label}"' if label is not None else None) if p]
    return " ".join(parts) if parts else "<unknown location>"
