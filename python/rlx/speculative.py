"""Speculative greedy decoding: a drafter proposes K tokens, one call of the main model
(``verify_K``) scores the pending token and the K drafts, the longest prefix of drafts that
equals the main model's own greedy choices is accepted, plus the main model's token after
it. The output is exactly plain greedy decoding's, whatever the drafts: every emitted token
is the main model's argmax given the tokens before it.

Rejected positions roll back exactly: the KV caches are cut to the accepted length
(``rollback``, a gather of their first rows), and each linear-attention layer's conv and
recurrent state is the one ``verify_K`` returned after the last accepted position (it
returns them after every position). The drafters:

- :class:`MtpDrafter`: the checkpoint's MTP head (``mtp``), with its own KV cache: the
  first draft of a round reads the main model's hidden states of the accepted positions
  (one ``mtp`` call over them), each further draft the head's own previous state;
  its cache entries made from its own states are dropped (``mtp_rollback``) once the main
  model has verified those positions.
- :class:`ReplayDrafter`: replays a given token sequence (a draft that is always right
  when it is the main model's own greedy output: the upper bound of the speed-up).

Works on a compiled :mod:`rlx.models.qwen35` module built with
:func:`rlx.models.qwen35.speculative`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rlx.cache import CompileCache
from rlx.compiler import TargetConfig
from rlx.encoding import compile_model, load_compiled
from rlx.ir.diagnostics import RunError
from rlx.models import qwen35
from rlx.models.llama_cache import fits_context, start_state
from rlx.models.qwen35 import FULL, Qwen35Model, require_mtp


class Drafter(Protocol):
    def start(self, hidden: Any, prompt: Sequence[int], token: int) -> None:
        """After the prefill: the prompt's hidden states, the first generated token."""

    def propose(self, k: int, position: int) -> list[int]:
        """K drafts following the pending token at ``position``."""

    def accept(self, hidden: Any, accepted: Sequence[int], position: int) -> None:
        """The verify call's hidden states and the tokens it accepted after the pending
        one at ``position`` (the last is the new pending token)."""


@dataclass
class Stats:
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        """Accepted drafts / proposed drafts."""
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass
class ReplayDrafter:
    """Proposes ``tokens[i:i + K]`` when ``i`` tokens have been generated (zeros past its
    end): always right when ``tokens`` is the main model's own greedy continuation."""

    tokens: Sequence[int]
    done: int = 0

    def start(self, hidden: Any, prompt: Sequence[int], token: int) -> None:
        self.done = 1

    def propose(self, k: int, position: int) -> list[int]:
        out = list(self.tokens[self.done:self.done + k])
        return out + [0] * (k - len(out))

    def accept(self, hidden: Any, accepted: Sequence[int], position: int) -> None:
        self.done += len(accepted)


@dataclass
class MtpDrafter:
    """The MTP head of the compiled module (see the module docstring)."""

    program: Any
    model: Qwen35Model
    cache: tuple[Any, Any] | None = None
    base: int = 0
    """Cache rows made from the main model's hidden states (the rest are this round's
    own-state entries, dropped once verified)."""
    pending: tuple[Any, list[int], list[int], int] | None = None
    """(hidden states, their rows, the tokens paired with them, first position) of the
    positions the next round's first draft call covers."""

    def __post_init__(self) -> None:
        require_mtp(self.model)

    def start(self, hidden: Any, prompt: Sequence[int], token: int) -> None:
        kv = np.zeros((1, 0, self.model.config.kv_dim), np.float32)
        self.cache = (kv, kv)
        ids = [*prompt[1:], token]
        self.pending = (hidden, list(range(len(ids))), ids, 0)

    def _call(self, hidden: Any, rows: list[int], ids: list[int], first: int
              ) -> tuple[Any, Any]:
        assert self.cache is not None
        cos, sin = self.model.rope_tables(range(first, first + len(ids)))
        out = self.program.mtp.on_device(
            hidden, np.array([rows], np.int32), np.array([ids], np.int32), cos, sin,
            np.array([len(ids) - 1], np.int32), *self.cache)
        self.cache = (out[2], out[3])
        return out[0], out[1]

    def propose(self, k: int, position: int) -> list[int]:
        assert self.pending is not None
        nxt, hidden = self._call(*self.pending)
        drafts = [int(nxt.numpy().reshape(-1)[0])]
        for j in range(1, k):
            nxt, hidden = self._call(hidden, [0], [drafts[-1]], position + j - 1)
            drafts.append(int(nxt.numpy().reshape(-1)[0]))
        self.base = position  # cache rows before this round's own-state entries
        return drafts

    def accept(self, hidden: Any, accepted: Sequence[int], position: int) -> None:
        assert self.cache is not None
        if self.cache[0].shape[1] > self.base:
            keep = np.arange(self.base, dtype=np.int32)
            out = self.program.mtp_rollback.on_device(keep, *self.cache)
            self.cache = (out[0], out[1])
        self.pending = (hidden, list(range(len(accepted))), list(accepted), position)


@dataclass
class SpeculativeDecoder:
    """Greedy decoding with ``draft_tokens`` drafts a round on a compiled Qwen3.5 module."""

    program: Any
    model: Qwen35Model
    draft_tokens: int
    drafter: Drafter
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        name = f"verify_{self.draft_tokens}"
        if name not in self.program.functions:
            raise RunError(f"error: the module has no '{name}' (build it with "
                           f"rlx.models.qwen35.speculative(model, {self.draft_tokens}))")
        self.verify = self.program[name]

    def prefill(self, prompt: Sequence[int]) -> tuple[int, list[Any], Any]:
        """First token, state, the prompt's hidden states."""
        cos, sin = self.model.rope_tables(range(len(prompt)))
        out = self.program.prefill.on_device(
            np.array([list(prompt)], np.int32), cos, sin,
            np.array([[len(prompt) - 1]], np.int32), *start_state(self.program, self.model))
        return int(out[1].numpy().reshape(-1)[0]), list(out[2:-1]), out[-1]

    def generate(self, prompt: Sequence[int], max_new_tokens: int,
                 eos_token_id: int | None = None) -> list[int]:
        if not prompt:
            raise RunError("error: the prompt is empty")
        if max_new_tokens < 1:
            return []
        # the last verify call writes K + 1 rows from at most the last token's position
        fits_context(self.model, len(prompt) + max_new_tokens + self.draft_tokens,
                     f"the prompt ({len(prompt)} tokens), {max_new_tokens} new tokens and "
                     f"{self.draft_tokens} drafts")
        token, state, hidden = self.prefill(prompt)
        tokens = [token]
        if token == eos_token_id or max_new_tokens == 1:
            return tokens
        self.drafter.start(hidden, prompt, token)
        position = len(prompt)
        while True:
            accepted, state, hidden = self._round(token, position, state)
            for t in accepted:
                tokens.append(t)
                if t == eos_token_id or len(tokens) == max_new_tokens:
                    return tokens
            self.drafter.accept(hidden, accepted, position)
            position += len(accepted)
            token = accepted[-1]

    def _round(self, token: int, position: int, state: list[Any]
               ) -> tuple[list[int], list[Any], Any]:
        """One verify call: the accepted drafts and the main model's next token, the state
        after the pending token and the accepted drafts, the hidden states."""
        k = self.draft_tokens
        drafts = self.drafter.propose(k, position)
        cos, sin = self.model.rope_tables(range(position, position + k + 1))
        out = self.verify.on_device(np.array([[token, *drafts]], np.int32), cos, sin, *state)
        greedy = [int(t) for t in out[0].numpy().reshape(-1)]
        n = 0
        while n < k and drafts[n] == greedy[n]:
            n += 1
        self.stats.rounds += 1
        self.stats.drafted += k
        self.stats.accepted += n
        return greedy[:n + 1], self._rolled_back(list(out[2:]), position + n + 1, n), out[1]

    def _rolled_back(self, out: list[Any], length: int, n: int) -> list[Any]:
        """The state after ``n + 1`` of the ``K + 1`` positions: KV caches cut to
        ``length`` rows (a preallocated cache: ``length`` rows filled, the rows after them
        left for the next call to overwrite), the linear layers' states after position n."""
        k1 = self.draft_tokens + 1
        filled = [] if self.model.context is None else [np.array([length], np.int32)]
        out = out[len(filled):]
        kv: list[Any] = []
        linear: dict[int, tuple[Any, Any]] = {}
        at = 0
        for i, kind in enumerate(self.model.config.layer_types):
            if kind == FULL:
                kv += out[at:at + 2]
                at += 2
            else:
                linear[i] = (out[at + n], out[at + k1 + n])
                at += 2 * k1
        if n + 1 < k1 and kv and not filled:
            kv = list(self.program.rollback.on_device(np.arange(length, dtype=np.int32), *kv))
        state: list[Any] = list(filled)
        for i, kind in enumerate(self.model.config.layer_types):
            state += [kv.pop(0), kv.pop(0)] if kind == FULL else list(linear[i])
        return state


def load(model: Qwen35Model, draft_tokens: int | Sequence[int], target: str = "llvm-cpu",
         device: str | None = None, cache: CompileCache | bool | str | Path | None = True,
         **options: Any) -> Any:
    """Compile the model's speculative module (``verify_K`` for each K) and load it;
    ``cache`` as for :class:`rlx.generate.Generator` (the compiled-model cache, on by
    default: a second run of the same model and K starts without compiling)."""
    if not isinstance(model, Qwen35Model):
        raise RunError(f"error: speculative decoding: expected a Qwen3.5 model "
                       f"(rlx.models.qwen35), found {type(model).__name__}")
    built = qwen35.speculative(model, draft_tokens)
    compiled = compile_model(built.module, built.weights, target, cache, **options)
    return load_compiled(compiled, built.weights,
                         device or TargetConfig(target).runtime_device)[0]


def decoder(model: Qwen35Model, program: Any, draft_tokens: int, drafter: str = "mtp",
            replay: Sequence[int] = ()) -> SpeculativeDecoder:
    """A decoder on a program from :func:`load`: ``drafter`` ``"mtp"`` (the checkpoint's
    head) or ``"replay"`` (``replay``'s tokens)."""
    if drafter == "mtp":
        return SpeculativeDecoder(program, model, draft_tokens, MtpDrafter(program, model))
    if drafter == "replay":
        return SpeculativeDecoder(program, model, draft_tokens, ReplayDrafter(replay))
    raise RunError(f"error: speculative: expected 'mtp' (or 'replay'), found {drafter!r}")


def generate(model: Qwen35Model, prompt_ids: Sequence[int], max_new_tokens: int = 32, *,
             draft_tokens: int = 4, target: str = "llvm-cpu",
             eos_token_id: int | None = None, **options: Any) -> list[int]:
    """Compile and decode greedily with the MTP head drafting ``draft_tokens`` a round."""
    if draft_tokens < 1:
        raise RunError(f"error: draft_tokens: expected >= 1, found {draft_tokens}")
    require_mtp(model)
    program = load(model, draft_tokens, target, **options)
    return decoder(model, program, draft_tokens).generate(prompt_ids, max_new_tokens,
                                                          eos_token_id)


__all__ = ["Drafter", "MtpDrafter", "ReplayDrafter", "SpeculativeDecoder", "Stats", "decoder",
           "generate", "load"]
