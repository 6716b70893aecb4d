"""Shared plumbing of the command-line tools: one error line, exit code 1, no traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from rlx.ir.diagnostics import RlxError


def run(main: Callable[[], int | None]) -> int:
    """Run a tool's body; an :class:`RlxError` prints its message and returns 1."""
    try:
        return main() or 0
    except RlxError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (``rlx-run ... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def read_input(path: str) -> tuple[str, str]:
    """(text, source name) of a file argument; ``-`` is stdin."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    try:
        return p.read_text(), str(p)
    except (OSError, UnicodeDecodeError) as e:
        raise RlxError(f"{path}: error: cannot read file: {e.strerror or e}") from None


def write_output(text: str | bytes, path: str | None) -> None:
    """Write to ``path`` atomically (a temp file renamed over it), or stdout."""
    if path is None or path == "-":
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        if isinstance(text, bytes):
            tmp.write_bytes(text)
        else:
            tmp.write_text(text)
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise RlxError(f"{path}: error: cannot write file: {e.strerror or e}") from None
