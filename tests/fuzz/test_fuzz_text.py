"""Random mutations of valid .hir text: each gives a valid module or one RlxError with a
location, never a crash, a hang or another exception; rlx-compile on such files exits 0 or 1
with one message, no traceback and no output file left behind.

CI runs the deterministic ``ci`` profile; ``RLX_FUZZ_PROFILE=long`` runs a campaign.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import examples, mutations

import rlx
from hir_zoo import build

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {name: str(build(name)) for name in (
    "linear", "swiglu", "norms", "attention_custom", "rope_gptj", "transformer_block",
    "gated_delta_net_carry", "dequant_gguf_q4_k", "mir_escape")}
SOURCES["ffn.hir"] = (ROOT / "examples" / "ffn.hir").read_text()
LOCATED = re.compile(r'^\S+?(:\d+:\d+)?( "[^"]*")?: error: ')


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(sorted(SOURCES)))
    text = SOURCES[name]
    for _ in range(draw(st.integers(1, 3))):
        text = draw(mutations(text))
    return name, text


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_text_parses_or_fails_cleanly(case: tuple[str, str]) -> None:
    _, text = case
    message = None
    try:
        rlx.compile(rlx.HirModule.parse(text, "m.hir"), emit="linalg")
    except rlx.RlxError as e:
        message = str(e)
    assert message is None or LOCATED.match(message), f"error without a location: {message}"


@settings(max_examples=examples(8))
@given(mutated())
def test_rlx_compile_on_mutated_files(tmp_path_factory: pytest.TempPathFactory,
                                      case: tuple[str, str]) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    src, out = tmp / "m.hir", tmp / "m.vmfb"
    src.write_text(case[1], errors="surrogateescape")
    proc = subprocess.run([sys.executable, "-m", "rlx.tools.compile", str(src), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    if proc.returncode == 1:
        assert proc.stderr.strip()
        assert LOCATED.match(proc.stderr), proc.stderr
        assert not out.exists()
        assert not list(tmp.glob(".*.tmp"))
    else:
        assert out.stat().st_size > 0
