"""Greedy generation on a compiled model: prefill once, then one decode call per token,
the KV cache kept in device memory between calls.

The decode calls are pipelined: each step's greedy token is the module's ``next`` output
(argmax on the device), passed to the next step as a device tensor, and step n + 1 is
queued (``Function.submit``) before step n's token is read back, so the host's per-call
work (binding ~60 cache tensors, IREE recording the call) runs while the device computes
the previous step instead of between steps."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlx import runtime
from rlx.compiler import TargetConfig, compile
from rlx.dialects.builder import HirModule
from rlx.ir.diagnostics import RunError

PIPELINE_DEPTH = 1
"""Decode steps queued beyond the one whose token is being read back."""


class DecoderModel(Protocol):
    """What the generation loop needs of a model family (``rlx.models.llama.LlamaModel``,
    ``rlx.models.qwen35.Qwen35Model``): the HIR module with ``prefill(ids, cos, sin,
    [last], *initial_state)`` and ``decode(ids, cos, sin, *state)``, both returning
    ``logits, next, *state``; its weights; the RoPE tables of given positions."""

    module: HirModule
    weights: dict[str, np.ndarray]

    def rope_tables(self, positions: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]: ...

    def initial_state(self) -> list[np.ndarray]: ...


@dataclass
class Generator:
    """A model compiled for one target and loaded with its weights."""

    model: DecoderModel
    target: str = "llvm-cpu"
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vmfb = compile(self.model.module, self.target, **self.options)
        device = self.device or TargetConfig(self.target).runtime_device
        self.program = runtime.load(self.vmfb, device, self.model.weights)

    def prefill(self, ids: Sequence[int]) -> tuple[np.ndarray, tuple[Any, ...]]:
        """Logits of the last prompt token ``[V]`` and the KV cache (device tensors)."""
        if not ids:
            raise RunError("error: the prompt is empty")
        tokens = np.asarray([list(ids)], np.int32)
        cos, sin = self.model.rope_tables(range(len(ids)))
        inputs = [tokens, cos, sin]
        if "last" in self.program.prefill.input_names:
            inputs.append(np.array([[len(ids) - 1]], np.int32))
        out = self.program.prefill.on_device(*inputs, *self.model.initial_state())
        return out[0].numpy()[0, -1], out[2:]

    def decode(self, token: int, position: int, cache: tuple[Any, ...]
               ) -> tuple[np.ndarray, tuple[Any, ...]]:
        """One step: logits ``[V]`` of ``token`` at ``position`` and the grown cache."""
        cos, sin = self.model.rope_tables([position])
        out = self.program.decode.on_device(np.array([[token]], np.int32), cos, sin, *cache)
        return out[0].numpy()[0, -1], out[2:]

    def greedy(self, token: int, position: int, cache: tuple[Any, ...], steps: int,
               eos_token_id: int | None = None) -> list[int]:
        """``steps`` greedy decode steps from ``token`` at ``position``: the tokens they
        choose (stopping after ``eos_token_id``). Step n + 1 is queued before step n's
        token is read back (a step queued past an end token is discarded)."""
        cos, sin = self.model.rope_tables(range(position, position + steps))
        decode = self.program.decode
        ids: Any = np.array([[token]], np.int32)
        pending: deque[Any] = deque()
        out: list[int] = []
        for step in range(steps + PIPELINE_DEPTH):
            if step < steps:
                res = decode.submit(ids, cos[step:step + 1], sin[step:step + 1], *cache)
                ids, cache = res[1], res[2:]
                pending.append(ids)
            if len(pending) > PIPELINE_DEPTH or (step >= steps and pending):
                out.append(int(pending.popleft().numpy().reshape(-1)[0]))
                if out[-1] == eos_token_id:
                    break
        return out

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 32,
                 eos_token_id: int | None = None) -> list[int]:
        """Greedy decoding; returns the new token ids (stops after ``eos_token_id``)."""
        if max_new_tokens < 1:
            return []
        logits, cache = self.prefill(prompt_ids)
        first = int(np.argmax(logits))
        if first == eos_token_id or max_new_tokens == 1:
            return [first]
        return [first, *self.greedy(first, len(prompt_ids), cache, max_new_tokens - 1,
                                    eos_token_id)]


def generate(model: DecoderModel, prompt_ids: Sequence[int], max_new_tokens: int = 32, *,
             target: str = "llvm-cpu", eos_token_id: int | None = None,
             speculative: str | None = None, draft_tokens: int = 4, **options: Any
             ) -> list[int]:
    """Compile ``model`` for ``target`` and greedily generate ``max_new_tokens`` ids; with
    ``speculative="mtp"`` (Qwen3.5) the checkpoint's MTP head drafts ``draft_tokens`` a
    step and one main-model call verifies them (the same tokens, see ``rlx.speculative``)."""
    if speculative is not None:
        return _speculative(model, prompt_ids, max_new_tokens, target=target,
                            eos_token_id=eos_token_id, speculative=speculative,
                            draft_tokens=draft_tokens, **options)
    return Generator(model, target, options=options).generate(prompt_ids, max_new_tokens,
                                                              eos_token_id)


def _speculative(model: DecoderModel, prompt_ids: Sequence[int], max_new_tokens: int, *,
                 speculative: str, **kw: Any) -> list[int]:
    from rlx import speculative as spec
    from rlx.models.qwen35 import Qwen35Model

    if speculative != "mtp":
        raise RunError(f"error: speculative: expected 'mtp', found {speculative!r}")
    if not isinstance(model, Qwen35Model):
        raise RunError(f"error: speculative='mtp' needs a model with an MTP head (Qwen3.5), "
                       f"found {type(model).__name__}")
    return spec.generate(model, prompt_ids, max_new_tokens, **kw)


__all__ = ["Generator", "generate"]
