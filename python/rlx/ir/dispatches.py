"""Dispatch counts of a compiled module's public functions, read from ``iree-compile``'s
``--compile-to=flow`` and ``--compile-to=stream`` text (:func:`rlx.compiler.dispatch_counts`
runs the compiler)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DispatchCounts:
    """Dispatches of the public functions (initializers, e.g. hoisted weight packing, are
    not counted): ``flow`` regions plus ``encode`` ops at ``--compile-to=flow`` (encodes
    become dispatches later), and the dispatches a call runs at ``--compile-to=stream``."""

    flow: int
    encode: int
    stream: int


def public_bodies(text: str) -> str:
    """The bodies of public functions in MLIR text (util.func / func.func), joined."""
    bodies, current, depth = [], [], 0
    for line in text.splitlines():
        if not current and re.match(r"\s*(util|func)\.func public @", line):
            current, depth = [line], line.count("{") - line.count("}")
            continue
        if current:
            current.append(line)
            depth += line.count("{") - line.count("}")
            if depth <= 0:
                bodies.append("\n".join(current))
                current = []
    return "\n".join(bodies)


def counts_of(flow_text: str, stream_text: str) -> DispatchCounts:
    """The counts of a module compiled to flow (``flow_text``) and to stream."""
    flow, stream = public_bodies(flow_text), public_bodies(stream_text)
    return DispatchCounts(flow=flow.count("flow.dispatch @"),
                          encode=flow.count("flow.tensor.encode"),
                          stream=stream.count("stream.cmd.dispatch"))


__all__ = ["DispatchCounts", "counts_of", "public_bodies"]
