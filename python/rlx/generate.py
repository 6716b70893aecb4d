"""Greedy generation on a compiled model: prefill once, then one decode call per token,
the KV cache kept in device memory between calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx import runtime
from rlx.compiler import TargetConfig, compile
from rlx.ir.diagnostics import RunError
from rlx.models.llama import LlamaModel, rope_tables


@dataclass
class Generator:
    """A model compiled for one target and loaded with its weights."""

    model: LlamaModel
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
        cos, sin = rope_tables(self.model.config, range(len(ids)))
        inputs = {"ids": tokens, "cos": cos, "sin": sin}
        if "last" in self.program.prefill.input_names:
            inputs["last"] = np.array([[len(ids) - 1]], np.int32)
        out = self.program.prefill.on_device(**inputs)
        return out[0].numpy()[0, -1], out[1:]

    def decode(self, token: int, position: int, cache: tuple[Any, ...]
               ) -> tuple[np.ndarray, tuple[Any, ...]]:
        cos, sin = rope_tables(self.model.config, [position])
        out = self.program.decode.on_device(np.array([[token]], np.int32), cos, sin, *cache)
        return out[0].numpy()[0, -1], out[1:]

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int = 32,
                 eos_token_id: int | None = None) -> list[int]:
        """Greedy decoding; returns the new token ids (stops after ``eos_token_id``)."""
        logits, cache = self.prefill(prompt_ids)
        out: list[int] = []
        position = len(prompt_ids)
        for _ in range(max_new_tokens):
            token = int(np.argmax(logits))
            out.append(token)
            if token == eos_token_id or len(out) == max_new_tokens:
                break
            logits, cache = self.decode(token, position, cache)
            position += 1
        return out


def generate(model: LlamaModel, prompt_ids: Sequence[int], max_new_tokens: int = 32, *,
             target: str = "llvm-cpu", eos_token_id: int | None = None, **options: Any
             ) -> list[int]:
    """Compile ``model`` for ``target`` and greedily generate ``max_new_tokens`` ids."""
    return Generator(model, target, options=options).generate(prompt_ids, max_new_tokens,
                                                              eos_token_id)


__all__ = ["Generator", "generate"]
