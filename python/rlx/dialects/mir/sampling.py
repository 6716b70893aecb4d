"""MIR sampling ops: the logits processors of HF's ``generate`` and a seeded categorical draw.

Each op works on logits ``x [..., V]`` (the vocabulary is the last axis; the leading axes are
a batch of rows) with one parameter per row (``[...]``, the leading shape of ``x``), so one
compiled module serves any setting. A filter keeps ``x`` where a token stays and writes
``-inf`` where it is removed, as HF's warpers do; a parameter value that turns a filter off
(``k <= 0``, ``p >= 1``, ``min_p <= 0``, ``penalty == 1``) returns the row unchanged.
``categorical`` draws a token with the probabilities ``softmax(x)`` from a seed and a
counter (Gumbel-max over a counter-based hash), so a token can be sampled on the device
without a host round trip, and the same seed gives the same tokens.
"""

from __future__ import annotations

from rlx.dialects.enums import BLOCK_FLOAT_TYPES
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check
from rlx.ir.types import DType, TensorInfo

INT_TYPES = frozenset({DType.I32})


def _rows(c: Check, x: str, *params: str) -> TensorInfo:
    """``x [..., V]`` float; each param ``[...]`` (the leading shape of ``x``)."""
    t = c.dtype(x, BLOCK_FLOAT_TYPES)
    c.min_rank(x, 1)
    rows = c.refs(x)[:-1]
    for p in params:
        c.shape(p, rows, f"one value per row of '{x}' (its leading dims)")
    return t


@MIR.op("repetition_penalty", operands=["x", "seen", "penalty"])
def repetition_penalty(c: Check) -> list[TensorInfo]:
    """HF's ``RepetitionPenaltyLogitsProcessor``: where ``seen`` is non-zero, a logit below
    zero is multiplied by ``penalty`` and one at or above zero divided by it.

    Operands: ``x [..., V]`` float, ``seen [..., V]`` (any element type; the tokens of the
    prompt and of the output so far), ``penalty [...]`` of ``x``'s type.

    Example::

        %y = "rlx_mir.repetition_penalty"(%x, %seen, %p)
            : (tensor<1x32000xf32>, tensor<1x32000xf32>, tensor<1xf32>) -> tensor<1x32000xf32>
    """
    t = _rows(c, "x", "penalty")
    c.shape("seen", c.refs("x"), "the shape of 'x'")
    c.same_dtype("x", "penalty")
    return [t]


@MIR.op("top_k_filter", operands=["x", "k"])
def top_k_filter(c: Check) -> list[TensorInfo]:
    """HF's ``TopKLogitsWarper``: keeps the logits at least as large as the ``k``-th largest
    of the row (ties with it stay), ``-inf`` elsewhere; ``k <= 0`` or ``k >= V`` keeps all.

    Operands: ``x [..., V]`` float, ``k [...]`` i32.

    Example::

        %y = "rlx_mir.top_k_filter"(%x, %k)
            : (tensor<1x32000xf32>, tensor<1xi32>) -> tensor<1x32000xf32>
    """
    t = _rows(c, "x", "k")
    c.dtype("k", INT_TYPES)
    return [t]


@MIR.op("top_p_filter", operands=["x", "p"])
def top_p_filter(c: Check) -> list[TensorInfo]:
    """HF's ``TopPLogitsWarper`` (nucleus): keeps the largest logits whose ``softmax(x)``
    mass first reaches ``p`` (the token that crosses ``p`` stays; ties with the last kept
    logit stay), ``-inf`` elsewhere; ``p >= 1`` keeps all, the largest always stays.

    Operands: ``x [..., V]`` float, ``p [...]`` of ``x``'s type.

    Example::

        %y = "rlx_mir.top_p_filter"(%x, %p)
            : (tensor<1x32000xf32>, tensor<1xf32>) -> tensor<1x32000xf32>
    """
    t = _rows(c, "x", "p")
    c.same_dtype("x", "p")
    return [t]


@MIR.op("min_p_filter", operands=["x", "min_p"])
def min_p_filter(c: Check) -> list[TensorInfo]:
    """HF's ``MinPLogitsWarper``: keeps tokens whose probability is at least ``min_p``
    times the largest one's (``x >= max(x) + log(min_p)``), ``-inf`` elsewhere;
    ``min_p <= 0`` keeps all.

    Operands: ``x [..., V]`` float, ``min_p [...]`` of ``x``'s type.

    Example::

        %y = "rlx_mir.min_p_filter"(%x, %m)
            : (tensor<1x32000xf32>, tensor<1xf32>) -> tensor<1x32000xf32>
    """
    t = _rows(c, "x", "min_p")
    c.same_dtype("x", "min_p")
    return [t]


@MIR.op("categorical", operands=["x", "seed", "counter"])
def categorical(c: Check) -> list[TensorInfo]:
    """A token drawn with the probabilities ``softmax(x)`` of each row, as i32: the index
    of the largest ``x + g`` where ``g`` is Gumbel noise ``-log(-log(u))`` and ``u`` a
    uniform number made from (``seed``, ``counter``, index) by a counter-based hash (see
    ``rlx.reference.ops.uniform_hash``): the same three give the same draw on every run.
    ``-inf`` logits are never drawn. Give each draw its own ``counter`` (e.g. the position).

    Operands: ``x [..., V]`` float, ``seed [...]`` i32, ``counter [...]`` i32.

    Example::

        %t = "rlx_mir.categorical"(%x, %seed, %n)
            : (tensor<1x32000xf32>, tensor<1xi32>, tensor<1xi32>) -> tensor<1xi32>
    """
    t = _rows(c, "x", "seed", "counter")
    c.dtype("seed", INT_TYPES)
    c.dtype("counter", INT_TYPES)
    return [TensorInfo(t.shape[:-1], DType.I32)]


@MIR.op("mark_tokens", operands=["mask", "ids"])
def mark_tokens(c: Check) -> list[TensorInfo]:
    """``mask [..., V]`` with 1 at each of the row's ``ids [..., N]`` (i32; ids outside
    ``0 .. V-1`` are ignored): the set of tokens seen so far, grown by the new ones.

    Example::

        %m2 = "rlx_mir.mark_tokens"(%m, %t)
            : (tensor<1x32000xf32>, tensor<1x1xi32>) -> tensor<1x32000xf32>
    """
    t = c.min_rank("mask", 1)
    c.rank("ids", t.rank)
    c.dtype("ids", INT_TYPES)
    c.shape("ids", [*c.refs("mask")[:-1], c.ref("ids", -1)], "the leading dims of 'mask'")
    return [t]
