"""Regenerate lit_tests/hir/<family>.mlir (round-trip tests) from tests/hir_zoo.py.

Review the diff line by line before committing: the CHECK lines pin the canonical text.
Run from the repository root: ``python tools/gen_hir_lit.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hir_zoo  # noqa: E402

FAMILIES = {
    "linear": ["linear", "linear_fused", "shared_linear_pair", "swiglu"],
    "norm": ["norms"],
    "attention": ["attention_none", "attention_causal", "attention_sliding_window",
                  "attention_custom", "attention_bias", "rope_neox", "rope_gptj"],
    "conv": ["depthwise_conv1d_causal"],
    "quant": ["dequant_gguf_q4_k", "dequant_int8"],
    "quant_nvfp4": ["dequant_nvfp4"],
    "recurrent": ["gated_delta_net", "gated_delta_net_carry", "lstm", "lstm_carry", "gru",
                  "gru_carry"],
    "recurrent_ragged": ["rnn_lengths_peephole"],
    "block": ["llama_decoder_block", "llama_decoder_block_custom_mask", "transformer_block",
              "qwen35_mtp_head"],
    "leaf": ["constant"],
    "escape": ["mir_escape", "mir_blocks", "mir_scans"],
}
IRDL_RUN = "// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null\n"
NO_IRDL = {
    "quant_nvfp4": ("// No IRDL run: IRDL cannot express nvfp4's differently-typed scale "
                    "operands\n// (see python/rlx/dialects/irdl.py).\n"),
    "recurrent_ragged": ("// No IRDL run: IRDL cannot express a scan's differently-typed "
                         "trailing operands\n// (states, peepholes, i64 lengths; see "
                         "python/rlx/dialects/irdl.py).\n"),
}


def family_file(family: str, names: list[str]) -> str:
    header = [
        f"// Round trip of the {family} HIR ops: rlx-opt prints its input back unchanged, "
        "twice.\n",
        "// RUN: %rlx-opt --split-input-file %s | FileCheck %s\n",
        "// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - "
        "| FileCheck %s\n",
        NO_IRDL.get(family, IRDL_RUN),
    ]
    chunks = []
    for name in names:
        text = str(hir_zoo.build(name))
        lines = text.splitlines()
        checks = [f"// CHECK-LABEL: {lines[0]}"]
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith(("%", "func.func", "return")):
                checks.append(f"// CHECK-NEXT: {stripped}")
        chunks.append("\n".join(checks) + "\n" + text)
    return "".join(header) + "\n" + "\n// -----\n\n".join(chunks)


def main() -> None:
    for family, names in FAMILIES.items():
        (ROOT / "lit_tests" / "hir" / f"{family}.mlir").write_text(family_file(family, names))


if __name__ == "__main__":
    main()
