"""Typed errors of rlx.

Every error rlx raises on bad input is an :class:`RlxError`. The message is one line (or a
few, for a reproducer) that names where the problem is (``file:line:col`` and/or the op
label), what was expected and what was found. The command-line tools print ``str(error)``
and exit with status 1, without a Python traceback.
"""

from __future__ import annotations

import re


class RlxError(Exception):
    """Base class of every error rlx reports to its users."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ParseError(RlxError):
    """Malformed HIR/MIR text; the message carries MLIR's ``file:line:col`` diagnostic."""


class VerifyError(RlxError):
    """An op breaks its schema (operand count, rank, dtype, shape, attribute value).

    The message reads ``FILE:LINE:COL: error: 'rlx_hir.swiglu' "ffn": operand 'gate_w' dim 0:
    expected 768 (...), found 512``; the position is absent for ops built in Python.
    """

    def __init__(
        self,
        op_name: str,
        what: str,
        expected: str,
        found: str,
        *,
        label: str | None = None,
        source: str | None = None,
    ) -> None:
        self.op_name = op_name
        self.label = label
        self.source = source
        self.what = what
        self.expected = expected
        self.found = found
        prefix = f"{source}: " if source else ""
        named = f' "{label}"' if label is not None else ""
        super().__init__(
            f"{prefix}error: '{op_name}'{named}: {what}: expected {expected}, found {found}"
        )


class BuildError(RlxError):
    """Misuse of the Python builder API (a value from another module, outputs not set, ...)."""


class LoweringError(RlxError):
    """A lowering pass could not lower an op (no rule, or a rule that rejected its input)."""


class CompileError(RlxError):
    """IREE rejected a module; the message names the failing op and a reproduce command."""


class WeightError(RlxError):
    """A weight file or weight dict does not match the module's parameters."""


class RunError(RlxError):
    """Running a compiled module failed (bad inputs, missing parameters, runtime error)."""


SIZE_CHECK_FOUND = "found another size at run time"
"""How the message of a failed run-time size check ends (``rlx.lowering.guards`` writes it
into the module; the sizes themselves are not known when it is written)."""
_SIZE_CHECK = re.compile(r"INVALID_ARGUMENT; (?P<msg>.*?" + re.escape(SIZE_CHECK_FOUND)
                         + ")")


def size_check_message(status: str) -> str | None:
    """The message of a failed run-time size check in IREE's status text, or None."""
    m = _SIZE_CHECK.search(status)
    return m.group("msg") if m else None


class ModelImportError(RlxError):
    """A model file could not be imported: unreadable or corrupt, or it uses an op, opset or
    element type rlx does not support (the message names the node, its op type and opset)."""
