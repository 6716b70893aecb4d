"""rlx-serve under concurrent clients: total generated tokens/s at concurrency 1, 4 and 8,
time to first token (TTFT) and inter-token latency (ITL) percentiles, over loopback.

The script starts ``python -m rlx.serve MODEL --port 0 --max-batch B --context C`` (the
compiled model comes from rlx's cache after the first run), then for each round and each
concurrency level (interleaved: 1, 4, 8, 1, 4, 8, ... so that a slow phase of a shared
machine hits every level alike) runs ``--requests`` streamed greedy completions
(``max_tokens`` ``--gen``, a prompt of about ``--prompt`` tokens) from that many client
threads at once. A client thread reads the server-sent events itself (``http.client``), so
TTFT is from sending the request to the first text event and ITL the gaps between events.
Reported per level: tokens/s (generated tokens of all requests / wall time of the level's
batch; the median over rounds), the ratio to concurrency 1, TTFT and ITL p50 / p90 / p99 (ms).

llama.cpp's ``llama-server --parallel`` on the same file runs beside it when
``--llama-server PATH`` (or ``benchmarks/.cache/llama.cpp/build/bin/llama-server``) exists;
``benchmarks/build_llama_cpp.sh`` does not build it today, and without it the comparison is
left out (said in the output).

Usage: ``python benchmarks/serve.py [--model FILE.gguf | HF_DIR] [--levels 1,4,8]
[--requests 16] [--gen 32] [--prompt 32] [--rounds 2] [--max-batch 8] [--context 256]
[--threads N] [--json out.json]``. Without ``--model``: the 135M Q8_0 GGUF that
``benchmarks/llama.py`` writes to ``benchmarks/.cache/``.
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


class Server:
    """A server subprocess; ``url`` once it listens."""

    def __init__(self, cmd: list[str], ready: str) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{cmd[0]} exited with {self.proc.wait()}")
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


def level(port: int, concurrency: int, requests: int, prompt: str, gen: int
          ) -> dict[str, Any]:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        done = list(pool.map(lambda i: one_request(port, f"{i} {prompt}", gen),
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


def run_side(name: str, server: Server, args: argparse.Namespace, prompt: str
             ) -> dict[int, dict[str, Any]]:
    levels = [int(x) for x in args.levels.split(",")]
    one_request(server.port, prompt, 4)  # warm-up
    rounds: dict[int, list[dict[str, Any]]] = {c: [] for c in levels}
    for r in range(args.rounds):
        for c in levels:
            res = level(server.port, c, max(args.requests, c), prompt, args.gen)
            rounds[c].append(res)
            print(f"  {name} round {r + 1} concurrency {c}: {res['tok_s']:.1f} tok/s "
                  f"({res['tokens']} tokens, {res['wall_s']:.1f} s)", flush=True)
    out = {}
    for c, rs in rounds.items():
        out[c] = {"tok_s": statistics.median(x["tok_s"] for x in rs),
                  "ttft": [t for x in rs for t in x["ttft"]],
                  "itl": [t for x in rs for t in x["itl"]]}
    return out


def report(name: str, res: dict[int, dict[str, Any]]) -> None:
    base = res[min(res)]["tok_s"]
    print(f"\n{name}: concurrency | tokens/s | x conc-1 | TTFT p50/p90/p99 ms | "
          "ITL p50/p90/p99 ms")
    for c, r in res.items():
        t, i = r["ttft"], r["itl"]
        print(f"  {c:>2} | {r['tok_s']:8.1f} | {r['tok_s'] / base:5.2f}x | "
              f"{pct(t, 50):6.0f} {pct(t, 90):6.0f} {pct(t, 99):6.0f} | "
              f"{pct(i, 50):6.1f} {pct(i, 90):6.1f} {pct(i, 99):6.1f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(CACHE / "llama-135m-Q8_0.gguf"))
    p.add_argument("--levels", default="1,4,8")
    p.add_argument("--requests", type=int, default=16, help="requests per level and round")
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--prompt", type=int, default=32, help="prompt words (about tokens)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="llama-server's -t (rlx's IREE runtime uses every core)")
    p.add_argument("--llama-server", default=str(CACHE / "llama.cpp/build/bin/llama-server"))
    p.add_argument("--json")
    args = p.parse_args()
    model = Path(args.model)
    if not model.exists():
        print(f"error: {model} not found (benchmarks/llama.py writes it)", file=sys.stderr)
        return 1
    prompt = " ".join(["the quick brown fox jumps"] * (args.prompt // 5 + 1))
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores), load average "
          f"{os.getloadavg()[0]:.1f}; model {model.name}; {args.max_batch} slots, context "
          f"{args.context}; {args.gen} tokens a request, greedy", flush=True)
    srv = Server([sys.executable, "-m", "rlx.serve", str(model), "--port", "0",
                  "--max-batch", str(args.max_batch), "--context", str(args.context)],
                 " on http://")
    results: dict[str, Any] = {}
    try:
        results["rlx"] = run_side("rlx", srv, args, prompt)
    finally:
        srv.stop()
    if Path(args.llama_server).is_file():
        ls = Server([args.llama_server, "-m", str(model), "--port", "0", "-t",
                     str(args.threads), "--parallel", str(args.max_batch), "-c",
                     str(args.context * args.max_batch)], "listening on http://")
        try:
            results["llama-server"] = run_side("llama-server", ls, args, prompt)
        finally:
            ls.stop()
    else:
        print(f"llama-server: {args.llama_server} not found; no comparison")
    for name, res in results.items():
        report(name, res)
    if "llama-server" in results:
        print("\nrlx / llama-server tokens/s: " + ", ".join(
            f"c{c} {results['rlx'][c]['tok_s'] / r['tok_s']:.2f}"
            for c, r in results["llama-server"].items()))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"cpu": cpu_model(), "model": model.name, "results": {
                n: {c: {"tok_s": r["tok_s"], "ttft_p50_ms": pct(r["ttft"], 50),
                        "itl_p50_ms": pct(r["itl"], 50)} for c, r in res.items()}
                for n, res in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
