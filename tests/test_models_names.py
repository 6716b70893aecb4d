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


def test_qwen35_names_are_llama_cpp_names() -> None:
    """Qwen3.5's table (trunk, and the MTP block's ``nextn.*`` tensors after the trunk's
    last block) against the gguf package's qwen35 map and its NEXTN tensor names."""
    from rlx.models import qwen35

    c = qwen35.Qwen35Config(vocab_size=32, hidden_size=8, layer_types=(
        qwen35.LINEAR, qwen35.FULL), num_heads=2, num_kv_heads=1, head_dim=4,
        intermediate_size=16, linear_k_heads=1, linear_v_heads=2, linear_head_dim=4)
    reference = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN35, 3)
    nextn = {gguf.TENSOR_NAMES[t].format(bid=2) for t in (
        gguf.MODEL_TENSOR.NEXTN_EH_PROJ, gguf.MODEL_TENSOR.NEXTN_ENORM,
        gguf.MODEL_TENSOR.NEXTN_HNORM, gguf.MODEL_TENSOR.NEXTN_SHARED_HEAD_NORM)}
    seen = set()
    for name in qwen35.param_shapes(c, mtp=True):
        hf, mine = qwen35.names(name, c.num_layers)
        if name.startswith("mtp.") and name[4:] in qwen35.MTP_NAMES:
            assert mine.removesuffix(".weight") in nextn, name
            seen.add(mine)
            continue
        if hf.startswith("mtp.layers.0."):
            hf = "model.layers.2." + hf.removeprefix("mtp.layers.0.")
        if hf.endswith(".dt_bias"):  # the converter renames it dt_proj.bias first
            hf = hf.removesuffix(".dt_bias") + ".dt_proj.bias"
        want = reference.get_name(hf, try_suffixes=(".weight", ".bias"))
        if want is None:  # A_log: no suffix
            want = reference.get_name(hf)
        assert mine == want, f"{name} ({hf})"
    assert len(seen) == 4
