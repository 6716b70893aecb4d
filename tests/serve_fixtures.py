"""Helpers of the rlx-serve tests: a tiny LLaMA with a tokenizer, an rlx-serve subprocess on
loopback, HF transformers' greedy continuation (the "run alone" oracle)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Container, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import transformers

import tokenizer_fixtures as fixtures
from rlx.tokenizer import load as load_tokenizer

BATCH, CONTEXT = 4, 96
READY_S = 1800.0
"""How long a server may take to compile and start (a loaded 2-core machine; the second
start of the session reads the compiled model from the session's cache)."""


def write_model(directory: Path) -> Path:
    """A tiny HF LLaMA (2 layers, GQA) over the trained smollm tokenizer's vocabulary."""
    d = fixtures.write_hf("smollm", directory)
    vocab = load_tokenizer(d).vocab_size
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, num_hidden_layers=2,
        max_position_embeddings=256, initializer_range=0.2)).eval()
    model.save_pretrained(d)
    return d


class ServerProcess:
    """``python -m rlx.serve MODEL --port 0`` until :meth:`stop`; its output lines in
    :attr:`lines`."""

    def __init__(self, model: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlx.serve", str(model), "--port", "0",
             "--max-batch", str(BATCH), "--context", str(CONTEXT), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._wait_ready()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._q.put(line)
        self._q.put(None)

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if " on http://" in line:
                return line.split(" on ", 1)[1].split()[0]
        self.proc.kill()
        raise RuntimeError("rlx-serve did not start:\n" + "\n".join(self.lines))

    def rss_kb(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines()
                        if line.startswith("VmRSS:")))

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def hf_greedy(model_dir: Path, ids: Sequence[int], n: int) -> list[int]:
    """HF's greedy continuation of ``ids`` alone (``n`` tokens, end tokens not stopping)."""
    model = transformers.LlamaForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([list(ids)]), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, pad_token_id=0)
    return out[0, len(ids):].tolist()


def concurrent_streams(client: Any, name: str, prompts: Sequence[str], lengths: Sequence[int],
                       dropped: Container[int], drop_after: int, stagger_s: float
                       ) -> dict[int, tuple[str, str | None]]:
    """Greedy streamed completions of ``prompts`` from one thread each; a request in
    ``dropped`` closes its stream after ``drop_after + 1`` pieces. Each request's (text,
    finish_reason) as the client saw them.

    Request 0 goes first; request i > 0 is sent ``stagger_s * (i - 1)`` after request 0's
    first piece came back (they join apart). So request 0 holds a slot when the others
    arrive, and it shares decode calls with them as long as its ``lengths[0]`` tokens
    outlast request 1's trip to the server (not as long as they outlast a fixed delay
    counted from request 0's send, which a fast machine beat: a tiny model's token takes
    well under a millisecond)."""
    results: dict[int, tuple[str, str | None]] = {}
    first_piece = threading.Event()

    def run(i: int) -> None:
        if i > 0:
            first_piece.wait(timeout=600)
            time.sleep(stagger_s * (i - 1))
        stream = client.completions.create(model=name, prompt=prompts[i], max_tokens=lengths[i],
                                           temperature=0, stream=True)
        text, finish = "", None
        try:
            for n, piece in enumerate(stream):
                text += piece.choices[0].text
                finish = piece.choices[0].finish_reason or finish
                if i == 0:
                    first_piece.set()
                if i in dropped and n == drop_after:
                    stream.close()
                    break
        finally:
            if i == 0:
                first_piece.set()  # request 0 failed: let the others run and report
        results[i] = (text, finish)

    with ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(run, range(len(prompts))))
    return results


def until_end(tokens: Sequence[int], ends: Container[int], decode: Callable[[list[int]], str]
              ) -> tuple[str, str]:
    """(text, finish_reason) a server gives for greedy ``tokens``: cut before the first end
    token ("stop"), else all of them ("length")."""
    cut = next((i for i, t in enumerate(tokens) if t in ends), None)
    return (decode(list(tokens) if cut is None else list(tokens[:cut])),
            "length" if cut is None else "stop")
