"""Generation on a compiled model: prefill once, then one decode call per token, the KV cache
kept in device memory between calls; text in and out through the model's own tokenizer.

The decode calls are pipelined: each step's token is a device tensor passed to the next
step, and step n + 1 is queued (``Function.submit``) before step n's token is read back, so
the host's per-call work (binding ~60 cache tensors, IREE recording the call) runs while the
device computes the previous step instead of between steps. Greedy steps take the module's
``next`` output (argmax on the device); sampled steps queue the module's ``sample`` function
(:mod:`rlx.models.sampling`: HF's logits processors and a seeded draw, on the device) after
each decode, its token feeding the next decode the same way.

``rlx.generate(model, "text")`` returns the continuation as text, ``stream=True`` yields it
in pieces as tokens arrive (never half a UTF-8 character), a list of ``{"role", "content"}``
messages goes through the model's chat template, and ids in give ids out. Generation stops
at the tokenizer's end tokens (EOS, end of turn), at ``eos_token_id`` and at ``stop``
strings (the text before one is returned).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rlx.cache import CompileCache
from rlx.cache import resolve as resolve_cache
from rlx.compiler import TargetConfig
from rlx.dialects.builder import HirModule
from rlx.encoding import compile_model, load_compiled
from rlx.ir.diagnostics import RlxError, RunError
from rlx.models import qwen35
from rlx.models.llama import DEFAULT_CONTEXT, LlamaModel, ModelError, from_gguf, from_hf
from rlx.models.llama_cache import fits_context, start_state
from rlx.tokenizer import Tokenizer, TokenizerError
from rlx.tokenizer import load as load_tokenizer

PIPELINE_DEPTH = 1
"""Decode steps queued beyond the one whose token is being read back."""

Prompt = str | Sequence[int] | Sequence[Mapping[str, Any]]
"""Text, token ids, or chat messages (``{"role": ..., "content": ...}``)."""
Progress = Callable[[str], AbstractContextManager[Any]]
"""Reports a stage (``"compiling for llvm-cpu"``) while its ``with`` block runs."""


class SamplingError(RlxError):
    """A sampling parameter out of its range."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen (HF ``generate``'s parameters; the default is greedy).

    ``temperature`` 0 is greedy (the argmax, after the repetition penalty); ``top_k`` 0,
    ``top_p`` 1 and ``min_p`` 0 turn their filter off; ``repetition_penalty`` 1 is none.
    ``seed`` picks the draws: the same seed gives the same tokens on the same target."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        checks = (
            ("temperature", self.temperature, math.isfinite(self.temperature)
             and self.temperature >= 0, "a number >= 0 (0 is greedy)"),
            ("top_k", self.top_k, isinstance(self.top_k, int) and self.top_k >= 0,
             "an integer >= 0 (0 keeps every token)"),
            ("top_p", self.top_p, 0 < self.top_p <= 1, "a number in (0, 1] (1 keeps all)"),
            ("min_p", self.min_p, 0 <= self.min_p <= 1, "a number in [0, 1] (0 keeps all)"),
            ("repetition_penalty", self.repetition_penalty,
             math.isfinite(self.repetition_penalty) and self.repetition_penalty > 0,
             "a number > 0 (1 is no penalty)"),
            ("seed", self.seed, isinstance(self.seed, int), "an integer"),
        )
        for name, value, ok, expected in checks:
            if not ok:
                raise SamplingError(f"error: {name}: expected {expected}, found {value!r}")

    @property
    def greedy(self) -> bool:
        """Greedy without a penalty: the module's ``next`` output is the token."""
        return self.temperature == 0 and self.repetition_penalty == 1

    def inputs(self) -> list[np.ndarray]:
        """The ``sample`` function's setting inputs, in order (temperature ... seed)."""
        seed = (self.seed + 2 ** 31) % 2 ** 32 - 2 ** 31
        return [np.array([self.temperature], np.float32), np.array([self.top_k], np.int32),
                np.array([self.top_p], np.float32), np.array([self.min_p], np.float32),
                np.array([self.repetition_penalty], np.float32), np.array([seed], np.int32)]


@dataclass
class Stats:
    """Timings of the last generation (llama.cpp's summary: prompt and generation rates)."""

    prompt_tokens: int = 0
    prompt_s: float = 0.0
    """Prefill until the first new token is known."""
    new_tokens: int = 0
    decode_s: float = 0.0
    """From the first new token to the last."""

    def line(self) -> str:
        prompt = self.prompt_tokens / self.prompt_s if self.prompt_s > 0 else 0.0
        steps = max(self.new_tokens - 1, 0)
        gen = steps / self.decode_s if self.decode_s > 0 else 0.0
        return (f"prompt: {self.prompt_tokens} tokens, {prompt:.1f} tok/s | generation: "
                f"{self.new_tokens} tokens, {gen:.1f} tok/s")


def _no_progress(stage: str) -> AbstractContextManager[Any]:
    return nullcontext()


class DecoderModel(Protocol):
    """What the generation loop needs of a model family (``rlx.models.llama.LlamaModel``,
    ``rlx.models.qwen35.Qwen35Model``): the HIR module with ``prefill(ids, cos, sin,
    [last], *initial_state)`` and ``decode(ids, cos, sin, *state)``, both returning
    ``logits, next, *state``; its weights; the RoPE tables of given positions."""

    module: HirModule
    weights: dict[str, np.ndarray]

    @property
    def config(self) -> Any: ...

    def rope_tables(self, positions: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]: ...

    def initial_state(self) -> list[np.ndarray]: ...


@dataclass
class Generator:
    """A model compiled for one target and loaded with its weights (and its tokenizer, for
    text). ``cache``: the compiled-model cache (:mod:`rlx.cache`; ``True`` the default
    directory, a path, or ``False``)."""

    model: DecoderModel
    target: str = "llvm-cpu"
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: Tokenizer | None = None
    cache: CompileCache | bool | str | Path | None = True
    progress: Progress = _no_progress
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        start = time.perf_counter()
        store = resolve_cache(self.cache)
        hits = store.hits if store is not None else 0
        with self.progress(f"compiling for {self.target}"):
            compiled = compile_model(self.model.module, self.model.weights, self.target,
                                     store, **self.options)
        self.vmfb = compiled.vmfb
        self.cache_hit = store is not None and store.hits > hits
        """Whether the compiled model came from the cache."""
        device = self.device or TargetConfig(self.target).runtime_device
        stage = ("encoding the weights (once: kept in the cache) and loading them"
                 if compiled.encoded is not None and not compiled.encoded.is_file()
                 else "loading weights onto the device")
        with self.progress(stage):
            self.program, self.encoded = load_compiled(compiled, self.model.weights, device)
        """Whether this load encoded the weights' planes (:mod:`rlx.encoding`)."""
        self.startup_s = time.perf_counter() - start
        """Compiling (or reading the cache) and loading the weights onto the device."""

    def prefill(self, ids: Sequence[int]) -> tuple[np.ndarray, tuple[Any, ...]]:
        """Logits of the last prompt token ``[V]`` and the KV cache (device tensors)."""
        if not ids:
            raise RunError("error: the prompt is empty")
        self._fits(len(ids), "the prompt")
        tokens = np.asarray([list(ids)], np.int32)
        cos, sin = self.model.rope_tables(range(len(ids)))
        inputs = [tokens, cos, sin]
        if "last" in self.program.prefill.input_names:
            inputs.append(np.array([[len(ids) - 1]], np.int32))
        out = self.program.prefill.on_device(*inputs, *start_state(self.program, self.model))
        return out[0].numpy()[0, -1], out[2:]

    def _fits(self, positions: int, what: str) -> None:
        fits_context(self.model, positions, what)

    def decode(self, token: int, position: int, cache: tuple[Any, ...]
               ) -> tuple[np.ndarray, tuple[Any, ...]]:
        """One step: logits ``[V]`` of ``token`` at ``position`` and the grown cache."""
        self._fits(position + 1, f"a token at position {position}")
        cos, sin = self.model.rope_tables([position])
        out = self.program.decode.on_device(np.array([[token]], np.int32), cos, sin, *cache)
        return out[0].numpy()[0, -1], out[2:]

    def greedy(self, token: int, position: int, cache: tuple[Any, ...], steps: int,
               eos_token_id: int | None = None) -> list[int]:
        """``steps`` greedy decode steps from ``token`` at ``position``: the tokens they
        choose (stopping after ``eos_token_id``). Step n + 1 is queued before step n's
        token is read back (a step queued past an end token is discarded)."""
        stops = frozenset() if eos_token_id is None else frozenset({eos_token_id})
        return list(self._steps(token, position, cache, steps, None, stops))

    def _steps(self, token: int, position: int, cache: tuple[Any, ...], steps: int,
               sampler: _Sampler | None, stops: frozenset[int]) -> Iterator[int]:
        """Pipelined decode steps (see ``greedy``); ``sampler`` None takes ``next``."""
        cos, sin = self.model.rope_tables(range(position, position + steps))
        decode = self.program.decode
        ids: Any = np.array([[token]], np.int32)
        pending: deque[Any] = deque()
        for step in range(steps + PIPELINE_DEPTH):
            if step < steps:
                res = decode.submit(ids, cos[step:step + 1], sin[step:step + 1], *cache)
                cache = res[2:]
                ids = res[1] if sampler is None else sampler.submit(res[0], position + 1 + step)
                pending.append(ids)
            if len(pending) > PIPELINE_DEPTH or (step >= steps and pending):
                out = int(pending.popleft().numpy().reshape(-1)[0])
                yield out
                if out in stops:
                    return

    def tokens(self, prompt_ids: Sequence[int], max_new_tokens: int = 32,
               sampling: Sampling | None = None, stop_ids: frozenset[int] = frozenset()
               ) -> Iterator[int]:
        """New token ids as they are read back (the end token that stops it included);
        :attr:`stats` holds the timings."""
        sampling = sampling or Sampling()
        self.stats = stats = Stats(prompt_tokens=len(prompt_ids))
        if max_new_tokens < 1:
            return
        # the last new token is never fed back: prompt + max_new_tokens - 1 cache rows
        self._fits(len(prompt_ids) + max_new_tokens - 1,
                   f"the prompt ({len(prompt_ids)} tokens) and max_new_tokens "
                   f"({max_new_tokens})")
        start = time.perf_counter()
        logits, cache = self.prefill(prompt_ids)
        sampler = None if sampling.greedy else _Sampler(self, sampling, prompt_ids)
        first = int(np.argmax(logits)) if sampler is None else sampler.first(logits,
                                                                             len(prompt_ids))
        stats.prompt_s = time.perf_counter() - start
        stats.new_tokens = 1
        yield first
        if first in stop_ids or max_new_tokens == 1:
            return
        begin = time.perf_counter()
        for token in self._steps(first, len(prompt_ids), cache, max_new_tokens - 1, sampler,
                                 stop_ids):
            stats.new_tokens += 1
            stats.decode_s = time.perf_counter() - begin
            yield token

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 32,
                 eos_token_id: int | None = None, sampling: Sampling | None = None
                 ) -> list[int]:
        """The new token ids (stops after ``eos_token_id``); greedy by default."""
        stops = frozenset() if eos_token_id is None else frozenset({eos_token_id})
        return list(self.tokens(prompt_ids, max_new_tokens, sampling, stops))

    # -- text ---------------------------------------------------------------------------

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt (see :func:`encode_prompt`)."""
        return encode_prompt(prompt, self.tokenizer, self.model.config.vocab_size)

    def _tokenizer(self) -> Tokenizer:
        return _need(self.tokenizer)

    def stream(self, prompt: Prompt, max_new_tokens: int = 32, *,
               sampling: Sampling | None = None, stop: Sequence[str] = (),
               eos_token_id: int | None = None) -> Iterator[str]:
        """The continuation as text pieces, as tokens arrive (see the module docstring)."""
        tok = self._tokenizer()
        ids = self.prompt_ids(prompt)
        ends = tok.end_ids | ({eos_token_id} if eos_token_id is not None else set())
        decoder = tok.stream()
        held = _StopHolder(stop)
        for token in self.tokens(ids, max_new_tokens, sampling, frozenset(ends)):
            if token in ends:
                break
            piece, done = held.push(decoder.push(token))
            if piece:
                yield piece
            if done:
                return
        piece, _ = held.push(decoder.flush())
        rest = piece + held.flush()
        if rest:
            yield rest

    def text(self, prompt: Prompt, max_new_tokens: int = 32, **kwargs: Any) -> str:
        """The continuation as one string (see :meth:`stream`)."""
        return "".join(self.stream(prompt, max_new_tokens, **kwargs))


def _need(tokenizer: Tokenizer | None) -> Tokenizer:
    if tokenizer is None:
        raise TokenizerError("error: the model has no tokenizer (no tokenizer.json beside it, "
                             "no tokenizer.* metadata in its GGUF): give the prompt as token "
                             "ids (rlx-generate --prompt-ids)")
    return tokenizer


def encode_prompt(prompt: Prompt, tokenizer: Tokenizer | None, vocab_size: int | None = None
                  ) -> list[int]:
    """Token ids of a prompt: ids as they are (checked against ``vocab_size``), text
    encoded, chat messages through the chat template."""
    if isinstance(prompt, str):
        return _need(tokenizer).encode(prompt)
    if prompt and isinstance(prompt[0], Mapping):
        return _need(tokenizer).encode_chat(prompt)  # type: ignore[arg-type]
    ids = [int(t) for t in prompt]  # type: ignore[arg-type]
    bad = [t for t in ids if vocab_size is not None and not 0 <= t < vocab_size]
    if bad:
        raise RunError(f"error: prompt ids {bad} are outside the vocabulary "
                       f"(0..{vocab_size - 1 if vocab_size else 0})")
    return ids


class _Sampler:
    """Queues the module's ``sample`` function after each decode step: the settings are
    uploaded once, ``seen`` (the prompt's and output's tokens) stays on the device."""

    def __init__(self, gen: Generator, sampling: Sampling, prompt_ids: Sequence[int]) -> None:
        program = gen.program
        if "sample" not in program.functions:
            raise RunError("error: the compiled model has no 'sample' function (built with "
                           "functions= that leave it out): sampling needs it")
        self.function = program.sample
        self.settings = [program.upload(a) for a in sampling.inputs()]
        vocab = gen.model.config.vocab_size
        seen = np.zeros((1, vocab), np.float32)
        seen[0, [t for t in prompt_ids if 0 <= t < vocab]] = 1
        self.seen: Any = seen

    def first(self, logits: np.ndarray, position: int) -> int:
        """The token after the prompt, from the prefill's last logits (host)."""
        token = self.submit(np.asarray(logits, np.float32)[None, None], position)
        return int(token.numpy().reshape(-1)[0])

    def submit(self, logits: Any, position: int) -> Any:
        """Queue one draw for the token at ``position``; its token, a device tensor."""
        token, self.seen = self.function.submit(logits, self.seen, *self.settings,
                                                np.array([position], np.int32))
        return token


class _StopHolder:
    """Holds back text that could be the start of a stop string until it is clear."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self.pending = ""

    def push(self, text: str) -> tuple[str, bool]:
        """(text safe to show, whether a stop string was reached)."""
        self.pending += text
        hits = [i for i in (self.pending.find(s) for s in self.stops) if i >= 0]
        if hits:
            out, self.pending = self.pending[:min(hits)], ""
            return out, True
        keep = max((k for s in self.stops for k in range(1, len(s))
                    if self.pending.endswith(s[:k])), default=0)
        cut = len(self.pending) - keep
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out, False

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


# --------------------------------------------------------------------------------------
# Loading models by path, and the one-call API
# --------------------------------------------------------------------------------------


QWEN35_TYPES = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"}
"""HF model_type values read by rlx.models.qwen35 (which refuses the MoE ones clearly)."""


def load_model(path: str | Path, context: int | None = DEFAULT_CONTEXT
               ) -> LlamaModel | qwen35.Qwen35Model:
    """A model from an HF directory (config.json + *.safetensors) or a ``.gguf`` file: the
    LLaMA family, or Qwen3.5 (``model_type`` / ``general.architecture``). ``context``: the
    positions the model's KV cache is preallocated to (None: it grows)."""
    p = Path(path)
    if p.suffix == ".gguf":
        import rlx.gguf

        with rlx.gguf.load(p) as f:
            arch = f.metadata.get("general.architecture")
        return (qwen35.from_gguf(p, context=context) if arch in ("qwen35", "qwen35moe")
                else from_gguf(p, context=context))
    if not (p / "config.json").is_file():
        raise ModelError(f"{p}: error: expected an HF model directory with config.json, or "
                         "a .gguf file")
    kind = qwen35.read_config(p / "config.json").get("model_type")
    return (qwen35.from_hf(p, context=context) if kind in QWEN35_TYPES
            else from_hf(p, context=context))


def model_tokenizer(path: str | Path) -> Tokenizer | None:
    """The tokenizer that comes with a model (None when it has none)."""
    p = Path(path)
    if p.is_dir() and not (p / "tokenizer.json").is_file():
        return None
    try:
        return load_tokenizer(p)
    except TokenizerError as e:
        if "has no tokenizer" in str(e):
            return None
        raise


def generate(model: DecoderModel | str | Path, prompt: Prompt, max_new_tokens: int = 32, *,
             target: str = "llvm-cpu", tokenizer: Tokenizer | None = None,
             eos_token_id: int | None = None, stop: Sequence[str] = (),
             stream: bool = False, cache: CompileCache | bool | str | Path | None = True,
             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int = 0,
             speculative: str | None = None, draft_tokens: int = 4, **options: Any) -> Any:
    """Compile ``model`` (a built model, or the path of an HF directory / ``.gguf``, whose
    tokenizer comes along) for ``target`` and generate ``max_new_tokens``.

    ``prompt`` text or chat messages: returns the text (``stream=True``: an iterator of
    text pieces); token ids: returns the new ids (stopping after ``eos_token_id``).
    Sampling parameters as in :class:`Sampling` (the default is greedy); ``options`` are
    compile options (:func:`rlx.compile`). ``speculative="mtp"`` (Qwen3.5, greedy, ids in
    and out): the checkpoint's MTP head drafts ``draft_tokens`` a step and one main-model
    call verifies them (the same tokens, see :mod:`rlx.speculative`)."""
    sampling = Sampling(temperature, top_k, top_p, min_p, repetition_penalty, seed)
    if isinstance(model, str | Path):
        tokenizer = tokenizer if tokenizer is not None else model_tokenizer(model)
        model = load_model(model)
    if speculative is not None:
        return _speculative(model, prompt, max_new_tokens, sampling, speculative,
                            target=target, eos_token_id=eos_token_id,
                            draft_tokens=draft_tokens, cache=cache, **options)
    gen = Generator(model, target, options=options, tokenizer=tokenizer, cache=cache)
    text = isinstance(prompt, str) or bool(prompt and isinstance(prompt[0], Mapping))
    if text or stream:
        pieces = gen.stream(prompt, max_new_tokens, sampling=sampling, stop=stop,
                            eos_token_id=eos_token_id)
        return pieces if stream else "".join(pieces)
    return gen.generate(gen.prompt_ids(prompt), max_new_tokens, eos_token_id, sampling)


def _speculative(model: DecoderModel, prompt: Prompt, max_new_tokens: int,
                 sampling: Sampling, speculative: str, **kw: Any) -> list[int]:
    from rlx import speculative as spec

    if speculative != "mtp":
        raise RunError(f"error: speculative: expected 'mtp', found {speculative!r}")
    if not isinstance(model, qwen35.Qwen35Model):
        raise RunError(f"error: speculative='mtp' needs a model with an MTP head (Qwen3.5), "
                       f"found {type(model).__name__}")
    if not sampling.greedy:
        raise SamplingError("error: speculative='mtp' decodes greedily: expected temperature "
                            f"0 and no repetition penalty, found {sampling}")
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], Mapping)):
        raise RunError("error: speculative='mtp' takes the prompt as token ids")
    return spec.generate(model, [int(t) for t in prompt], max_new_tokens,  # type: ignore
                         **kw)


__all__ = ["DecoderModel", "Generator", "Sampling", "SamplingError", "Stats", "encode_prompt",
           "generate", "load_model", "model_tokenizer"]
