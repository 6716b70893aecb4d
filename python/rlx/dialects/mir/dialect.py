"""The ``rlx_mir`` dialect object; op families register their schemas into it."""

from rlx.dialects.schema import Dialect

MIR = Dialect("rlx_mir")
