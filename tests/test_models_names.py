"""The LLaMA family's one name table (``rlx.models.llama.LAYER_NAMES`` / ``TOP_NAMES``)
against the ``gguf`` package's tensor name map (the names llama.cpp's converter writes; it
shares no code with rlx). The HF side of the table is checked by loading transformers'
checkpoints (tests/test_models.py)."""

from __future__ import annotations

import gguf
import pytest

from rlx.models import llama
from rlx.models.gguf import GGUF_ARCHITECTURES

GGUF_ARCH = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2,
             "qwen3": gguf.MODEL_ARCH.QWEN3}


def names(arch: str) -> list[str]:
    """Every rlx weight name of a 2-layer model of ``arch``."""
    config = llama.LlamaConfig(vocab_size=32, hidden_size=8, num_layers=2, num_heads=2,
                               num_kv_heads=1, head_dim=4, intermediate_size=16, arch=arch,
                               **llama.ARCHITECTURES[arch])
    return list(llama.param_shapes(config))


def test_every_architecture_and_table_entry_is_checked() -> None:
    assert set(GGUF_ARCH) == set(GGUF_ARCHITECTURES)
    keys = {n.rsplit(".", 1)[-1] for arch in GGUF_ARCH for n in names(arch)}
    assert keys == set(llama.LAYER_NAMES) | set(llama.TOP_NAMES)


@pytest.mark.parametrize("arch", sorted(GGUF_ARCH))
def test_gguf_names_are_llama_cpp_names(arch: str) -> None:
    reference = gguf.get_tensor_name_map(GGUF_ARCH[arch], 2)
    for name in names(arch):
        hf = llama.hf_name(name)
        want = reference.get_name(hf, try_suffixes=(".weight", ".bias"))
        assert llama.gguf_name(name) == want, f"{arch}: {name} ({hf})"
        assert llama.hf_to_gguf(hf) == want, f"{arch}: {hf}"
