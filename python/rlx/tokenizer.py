"""The model's own tokenizer and chat template: ``rlx.tokenizer.load(path)``.

``path`` is an HF model directory (``tokenizer.json``, with ``tokenizer_config.json``,
``generation_config.json`` and ``chat_template.jinja`` where present) or a llama.cpp
``.gguf`` file (its ``tokenizer.*`` metadata). Either way the result is a
:class:`Tokenizer` on the ``tokenizers`` library (Hugging Face's Rust tokenizer):

- An HF directory's ``tokenizer.json`` is loaded as it is. Special tokens around a text
  (BOS, EOS) follow ``tokenizer_config.json`` as transformers applies it: where the config
  sets ``add_bos_token`` / ``add_eos_token`` (or the file has no post-processor) the
  post-processor is rebuilt from those flags.
- A GGUF vocabulary is converted the way llama.cpp reads it (``llama-vocab.cpp``): model
  ``gpt2`` is byte-level BPE with the file's merges and the pre-tokenizer split named by
  ``tokenizer.ggml.pre`` (:data:`PRE_TOKENIZERS`); model ``llama`` is SentencePiece-style
  BPE over ``▁``-escaped text with byte fallback, its merges recovered from the token scores
  (a piece merges before another when its score is higher, as llama.cpp's SPM tokenizer
  merges), a ``▁`` prepended unless ``tokenizer.ggml.add_space_prefix`` is false. Control
  tokens become special tokens and user-defined ones added tokens, matched whole in text.

The chat template (GGUF ``tokenizer.chat_template``, the HF config's ``chat_template`` or
``chat_template.jinja``) is rendered as transformers renders it: a sandboxed jinja2
environment with ``trim_blocks`` / ``lstrip_blocks``, loop controls, ``raise_exception``,
``strftime_now`` and a ``tojson`` that does not escape HTML, given ``messages``,
``add_generation_prompt`` and the special tokens (``bos_token``, ``eos_token``, ...); the
rendered text is encoded without adding special tokens.

:class:`StreamDecoder` turns generated ids into text pieces as they arrive, holding back
bytes of a character that is not complete yet.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rlx.ir.diagnostics import RlxError


class TokenizerError(RlxError):
    """A tokenizer or chat template rlx cannot load or apply."""


END_TOKEN_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "_<EOT>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|eom_id|>",
})
"""Control tokens llama.cpp treats as end of generation by their text, beside the ids the
GGUF metadata names (``eos``, ``eot``, ``eom``)."""

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

PRE_TOKENIZERS: dict[str, tuple[tuple[str, ...], bool]] = {
    **dict.fromkeys(("default", "gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion"),
                    ((GPT2_SPLIT,), False)),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx",
                     "smaug-bpe", "lfm2"), ((LLAMA3_SPLIT,), False)),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"), ((QWEN2_SPLIT,), True)),
    "qwen35": ((QWEN35_SPLIT,), False),
    **dict.fromkeys(("smollm", "starcoder", "refact", "codeshell", "command-r", "exaone",
                     "minerva"), ((r"\p{N}", GPT2_SPLIT), False)),
}
"""``tokenizer.ggml.pre`` -> (the regex splits llama.cpp applies in order, whether the text is
NFC-normalized first as the source tokenizer.json does): llama.cpp's table
(``llm_tokenizer_bpe``), with each regex as the model's ``tokenizer.json`` spells it."""

LLAMA3_PRE = frozenset({"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "lfm2"})
"""Pre-tokenizer names whose vocabularies take a whole pre-token found in the vocabulary
as one token before merging (llama.cpp's ``ignore_merges``) and add BOS by default."""

GGUF_CONTROL, GGUF_USER_DEFINED, GGUF_BYTE = 3, 4, 6
"""``tokenizer.ggml.token_type`` values (llama.cpp's ``llama_token_type``)."""


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


@dataclass
class Tokenizer:
    """A model's tokenizer: ``encode`` / ``decode``, its end tokens and chat template."""

    backend: Any
    """The ``tokenizers.Tokenizer``."""
    source: str
    special: dict[str, str] = field(default_factory=dict)
    """Named special tokens (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``)."""
    end_ids: frozenset[int] = frozenset()
    """Ids that end generation (EOS, end of turn)."""
    chat_template: str | None = None
    clean_up_spaces: bool = False
    """Undo the spaces before punctuation on decode (``clean_up_tokenization_spaces``)."""

    @property
    def vocab_size(self) -> int:
        """Ids are below this (the added tokens included)."""
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    def token_id(self, text: str) -> int | None:
        return self.backend.token_to_id(text)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The ids of ``text``; BOS / EOS added as the model's config says unless
        ``add_special_tokens`` is false. Special tokens written in the text are matched."""
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        text = self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return _clean_up(text) if self.clean_up_spaces else text

    def render_chat(self, messages: Sequence[Mapping[str, Any]],
                    add_generation_prompt: bool = True) -> str:
        """The chat template applied to ``messages`` (``{"role", "content"}`` dicts)."""
        if self.chat_template is None:
            raise TokenizerError(f"{self.source}: error: the model has no chat template "
                                 "(tokenizer.chat_template / tokenizer_config.json); use a "
                                 "plain prompt")
        import jinja2

        try:
            template = compile_chat_template(self.chat_template, self.source)
            return template.render(messages=[dict(m) for m in messages], tools=None,
                                   documents=None, add_generation_prompt=add_generation_prompt,
                                   **self.special)
        except jinja2.TemplateError as e:
            raise TokenizerError(f"{self.source}: error: the chat template failed to render: "
                                 f"{e}") from None
        except Exception as e:  # the template is the model's code: any error is its own
            raise TokenizerError(f"{self.source}: error: the chat template failed to render: "
                                 f"{type(e).__name__}: {e}") from None

    def encode_chat(self, messages: Sequence[Mapping[str, Any]],
                    add_generation_prompt: bool = True) -> list[int]:
        """The ids of the rendered chat (special tokens come from the template itself)."""
        return self.encode(self.render_chat(messages, add_generation_prompt),
                           add_special_tokens=False)

    def stream(self) -> StreamDecoder:
        """An incremental decoder for generated ids."""
        return StreamDecoder(self)


_CLEAN_UPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
              (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def _clean_up(text: str) -> str:
    """transformers' ``clean_up_tokenization``."""
    for a, b in _CLEAN_UPS:
        text = text.replace(a, b)
    return text


@functools.lru_cache(maxsize=8)
def compile_chat_template(template: str, source: str) -> Any:
    """A jinja2 template in the environment transformers renders chat templates in."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateError as e:
        raise TokenizerError(f"{source}: error: the chat template does not parse: {e}") from None


class StreamDecoder:
    """Generated ids in, text pieces out: each :meth:`push` returns the text the new id
    completes, never half a UTF-8 character (bytes of an unfinished character wait for the
    next ids). Decodes a short window of ids, not the whole output, per push."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # ids before this are out of the window
        self._read = 0    # ids before this are already returned as text

    def push(self, token: int) -> str:
        self._ids.append(token)
        prefix_text = self._tok.decode(self._ids[self._prefix:self._read])
        text = self._tok.decode(self._ids[self._prefix:])
        if len(text) <= len(prefix_text) or text.endswith("\ufffd"):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return text[len(prefix_text):]

    def flush(self) -> str:
        """What is left (an unfinished character comes out as U+FFFD, as decode gives it)."""
        prefix_text = self._tok.decode(self._ids[self._prefix:self._read])
        text = self._tok.decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return text[len(prefix_text):]


# --------------------------------------------------------------------------------------
# HF model directories
# --------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerError(f"{path}: error: cannot read: {e}") from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{path}: error: expected a JSON object")
    return data


def _hf_chat_template(directory: Path, config: Mapping[str, Any]) -> str | None:
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    template = config.get("chat_template") or _read_json(
        directory / "chat_template.json").get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template if isinstance(template, str) else None


def _template_processing(backend: Any, bos: str | None, eos: str | None, add_bos: bool,
                         add_eos: bool) -> Any:
    """transformers' ``update_post_processor``: ``[BOS] $A [EOS]`` by the flags."""
    from tokenizers import processors

    add_bos = add_bos and bos is not None and backend.token_to_id(bos) is not None
    add_eos = add_eos and eos is not None and backend.token_to_id(eos) is not None
    single = f"{f'{bos}:0 ' if add_bos else ''}$A:0{f' {eos}:0' if add_eos else ''}"
    pair = f"{single}{f' {bos}:1' if add_bos else ''} $B:1{f' {eos}:1' if add_eos else ''}"
    specials = [(t, backend.token_to_id(t)) for t, on in ((bos, add_bos), (eos, add_eos)) if on]
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials)


def from_hf(directory: str | Path) -> Tokenizer:
    """The tokenizer of an HF model directory (``tokenizer.json`` and its configs)."""
    from tokenizers import Tokenizer as Backend

    d = Path(directory)
    file = d / "tokenizer.json"
    if not file.is_file():
        raise TokenizerError(f"{d}: error: no tokenizer.json in the model directory")
    try:
        backend = Backend.from_file(str(file))
    except Exception as e:
        raise TokenizerError(f"{file}: error: cannot load: {e}") from None
    config = _read_json(d / "tokenizer_config.json")
    special = {name: text for name in ("bos_token", "eos_token", "unk_token", "pad_token")
               if (text := _token_text(config.get(name))) is not None}
    if "add_bos_token" in config or "add_eos_token" in config or backend.post_processor is None:
        backend.post_processor = _template_processing(
            backend, special.get("bos_token"), special.get("eos_token"),
            bool(config.get("add_bos_token")), bool(config.get("add_eos_token")))
    ends: set[int] = set()
    eos = special.get("eos_token")
    if eos is not None and backend.token_to_id(eos) is not None:
        ends.add(backend.token_to_id(eos))
    generation = _read_json(d / "generation_config.json").get("eos_token_id")
    ends.update(generation if isinstance(generation, list) else
                [generation] if isinstance(generation, int) else [])
    return Tokenizer(backend, str(d), special, frozenset(ends), _hf_chat_template(d, config),
                     bool(config.get("clean_up_tokenization_spaces", False)))


# --------------------------------------------------------------------------------------
# GGUF vocabularies
# --------------------------------------------------------------------------------------


def _byte_level_bpe(meta: Mapping[str, Any], tokens: list[str], source: str) -> Any:
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise TokenizerError(f"{source}: error: tokenizer.ggml.pre {pre!r} is not supported "
                             f"(supported: {', '.join(sorted(PRE_TOKENIZERS))})")
    merges = meta.get("tokenizer.ggml.merges")
    if not isinstance(merges, list):
        raise TokenizerError(f"{source}: error: a 'gpt2' vocabulary needs "
                             "tokenizer.ggml.merges")
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    bpe = models.BPE({t: i for i, t in enumerate(tokens)}, pairs,
                     ignore_merges=pre in LLAMA3_PRE)
    backend = Backend(bpe)
    splits, nfc = PRE_TOKENIZERS[pre]
    if nfc:
        backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(s), behavior="isolated") for s in splits]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend


def _spm_merges(tokens: list[str], scores: Sequence[float], types: Sequence[int]
                ) -> list[tuple[str, str]]:
    """Merges that make BPE merge as llama.cpp's SPM tokenizer does: every split of a piece
    into two pieces, the piece with the higher score first (ties: the lower id first)."""
    ids = {t: i for i, t in enumerate(tokens)}
    found: list[tuple[float, int, int, str, str]] = []
    for i, t in enumerate(tokens):
        if types[i] not in (1,) or len(t) < 2:
            continue
        for k in range(1, len(t)):
            a, b = t[:k], t[k:]
            ia, ib = ids.get(a), ids.get(b)
            if ia is not None and ib is not None:
                found.append((-float(scores[i]), i, ia, a, b))
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    return [(a, b) for *_, a, b in found]


def _spm_bpe(meta: Mapping[str, Any], tokens: list[str], types: Sequence[int], source: str
             ) -> Any:
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, normalizers

    scores = meta.get("tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        raise TokenizerError(f"{source}: error: a 'llama' vocabulary needs "
                             "tokenizer.ggml.scores, one per token")
    merges = meta.get("tokenizer.ggml.merges")
    pairs = ([tuple(m.split(" ", 1)) for m in merges] if isinstance(merges, list)
             else _spm_merges(tokens, scores, types))
    unk_id = meta.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else None
    bpe = models.BPE({t: i for i, t in enumerate(tokens)}, pairs, unk_token=unk,
                     fuse_unk=True, byte_fallback=True)
    backend = Backend(bpe)
    prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
    escape = normalizers.Replace(" ", "\u2581")
    backend.normalizer = (normalizers.Sequence([normalizers.Prepend("\u2581"), escape])
                          if prefix else escape)
    parts = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    backend.decoder = decoders.Sequence(parts + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    return backend


def _gguf_end_ids(meta: Mapping[str, Any], tokens: list[str], types: Sequence[int]
                  ) -> frozenset[int]:
    ends = {meta[k] for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                              "tokenizer.ggml.eom_token_id") if isinstance(meta.get(k), int)}
    ends.update(i for i, t in enumerate(tokens)
                if types[i] in (GGUF_CONTROL, GGUF_USER_DEFINED) and t in END_TOKEN_TEXTS)
    return frozenset(i for i in ends if 0 <= i < len(tokens))


def from_gguf_metadata(meta: Mapping[str, Any], source: str) -> Tokenizer:
    """The tokenizer a GGUF file's ``tokenizer.*`` metadata describes."""
    from tokenizers import AddedToken

    model = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if model is None or not isinstance(tokens, list):
        raise TokenizerError(f"{source}: error: the file has no tokenizer (no "
                             "tokenizer.ggml.model / tokenizer.ggml.tokens)")
    types = [int(t) for t in meta.get("tokenizer.ggml.token_type", [1] * len(tokens))]
    if len(types) != len(tokens):
        raise TokenizerError(f"{source}: error: tokenizer.ggml.token_type has {len(types)} "
                             f"entries for {len(tokens)} tokens")
    if model == "gpt2":
        backend = _byte_level_bpe(meta, tokens, source)
    elif model == "llama":
        backend = _spm_bpe(meta, tokens, types, source)
    else:
        raise TokenizerError(f"{source}: error: tokenizer.ggml.model {model!r} is not supported "
                             "(supported: gpt2 (byte-level BPE), llama (SentencePiece BPE))")
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, k in zip(tokens, types, strict=True) if k == GGUF_CONTROL])
    backend.add_tokens([AddedToken(t, special=False, normalized=False)
                        for t, k in zip(tokens, types, strict=True) if k == GGUF_USER_DEFINED])
    special = {}
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"),
                      ("pad_token", "padding")):
        i = meta.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(i, int) and 0 <= i < len(tokens):
            special[name] = tokens[i]
    pre = meta.get("tokenizer.ggml.pre", "default")
    add_bos = meta.get("tokenizer.ggml.add_bos_token", model == "llama" or pre in LLAMA3_PRE)
    add_eos = meta.get("tokenizer.ggml.add_eos_token", False)
    backend.post_processor = _template_processing(backend, special.get("bos_token"),
                                                  special.get("eos_token"), bool(add_bos),
                                                  bool(add_eos))
    template = meta.get("tokenizer.chat_template")
    return Tokenizer(backend, source, special, _gguf_end_ids(meta, tokens, types),
                     template if isinstance(template, str) else None)


def from_gguf(path: str | Path) -> Tokenizer:
    """The tokenizer stored in a ``.gguf`` file."""
    import rlx.gguf
    from rlx.ir.diagnostics import WeightError

    try:
        f = rlx.gguf.load(path)
    except WeightError as e:
        raise TokenizerError(str(e)) from None
    try:
        return from_gguf_metadata(f.metadata, str(path))
    finally:
        f.close()


def load(path: str | Path) -> Tokenizer:
    """The tokenizer of a model: an HF model directory or a ``.gguf`` file."""
    p = Path(path)
    if p.suffix == ".gguf":
        return from_gguf(p)
    if p.is_dir():
        return from_hf(p)
    raise TokenizerError(f"{p}: error: expected an HF model directory or a .gguf file")


__all__ = ["END_TOKEN_TEXTS", "PRE_TOKENIZERS", "StreamDecoder", "Tokenizer", "TokenizerError",
           "compile_chat_template", "from_gguf", "from_gguf_metadata", "from_hf", "load"]
