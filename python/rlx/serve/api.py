"""The OpenAI request and response bodies: parsing a request into prompt ids and settings
(every bad value an :class:`ApiError` that becomes a 4xx in OpenAI's error shape) and
building the completion / chat completion objects and their stream chunks.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.generate import Sampling
from rlx.ir.diagnostics import RlxError
from rlx.tokenizer import Tokenizer, TokenizerError

MAX_STOPS = 4


class ApiError(RlxError):
    """A request the server refuses: ``status`` (4xx) and OpenAI's ``error`` object."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.code, self.kind = (
            message, param, status, code, kind)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}


@dataclass(frozen=True)
class Settings:
    """What a completion request asks for, checked."""

    prompt_ids: list[int]
    max_tokens: int | None
    sampling: Sampling
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool


def _number(body: Mapping[str, Any], name: str, default: float, lo: float, hi: float
            ) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not lo <= value <= hi:
        raise ApiError(f"{name}: expected a number in [{lo}, {hi}], found {value!r}", name)
    return float(value)


def _integer(body: Mapping[str, Any], name: str, lo: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ApiError(f"{name}: expected an integer >= {lo}, found {value!r}", name)
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(
            isinstance(s, str) and s for s in stops):
        raise ApiError(f"stop: expected a string or a list of at most {MAX_STOPS} non-empty "
                       f"strings, found {stop!r}", "stop")
    return tuple(stops)


def _unsupported(body: Mapping[str, Any]) -> None:
    """Fields whose values rlx does not implement: refused, never silently ignored."""
    n = body.get("n")
    if n is not None and n != 1:
        raise ApiError(f"n: only 1 choice per request is supported, found {n!r}", "n")
    for name in ("logprobs", "top_logprobs", "echo", "best_of", "suffix", "tools", "functions",
                 "logit_bias", "response_format"):
        value = body.get(name)
        ok = value in (None, False) or (name == "best_of" and value == 1) or (
            name in ("tools", "functions", "logit_bias") and value in ([], {}))
        if not ok:
            raise ApiError(f"{name}: not supported by this server, found {value!r}", name)
    for name in ("frequency_penalty", "presence_penalty"):
        if _number(body, name, 0.0, -2.0, 2.0) != 0.0:
            raise ApiError(f"{name}: not supported by this server (only 0)", name)


def _prompt(body: Mapping[str, Any], tokenizer: Tokenizer | None, vocab: int) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str) and prompt:
        return _tok(tokenizer, "prompt").encode(prompt)
    if isinstance(prompt, list) and prompt and all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in prompt):
        return list(prompt)
    raise ApiError("prompt: expected a non-empty string or a list of token ids in "
                   f"[0, {vocab - 1}] (one prompt per request), found {str(prompt)[:80]!r}",
                   "prompt")


def _messages(body: Mapping[str, Any], tokenizer: Tokenizer | None) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str) for m in messages):
        raise ApiError("messages: expected a non-empty list of {role, content} objects with "
                       "string content", "messages")
    try:
        return _tok(tokenizer, "messages").encode_chat(
            [{"role": m["role"], "content": m["content"]} for m in messages])
    except TokenizerError as e:
        raise ApiError(f"messages: {e}", "messages") from None


def _tok(tokenizer: Tokenizer | None, param: str) -> Tokenizer:
    if tokenizer is None:
        raise ApiError("the model has no tokenizer: give the prompt as token ids", param)
    return tokenizer


def parse(body: Any, chat: bool, tokenizer: Tokenizer | None, vocab: int) -> Settings:
    """Check a request body; any bad value raises :class:`ApiError`."""
    if not isinstance(body, dict):
        raise ApiError(f"expected a JSON object, found {type(body).__name__}")
    _unsupported(body)
    ids = _messages(body, tokenizer) if chat else _prompt(body, tokenizer, vocab)
    max_tokens = _integer(body, "max_completion_tokens" if chat and "max_completion_tokens"
                          in body else "max_tokens", 1)
    if max_tokens is None and not chat:
        max_tokens = 16  # OpenAI's default for completions
    seed = _integer(body, "seed", -2 ** 63)
    sampling = Sampling(temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
                        top_p=_number(body, "top_p", 1.0, 1e-9, 1.0),
                        seed=seed if seed is not None else uuid.uuid4().int % 2 ** 31)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(f"stream: expected true or false, found {stream!r}", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError("stream_options: expected an object", "stream_options")
    return Settings(ids, max_tokens, sampling, _stop(body), stream,
                    bool(options.get("include_usage", False)))


# -- responses ------------------------------------------------------------------------------


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]


def completion(rid: str, model: str, chat: bool, text: str, finish: str | None,
               counts: tuple[int, int]) -> dict[str, Any]:
    """The whole (non-streamed) response."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {"id": rid, "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice],
            "usage": usage(*counts)}


def chunk(rid: str, model: str, chat: bool, text: str | None, finish: str | None,
          role: bool = False) -> dict[str, Any]:
    """One server-sent event's object (``text`` None: a chat chunk with an empty delta)."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if chat:
        delta: dict[str, Any] = {"role": "assistant"} if role else {}
        if text is not None:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice]}


def usage_chunk(rid: str, model: str, chat: bool, counts: Sequence[int]) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [],
            "usage": usage(counts[0], counts[1])}


__all__ = ["ApiError", "Settings", "chunk", "completion", "new_id", "parse", "usage",
           "usage_chunk"]
