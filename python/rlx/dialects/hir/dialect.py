"""The ``rlx_hir`` dialect object; op families register their schemas into it."""

from rlx.dialects.schema import Dialect

HIR = Dialect("rlx_hir")
