"""Continuous batching: one thread owns the compiled batched model
(:mod:`rlx.models.llama_batch`, or :mod:`rlx.models.qwen35_batch` for Qwen3.5: each
sequence its own KV cache slot and DeltaNet states) and advances every running request by
one token per decode call; requests join and leave between calls.

The scheduler loop, each round: drop requests that were cancelled (a client went away: the
slot is free for the next round), admit waiting requests into free slots (a ``prefill``
call writes a group of prompts' K / V into their slots and gives each its first token: a
LLaMA module prefills several prompts of similar length in one call, sharing each weight's
dequantization; while others are decoding, one prefill call a round so that their tokens
keep coming), then one
``decode`` call for all slots (a request's token sits at its own position in its own slot)
and, for each running request that samples, one ``sample`` call on its row of the step's
logits.
Each request's tokens become text in the engine thread (the tokenizer's StreamDecoder, stop
strings held back until clear) and are handed to the request's ``emit`` callback.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx.cache import CompileCache
from rlx.cache import resolve as resolve_cache
from rlx.compiler import TargetConfig
from rlx.encoding import compile_model, load_compiled
from rlx.generate import Sampling, _StopHolder
from rlx.ir.diagnostics import RlxError
from rlx.models import llama_batch, qwen35_batch
from rlx.models.llama import LlamaModel
from rlx.models.qwen35 import Qwen35Model
from rlx.tokenizer import Tokenizer


class EngineError(RlxError):
    """The engine cannot take a request (stopped, or the request does not fit)."""


@dataclass(frozen=True)
class Event:
    """What a request's ``emit`` receives: a text piece, or the end (``finish`` set)."""

    text: str = ""
    tokens: int = 0
    """Tokens generated so far."""
    finish: str | None = None
    """``"stop"`` (an end token or a stop string), ``"length"`` (max_tokens or the context),
    ``"cancelled"`` or ``"error"``; None while running."""
    error: str | None = None


@dataclass
class Request:
    """One generation: prompt ids, how many tokens at most, sampling, stop strings."""

    prompt_ids: Sequence[int]
    max_tokens: int
    emit: Callable[[Event], None]
    sampling: Sampling = field(default_factory=Sampling)
    stop: Sequence[str] = ()
    id: int = field(default_factory=itertools.count().__next__)
    cancelled: threading.Event = field(default_factory=threading.Event)
    tokens: list[int] = field(default_factory=list)
    submitted: float = field(default_factory=time.perf_counter)

    def cancel(self) -> None:
        """Ask the engine to drop the request (it frees the slot before the next step)."""
        self.cancelled.set()


@dataclass
class _Running:
    request: Request
    slot: int
    position: int
    """The position of the last token (the next decode input)."""
    decoder: Any
    held: _StopHolder


class BatchModel:
    """The batched module compiled and loaded: ``prefill`` into a slot, ``step`` the busy
    slots (with the decode function of the fewest rows that covers them)."""

    def __init__(self, model: LlamaModel | Qwen35Model, batch: int, context: int,
                 target: str = "llvm-cpu", cache: CompileCache | bool | str | None = True,
                 rows: Sequence[int] | None = None, **options: Any) -> None:
        self.config = c = model.config
        self.rope_tables = model.rope_tables
        self.batch, self.context = batch, context
        self.rows = llama_batch.step_rows(batch, rows)
        """The row counts of the decode functions (:func:`.llama_batch.step_rows`)."""
        self.calls = {r: 0 for r in self.rows}
        """Decode calls made, per row count."""
        kind = qwen35_batch if isinstance(model, Qwen35Model) else llama_batch
        module = kind.build(c, batch, context, rows=self.rows)  # type: ignore[arg-type]
        compiled = compile_model(module, model.weights, target, resolve_cache(cache),
                                 **options)
        self.vmfb = compiled.vmfb
        self.program, _ = load_compiled(compiled, model.weights,
                                        TargetConfig(target).runtime_device)
        # each state tensor its own buffer (the calls update them in place)
        self.cache: tuple[Any, ...] = tuple(
            self.program.upload(np.zeros(shape, np.float32))
            for shape in kind.state_shapes(c, batch, context))  # type: ignore[arg-type]
        self.seen1 = self.program.upload(np.zeros((1, c.vocab_size), np.float32))

    def prefill(self, slot: int, ids: Sequence[int], sampling: Sampling) -> int:
        """Run the prompt into ``slot``; the token after it."""
        return self.prefill_many([slot], [ids], [sampling])[0]

    def prefill_many(self, slots: Sequence[int], prompts: Sequence[Sequence[int]],
                     sampling: Sequence[Sampling]) -> list[int]:
        """Run ``prompts[p]`` into ``slots[p]``; the token after each. One call for all of
        them, right-padded to the longest. The slots must be distinct and each below the
        batch (the module writes each prompt's state at its slot, and computes the logits
        of at most ``batch`` prompts: ``llama_batch.prompt_logits``), the prompts non-empty:
        else an :class:`EngineError` naming what was found."""
        if not prompts:
            return []
        bad = [s for s in slots if not 0 <= s < self.batch]
        if bad or len(set(slots)) != len(slots) or any(not p for p in prompts):
            raise EngineError(f"error: prefill: expected distinct slots in 0 .. "
                              f"{self.batch - 1} and non-empty prompts, found slots "
                              f"{list(slots)}, prompt lengths {[len(p) for p in prompts]}")
        n = max(len(p) for p in prompts)
        ids = np.zeros((len(prompts), n), np.int32)
        for row, p in zip(ids, prompts, strict=True):
            row[:len(p)] = p
        last = np.array([[len(p) - 1] for p in prompts], np.int32)
        cos, sin = self.rope_tables(range(n))
        out = self.program.prefill.on_device(ids, cos, sin, last,
                                             np.asarray(slots, np.int32), *self.cache)
        self.cache = tuple(out[2:])
        tokens = [int(t) for t in out[1].numpy().reshape(-1)]
        if all(s.greedy for s in sampling):
            return tokens
        logits = out[0].numpy()
        for p, s in enumerate(sampling):
            if not s.greedy:
                token, _ = self.program.sample.on_device(
                    logits[p][None], self.seen1, *s.inputs(),
                    np.array([len(prompts[p])], np.int32))
                tokens[p] = int(token.numpy().reshape(-1)[0])
        return tokens

    def step(self, tokens: np.ndarray, positions: np.ndarray,
             sampling: Sequence[Sampling | None]) -> np.ndarray:
        """One decode call: slot b's ``tokens[b]`` at ``positions[b]``; the next tokens
        ``[B]``. ``sampling[b]`` None (a free slot) or greedy takes the argmax. The call
        runs the fewest rows that cover the last busy slot (``decode_R``); the slots past
        them are left as they are (their tokens come back 0)."""
        busy = [b for b, s in enumerate(sampling) if s is not None]
        rows = next(r for r in self.rows if r > (busy[-1] if busy else 0))
        fn = self.program[llama_batch.decode_function(rows, self.batch)]
        self.calls[rows] += 1
        cos, sin = self.rope_tables(positions[:rows])
        out = fn.on_device(tokens[None, :rows].astype(np.int32), cos, sin,
                           positions[:rows].astype(np.int32), *self.cache)
        self.cache = tuple(out[2:])
        greedy = np.zeros(self.batch, np.int64)
        greedy[:rows] = out[1].numpy().reshape(-1)
        hot = [b for b, s in enumerate(sampling) if s is not None and not s.greedy]
        if not hot:
            return greedy
        logits = out[0].numpy()[0]
        for b in hot:
            s = sampling[b]
            assert s is not None
            token, _ = self.program.sample.on_device(
                logits[b][None, None], self.seen1, *s.inputs(),
                np.array([positions[b] + 1], np.int32))
            greedy[b] = int(token.numpy().reshape(-1)[0])
        return greedy


class Engine:
    """Runs :class:`BatchModel` in its own thread; :meth:`submit` from any thread."""

    def __init__(self, model: BatchModel, tokenizer: Tokenizer | None,
                 max_prefills_while_decoding: int = 1, prefill_tokens: int = 2048) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.end_ids = tokenizer.end_ids if tokenizer is not None else frozenset()
        self.prefills_per_round = max_prefills_while_decoding
        self.waiting: queue.Queue[Request] = queue.Queue()
        self.running: dict[int, _Running] = {}
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.steps = 0
        self.peak = 0
        """The most sequences one decode call has advanced."""
        self.thread = threading.Thread(target=self._loop, name="rlx-engine", daemon=True)
        self.error: BaseException | None = None
        self.admitting: list[Request] = []
        self.held: list[Request] = []
        """Requests taken from :attr:`waiting` and left out of a prefill group."""
        self.prefill_tokens = max(prefill_tokens, model.context)
        """A prefill call's padded tokens at most (several prompts; one may be longer)."""

    def start(self) -> Engine:
        self.thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Finish the running and waiting requests, then end the thread."""
        self.stopping.set()
        self.wake.set()
        self.thread.join(timeout)

    def submit(self, request: Request) -> Request:
        """Queue a request; its events arrive through ``request.emit``."""
        if self.stopping.is_set() or self.error is not None:
            raise EngineError("error: the engine is shutting down; no new requests")
        room = self.model.context - len(request.prompt_ids)
        if not request.prompt_ids or room < 1:
            raise EngineError(f"error: the prompt has {len(request.prompt_ids)} tokens; "
                              f"expected 1 to {self.model.context - 1} (context "
                              f"{self.model.context})")
        self.waiting.put(request)
        self.wake.set()
        return request

    @property
    def free_slots(self) -> int:
        return self.model.batch - len(self.running)

    # -- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                self._drop_cancelled()
                self._admit()
                if self.running:
                    self._step()
                    continue
                if self.stopping.is_set() and self.waiting.empty() and not self.held:
                    return
                self.wake.wait(0.5)
                self.wake.clear()
        except BaseException as e:  # the model failed: every request gets the error
            self.error = e
            self._fail_all(str(e))
            raise

    def _fail_all(self, error: str) -> None:
        failed = [r.request for r in self.running.values()]
        failed += self.admitting + self.held
        self.admitting, self.held = [], []
        self.running.clear()
        while not self.waiting.empty():
            failed.append(self.waiting.get_nowait())
        for request in failed:
            request.emit(Event(finish="error", error=error, tokens=len(request.tokens)))

    def _drop_cancelled(self) -> None:
        for slot, r in list(self.running.items()):
            if r.request.cancelled.is_set():
                del self.running[slot]
                r.request.emit(Event(finish="cancelled", tokens=len(r.request.tokens)))

    def _admit(self) -> None:
        """Prefill calls for waiting requests: while others decode, ``prefills_per_round``
        calls a round (so their tokens keep coming), else as many as the free slots take;
        each call runs a group of prompts (:meth:`_group`) into the lowest free slots."""
        calls = self.prefills_per_round if self.running else self.model.batch
        while calls > 0 and self.free_slots > 0:
            group = self._group()
            if not group:
                return
            free = [b for b in range(self.model.batch) if b not in self.running]
            slots = free[:len(group)]
            self.admitting = group
            tokens = self.model.prefill_many(slots, [r.prompt_ids for r in group],
                                             [r.sampling for r in group])
            self.admitting = []
            calls -= 1
            for request, slot, token in zip(group, slots, tokens, strict=True):
                decoder = self.tokenizer.stream() if self.tokenizer is not None else None
                r = _Running(request, slot, len(request.prompt_ids), decoder,
                             _StopHolder(request.stop))
                self.running[slot] = r
                self._deliver(r, token)

    def _group(self) -> list[Request]:
        """The next prompts to prefill together, oldest first, at most the free slots:
        each next one that keeps the padded call (prompts x the longest) within twice its
        real tokens and :attr:`prefill_tokens` (a longer prompt alone goes alone). Requests
        left out wait in :attr:`held`, first in line for the next call."""
        while not self.waiting.empty():
            self.held.append(self.waiting.get_nowait())
        group: list[Request] = []
        longest = total = 0
        for request in list(self.held):
            if request.cancelled.is_set():
                self.held.remove(request)
                request.emit(Event(finish="cancelled"))
                continue
            if len(group) == self.free_slots:
                break
            n = len(request.prompt_ids)
            padded = max(longest, n) * (len(group) + 1)
            if group and (padded > 2 * (total + n) or padded > self.prefill_tokens):
                continue
            group.append(request)
            self.held.remove(request)
            longest, total = max(longest, n), total + n
        return group

    def _step(self) -> None:
        tokens = np.zeros(self.model.batch, np.int64)
        positions = np.zeros(self.model.batch, np.int64)
        sampling: list[Sampling | None] = [None] * self.model.batch
        for slot, r in self.running.items():
            tokens[slot], positions[slot] = r.request.tokens[-1], r.position
            sampling[slot] = r.request.sampling
        nxt = self.model.step(tokens, positions, sampling)
        self.steps += 1
        self.peak = max(self.peak, len(self.running))
        for slot, r in list(self.running.items()):
            r.position += 1
            self._deliver(r, int(nxt[slot]))

    def _deliver(self, r: _Running, token: int) -> None:
        """Hand ``token`` to its request; free the slot when the request is done."""
        request = r.request
        request.tokens.append(token)
        n = len(request.tokens)
        if token in self.end_ids:
            return self._finish(r, "stop", flush=True)
        text, stopped = ("", False)
        if r.decoder is not None:
            text, stopped = r.held.push(r.decoder.push(token))
        if stopped:
            return self._finish(r, "stop", text)
        if n >= request.max_tokens or r.position >= self.model.context:
            return self._finish(r, "length", text, flush=True)
        if text or r.decoder is None:
            request.emit(Event(text=text, tokens=n))
        return None

    def _finish(self, r: _Running, reason: str, text: str = "", flush: bool = False) -> None:
        """End the request; ``flush``: the text held back (no stop string was reached)."""
        self.running.pop(r.slot, None)
        if flush and r.decoder is not None:
            more, stopped = r.held.push(r.decoder.flush())
            text += more + ("" if stopped else r.held.flush())
        r.request.emit(Event(text=text, tokens=len(r.request.tokens), finish=reason))


__all__ = ["BatchModel", "Engine", "EngineError", "Event", "Request"]
