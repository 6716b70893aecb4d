"""Write dialects/rlx_hir.irdl.mlir and dialects/rlx_mir.irdl.mlir from the op schemas.

Run after changing a schema: ``python tools/gen_irdl.py``; ``--check`` exits 1 when the
files are stale (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlx.dialects.irdl import irdl_text

ROOT = Path(__file__).resolve().parent.parent
FILES = {"hir": ROOT / "dialects" / "rlx_hir.irdl.mlir",
         "mir": ROOT / "dialects" / "rlx_mir.irdl.mlir"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args()
    stale = []
    for stage, path in FILES.items():
        text = irdl_text(stage)
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("stale: " + ", ".join(str(p) for p in stale) + " (run python tools/gen_irdl.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
