"""Values an exported program computes from its sizes alone, evaluated at import time.

A node is *size-only* when its value depends on no input tensor's data, only on weights and
on sizes (``arange(seq)``, a causal mask, RoPE's cos / sin tables of ``position_ids``,
BERT's ``token_type_ids`` buffer sliced to the sequence). :class:`Probe` runs such nodes
with torch itself (each ATen op on real tensors) at chosen sizes inside the ranges
torch.export recorded for the program's dims:

- a size-only tensor whose dynamic dims are plain dims with an upper bound, and whose value
  at a smaller size is the leading block of its value at the largest size (*prefix
  stable*: row t of a RoPE table is position t whatever the length), is imported as that
  largest value, sliced to the run-time sizes;
- the matchers ask what a mask is: causal (at two sizes), or a padding mask of one input
  ``[B, S_k]`` (at two sizes, with random keep flags).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import sympy
import torch
from torch.fx import Node
from torch.fx.node import map_arg

from rlx.importers.dims import is_static
from rlx.importers.torch_export.program import IGNORED, ProgramView, op_name, sym_dim

MAX_FOLDED = 1 << 22
"""Elements of the largest size-only tensor imported as a constant (else op by op)."""

Env = dict[sympy.Symbol, int]


class ProbeError(Exception):
    """A probe that cannot run (an op torch refuses at the chosen sizes)."""


class Probe:
    def __init__(self, g: ProgramView) -> None:
        self.g = g
        self._data: dict[Node, frozenset[Node]] = {}
        self._envs: dict[str, Env | None] = {}
        self._folded: dict[Node, tuple[torch.Tensor, list[int]] | None] = {}

    # -- which nodes are size-only -------------------------------------------------------
    def data_inputs(self, node: Node) -> frozenset[Node]:
        """The user inputs whose data ``node``'s value depends on (not their sizes)."""
        if node in self._data:
            return self._data[node]
        stack = [node]
        while stack:
            n = stack[-1]
            if n in self._data:
                stack.pop()
                continue
            if n.op == "placeholder":
                self._data[n] = frozenset({n} if n in self.g.user_inputs else ())
                stack.pop()
                continue
            if self._is_size(n):
                self._data[n] = frozenset()  # a size
                stack.pop()
                continue
            pending = [a for a in n.all_input_nodes if a not in self._data]
            if pending:
                stack.extend(pending)
                continue
            self._data[n] = frozenset().union(*(self._data[a] for a in n.all_input_nodes))
            stack.pop()
        return self._data[node]

    def size_only(self, node: Node) -> bool:
        return node.op == "call_function" and not self.data_inputs(node)

    # -- sizes to probe at ---------------------------------------------------------------
    def env(self, which: str) -> Env | None:
        """Sizes for every dim of the program: ``small``, ``other`` (distinct per dim, in
        range) or ``max`` (each dim's upper bound; None when one is unbounded)."""
        if which in self._envs:
            return self._envs[which]
        env: Env | None = {}
        for i, (s, (lo, hi)) in enumerate(sorted(self.g.ranges.items(), key=lambda kv: str(
                kv[0]))):
            lo_i = max(lo, 1) if lo is not None else 1
            hi_i = hi
            if which == "max":
                if hi_i is None:
                    env = None
                    break
                env[s] = hi_i
                continue
            want = 3 + i if which == "small" else 6 + 2 * i
            env[s] = max(lo_i, want if hi_i is None else min(hi_i, want))
        self._envs[which] = env
        return env

    def sizes_at(self, node: Node, env: Env) -> list[int]:
        return [int(sympy.sympify(d).subs(env)) for d in self.g.dims(node)]

    # -- running nodes -------------------------------------------------------------------
    def evaluate(self, node: Node, env: Env, feeds: Mapping[Node, torch.Tensor] | None = None
                 ) -> Any:
        """The value of ``node`` at sizes ``env`` (user inputs from ``feeds``)."""
        feeds = feeds or {}
        cone: list[Node] = []
        seen: set[Node] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            cone.append(n)
            if not self._is_size(n):
                stack.extend(n.all_input_nodes)
        values: dict[Node, Any] = {}
        for n in sorted(cone, key=self.g.index.__getitem__):
            values[n] = self._run(n, env, feeds, values)
        return values[node]

    def _is_size(self, n: Node) -> bool:
        return n.op == "call_function" and isinstance(self.g.val(n), torch.SymInt | int) \
            and not isinstance(self.g.val(n), bool)

    def _run(self, n: Node, env: Env, feeds: Mapping[Node, torch.Tensor],
             values: dict[Node, Any]) -> Any:
        if self._is_size(n):
            return int(sympy.sympify(sym_dim(self.g.val(n))).subs(env))
        if n.op == "placeholder":
            if n in feeds:
                return feeds[n]
            if n in self.g.weights:
                return self.g.weights[n][1]
            raise ProbeError(f"input '{n.name}' is not fed")
        if op_name(n) in IGNORED:
            return None
        args = map_arg(n.args, values.__getitem__)
        kwargs = map_arg(n.kwargs, values.__getitem__)
        try:
            with torch.no_grad():
                return n.target(*args, **kwargs)  # type: ignore[operator]
        except Exception as e:  # any op torch refuses at these sizes: the probe fails
            raise ProbeError(f"{n.name}: {e}") from e

    def try_evaluate(self, node: Node, env: Env | None,
                     feeds: Mapping[Node, torch.Tensor] | None = None) -> Any:
        if env is None:
            return None
        try:
            return self.evaluate(node, env, feeds)
        except ProbeError:
            return None

    # -- size-only tensors as constants ----------------------------------------------------
    def fold(self, node: Node) -> tuple[torch.Tensor, list[int]] | None:
        """A size-only tensor as (its value at the largest sizes, its dynamic axes), when
        it is prefix stable; None when it is not, or unbounded, or too large."""
        if node not in self._folded:
            self._folded[node] = self._fold(node)
        return self._folded[node]

    def _fold(self, node: Node) -> tuple[torch.Tensor, list[int]] | None:
        dims = self.g.dims(node)
        dynamic = [a for a, d in enumerate(dims) if not is_static(d)]
        if any(not isinstance(dims[a], sympy.Symbol) for a in dynamic):
            return None
        big = self.env("max") if dynamic else self.env("small")
        if big is None or math.prod(self.sizes_at(node, big)) > MAX_FOLDED:
            return None
        full = self.try_evaluate(node, big)
        if not isinstance(full, torch.Tensor):
            return None
        for which in ("small", "other"):
            part = self.try_evaluate(node, self.env(which))
            if not isinstance(part, torch.Tensor) or part.dim() != full.dim():
                return None
            if any(p > f for p, f in zip(part.shape, full.shape, strict=True)):
                return None
            lead = full[tuple(slice(0, p) for p in part.shape)]
            if lead.shape != part.shape or not _equal(lead, part):
                return None
        return full, dynamic

    # -- what a mask is ----------------------------------------------------------------
    def is_causal(self, mask: Node, q: Node, k: Node) -> bool:
        """A size-only mask that keeps key j for query i iff ``j <= i + (S_k - S)`` at two
        sizes (bool: true keeps; float: 0 keeps, very negative masks)."""
        if not self.size_only(mask):
            return False
        for which in ("small", "other"):
            env = self.env(which)
            m = self.try_evaluate(mask, env)
            if env is None or not isinstance(m, torch.Tensor) or m.dim() < 2:
                return False
            s, sk = self.sizes_at(q, env)[-2], self.sizes_at(k, env)[-2]
            keep = torch.ones(s, sk, dtype=torch.bool).tril(sk - s)
            if not _mask_is(m, keep):
                return False
        return True

    def padding_source(self, mask: Node, q: Node, k: Node) -> Node | None:
        """The user input ``[B, S_k]`` whose non-zero entries are the keys a mask keeps
        (the same for every query and head): BERT's ``attention_mask`` expanded."""
        sources = self.data_inputs(mask)
        if len(sources) != 1:
            return None
        (src,) = sources
        if len(self.g.dims(src)) != 2 or self.g.dtype(src) is None:
            return None
        gen = torch.Generator().manual_seed(0)
        for which in ("small", "other"):
            env = self.env(which)
            if env is None:
                return None
            b, sk = self.sizes_at(src, env)
            if [b, sk] != [self.sizes_at(q, env)[0], self.sizes_at(k, env)[-2]]:
                return None
            flags = torch.randint(0, 2, (b, sk), generator=gen)
            flags[:, 0] = 1
            feed = flags.to(self.g.dtype(src))  # type: ignore[arg-type]
            m = self.try_evaluate(mask, env, {src: feed})
            if not isinstance(m, torch.Tensor) or m.dim() != 4:
                return None
            s = self.sizes_at(q, env)[-2]
            keep = flags.bool()[:, None, None, :].expand(b, 1, s, sk)
            if not _mask_is(m, keep):
                return None
        return src


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))
    return bool(torch.equal(a, b))


def _mask_is(m: torch.Tensor, keep: torch.Tensor) -> bool:
    """``m`` (broadcast against ``keep``) keeps exactly ``keep``: true / 0 keeps, false /
    a very negative bias masks."""
    try:
        mb, kb = torch.broadcast_tensors(m, keep)
    except RuntimeError:
        return False
    if m.dtype == torch.bool:
        return bool(torch.equal(mb, kb))
    if not m.dtype.is_floating_point:
        return False
    return bool(torch.all(mb[kb] == 0) and torch.all(mb[~kb] <= -1e4))


__all__ = ["MAX_FOLDED", "Probe", "ProbeError"]
