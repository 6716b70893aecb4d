"""Whole models in the GPU bundle: a LLaMA-shaped GGUF file made from a seed, compiled by
``tools/gpu_bundle.py --suite models`` through ``rlx.models.llama.from_gguf`` (the path a
user's file takes), run by ``tools/gpu_run.py`` on the GPU machine.

The file is never carried: both machines make its tensors from the seed
(:func:`tensor_data`, the same numbers on both), the bundle tool writes them as a GGUF
(64-byte aligned, so that every weight is a view of its tensor, no lead bytes) and records
which tensor each of the module's parameters is. The runner makes the same tensors and
gives them to ``rlx.runtime.load``. Greedy tokens and the prompt's last logits are compared
with rlx's own run of the same file on llvm-cpu (whose agreement with HF transformers is
what CI checks); speed is set beside PyTorch eager running a LLaMA of the same shape with f16
weights (PyTorch has no GGUF kernels) on the same GPU.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gpu_run import SCALE_FIELDS, median_s, seeded_array

LLAMA_1B = {"hidden": 2048, "layers": 22, "heads": 32, "kv_heads": 4, "ffn": 5632,
            "vocab": 32000, "eps": 1e-5, "theta": 10000.0}
"""TinyLlama-1.1B's shape (``benchmarks/llama.py``'s 1b row)."""
LLAMA_SMALL = {"hidden": 256, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 512,
               "vocab": 512, "eps": 1e-5, "theta": 10000.0}
"""For the runner's own test on the CPU (``--suite small``)."""
BLOCK_TYPES = {"Q8_0": "gguf_q8_0", "Q4_K": "gguf_q4_k", "Q6_K": "gguf_q6_k"}
"""GGML block types the made files use -> rlx scheme (:data:`gpu_run.SCALE_FIELDS`)."""
BLOCK_ELEMS = {"Q8_0": 32, "Q4_K": 256, "Q6_K": 256}
STD = 0.02
"""The made weights' spread (HF's ``initializer_range``): F16 ones are ~N(0, 1/fan_in), a
block format's scales are set so that its random codes spread about this much (Q8_0 codes
spread ~74; Q4_K's ``sc (q - 7.5)`` ~168; Q6_K's ~1370). Q4_K's mins are made equal to
its scales and ``dmin = 7.5 d``, so that its weights centre on 0 as a quantizer's do (random
mins gave every weight a positive mean). With :data:`gpu_run.SCALE_FIELDS`' scales and
mins, meant for single GEMVs, a made model's greedy tokens were one token repeated."""
MODEL_SCALES = {"Q8_0": {0: STD / 74}, "Q4_K": {0: STD / 168, 2: 7.5 * STD / 168},
                "Q6_K": {208: STD / 1370}}


def _more_bits(layer: int, layers: int) -> bool:
    """llama-quantize's Q4_K_M rule for ``attn_v`` / ``ffn_down``: Q6_K in the first and
    last eighth of the layers and every third one between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensor_types(c: dict[str, Any], fmt: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """GGUF tensor name -> (GGML type, numpy shape: ``[out, in]`` for linear weights) of a
    LLaMA file in ``fmt`` (Q4_K_M as llama-quantize mixes it: Q6_K for the head and some
    ``attn_v`` / ``ffn_down``)."""
    e, kv = c["hidden"], c["kv_heads"] * c["hidden"] // c["heads"]
    main = "Q4_K" if fmt == "Q4_K_M" else fmt
    head = "Q6_K" if fmt == "Q4_K_M" else fmt
    out: dict[str, tuple[str, tuple[int, ...]]] = {
        "token_embd.weight": (main, (c["vocab"], e)), "output_norm.weight": ("F32", (e,)),
        "output.weight": (head, (c["vocab"], e))}
    for i in range(c["layers"]):
        more = head if _more_bits(i, c["layers"]) else main
        for name, typ, shape in (("attn_norm", "F32", (e,)), ("ffn_norm", "F32", (e,)),
                                 ("attn_q", main, (e, e)), ("attn_k", main, (kv, e)),
                                 ("attn_v", more, (kv, e)), ("attn_output", main, (e, e)),
                                 ("ffn_gate", main, (c["ffn"], e)),
                                 ("ffn_up", main, (c["ffn"], e)),
                                 ("ffn_down", more, (e, c["ffn"]))):
            out[f"blk.{i}.{name}.weight"] = (typ, shape)
    return out


def tensor_data(name: str, typ: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """A tensor's data as the file stores it: block types as ``uint8 [rows, row bytes]``
    (random bytes, the scales of :data:`gpu_run.SCALE_FIELDS`), F16 / F32 as arrays."""
    if typ in BLOCK_TYPES:
        scheme = BLOCK_TYPES[typ]
        block = SCALE_FIELDS[scheme][0]
        raw = seeded_array((*shape[:-1], shape[-1] // BLOCK_ELEMS[typ] * block), "i8", seed,
                           name, scheme).view(np.uint8)
        blocks = raw.reshape(*shape[:-1], -1, block)
        for at, value in MODEL_SCALES[typ].items():
            blocks[..., at:at + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
        if typ == "Q4_K":       # ggml's 12 scale bytes: each sub-block's min = its scale
            blocks[..., 8:12] = blocks[..., 4:8]
            blocks[..., 12:16] = (blocks[..., 12:16] & 15) * 17
        return raw
    return seeded_array(shape, "f16" if typ == "F16" else "f32", seed, name)


def write_gguf(path: Path, c: dict[str, Any], fmt: str, seed: int) -> None:
    """The made LLaMA file (``general.architecture`` llama; no tokenizer: ids in, ids out)."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_custom_alignment(64)
    w.add_block_count(c["layers"])
    w.add_context_length(4096)
    w.add_embedding_length(c["hidden"])
    w.add_feed_forward_length(c["ffn"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_layer_norm_rms_eps(c["eps"])
    w.add_rope_freq_base(c["theta"])
    for name, (typ, shape) in tensor_types(c, fmt).items():
        data = tensor_data(name, typ, shape, seed)
        raw = gguf.GGMLQuantizationType[typ] if typ in BLOCK_TYPES else None
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def param_sources(weights: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """For each of a model's weights (``LlamaModel.weights`` of the made file): its tensor
    (llama.cpp's name), whether it is the tensor's bytes (``raw``: block formats and F16,
    ``dequant_matmul``'s operand) or its values as f32 (norms), and the shape and dtype the
    module declares. The bundle tool checks that :func:`model_weights` remakes each one."""
    from rlx.models.llama import gguf_name

    return {p: {"tensor": gguf_name(p), "raw": a.dtype == np.int8, "shape": list(a.shape),
                "dtype": a.dtype.name} for p, a in weights.items()}


def model_weights(case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The module's weights, made here from the case's seed (see :func:`param_sources`)."""
    types = tensor_types(case["config"], case["format"])
    out = {}
    for pname, src in case["params"].items():
        typ, shape = types[src["tensor"]]
        data = tensor_data(src["tensor"], typ, shape, case["seed"])
        if src["raw"]:
            data = data.view(np.int8).reshape(src["shape"])
        out[pname] = np.ascontiguousarray(data.astype(src["dtype"], copy=False)
                                          .reshape(src["shape"]))
    return out


# --------------------------------------------------------------------------------------
# Running a model case (on the GPU machine)
# --------------------------------------------------------------------------------------


def greedy(program: Any, first: int, cos: np.ndarray, sin: np.ndarray, cache: tuple[Any, ...],
           steps: int) -> Iterator[int]:
    """``rlx.generate``'s pipelined greedy loop: step n + 1 queued before step n's token is
    read back, the token a device tensor (the module's ``next``)."""
    ids: Any = np.array([[first]], np.int32)
    pending: deque[Any] = deque()
    for step in range(steps + 1):
        if step < steps:
            res = program.decode.submit(ids, cos[step:step + 1], sin[step:step + 1], *cache)
            cache, ids = res[2:], res[1]
            pending.append(ids)
        if len(pending) > 1 or (step >= steps and pending):
            yield int(pending.popleft().numpy().reshape(-1)[0])


def prefill(program: Any, ids: np.ndarray, cos: np.ndarray, sin: np.ndarray
            ) -> tuple[np.ndarray, tuple[Any, ...]]:
    """The prompt's last logits ``[V]`` and the KV cache (device tensors)."""
    p = ids.shape[1]
    out = program.prefill.on_device(ids, cos[:p], sin[:p], np.array([[p - 1]], np.int32))
    return out[0].numpy()[0, -1], out[2:]


def generate(program: Any, ids: np.ndarray, cos: np.ndarray, sin: np.ndarray, steps: int
             ) -> tuple[np.ndarray, list[int]]:
    """The prompt's last logits and ``steps + 1`` greedy tokens (the first from them)."""
    logits, cache = prefill(program, ids, cos, sin)
    first = int(np.argmax(logits))
    p = ids.shape[1]
    return logits, [first, *greedy(program, first, cos[p:], sin[p:], cache, steps)]


def run_model(rt: Any, bundle: Path, case: dict[str, Any], target: str, device: str,
              torch: Any, within: Callable[..., tuple[bool, float, float]]) -> dict[str, Any]:
    """Load the made file's weights, prefill the prompt, decode greedily; the tokens and
    the last logits against the CPU's, the times beside PyTorch's (:func:`torch_llama`)."""
    t0 = time.perf_counter()
    weights = model_weights(case)
    made_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    program = rt.load(bundle / case["vmfb"][target], device, weights)
    load_s = time.perf_counter() - t0
    del weights
    with np.load(bundle / case["data"]) as z:
        ids, cos, sin, want = z["ids"], z["cos"], z["sin"], z["logits"]
        want_tokens = [int(t) for t in z["tokens"]]
    p, steps = ids.shape[1], len(want_tokens) - 1
    logits, got = generate(program, ids, cos, sin, steps)
    ok, err, bound = within(logits, want, tuple(case["tolerance"]))
    same = next((i for i, (a, b) in enumerate(zip(got, want_tokens, strict=True)) if a != b),
                len(got))
    prefill_s = median_s(lambda: prefill(program, ids, cos, sin), 5, warmup=1)
    decode_s = []
    for _ in range(3):
        _, cache = prefill(program, ids, cos, sin)
        t0 = time.perf_counter()
        for _ in greedy(program, got[0], cos[p:], sin[p:], cache, steps):
            pass
        decode_s.append((time.perf_counter() - t0) / steps)
    row: dict[str, Any] = {
        "ok": bool(ok and same == len(got)), "err": err, "bound": bound,
        "tokens_same": same, "tokens": len(got), "made_s": made_s, "load_s": load_s,
        "rlx": {"prefill_ms": prefill_s * 1e3, "prefill_tok_s": p / prefill_s,
                "decode_ms": min(decode_s) * 1e3, "decode_tok_s": 1 / min(decode_s)}}
    if same < len(got):
        row["where"] = f"token {same}: {got[same]} (CPU {want_tokens[same]})"
    if torch is not None:
        try:
            row["torch"] = torch_llama(torch, case["config"], p, steps)
        except Exception as e:  # PyTorch's side failing leaves rlx's result standing
            row["torch_error"] = f"{type(e).__name__}: {e}"[:500]
    return row


def torch_llama(torch: Any, c: dict[str, Any], prompt: int, steps: int) -> dict[str, float]:
    """PyTorch eager, f16 weights on CUDA (f32 on a CPU; random: PyTorch has no GGUF
    kernels): a LLaMA of the shape ``c`` (RMSNorm, q / k / v, NeoX RoPE, GQA SDPA over a
    preallocated cache, o, SwiGLU, the LM head), prefill of ``prompt`` tokens and ``steps``
    greedy decode steps, the token fed back on the device, synchronized once at the end (as
    rlx's pipelined loop reads each token back one step late)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = torch.float16 if dev == "cuda" else torch.float32

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    e, nh, nkv, f = c["hidden"], c["heads"], c["kv_heads"], c["ffn"]
    hd = e // nh
    g = torch.Generator(device=dev).manual_seed(0)

    def mat(i: int, o: int) -> Any:
        return torch.randn(i, o, generator=g, device=dev, dtype=dt) / i ** 0.5

    layers = [{"q": mat(e, e), "k": mat(e, nkv * hd), "v": mat(e, nkv * hd), "o": mat(e, e),
               "gate": mat(e, f), "up": mat(e, f), "down": mat(f, e)}
              for _ in range(c["layers"])]
    embed, head = mat(c["vocab"], e), mat(e, c["vocab"])
    ctx = prompt + steps + 1
    kc = [torch.zeros(1, nkv, ctx, hd, device=dev, dtype=dt) for _ in layers]
    vc = [torch.zeros(1, nkv, ctx, hd, device=dev, dtype=dt) for _ in layers]
    inv = 1.0 / c["theta"] ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd)
    ang = torch.arange(ctx, device=dev, dtype=torch.float32)[:, None] * inv[None]
    cos_t, sin_t = ang.cos().to(dt), ang.sin().to(dt)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def norm(x: Any) -> Any:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + c["eps"]).to(dt)

    def rope(x: Any, pos: slice) -> Any:
        a, b = x[..., :hd // 2], x[..., hd // 2:]
        cs, sn = cos_t[pos][None, None], sin_t[pos][None, None]
        return torch.cat([a * cs - b * sn, b * cs + a * sn], -1)

    def forward(tok: Any, start: int) -> Any:
        n = tok.shape[1]
        pos = slice(start, start + n)
        x = embed[tok]
        for w, kk, vv in zip(layers, kc, vc, strict=True):
            h = norm(x)
            q = rope((h @ w["q"]).view(1, n, nh, hd).transpose(1, 2), pos)
            kk[:, :, pos] = rope((h @ w["k"]).view(1, n, nkv, hd).transpose(1, 2), pos)
            vv[:, :, pos] = (h @ w["v"]).view(1, n, nkv, hd).transpose(1, 2)
            a = sdpa(q, kk[:, :, :start + n], vv[:, :, :start + n], is_causal=n > 1,
                     enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(1, n, e) @ w["o"]
            h = norm(x)
            x = x + (torch.nn.functional.silu(h @ w["gate"]) * (h @ w["up"])) @ w["down"]
        return (norm(x[:, -1:]) @ head).argmax(-1)

    tok = torch.randint(0, c["vocab"], (1, prompt), generator=g, device=dev)
    with torch.inference_mode():
        def pre() -> None:
            forward(tok, 0)
            sync()

        prefill_s = median_s(pre, 5, warmup=1)
        runs = []
        for _ in range(3):
            nxt = forward(tok, 0)
            sync()
            t0 = time.perf_counter()
            for s in range(steps):
                nxt = forward(nxt, prompt + s)
            sync()
            runs.append((time.perf_counter() - t0) / steps)
    return {"prefill_ms": prefill_s * 1e3, "prefill_tok_s": prompt / prefill_s,
            "decode_ms": min(runs) * 1e3, "decode_tok_s": 1 / min(runs)}
