"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has a Python example"
    scope: dict[str, object] = {}
    exec(compile(blocks[0], str(README), "exec"), scope)
    assert scope["out"].shape == (3, 64)
