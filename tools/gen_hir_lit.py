"""Regenerate lit_tests/hir/<family>.mlir (round-trip tests) from tests/hir_zoo.py.

Review the diff line by line before committing: the CHECK lines pin the canonical text.
Run from the repository root: python tools/gen_hir_lit.py
"""

from __future__ import annotations

import sys

sys.path.insert(0, 'tests')
import hir_zoo

FAMILIES = {
  "linear": ["linear", "linear_fused", "shared_linear_pair", "swiglu"],
  "norm": ["norms"],
  "attention": ["attention_none", "attention_causal", "attention_sliding_window", "attention_custom", "attention_bias", "rope_neox", "rope_gptj"],
  "conv": ["depthwise_conv1d_causal"],
  "quant": ["dequant_gguf_q4_k", "dequant_int8"],
  "quant_nvfp4": ["dequant_nvfp4"],
  "recurrent": ["gated_delta_net", "gated_delta_net_carry", "lstm", "lstm_carry", "gru", "gru_carry"],
  "block": ["llama_decoder_block", "llama_decoder_block_custom_mask", "transformer_block", "qwen35_mtp_head"],
  "leaf": ["constant"],
  "escape": ["mir_escape", "mir_blocks", "mir_scans"],
}
for fam, names in FAMILIES.items():
    irdl = "" if fam == "quant_nvfp4" else "// RUN: %iree-opt --irdl-file=%hir_irdl --split-input-file %s > /dev/null\n"
    out = [f"// Round trip of the {fam} HIR ops: rlx-opt prints its input back unchanged, twice.\n",
           "// RUN: %rlx-opt --split-input-file %s | FileCheck %s\n",
           "// RUN: %rlx-opt --split-input-file %s | %rlx-opt --split-input-file - | FileCheck %s\n", irdl]
    if fam == "quant_nvfp4":
        out.append("// No IRDL run: IRDL cannot express nvfp4's differently-typed scale operands\n// (see python/rlx/dialects/irdl.py).\n")
    chunks = []
    for n in names:
        text = str(hir_zoo.build(n))
        lines = text.splitlines()
        checks = [f"// CHECK-LABEL: {lines[0]}"]
        for l in lines[1:]:
            s = l.strip()
            if s.startswith("%") or s.startswith("func.func") or s.startswith("return"):
                checks.append(f"// CHECK-NEXT: {s}")
        chunks.append("\n".join(checks) + "\n" + text)
    body = "\n// -----\n\n".join(chunks)
    open(f"lit_tests/hir/{fam}.mlir","w").write("".join(out) + "\n" + body)
