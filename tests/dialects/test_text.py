"""Text round trip: print, parse, print gives identical text; labels and positions."""

from __future__ import annotations

from pathlib import Path

import pytest

import rlx
from hir_zoo import HIR_ZOO, build
from rlx.dialects.enums import FUSION_POLICIES
from rlx.ir.locations import label_of, source_of


@pytest.mark.parametrize("policy", FUSION_POLICIES)
@pytest.mark.parametrize("name", sorted(HIR_ZOO))
def test_print_parse_print_is_identical(name: str, policy: str) -> None:
    text = str(build(name, policy))
    again = rlx.HirModule.parse(text)
    assert str(again) == text
    assert again.fusion_policy == policy


def test_text_shows_labels_as_locations_only() -> None:
    text = str(build("swiglu"))
    assert 'loc("swiglu_ffn")' in text
    assert "loc(unknown)" not in text
    assert '"-"' not in text
    assert text.startswith('module @swiglu attributes {rlx.fusion_policy = "direct"}')
    assert '{rlx.name = "x"}' in text


def test_parsed_ops_keep_label_and_source_position(tmp_path: Path) -> None:
    path = tmp_path / "m.hir"
    path.write_text(str(build("swiglu")))
    module = rlx.load_hir(path)
    swiglu = next(op for op in module.ops if op.name == "rlx_hir.swiglu")
    assert label_of(swiglu.location) == "swiglu_ffn"
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "swiglu\"(" in t)
    assert source_of(swiglu.location) == f"{path}:{line}:10"
    # The canonical text drops the positions again.
    assert str(module) == path.read_text()


def test_loc_inside_strings_and_comments_is_left_alone() -> None:
    h = rlx.HirModule("m")
    w = h.param('loc("evil")', (2,))
    h.set_outputs([h.mir("activation", [w], kind="exp")])
    text = str(h)
    commented = text.replace("module @m", '// loc("comment")\nmodule @m', 1)
    again = rlx.HirModule.parse(commented)
    assert str(again) == text
    assert 'name = "loc(\\22evil\\22)"' in text


def test_module_without_outputs_prints_and_parses() -> None:
    h = rlx.HirModule("empty")
    h.input("x", (2,))
    assert str(rlx.HirModule.parse(str(h))) == str(h)
