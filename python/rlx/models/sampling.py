"""The ``sample`` entry point every generating model carries: HF's logits processors and a
seeded draw on the device (the MIR ``sampling`` ops), so a sampled token feeds the next
decode step as a device tensor, like the greedy ``next``.

``sample(logits [1, 1, V] f32, seen [1, V] f32, temperature [1] f32, top_k [1] i32,
top_p [1] f32, min_p [1] f32, penalty [1] f32, seed [1] i32, counter [1] i32)`` returns
``token [1, 1]`` i32 and ``seen`` with the token marked. In HF's order: the repetition
penalty over the ``seen`` tokens (the prompt's and the output's), then temperature, top-k,
top-p, min-p, then a draw from the filtered distribution (``categorical``: Gumbel-max on a
hash of ``seed``, ``counter`` and the token index; ``counter`` is the position of the token
drawn, so one seed gives one text). ``temperature`` 0 is greedy: the argmax of the penalized
logits (the filters never remove the largest logit). Every setting is an input: one
compiled module serves them all.
"""

from __future__ import annotations

import numpy as np

from rlx.dialects.builder import HirModule

SAMPLE_INPUTS = ("logits", "seen", "temperature", "top_k", "top_p", "min_p", "penalty", "seed",
                 "counter")


def add_sample_function(h: HirModule, vocab_size: int, name: str = "sample") -> None:
    """Add the ``sample`` function (see the module docstring) to ``h``."""
    h.function(name)
    v = vocab_size
    logits = h.input("logits", (1, 1, v))
    seen = h.input("seen", (1, v))
    temperature = h.input("temperature", (1,))
    top_k = h.input("top_k", (1,), "i32")
    top_p, min_p, penalty = h.input("top_p", (1,)), h.input("min_p", (1,)), h.input("penalty", (1,))
    seed, counter = h.input("seed", (1,), "i32"), h.input("counter", (1,), "i32")
    start = len(h)
    x = h.mir("reshape", [logits], new_shape=[1, v])
    x = h.mir("repetition_penalty", [x, seen, penalty])
    greedy = h.mir("argmax", [x], axis=-1, keep_dim=False)
    hot = h.mir("compare", [temperature, h.constant(np.zeros(1, np.float32))], kind="gt")
    scale = h.mir("where", [hot, temperature, h.constant(np.ones(1, np.float32))])
    x = h.mir("binary", [x, h.mir("reshape", [scale], new_shape=[1, 1])], kind="div")
    x = h.mir("top_k_filter", [x, top_k])
    x = h.mir("top_p_filter", [x, top_p])
    x = h.mir("min_p_filter", [x, min_p])
    drawn = h.mir("categorical", [x, seed, counter])
    token = h.mir("reshape", [h.mir("where", [hot, drawn, greedy])], new_shape=[1, 1])
    marked = h.mir("mark_tokens", [seen, token])
    h.label_nodes_since(start, "sample")
    h.set_outputs([token, marked])


__all__ = ["SAMPLE_INPUTS", "add_sample_function"]
