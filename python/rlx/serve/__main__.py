"""``python -m rlx.serve``: the same as ``rlx-serve``."""

import sys

from rlx.serve.cli import main

sys.exit(main())
