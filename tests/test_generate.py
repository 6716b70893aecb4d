"""Text in, text out: rlx.generate and rlx-generate with the model's own tokenizer, against
HF transformers on a tiny random LLaMA whose directory holds a tokenizer trained here
(``tokenizer_fixtures``, SmolLM2-shaped, ChatML template).

Greedy text equals transformers' ``generate`` decoded by its tokenizer; streaming yields the
same text in pieces; end tokens, ``eos_token_id`` and stop strings end it; sampled tokens
equal a host-side chain of the numpy reference processors and draw on the decode logits,
and the same seed gives the same text. The CLI prints text (or ids), a tokens/s line, and
one error line for bad input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

import rlx
import tokenizer_fixtures as fixtures
from hf_gguf import write_gguf
from rlx.generate import Generator, Sampling, SamplingError
from rlx.models import llama
from rlx.tokenizer import load as load_tokenizer
from sampling_chain import host_chain

PROMPT = "Hello world, the quick brown fox"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny HF LLaMA (2 layers, GQA) over the trained smollm tokenizer's vocabulary."""
    d = fixtures.write_hf("smollm", tmp_path_factory.mktemp("tiny"))
    vocab = load_tokenizer(d).vocab_size
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, num_hidden_layers=2,
        max_position_embeddings=256, initializer_range=0.2)).eval()
    model.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def gen(model_dir: Path) -> Generator:
    return Generator(llama.from_hf(model_dir), tokenizer=load_tokenizer(model_dir))


def hf_greedy(model_dir: Path, ids: list[int], n: int) -> list[int]:
    model = transformers.LlamaForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, pad_token_id=0)
    return out[0, len(ids):].tolist()


def test_text_matches_transformers(model_dir: Path, gen: Generator) -> None:
    hf_tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    ids = hf_tok(PROMPT)["input_ids"]
    assert gen.prompt_ids(PROMPT) == ids
    want_ids = hf_greedy(model_dir, ids, 24)
    want = hf_tok.decode(want_ids)
    assert gen.generate(ids, 24) == want_ids
    assert gen.text(PROMPT, 24) == want
    pieces = list(gen.stream(PROMPT, 24))
    assert "".join(pieces) == want
    assert len(pieces) > 5
    assert gen.stats.prompt_tokens == len(ids)
    assert gen.stats.new_tokens == 24
    assert "tok/s" in gen.stats.line()
    assert rlx.generate(model_dir, PROMPT, 24) == want  # by path: the tokenizer comes along
    assert "".join(rlx.generate(model_dir, PROMPT, 24, stream=True)) == want


def test_chat_template_end_tokens_and_stop_strings(model_dir: Path, gen: Generator) -> None:
    hf_tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    chat_ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
    assert gen.prompt_ids(messages) == chat_ids
    want = gen.generate(chat_ids, 16)
    assert gen.text(messages, 16) == hf_tok.decode(want)
    tok = gen.tokenizer
    assert tok is not None
    saved = tok.end_ids
    try:  # the model "ends its turn" with its 6th token: the text stops before it
        tok.end_ids = frozenset({want[5]})
        end = want.index(want[5])
        assert gen.text(messages, 16) == hf_tok.decode(want[:end])
        assert list(gen.tokens(chat_ids, 16, stop_ids=tok.end_ids)) == want[:end + 1]
    finally:
        tok.end_ids = saved
    text = hf_tok.decode(want)
    stop = text[7:10]
    assert gen.text(messages, 16, stop=[stop, "never"]) == text[:text.index(stop)]
    assert "".join(gen.stream(messages, 16, stop=[stop])) == text[:text.index(stop)]
    assert gen.text(messages, 16, eos_token_id=want[2]) == hf_tok.decode(
        want[:want.index(want[2])])


@pytest.mark.parametrize("sampling", [
    Sampling(temperature=0.9, seed=5),
    Sampling(temperature=0.7, top_k=40, top_p=0.9, min_p=0.02, repetition_penalty=1.3,
             seed=11),
    Sampling(temperature=1.5, top_k=3, seed=-7),
], ids=["plain", "all_filters", "top_k"])
def test_sampled_tokens_follow_the_reference_chain(gen: Generator, sampling: Sampling) -> None:
    ids = gen.prompt_ids(PROMPT)
    got = gen.generate(ids, 12, sampling=sampling)
    assert got == host_chain(gen, ids, 12, sampling)
    assert gen.generate(ids, 12, sampling=sampling) == got  # same seed, same tokens


def test_greedy_with_penalty_and_seeds(gen: Generator) -> None:
    ids = gen.prompt_ids(PROMPT)
    greedy = gen.generate(ids, 16)
    assert gen.generate(ids, 16, sampling=Sampling(temperature=0.0, seed=3)) == greedy
    penalized = gen.generate(ids, 16, sampling=Sampling(repetition_penalty=1.5))
    assert penalized == host_chain(gen, ids, 16, Sampling(repetition_penalty=1.5))
    seeds = {tuple(gen.generate(ids, 16, sampling=Sampling(temperature=1.0, seed=s)))
             for s in range(4)}
    assert len(seeds) == 4
    with pytest.raises(SamplingError, match=r"top_p: expected a number in \(0, 1\]"):
        Sampling(top_p=1.5)
    with pytest.raises(SamplingError, match=r"temperature: expected a number >= 0"):
        Sampling(temperature=-1)


def test_gguf_model_with_its_tokenizer(model_dir: Path, gen: Generator,
                                       tmp_path: Path) -> None:
    """The same model and tokenizer as a GGUF file: the same text."""
    hf = transformers.LlamaForCausalLM.from_pretrained(model_dir)
    file = write_gguf(hf, tmp_path / "tiny.gguf", "F32",
                      vocab=lambda w: fixtures.add_vocab("smollm", model_dir, w))
    assert rlx.generate(file, PROMPT, 12) == gen.text(PROMPT, 12)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlx.tools.generate", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_cli_text_chat_ids(model_dir: Path, gen: Generator) -> None:
    proc = cli(model_dir, "--prompt", PROMPT, "--max-new-tokens", "20")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == gen.text(PROMPT, 20) + "\n"
    assert f"prompt: {len(gen.prompt_ids(PROMPT))} tokens" in proc.stderr
    assert "generation: 20 tokens" in proc.stderr
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    proc = cli(model_dir, "--chat", "Hi", "--system", "Be brief.", "--max-new-tokens", "8")
    assert proc.stdout == gen.text(messages, 8) + "\n"
    ids = gen.prompt_ids(PROMPT)
    proc = cli(model_dir, "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", "8")
    assert proc.stdout.strip() == ",".join(map(str, gen.generate(ids, 8)))
    proc = cli(model_dir, "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", "8",
               "--output", "text")
    assert proc.stdout == gen.text(ids, 8) + "\n"
    args = ["--prompt", PROMPT, "--max-new-tokens", "10", "--temperature", "0.8",
            "--top-p", "0.9", "--seed", "4"]
    first, second = cli(model_dir, *args), cli(model_dir, *args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout == gen.text(
        PROMPT, 10, sampling=Sampling(temperature=0.8, top_p=0.9, seed=4)) + "\n"


def assert_one_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_cli_bad_input(model_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((model_dir / name).read_bytes())
    assert_one_error(cli(bare, "--prompt", "Hi"), "has no tokenizer", "--prompt-ids")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in model_dir.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{ raise_exception('only one message, please') }}"
    (broken / "tokenizer_config.json").write_text(json.dumps(config))
    assert_one_error(cli(broken, "--chat", "Hi"), "chat template failed to render",
                     "only one message, please")
    assert_one_error(cli(model_dir, "--prompt", "Hi", "--top-p", "1.5"),
                     "top_p: expected a number in (0, 1]")
    assert_one_error(cli(model_dir, "--prompt", "Hi", "--temperature", "warm"),
                     "--temperature: invalid float value: 'warm'")
    assert_one_error(cli(model_dir, "--prompt-ids", "1,x"), "--prompt-ids: expected")
    assert_one_error(cli(model_dir, "--prompt", "Hi", "--system", "S"),
                     "--system goes with --chat")



def test_cli_second_start_comes_from_the_cache(model_dir: Path, tmp_path: Path) -> None:
    args = [model_dir, "--prompt", "Hi", "--max-new-tokens", "4", "--cache-dir", tmp_path]
    default = {k: v for k, v in os.environ.items() if k != "RLX_ENCODE_PARAMETERS"}
    first = cli(*args, env=default)
    assert first.returncode == 0, first.stderr
    assert "startup: " in first.stderr
    assert "(compiled, weights encoded and loaded)" in first.stderr
    # the module and its parameter encoder; the weights' encoded planes (rlx.encoding)
    assert len(list((tmp_path / "vmfb").glob("*.vmfb"))) == 2
    assert len(list((tmp_path / "params").glob("*.irpa"))) == 1
    second = cli(*args, env=default)
    assert "(the compiled model from the cache, weights loaded)" in second.stderr
    assert second.stdout == first.stdout
    bypass = cli(*args, "--no-cache", env=default)
    assert "(compiled, weights loaded)" in bypass.stderr
    assert bypass.stdout == first.stdout


class _Terminal:
    """A stderr that says it is a terminal and keeps what is written."""

    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, []

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text.append(s)
        return len(s)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_progress_only_on_a_terminal_and_only_when_slow(tty: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from rlx.tools import generate as tool

    monkeypatch.setattr(tool, "SHOW_AFTER_S", 0.3)
    err = _Terminal(tty)
    monkeypatch.setattr(sys, "stderr", err)
    with tool.progress("quick stage"):
        pass
    with tool.progress("compiling for llvm-cpu"):
        time.sleep(1.2)
    shown = "".join(err.text)
    assert "quick stage" not in shown
    assert ("compiling for llvm-cpu" in shown) == tty
