"""The sampled-generation oracle the model tests share: the chain of sampled tokens computed
on the host, step by step, with the numpy reference of the sampling ops (``rlx.reference
.sampling``, which shares no code with their lowering) on logits the device's decode
returns."""

from __future__ import annotations

import numpy as np

from rlx.generate import Generator, Sampling
from rlx.reference import sampling as ref


def host_chain(gen: Generator, ids: list[int], n: int, s: Sampling) -> list[int]:
    """The sampled tokens, step by step on the host: decode logits from the device, then
    the numpy reference's penalty, temperature, top-k, top-p, min-p and draw (temperature
    0: the argmax of the penalized logits)."""
    logits, cache = gen.prefill(ids)
    seen = np.zeros((1, gen.model.config.vocab_size), np.float32)
    seen[0, ids] = 1
    out: list[int] = []
    while True:
        x = ref.repetition_penalty(logits[None], seen, np.array([s.repetition_penalty]))
        greedy = int(np.argmax(x))
        x = x / (s.temperature or 1.0)
        x = ref.top_k_filter(x, np.array([s.top_k]))
        x = ref.top_p_filter(x, np.array([s.top_p]))
        x = ref.min_p_filter(x, np.array([s.min_p]))
        position = len(ids) + len(out)
        token = (int(ref.categorical(x, np.array([s.seed]), np.array([position]))[0])
                 if s.temperature > 0 else greedy)
        out.append(token)
        seen[0, token] = 1
        if len(out) == n:
            return out
        logits, cache = gen.decode(token, position, cache)
