"""rlx-serve under concurrent clients: total generated tokens/s at concurrency 1, 4 and 8,
time to first token (TTFT) and inter-token latency (ITL) percentiles, over loopback, beside
llama.cpp's ``llama-server --parallel`` on the same file.

The script starts ``python -m rlx.serve MODEL --host 127.0.0.1 --port 0 --max-batch B
--context C`` (the compiled model comes from rlx's cache after the first run) and, when
``--llama-server PATH`` (or ``benchmarks/.cache/llama.cpp/build/bin/llama-server``) exists,
``llama-server -m MODEL --host 127.0.0.1 --port 0 -t T -tb T --parallel B -c B*C
--no-kv-unified`` (B slots of C positions each, as rlx's; T = ``--threads``, default every
core, which is what rlx's IREE runtime uses). B defaults to the largest level. Both servers
stay up; each round runs rlx's levels, then llama-server's (1, 4, 8, 1, 4, 8, ... so that a
slow phase of a shared machine hits every level and both sides alike). A level runs
``--requests`` streamed greedy completions (``temperature`` 0, ``max_tokens`` ``--gen``, a
prompt of ``--prompt`` tokens by the model's own tokenizer, a first word of its own: no prompt
repeats, so no prompt cache serves one)
from that many client threads at once. A client thread reads the server-sent events itself
(``http.client``), so TTFT is from sending the request to the first text event and ITL the
gaps between events; generated tokens are the servers' own usage counts. Reported per level:
tokens/s (generated tokens of all requests / wall time of the level's batch; the median over
rounds), the ratio to concurrency 1, TTFT and ITL p50 / p90 / p99 (ms), and rlx /
llama-server ratios. Without llama-server the comparison is left out (said in the output).

Usage: ``python benchmarks/serve.py [--model FILE.gguf | HF_DIR] [--levels 1,4,8]
[--requests 16] [--gen 32] [--prompt 32] [--rounds 2] [--max-batch B] [--context 256]
[--threads N] [--llama-server PATH] [--json out.json]``. Without ``--model``: the 135M Q8_0
GGUF that ``benchmarks/llama.py`` writes to ``benchmarks/.cache/``.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
READY_S = 3600.0
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model  # noqa: E402
from rlx.lowering.registry import ACTIVATION_QUANTS  # noqa: E402


class Server:
    """A server subprocess; ``url`` once it listens."""

    def __init__(self, cmd: list[str], ready: str) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + READY_S
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                tail = "".join(seen[-8:])
                raise RuntimeError(f"{cmd[0]} exited with {self.proc.wait()}:\n{tail}")
            seen.append(line)
            if ready in line:
                self.port = int(line.split(ready, 1)[1].split(":")[-1].split()[0].strip("/"))
                return
        raise RuntimeError(f"{cmd[0]} did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)


def one_request(port: int, prompt: str, gen: int) -> tuple[int, float, list[float]]:
    """(generated tokens, TTFT s, ITL gaps s) of one streamed completion."""
    body = json.dumps({"prompt": prompt, "max_tokens": gen, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    stamps: list[float] = []
    tokens = 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        elif event["choices"] and event["choices"][0].get("text"):
            stamps.append(time.perf_counter())
    conn.close()
    if not stamps:
        return tokens, float("nan"), []
    return tokens, stamps[0] - start, [b - a for a, b in itertools.pairwise(stamps)]


def level(port: int, concurrency: int, requests: int, prompt: str, gen: int, tag: str
          ) -> dict[str, Any]:
    """``requests`` streamed completions, ``concurrency`` at a time; request i's prompt
    starts with ``tag`` and i. Every (round, level) has its own tag: no prompt repeats
    within a server's run, so neither side serves one from a prompt cache (llama-server
    keeps finished prompts' KV in RAM, ``--cache-ram``, and restored whole prompts seen at an
    earlier level: its TTFT at concurrency 8 had been 65 ms for 8 x 32 prompt tokens)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        done = list(pool.map(lambda i: one_request(port, f"{tag}n{i} {prompt}", gen),
                             range(requests)))
    wall = time.perf_counter() - start
    tokens = sum(d[0] for d in done)
    return {"tok_s": tokens / wall, "tokens": tokens, "wall_s": wall,
            "ttft": [d[1] for d in done], "itl": [g for d in done for g in d[2]]}


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] * 1000


def prompt_of(model: Path, tokens: int) -> str:
    """Words of a fixed sentence, as many as make ``tokens`` tokens by the model's own
    tokenizer (the 135M / 1B GGUFs of ``benchmarks/llama.py`` have a synthetic vocabulary that
    splits words into pieces, so words are not tokens)."""
    import rlx.tokenizer

    tok = rlx.tokenizer.load(model)
    words = itertools.cycle("the quick brown fox jumps over the lazy dog".split())
    text = next(words)
    while len(tok.encode(text)) < tokens:
        text += " " + next(words)
    return text


def run_rounds(servers: dict[str, Server], args: argparse.Namespace, levels: list[int],
               prompt: str) -> dict[str, dict[int, dict[str, Any]]]:
    """Each round: every server's levels in turn; per server and level the median tokens/s
    over rounds and the TTFT / ITL samples of all rounds."""
    for srv in servers.values():
        one_request(srv.port, prompt, 4)  # warm-up
    rounds: dict[str, dict[int, list[dict[str, Any]]]] = {
        n: {c: [] for c in levels} for n in servers}
    for r in range(args.rounds):
        for name, srv in servers.items():
            for c in levels:
                res = level(srv.port, c, max(args.requests, c), prompt, args.gen,
                            f"r{r}c{c}")
                rounds[name][c].append(res)
                print(f"  round {r + 1} {name} concurrency {c}: {res['tok_s']:.1f} tok/s "
                      f"({res['tokens']} tokens, {res['wall_s']:.1f} s, load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
    return {n: {c: {"tok_s": statistics.median(x["tok_s"] for x in rs),
                    "tok_s_rounds": [x["tok_s"] for x in rs],
                    "tokens": [x["tokens"] for x in rs],
                    "ttft": [t for x in rs for t in x["ttft"]],
                    "itl": [t for x in rs for t in x["itl"]]} for c, rs in per.items()}
            for n, per in rounds.items()}


def report(name: str, res: dict[int, dict[str, Any]]) -> None:
    base = res[min(res)]["tok_s"]
    print(f"\n{name}: concurrency | tokens/s | x conc-1 | TTFT p50/p90/p99 ms | "
          "ITL p50/p90/p99 ms")
    for c, r in res.items():
        t, i = r["ttft"], r["itl"]
        print(f"  {c:>2} | {r['tok_s']:8.1f} | {r['tok_s'] / base:5.2f}x | "
              f"{pct(t, 50):6.0f} {pct(t, 90):6.0f} {pct(t, 99):6.0f} | "
              f"{pct(i, 50):6.1f} {pct(i, 90):6.1f} {pct(i, 99):6.1f}")


def summary(res: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    base = res[min(res)]["tok_s"]
    return {c: {"tok_s": r["tok_s"], "tok_s_rounds": r["tok_s_rounds"],
                "tokens": r["tokens"], "x_conc1": r["tok_s"] / base,
                **{f"{k}_p{q}_ms": pct(r[k], q) for k in ("ttft", "itl") for q in (50, 90, 99)}}
            for c, r in res.items()}


def servers_of(args: argparse.Namespace, model: Path, batch: int) -> dict[str, Server]:
    out = {"rlx": Server([sys.executable, "-m", "rlx.serve", str(model), "--host",
                          "127.0.0.1", "--port", "0", "--max-batch", str(batch),
                          "--context", str(args.context),
                          *(["--activation-quant", args.activation_quant]
                            if args.activation_quant else [])], " on http://")}
    if not Path(args.llama_server).is_file():
        print(f"llama-server: {args.llama_server} not found; no comparison")
        return out
    t = str(args.threads)
    out["llama-server"] = Server(
        [args.llama_server, "-m", str(model), "--host", "127.0.0.1", "--port", "0", "-t", t,
         "-tb", t, "--parallel", str(batch), "-c", str(args.context * batch),
         "--no-kv-unified", "--no-webui"], "listening on http://")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(CACHE / "llama-135m-Q8_0.gguf"))
    p.add_argument("--levels", default="1,4,8")
    p.add_argument("--requests", type=int, default=16, help="requests per level and round")
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-batch", type=int, help="slots of both servers (default: the "
                   "largest level)")
    p.add_argument("--context", type=int, default=256, help="positions per slot")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="llama-server's -t / -tb (rlx's IREE runtime uses every core)")
    p.add_argument("--llama-server", default=str(CACHE / "llama.cpp/build/bin/llama-server"))
    p.add_argument("--activation-quant", choices=ACTIVATION_QUANTS,
                   help="rlx-serve's numerics mode (default: exact f32)")
    p.add_argument("--json")
    args = p.parse_args()
    model = Path(args.model)
    if not model.exists():
        print(f"error: {model} not found (benchmarks/llama.py writes it)", file=sys.stderr)
        return 1
    levels = [int(x) for x in args.levels.split(",")]
    batch = args.max_batch or max(levels)
    prompt = prompt_of(model, args.prompt)
    load0 = os.getloadavg()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores), load average "
          f"{load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}; model {model.name}; {batch} slots, "
          f"context {args.context}; prompt {args.prompt} tokens, {args.gen} tokens a request, "
          f"greedy; llama-server threads {args.threads}; rlx numerics "
          f"{args.activation_quant or 'exact'}", flush=True)
    servers = servers_of(args, model, batch)
    try:
        results = run_rounds(servers, args, levels, prompt)
    finally:
        for srv in servers.values():
            srv.stop()
    for name, res in results.items():
        report(name, res)
    ratios = {}
    if "llama-server" in results:
        ratios = {c: results["rlx"][c]["tok_s"] / r["tok_s"]
                  for c, r in results["llama-server"].items()}
        print("\nrlx / llama-server tokens/s: " + ", ".join(
            f"c{c} {x:.2f}" for c, x in ratios.items()))
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"cpu": cpu_model(), "cores": os.cpu_count(), "model": model.name,
             "load_before": load0, "load_after": load1, "slots": batch,
             "context": args.context, "prompt_tokens": args.prompt, "gen": args.gen,
             "requests": args.requests, "rounds": args.rounds, "threads": args.threads,
             "activation_quant": args.activation_quant,
             "results": {n: summary(res) for n, res in results.items()},
             "rlx_over_llama_server": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
