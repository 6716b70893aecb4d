"""rlx-serve against the official ``openai`` client, on loopback, with a tiny random LLaMA
whose directory holds a tokenizer trained here (``serve_fixtures``).

One server subprocess (``python -m rlx.serve``, 4 slots, context 96) serves the module's
tests; the SIGTERM test starts a second one, which reads the compiled model from the
session's cache. Greedy text equals HF transformers' greedy continuation of the prompt run
alone, whatever else is in the batch: 8 requests of different lengths joining at different
times, some cancelled mid-stream. Bad requests get OpenAI-shaped 4xx errors and the server
keeps serving; a dropped stream frees its slot; 200 requests at concurrency 16 all succeed
and the server's memory returns to its level; SIGTERM lets an in-flight stream finish and
the process exits 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import transformers

from rlx.generate import Sampling, load_model
from rlx.models import llama_batch
from rlx.models.llama import ModelError
from rlx.serve.engine import BatchModel, Engine, EngineError, Event, Request
from rlx.tokenizer import load as load_tokenizer
from serve_fixtures import (
    BATCH,
    CONTEXT,
    ServerProcess,
    concurrent_streams,
    hf_greedy,
    until_end,
    write_model,
)

PROMPT = "Hello world, the quick brown fox"
SHUTDOWN_S = 20.0
"""How long SIGTERM may take with one short stream in flight (the test's bound)."""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(model_dir)
    yield srv
    assert srv.stop() == 0, "\n".join(srv.lines)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                         timeout=120)


@pytest.fixture(scope="module")
def hf_tok(model_dir: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(model_dir)


def alone(model_dir: Path, hf_tok: Any, ids: list[int], n: int) -> tuple[str, str]:
    """(text, finish_reason) of ``ids`` run alone through HF: up to an end token, or n."""
    return until_end(hf_greedy(model_dir, ids, n), load_tokenizer(model_dir).end_ids,
                     hf_tok.decode)


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def post(url: str, data: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def model_id(client: openai.OpenAI) -> str:
    return client.models.list().data[0].id


def test_completions_and_chat_match_transformers(client: openai.OpenAI, model_dir: Path,
                                                  hf_tok: Any) -> None:
    name = model_id(client)
    assert name == model_dir.name
    ids = hf_tok(PROMPT)["input_ids"]
    want, finish = alone(model_dir, hf_tok, ids, 20)
    r = client.completions.create(model=name, prompt=PROMPT, max_tokens=20, temperature=0)
    assert r.choices[0].text == want
    assert r.choices[0].finish_reason == finish
    assert r.usage is not None
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    pieces = list(client.completions.create(model=name, prompt=PROMPT, max_tokens=20,
                                            temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in pieces) == want
    assert len(pieces) > 3
    assert pieces[-1].choices[0].finish_reason == finish

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    chat_ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
    want, finish = alone(model_dir, hf_tok, chat_ids, 16)
    c = client.chat.completions.create(model=name, messages=messages,  # type: ignore[arg-type]
                                       max_tokens=16, temperature=0)
    assert c.choices[0].message.content == want
    assert c.choices[0].message.role == "assistant"
    assert c.usage is not None
    assert c.usage.prompt_tokens == len(chat_ids)
    chunks = list(client.chat.completions.create(
        model=name, messages=messages, max_tokens=16, temperature=0,  # type: ignore[arg-type]
        stream=True, stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == want
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == len(chat_ids)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == finish


def test_stop_seed_and_token_prompts(client: openai.OpenAI, model_dir: Path,
                                     hf_tok: Any) -> None:
    name = model_id(client)
    ids = hf_tok(PROMPT)["input_ids"]
    want, _ = alone(model_dir, hf_tok, ids, 20)
    stop = want[6:9]
    r = client.completions.create(model=name, prompt=PROMPT, max_tokens=20, temperature=0,
                                  stop=[stop, "never here"])
    assert r.choices[0].text == want[:want.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    r = client.completions.create(model=name, prompt=ids, max_tokens=20, temperature=0)
    assert r.choices[0].text == want  # token ids in

    def sampled(seed: int) -> str:
        return client.completions.create(model=name, prompt=PROMPT, max_tokens=24,
                                         temperature=1.0, top_p=0.95,
                                         seed=seed).choices[0].text

    first = sampled(3)
    assert sampled(3) == first  # the same seed, the same text
    assert len({first, sampled(4), sampled(5)}) > 1


def test_batched_greedy_equals_alone(server: ServerProcess, client: openai.OpenAI,
                                     model_dir: Path, hf_tok: Any) -> None:
    """8 requests of different prompt and output lengths (4 slots: some wait for a slot),
    joining at different times, streams 2 and 5 dropped after 3 pieces: every request that
    runs to its end gives the text of its prompt run alone."""
    name = model_id(client)
    words = "the quick brown fox jumps over a lazy dog while bees hum".split()
    prompts = [" ".join(words[:3 + 2 * i]) for i in range(8)]
    lengths = [60, 24, 56, 16, 50, 58, 10, 36]
    cancelled = {2, 5}
    # request 0 (60 tokens, ~30 ms) holds a slot when the others arrive, 10 ms apart
    results = concurrent_streams(client, name, prompts, lengths, cancelled, 2, 0.01)
    for i in sorted(set(range(8)) - cancelled):
        want = alone(model_dir, hf_tok, hf_tok(prompts[i])["input_ids"], lengths[i])
        assert results[i] == want, f"request {i}"
    status, health = get(server.url + "/health")
    assert status == 200
    assert health["peak_batch"] >= 2  # sequences did share decode calls
    assert health["slots_busy"] == 0


class _Recorder:
    """A stand-in for :class:`BatchModel` that records the engine's prefill groups (the
    prompts' lengths, per call) and gives token 1 for everything."""

    def __init__(self, batch: int) -> None:
        self.batch, self.context = batch, 1000
        self.groups: list[list[int]] = []

    def prefill_many(self, slots: list[int], prompts: list[list[int]], sampling: Any
                     ) -> list[int]:
        assert len(set(slots)) == len(slots)
        self.groups.append([len(p) for p in prompts])
        return [1] * len(prompts)

    def step(self, tokens: Any, positions: Any, sampling: Any) -> np.ndarray:
        return np.ones(self.batch, np.int64)


def test_prefill_groups_prompts_of_similar_length() -> None:
    """Queued before the engine starts, 4 slots: prompts of 10, 12, 100, 11, 9 and 14
    tokens. The engine prefills the oldest four that keep the padded call within twice
    their tokens (10, 12, 11, 9: 100 would pad 4 prompts to 400 tokens), then, once slots
    free, 100 (first in line) with 14 (200 padded tokens for 114). Every request ends."""
    model = _Recorder(4)
    engine = Engine(model, None)  # type: ignore[arg-type]
    done: list[Event] = []
    for n in (10, 12, 100, 11, 9, 14):
        engine.submit(Request(list(range(1, n + 1)), 3, done.append))
    engine.start().stop(timeout=30)
    finished = [e for e in done if e.finish is not None]
    assert [e.finish for e in finished] == ["length"] * 6
    assert model.groups == [[10, 12, 11, 9], [100, 14]]


def test_cli_activation_quant_errors(model_dir: Path) -> None:
    """``--activation-quant``: a mode rlx does not have, and q8 for a GPU target (its
    kernels are llvm-cpu's), are one-line errors naming the option, exit 1, no traceback."""
    for args, want in ((["--activation-quant", "q4"], "invalid choice: 'q4'"),
                       (["--activation-quant", "q8", "--target", "vulkan"], "activation_quant")):
        proc = subprocess.run([sys.executable, "-m", "rlx.serve", str(model_dir), "--port", "0",
                               *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert want in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert " on http://" not in proc.stdout


def test_step_rows() -> None:
    """The decode functions' row counts: the powers of two below the slots and the slots;
    row counts outside 1 .. slots are refused naming them."""
    assert llama_batch.step_rows(8) == [1, 2, 4, 8]
    assert llama_batch.step_rows(6) == [1, 2, 4, 6]
    assert llama_batch.step_rows(1) == [1]
    assert llama_batch.step_rows(4, [3]) == [3, 4]
    with pytest.raises(ModelError, match=r"rows: expected decode row counts 1 \.\. 4 \(the "
                                         r"slots\), found \[0, 5\]"):
        llama_batch.step_rows(4, [2, 0, 5])


def test_steps_run_the_rows_of_their_busy_slots(model_dir: Path) -> None:
    """The batched model (4 slots: ``decode_1``, ``decode_2`` and the 4-row ``decode``) runs
    each step with the fewest rows that cover its last busy slot, and every sequence gets
    HF's greedy tokens of its prompt alone whichever function advanced it: slot 0 alone (1
    row), slots 0 and 1 (2), slots 2 and 3 joining (4), slot 3 alone after the others leave
    (4: the rows cover the last busy slot). Slots 2 and 3 are prefilled in one call, their
    prompts (3 and 7 tokens) right-padded to one length. The server's module (the same batch
    and context): one compile."""
    model = BatchModel(load_model(model_dir), BATCH, CONTEXT)
    assert model.rows == [1, 2, 4]
    greedy = Sampling()
    prompts = {0: [5, 17, 42, 9], 1: [77, 3, 120, 64, 31, 8], 2: [200, 11, 5],
               3: [9, 300, 4, 150, 61, 7, 8]}
    got: dict[int, list[int]] = {}
    schedule = [({0}, 3), ({0, 1}, 3), ({0, 1, 2, 3}, 3), ({3}, 3)]
    for busy, steps in schedule:
        new = sorted(busy - set(got))
        firsts = model.prefill_many(new, [prompts[s] for s in new], [greedy] * len(new))
        got |= {s: [t] for s, t in zip(new, firsts, strict=True)}
        for _ in range(steps):
            tokens, positions = np.zeros(BATCH, np.int64), np.zeros(BATCH, np.int64)
            for slot in busy:
                tokens[slot] = got[slot][-1]
                positions[slot] = len(prompts[slot]) + len(got[slot]) - 1
            nxt = model.step(tokens, positions,
                             [greedy if b in busy else None for b in range(BATCH)])
            for slot in busy:
                got[slot].append(int(nxt[slot]))
    assert model.calls == {1: 3, 2: 3, 4: 3 + 3}
    for slot, ids in prompts.items():
        assert got[slot] == hf_greedy(model_dir, ids, len(got[slot])), f"slot {slot}"
    for slots, batch in (([BATCH], [[5]]), ([1, 1], [[5], [6]]), ([0], [[]])):
        with pytest.raises(EngineError, match=r"prefill: expected distinct slots in 0 \.\. "
                           rf"{BATCH - 1} and non-empty prompts, found slots"):
            model.prefill_many(slots, batch, [greedy] * len(batch))


def test_bad_requests_get_openai_errors(server: ServerProcess, client: openai.OpenAI) -> None:
    name = model_id(client)
    url = server.url + "/v1/completions"
    status, body = post(url, b'{"model": "x", "prompt": ')
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert "JSON" in body["error"]["message"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"prompt": "hi", "temperature": -1}, "temperature"),
        ({"prompt": "hi", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "hi", "n": 2}, "n"),
        ({"prompt": "hi", "stop": 5}, "stop"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "word " * (CONTEXT + 10)}, "prompt"),
    ]
    for fields, param in cases:
        status, body = post(url, json.dumps({"model": name, **fields}).encode())
        assert status == 400, (fields, body)
        assert body["error"]["param"] == param, body
    assert body["error"]["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model=name, prompt="hi", temperature=9)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="hi")
    status, body = get(server.url + "/v1/nothing")
    assert status == 404
    assert "error" in body
    r = client.completions.create(model=name, prompt=PROMPT, max_tokens=4, temperature=0)
    assert r.usage is not None
    assert r.usage.completion_tokens >= 1


def test_dropped_stream_frees_its_slot(server: ServerProcess, client: openai.OpenAI) -> None:
    name = model_id(client)
    stream = client.completions.create(model=name, prompt=PROMPT, max_tokens=CONTEXT,
                                       temperature=0, stream=True)
    next(iter(stream))
    assert get(server.url + "/health")[1]["slots_busy"] == 1
    stream.close()
    start = time.monotonic()
    while get(server.url + "/health")[1]["slots_busy"] and time.monotonic() - start < 5:
        time.sleep(0.02)
    assert get(server.url + "/health")[1]["slots_busy"] == 0


def test_load_200_requests_at_concurrency_16(server: ServerProcess,
                                             client: openai.OpenAI) -> None:
    name = model_id(client)

    def one(i: int) -> int:
        kw: dict[str, Any] = {"model": name, "max_tokens": 4 + i % 7,
                              "temperature": 0 if i % 2 else 0.8, "seed": i}
        if i % 3 == 0:
            pieces = list(client.completions.create(prompt=f"{PROMPT} {i}", stream=True, **kw))
            return len(pieces)
        r = client.chat.completions.create(messages=[{"role": "user", "content": f"n {i}"}],
                                           **kw)
        assert r.usage is not None
        return r.usage.completion_tokens

    with ThreadPoolExecutor(16) as pool:  # warm-up: the server's allocations settle
        assert all(list(pool.map(one, range(32))))
    before = server.rss_kb()
    with ThreadPoolExecutor(16) as pool:
        done = list(pool.map(one, range(200)))
    assert len(done) == 200
    assert all(done)
    time.sleep(0.5)
    after = server.rss_kb()
    assert after - before < 32 * 1024, f"RSS {before} kB -> {after} kB"
    assert get(server.url + "/health")[1]["slots_busy"] == 0


def test_sigterm_finishes_in_flight_and_exits_0(model_dir: Path,
                                                server: ServerProcess) -> None:
    srv = ServerProcess(model_dir, "--shutdown-timeout", str(SHUTDOWN_S))
    c = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=60)
    stream = c.completions.create(model=model_dir.name, prompt=PROMPT, max_tokens=40,
                                  temperature=0, stream=True)
    it = iter(stream)
    text = next(it).choices[0].text
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.extend(it))
    reader.start()
    start = time.monotonic()
    srv.proc.send_signal(15)
    code = srv.proc.wait(SHUTDOWN_S + 10)
    took = time.monotonic() - start
    reader.join(10)
    assert code == 0, "\n".join(srv.lines)
    assert took < SHUTDOWN_S
    text += "".join(p.choices[0].text for p in got)
    assert got
    assert got[-1].choices[0].finish_reason in ("length", "stop")
    r = openai.OpenAI(base_url=server.url + "/v1", api_key="none").completions.create(
        model=model_dir.name, prompt=PROMPT, max_tokens=40, temperature=0)
    assert text == r.choices[0].text  # the drained stream is whole
    assert any("stopped" in line for line in srv.lines)
