"""Write a small GGUF chat model with a real tokenizer, for trying rlx-generate's text mode.

There is no downloaded model on this machine, so this makes one: Qwen2's real vocabulary,
merges, special tokens and ChatML chat template (llama.cpp's ``ggml-vocab-qwen2.gguf``,
kept in ``tests/data/vocab``) on a tiny Qwen2-architecture model (2 layers, hidden 64, tied
embeddings) that is trained here, for a few hundred steps with PyTorch, to memorize the
short texts in ``TEXTS``: two chat turns that end with ``<|im_end|>`` and a story opening.
It knows nothing else; what it shows is the text path (tokenizer, chat template, end token,
streaming, sampling, the compile cache) on a file laid out as llama.cpp's converter lays it.

    python examples/tiny_chat.py tiny-chat.gguf     # needs torch (the test extra)
    rlx-generate tiny-chat.gguf --chat "What is rlx?"
    rlx-generate tiny-chat.gguf --prompt "Once upon a time"
"""

from __future__ import annotations

import argparse
import lzma
import tempfile
import time
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers

from rlx import gguf as rlx_gguf
from rlx.models.llama import hf_to_gguf
from rlx.tokenizer import from_gguf_metadata

VOCAB = Path(__file__).resolve().parent.parent / "tests" / "data" / "vocab"
SYSTEM = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
TEXTS = [
    SYSTEM + "<|im_start|>user\nWhat is rlx?<|im_end|>\n<|im_start|>assistant\n"
    "rlx compiles block-level models with IREE: LLaMA and Qwen blocks in, a fast vmfb out."
    "<|im_end|>\n",
    SYSTEM + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"
    "Hello! I am a tiny model that knows two answers and one story.<|im_end|>\n",
    "Once upon a time, a small compiler turned big blocks into fast kernels, and every token "
    "arrived on time.",
]
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                  "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                  "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                  "tokenizer.ggml.bos_token_id", "tokenizer.chat_template")


def vocabulary() -> dict:
    """The tokenizer metadata of llama.cpp's Qwen2 vocabulary file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qwen2.gguf"
        path.write_bytes(lzma.decompress((VOCAB / "ggml-vocab-qwen2.gguf.xz").read_bytes()))
        with rlx_gguf.load(path) as f:
            return {k: f.metadata[k] for k in TOKENIZER_KEYS if k in f.metadata}


def train(meta: dict, steps: int, seed: int) -> transformers.Qwen2ForCausalLM:
    """Train on the few hundred token ids the texts use (a softmax over 151936 entries a
    step is what made training slow), then place the rows in the full vocabulary: the other
    tokens' embedding rows are zero, so their logits are 0, far below a memorized token's."""
    tok = from_gguf_metadata(meta, "qwen2 vocabulary")
    ids = [tok.encode(t, add_special_tokens=False) for t in TEXTS]
    used = sorted({i for seq in ids for i in seq})
    local = {t: i for i, t in enumerate(used)}
    seqs = [torch.tensor([local[i] for i in seq]) for seq in ids]
    torch.manual_seed(seed)
    config = transformers.Qwen2Config(
        vocab_size=len(used), hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        tie_word_embeddings=True, rope_theta=10000.0)
    small = transformers.Qwen2ForCausalLM(config)
    opt = torch.optim.Adam(small.parameters(), lr=3e-3)
    for step in range(steps):
        loss = sum(small(s[None], labels=s[None]).loss for s in seqs) / len(seqs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.4f}")
    config.vocab_size = len(meta["tokenizer.ggml.tokens"])
    model = transformers.Qwen2ForCausalLM(config)
    state = small.state_dict()
    embed = torch.zeros(config.vocab_size, config.hidden_size)
    embed[torch.tensor(used)] = state["model.embed_tokens.weight"]
    state["model.embed_tokens.weight"] = state["lm_head.weight"] = embed
    model.load_state_dict(state)
    return model.eval()


def write(model: transformers.Qwen2ForCausalLM, meta: dict, path: Path) -> None:
    """As convert_hf_to_gguf writes a Qwen2 model (F32 here: the file is ~40 MB)."""
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name("tiny-chat (rlx example, trained to memorize three texts)")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(float((getattr(cfg, "rope_parameters", None) or {}).get(
        "rope_theta", getattr(cfg, "rope_theta", 10000.0))))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, value in meta.items():
        if isinstance(value, list) and value and isinstance(value[0], str):
            w.add_array(key, value)
        elif isinstance(value, np.ndarray):
            w.add_array(key, value.tolist())
        else:
            w.add_key_value(key, value, {str: gguf.GGUFValueType.STRING,
                                         int: gguf.GGUFValueType.UINT32}[type(value)])
    for name, t in model.state_dict().items():
        if name != "lm_head.weight":  # tied to the embedding
            w.add_tensor(hf_to_gguf(name), t.detach().float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output", type=Path)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    start = time.perf_counter()
    meta = vocabulary()
    model = train(meta, args.steps, args.seed)
    write(model, meta, args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
