"""Small tokenizers trained here (no downloads), saved as HF model directories and as GGUF
vocabularies the way llama.cpp's ``convert_hf_to_gguf.py`` writes them.

Four kinds, each shaped like a real model family's tokenizer:

- ``smollm``: byte-level BPE, digits split one by one, then GPT-2's regex (SmolLM2);
  ``<|im_start|>`` / ``<|im_end|>`` ChatML template; no BOS.
- ``qwen2``: byte-level BPE, NFC, Qwen2's split regex; ChatML with a default system prompt;
  no BOS.
- ``llama3``: byte-level BPE with LLaMA 3's regex, ``ignore_merges``; BOS
  ``<|begin_of_text|>`` added by a TemplateProcessing post-processor; LLaMA 3's template.
- ``spm``: SentencePiece-style BPE (LLaMA 2): ``▁``-escaped text, a ``▁`` prepended, byte
  fallback ``<0x00>`` ... ``<0xFF>``, merges derived from piece scores as transformers'
  SentencePiece converter derives them (``generate_merges``); BOS ``<s>``; ``[INST]`` template.

The GGUF side: byte-level kinds write the vocabulary in id order with token types (added
special tokens CONTROL, other added tokens USER_DEFINED), ``tokenizer.ggml.pre`` and what
``gguf.SpecialVocab`` (the converter's own reader) takes from tokenizer.json /
tokenizer_config.json: merges, special ids, ``add_bos/eos`` flags, chat template. The SPM
kind writes pieces, scores and types as ``_set_vocab_sentencepiece`` does from a
``tokenizer.model``. Nothing here is shared with ``rlx.tokenizer``.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf

CORPUS = [
    "Hello world", " Hello World!", "Hello, world! How are you today?",
    "  two leading spaces", "trailing spaces   ", "tabs\tand\t\ttabs", "\n", "\n\n\n",
    "line one\nline two\r\nline three\n\n  indented line",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n"
    "    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { printf(\"%d\\n\", i); }",
    "x = {'key': [1, 2, 3], \"other\": None}  # comment",
    "3.14159 1234567890 0.5e-10 -42 1,000,000 2024-05-17 12:30",
    "Äpfel und Bären, naïve café, résumé, Ångström, Łódź, Straße, ﬁ ligature",
    "e\u0301 (e + combining acute) vs \u00e9",
    "日本語のテキストと中文文本，还有한국어 텍스트。",
    "emoji: 🦙🔥👍🏽 👨‍👩‍👧 ❤️ ✅",
    "mixed: abc日本def🦙ghi", "   \t \n  ", "a  b   c    d",
    "It's, you're, we'll, they'd, I'm, she's", "IT'S LOUD, YOU'RE LOUD",
    "<|im_start|>user\nspecial tokens in text<|im_end|>", "ÿ\u0100\u07ff\u0800\uffff\U00010000",
]
"""Comparison texts: whitespace runs, newlines, code, numbers, accents, CJK, emoji (whose
UTF-8 bytes split across byte-level tokens), special tokens written in the text."""

TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "A tokenizer splits text into pieces; a model reads the pieces as ids. " * 3,
    "import numpy as np\nimport rlx\n\ndef main() -> None:\n    print('hello')\n" * 2,
    "Zahlen 0123456789, Umlaute äöü ÄÖÜ ß, accents éèêë àâ ç ñ. " * 2,
    "中文 日本語 한국어 русский текст ελληνικά" * 2,
    *CORPUS,
]

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}")

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

KINDS = ("smollm", "qwen2", "llama3", "spm")
GGUF_PRE = {"smollm": "smollm", "qwen2": "qwen2", "llama3": "llama-bpe"}


def _byte_level(kind: str, vocab_size: int) -> tuple[object, dict]:
    """(tokenizers.Tokenizer, tokenizer_config.json) of a byte-level kind."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if kind == "smollm":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        config = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                  "unk_token": "<|endoftext|>", "chat_template": CHATML}
    elif kind == "qwen2":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"), byte_level])
        config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                  "chat_template": QWEN2_TEMPLATE}
    else:
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"), byte_level])
        config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                  "chat_template": LLAMA3_TEMPLATE}
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TRAINING_TEXT, trainer)
    if kind == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    config |= {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192,
               "clean_up_tokenization_spaces": False}
    return tok, config


def _spm(vocab_size: int) -> tuple[object, dict, list[float]]:
    """(tokenizers.Tokenizer, tokenizer_config.json, piece scores) of the SPM kind."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.tokenization_utils_base import generate_merges

    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  show_progress=False)
    learner = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    learner.normalizer = normalizers.Replace(" ", "\u2581")
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                     prepend_scheme="first", split=True)
    learner.train_from_iterator(TRAINING_TEXT, trainer)
    vocab = learner.get_vocab()
    pieces = sorted(vocab, key=vocab.get)
    scores = [0.0 if i < len(specials) else -float(i) for i in range(len(pieces))]
    score_of = {p: s for p, s in zip(pieces, scores, strict=True) if p not in specials}
    merges = generate_merges(vocab, score_of)
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    from tokenizers import AddedToken, processors

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
              "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
              "add_eos_token": False, "clean_up_tokenization_spaces": False,
              "legacy": True, "chat_template": LLAMA2_TEMPLATE}
    return tok, config, scores


def write_hf(kind: str, directory: Path, vocab_size: int = 700) -> Path:
    """An HF tokenizer directory (tokenizer.json, tokenizer_config.json, and for the chat
    kinds a generation_config.json naming the end-of-turn token)."""
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "spm":
        tok, config, scores = _spm(vocab_size)
        (directory / "scores.json").write_text(json.dumps(scores))
    else:
        tok, config = _byte_level(kind, vocab_size)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
    ends = {"smollm": ["<|im_end|>"], "qwen2": ["<|im_end|>", "<|endoftext|>"],
            "llama3": ["<|end_of_text|>", "<|eot_id|>"], "spm": ["</s>"]}[kind]
    (directory / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tok.token_to_id(t) for t in ends]}))
    return directory


def _add_architecture(w: gguf.GGUFWriter, n_vocab: int) -> None:
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_vocab_size(n_vocab)


def write_gguf(kind: str, hf: Path, path: Path) -> Path:
    """A vocabulary-only GGUF of the HF tokenizer at ``hf``, as convert_hf_to_gguf writes."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"vocab-{kind}")
    n = add_vocab(kind, hf, w)
    _add_architecture(w, n)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def add_vocab(kind: str, hf: Path, w: gguf.GGUFWriter) -> int:
    """Write the tokenizer metadata of the HF tokenizer at ``hf``; returns its size."""
    data = json.loads((hf / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = dict(data["model"]["vocab"])
    added = {t["content"]: t for t in data["added_tokens"]}
    for text, t in added.items():
        vocab[text] = t["id"]
    tokens = sorted(vocab, key=vocab.get)
    if kind == "spm":
        scores = json.loads((hf / "scores.json").read_text())
        types = [gguf.TokenType.UNKNOWN if t == "<unk>" else gguf.TokenType.CONTROL
                 if t in ("<s>", "</s>") else gguf.TokenType.BYTE if t.startswith("<0x")
                 else gguf.TokenType.NORMAL for t in tokens]
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
    else:
        types = [(gguf.TokenType.CONTROL if added[t]["special"] else gguf.TokenType.USER_DEFINED)
                 if t in added else gguf.TokenType.NORMAL for t in tokens]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(GGUF_PRE[kind])
        w.add_token_list(tokens)
        w.add_token_types(types)
    special = gguf.SpecialVocab(hf, load_merges=kind != "spm", n_vocab=len(tokens))
    special.add_to_gguf(w, quiet=True)
    return len(tokens)
