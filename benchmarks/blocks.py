"""The benchmarked blocks, each in three forms sharing one set of weights: an rlx HIR module
(``tests/bench_blocks.py``, whose dispatch counts a test checks), a PyTorch eager module (HF
LLaMA style), and its ONNX export (built by the harness).

Shapes follow ../shared/reference/cpu-performance-anchors.md: batch 1, f32, hidden 1024,
16 query heads / 4 KV heads of 64, FFN 2816, prefill seq 128, decode 1 token against a
512-position cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tests.bench_blocks import BLOCKS, EPS, HD, KVD, KVH, PAST, E, F, H, S, rlx_block
from torch import nn


def rope_tables(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    inv = 10000.0 ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    ang = positions[:, None].astype(np.float64) * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def make_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def mat(i: int, o: int) -> np.ndarray:
        return (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(E)).astype(np.float32)

    return {"ln1": norm(), "ln2": norm(), "q": mat(E, H * HD), "k": mat(E, KVD),
            "v": mat(E, KVD), "o": mat(H * HD, E), "gate": mat(E, F), "up": mat(E, F),
            "down": mat(F, E), "zeros": np.zeros(E, np.float32)}


# --------------------------------------------------------------------------------------
# PyTorch (HF LLaMA style)
# --------------------------------------------------------------------------------------


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, S, HD]; cos/sin [S, HD/2] (duplicated to HD as HF does)."""
    c = torch.cat((cos, cos), -1)[None, None]
    s = torch.cat((sin, sin), -1)[None, None]
    return x * c + _rotate_half(x) * s


class Torch(nn.Module):
    def __init__(self, name: str, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.name = name
        for key, value in w.items():
            t = torch.from_numpy(value.copy())
            self.register_buffer(key, t.T.contiguous() if t.ndim == 2 else t)

    def lin(self, x: torch.Tensor, key: str) -> torch.Tensor:
        return nn.functional.linear(x, getattr(self, key))

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(nn.functional.silu(self.lin(x, "gate")) * self.lin(x, "up"), "down")

    def attn(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
             ) -> torch.Tensor:
        """q [B, H, S, HD], k/v [B, KVH, T, HD]; HF repeat_kv then SDPA."""
        k = k.repeat_interleave(H // KVH, dim=1)
        v = v.repeat_interleave(H // KVH, dim=1)
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], n, HD).transpose(1, 2)

    def merge(self, x: torch.Tensor) -> torch.Tensor:
        b, _, s, _ = x.shape
        return x.transpose(1, 2).reshape(b, s, H * HD)

    def forward(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if self.name == "rmsnorm":
            return _rms(args[0], self.ln1)
        if self.name == "swiglu_ffn":
            return self.ffn(args[0])
        if self.name == "attention":
            q, k, v = args
            return self.merge(self.attn(self.heads(q, H), self.heads(k, KVH),
                                        self.heads(v, KVH), True))
        x, cos, sin = args[:3]
        n1 = _rms(x, self.ln1)
        q = _rope(self.heads(self.lin(n1, "q"), H), cos, sin)
        k = _rope(self.heads(self.lin(n1, "k"), KVH), cos, sin)
        v = self.heads(self.lin(n1, "v"), KVH)
        if self.name == "decode_step":
            k = torch.cat((self.heads(args[3], KVH), k), dim=2)
            v = torch.cat((self.heads(args[4], KVH), v), dim=2)
        a = self.merge(self.attn(q, k, v, self.name == "prefill_block"))
        x1 = x + self.lin(a, "o")
        y = x1 + self.ffn(_rms(x1, self.ln2))
        if self.name == "decode_step":
            return y, k.transpose(1, 2).reshape(1, -1, KVD), v.transpose(1, 2).reshape(1, -1, KVD)
        return y


# --------------------------------------------------------------------------------------
# Inputs and work
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    name: str
    inputs: dict[str, np.ndarray]
    flops: float  # useful floating-point operations per call
    bytes_read: float  # weight + cache bytes per call (the decode bound)


def make_block(name: str, w: dict[str, np.ndarray], seed: int = 1) -> Block:
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    proj = 2 * (E * H * HD * 2 + 2 * E * KVD + 3 * E * F)
    weight_bytes = 4 * (2 * E * H * HD + 2 * E * KVD + 3 * E * F + 2 * E)
    if name == "rmsnorm":
        return Block(name, {"x": rand(1, S, E)}, 4.0 * S * E, 4 * S * E)
    if name == "swiglu_ffn":
        return Block(name, {"x": rand(S, E)}, 2.0 * S * 3 * E * F, 4 * 3 * E * F)
    if name == "attention":
        return Block(name, {"q": rand(1, S, H * HD), "k": rand(1, S, KVD), "v": rand(1, S, KVD)},
                     4.0 * H * HD * S * (S + 1) / 2, 4 * S * (H * HD + 2 * KVD))
    if name == "prefill_block":
        cos, sin = rope_tables(np.arange(S))
        return Block(name, {"x": rand(1, S, E), "cos": cos, "sin": sin},
                     S * proj + 4.0 * H * HD * S * (S + 1) / 2, weight_bytes)
    cos, sin = rope_tables(np.array([PAST]))
    return Block(name, {"x": rand(1, 1, E), "cos": cos, "sin": sin,
                        "k_cache": rand(1, PAST, KVD), "v_cache": rand(1, PAST, KVD)},
                 proj + 4.0 * H * HD * (PAST + 1), weight_bytes + 4 * 2 * PAST * KVD)


__all__ = ["BLOCKS", "Block", "Torch", "make_block", "make_weights", "rlx_block"]
