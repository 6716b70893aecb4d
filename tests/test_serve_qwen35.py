"""rlx-serve with a Qwen3.5 model (:mod:`rlx.models.qwen35_batch`): every sequence its own KV
cache slot and its own DeltaNet conv frames and delta state, so that requests of the hybrid
model join and leave between decode steps as LLaMA's do.

The model is ``test_models_qwen35``'s tiny random ``Qwen3_5ForCausalLM`` (two linear and two
full attention layers, GQA, partial RoPE) with DeltaNet states of Qwen3.5-0.8B's size, over
the trained smollm tokenizer's vocabulary.
The oracle is HF transformers' greedy continuation of each prompt run alone: through the
batched model directly (a schedule of slots joining, leaving and a slot reused by a new
prompt after its sequence ended, run by each decode function), and through the server with
the official ``openai`` client (concurrent streams of different lengths, one dropped).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import transformers

import tokenizer_fixtures as fixtures
from rlx.generate import Sampling, load_model
from rlx.serve.engine import BatchModel
from rlx.tokenizer import load as load_tokenizer
from serve_fixtures import CONTEXT, ServerProcess, concurrent_streams, until_end
from test_models_qwen35 import hf_model, hf_reference

REAL_STATES = {"linear_num_key_heads": 8, "linear_num_value_heads": 16,
               "linear_key_head_dim": 128, "linear_value_head_dim": 128}
"""The DeltaNet layers' states at Qwen3.5-0.8B's size (16 value heads of 128: a 1 MB delta
state and 5 KB of conv frames per slot; the rest of the model tiny): IREE fused the scan
into the state's write and stack-allocated the row, which llvm-cpu refuses at this size
only (a tiny model's states compiled)."""
SLOTS = 2
"""Two slots (a compile of two decode functions, not three): the server's 6 concurrent
requests still queue for them, and each step runs 1 or 2 rows."""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = fixtures.write_hf("smollm", tmp_path_factory.mktemp("tiny_qwen35"))
    hf_model(vocab_size=load_tokenizer(d).vocab_size, **REAL_STATES).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def hf(model_dir: Path) -> transformers.PreTrainedModel:
    return transformers.Qwen3_5ForCausalLM.from_pretrained(model_dir).eval()


def test_batched_steps_equal_alone(model_dir: Path, hf: Any) -> None:
    """Two slots (``decode_1`` and the 2-row ``decode``): sequence 0 alone in slot 0 (1
    row), 1 joining in slot 1 (2 rows), 0 ending and slot 0 taken by sequence 2 while 1
    runs, 1 ending and 2 alone (1 row: slot 1 left as it is), slot 1 taken by sequence 3
    (2 rows); then both slots taken at once by sequences 4 and 5, prompts of 3 and 7 tokens
    prefilled in one call (right-padded: the padding must not reach the shorter one's conv
    frames or delta state). A reused slot's old KV rows, conv frames and delta state must
    not leak into its new sequence; every sequence gets HF's greedy tokens of its prompt
    alone."""
    model = BatchModel(load_model(model_dir), SLOTS, CONTEXT)
    assert model.rows == [1, 2]
    greedy = Sampling()
    prompts = [[5, 17, 42, 9], [77, 3, 120, 64, 31, 8], [200, 11], [9, 300, 4, 150, 61],
               [13, 250, 7], [88, 41, 19, 230, 5, 66, 12]]
    slot_of = {0: 0, 1: 1, 2: 0, 3: 1, 4: 0, 5: 1}
    got: dict[int, list[int]] = {}
    schedule = [({0}, 3), ({0, 1}, 3), ({2, 1}, 3), ({2}, 3), ({2, 3}, 3), ({4, 5}, 3)]
    for busy, steps in schedule:
        new = sorted(busy - set(got))
        firsts = model.prefill_many([slot_of[s] for s in new], [prompts[s] for s in new],
                                    [greedy] * len(new))
        got |= {s: [t] for s, t in zip(new, firsts, strict=True)}
        for _ in range(steps):
            tokens, positions = np.zeros(SLOTS, np.int64), np.zeros(SLOTS, np.int64)
            for seq in busy:
                tokens[slot_of[seq]] = got[seq][-1]
                positions[slot_of[seq]] = len(prompts[seq]) + len(got[seq]) - 1
            slots = {slot_of[s] for s in busy}
            nxt = model.step(tokens, positions,
                             [greedy if b in slots else None for b in range(SLOTS)])
            for seq in busy:
                got[seq].append(int(nxt[slot_of[seq]]))
    assert model.calls == {1: 3 + 3, 2: 3 + 3 + 3 + 3}
    for seq, ids in enumerate(prompts):
        assert got[seq] == hf_reference(hf, ids, len(got[seq]))[1], f"sequence {seq}"


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(model_dir, "--max-batch", str(SLOTS))  # the module compiled above
    yield srv
    assert srv.stop() == 0, "\n".join(srv.lines)


def test_openai_client_against_a_qwen35_server(server: ServerProcess, model_dir: Path,
                                               hf: Any) -> None:
    """8 concurrent greedy streams (2 slots: most wait), of different prompt and output
    lengths, joining apart, streams 1 and 6 dropped after 2 pieces; plain and chat
    completions: each finished one is its prompt's text run alone through HF."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                           timeout=120)
    name = client.models.list().data[0].id
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    ends = load_tokenizer(model_dir).end_ids
    words = "the quick brown fox jumps over a lazy dog while bees hum".split()
    prompts = [" ".join(words[:2 + i + i % 3]) for i in range(8)]
    lengths = [64, 12, 8, 20, 14, 18, 16, 10]
    cancelled = {1, 6}
    results = concurrent_streams(client, name, prompts, lengths, cancelled, 1, 0.02)

    def alone(ids: list[int], n: int) -> tuple[str, str]:
        return until_end(hf_reference(hf, ids, n)[1], ends, tok.decode)

    for i in sorted(set(range(8)) - cancelled):
        assert results[i] == alone(tok(prompts[i])["input_ids"], lengths[i]), f"request {i}"
    messages = [{"role": "user", "content": "Hi there"}]
    chat_ids = tok.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
    c = client.chat.completions.create(model=name, messages=messages,  # type: ignore[arg-type]
                                       max_tokens=16, temperature=0)
    assert (c.choices[0].message.content, c.choices[0].finish_reason) == alone(chat_ids, 16)
    with urllib.request.urlopen(server.url + "/health", timeout=30) as r:
        health = json.load(r)
    assert health["peak_batch"] >= 2  # sequences did share decode calls
    assert health["slots_busy"] == 0
