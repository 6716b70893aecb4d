"""rlx.tokenizer against independent tokenizers.

- Real vocabularies (llama.cpp's ``ggml-vocab-*.gguf``: Phi-3's SentencePiece, Qwen2's and
  GPT-2's byte-level BPE, ``tests/data/vocab``): ids identical to llama.cpp's own test vectors.
- Tokenizers trained here (``tokenizer_fixtures.py``: SmolLM2-, Qwen2-, LLaMA 3- and
  LLaMA 2-shaped): the HF directory and the GGUF written from it as llama.cpp's converter
  does both give transformers' ``AutoTokenizer`` ids on a corpus of whitespace runs,
  newlines, code, numbers, accents, CJK and emoji; ``decode(encode(s)) == s`` wherever
  transformers round-trips; chat templates render as ``apply_chat_template`` renders them.
"""

from __future__ import annotations

import lzma
import warnings
from pathlib import Path
from typing import Any

import pytest

import tokenizer_fixtures as fixtures
from hf_gguf import write_gguf as write_model_gguf
from rlx import tokenizer as rlx_tokenizer
from rlx.tokenizer import TokenizerError

VOCAB = Path(__file__).resolve().parent / "data" / "vocab"
SEPARATOR = "\n__ggml_vocab_test__\n"
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi there 🦙"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Add 2 + 2, please."}]


def vectors(name: str) -> list[tuple[str, list[int]]]:
    texts = (VOCAB / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split(SEPARATOR)
    ids = (VOCAB / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(i) for i in line.split()]) for t, line in zip(texts, ids, strict=False)]


@pytest.fixture(scope="module")
def real_vocab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """name -> the decompressed vocabulary file."""
    tmp = tmp_path_factory.mktemp("vocab")

    def path(name: str) -> Path:
        out = tmp / f"ggml-vocab-{name}.gguf"
        if not out.exists():
            out.write_bytes(lzma.decompress((VOCAB / f"{out.name}.xz").read_bytes()))
        return out

    return path


@pytest.mark.parametrize("name", ["phi-3", "qwen2", "gpt-2"])
def test_real_vocabularies_match_llama_cpp(name: str, real_vocab: Any) -> None:
    tok = rlx_tokenizer.load(real_vocab(name))
    cases = vectors(name)
    assert len(cases) == 47
    wrong = [(text, tok.encode(text, add_special_tokens=False), want) for text, want in cases
             if tok.encode(text, add_special_tokens=False) != want]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ from llama.cpp, e.g. {wrong[:3]}"
    for text, want in cases:
        assert tok.decode(want) == text


def test_real_vocabularies_special_tokens_and_templates(real_vocab: Any) -> None:
    phi3 = rlx_tokenizer.load(real_vocab("phi-3"))
    assert phi3.encode("Hello")[0] == 1  # add_bos_token
    assert phi3.token_id("<|end|>") in phi3.end_ids
    assert 32000 in phi3.end_ids
    assert phi3.render_chat([{"role": "user", "content": "Hi"}]) == (
        "<s><|user|>\nHi<|end|>\n<|assistant|>\n")
    assert phi3.encode_chat([{"role": "user", "content": "Hi"}])[:2] == [1, 32010]
    qwen = rlx_tokenizer.load(real_vocab("qwen2"))
    assert qwen.encode("Hello") == qwen.encode("Hello", add_special_tokens=False)  # no BOS
    assert qwen.end_ids == {151643, qwen.token_id("<|im_end|>")}
    rendered = qwen.render_chat([{"role": "user", "content": "Hi"}])
    assert rendered == ("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert qwen.encode(rendered, add_special_tokens=False)[0] == qwen.token_id("<|im_start|>")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """kind -> the HF directory, its GGUF, transformers' tokenizer of the directory."""
    from transformers import AutoTokenizer

    tmp = tmp_path_factory.mktemp("trained")
    out = {}
    for kind in fixtures.KINDS:
        hf = fixtures.write_hf(kind, tmp / kind)
        gguf = fixtures.write_gguf(kind, hf, tmp / f"{kind}.gguf")
        out[kind] = {"hf": hf, "gguf": gguf, "ref": AutoTokenizer.from_pretrained(hf)}
    return out


def _apply_chat_template(ref: Any, messages: list[dict[str, str]], tokenize: bool) -> Any:
    out = ref.apply_chat_template(messages, tokenize=tokenize, add_generation_prompt=True)
    return out["input_ids"] if tokenize else out


@pytest.mark.parametrize("kind", fixtures.KINDS)
@pytest.mark.parametrize("source", ["hf", "gguf"])
def test_trained_tokenizers_match_transformers(kind: str, source: str,
                                               trained: dict[str, dict[str, Any]]) -> None:
    case = trained[kind]
    ref = case["ref"]
    tok = rlx_tokenizer.load(case[source])
    for text in fixtures.CORPUS:
        want = ref.encode(text)
        assert tok.encode(text) == want, f"{kind} {source}: {text!r}"
        assert tok.encode(text, add_special_tokens=False) == ref.encode(
            text, add_special_tokens=False)
        if ref.decode(want) == text:
            assert tok.decode(tok.encode(text)) == text
        assert tok.decode(want, skip_special_tokens=True) == ref.decode(
            want, skip_special_tokens=True)
    assert tok.render_chat(MESSAGES) == _apply_chat_template(ref, MESSAGES, tokenize=False)
    assert tok.encode_chat(MESSAGES) == _apply_chat_template(ref, MESSAGES, tokenize=True)
    assert tok.render_chat(MESSAGES[:2], add_generation_prompt=False) == (
        ref.apply_chat_template(MESSAGES[:2], tokenize=False))


@pytest.mark.parametrize("kind", ["smollm", "llama3"])
def test_gguf_agrees_with_transformers_gguf_loader(kind: str,
                                                   trained: dict[str, dict[str, Any]]) -> None:
    """A third opinion where transformers' own GGUF converter rebuilds the same tokenizer
    (it has no split for ``qwen2``'s NFC and uses a Metaspace pre-tokenizer for
    SentencePiece, so those two kinds differ from their HF directories there)."""
    from transformers import AutoTokenizer

    gguf = trained[kind]["gguf"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok = rlx_tokenizer.load(gguf)
    for text in fixtures.CORPUS:
        assert tok.encode(text) == ref.encode(text), text


@pytest.mark.parametrize("kind", fixtures.KINDS)
def test_end_tokens(kind: str, trained: dict[str, dict[str, Any]]) -> None:
    ends = {"smollm": {"<|im_end|>"}, "qwen2": {"<|im_end|>", "<|endoftext|>"},
            "llama3": {"<|end_of_text|>", "<|eot_id|>"}, "spm": {"</s>"}}[kind]
    hf = rlx_tokenizer.load(trained[kind]["hf"])
    assert {hf.backend.id_to_token(i) for i in hf.end_ids} == ends
    gguf = rlx_tokenizer.load(trained[kind]["gguf"])
    assert ends & {gguf.backend.id_to_token(i) for i in gguf.end_ids}


@pytest.mark.parametrize("kind", ["smollm", "spm"])
def test_stream_decoder_never_splits_a_character(kind: str,
                                                 trained: dict[str, dict[str, Any]]) -> None:
    tok = rlx_tokenizer.load(trained[kind]["hf"])
    for text in fixtures.CORPUS:
        ids = tok.encode(text, add_special_tokens=False)
        stream = tok.stream()
        pieces = [stream.push(i) for i in ids]
        pieces.append(stream.flush())
        assert "".join(pieces) == tok.decode(ids), text
        assert not any("\ufffd" in p for p in pieces), (text, pieces)
    emoji = tok.encode("🐘", add_special_tokens=False)  # not in the training text
    assert len(emoji) > 1  # the character's bytes are several tokens
    stream = tok.stream()
    assert [stream.push(i) for i in emoji] == [""] * (len(emoji) - 1) + ["🐘"]


def test_errors(trained: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, head_dim=8))
    bare = write_model_gguf(model, tmp_path / "bare.gguf", "F32")
    with pytest.raises(TokenizerError, match=r"bare.gguf: error: the file has no tokenizer"):
        rlx_tokenizer.load(bare)
    with pytest.raises(TokenizerError, match=r"error: no tokenizer.json in the model directory"):
        rlx_tokenizer.load(tmp_path)
    spm = rlx_tokenizer.load(trained["spm"]["hf"])
    with pytest.raises(TokenizerError, match=r"the chat template failed to render: "
                                             r"Conversation roles must alternate"):
        spm.render_chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    spm.chat_template = "{% for m in messages %}{{ m['content'] }"
    with pytest.raises(TokenizerError, match=r"the chat template does not parse"):
        spm.render_chat(MESSAGES)
    spm.chat_template = None
    with pytest.raises(TokenizerError, match=r"the model has no chat template"):
        spm.render_chat(MESSAGES)
    with pytest.raises(TokenizerError, match=r"expected an HF model directory or a .gguf"):
        rlx_tokenizer.load(tmp_path / "missing.bin")
