"""rlx.gguf: listing, weights for the runtime (dict, the .gguf itself, .irpa), and one clear
error naming the tensor for truncated / corrupt / unsupported files and shape mismatches.
Files are written with the gguf package's GGUFWriter; corrupt ones are patched bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

import rlx
from rlx.dialects.enums import QUANT_SCHEMES
from rlx.ir.diagnostics import WeightError
from rlx.ir.quant_formats import ALIGNMENT_KEY, GGML_TYPES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC
from rlx.reference import quant as ref

T = gguf.GGMLQuantizationType

K, N = 256, 8


def _q4k_bytes(rng: np.random.Generator, n: int = N, k: int = K) -> np.ndarray:
    raw = rng.integers(0, 256, (n, k // 256, 144), dtype=np.uint8)
    raw[:, :, 0:4] = np.array([0.01, 0.002], np.float16).view(np.uint8)
    return raw.reshape(n, -1)


def write_model(path: Path, rng: np.random.Generator, iq: bool = True
                ) -> dict[str, np.ndarray]:
    """A small file: Q4_K, Q8_0, F16, F32 and (``iq``) an IQ2_XXS tensor rlx cannot
    dequantize."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["a", "bc", "d"])
    tensors = {
        "blk.0.ffn_up.weight": (_q4k_bytes(rng), T.Q4_K),
        "blk.0.attn_q.weight": (gguf.quants.quantize(
            rng.standard_normal((N, K)).astype(np.float32), T.Q8_0), T.Q8_0),
        "blk.0.attn_k.weight": (rng.standard_normal((N, K)).astype(np.float16), None),
        "output_norm.weight": (rng.standard_normal(K).astype(np.float32), None),
    }
    if iq:
        tensors["blk.0.iq.weight"] = (rng.integers(0, 256, (N, K // 256 * 66), dtype=np.uint8),
                                      T.IQ2_XXS)
    for name, (data, qtype) in tensors.items():
        if qtype is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {name: data for name, (data, _) in tensors.items()}


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path / "m.gguf"
    return path, write_model(path, np.random.default_rng(0))


def decode_module() -> rlx.HirModule:
    h = rlx.HirModule("m")
    x = h.input("x", (1, K))
    up = h.dequant_matmul(x, h.param("blk.0.ffn_up.weight", (N, 144), "i8"), scheme="gguf_q4_k")
    q = h.dequant_matmul(x, h.param("blk.0.attn_q.weight", (N, K // 32 * 34), "i8"),
                         scheme="gguf_q8_0")
    k = h.dequant_matmul(x, h.param("blk.0.attn_k.weight", (N, 2 * K), "i8"), scheme="gguf_f16")
    h.set_outputs([up, q, k])
    return h


def test_lists_tensors_schemes_and_shapes(model: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = model
    with rlx.gguf.load(path) as f:
        t = f.tensors
        assert list(t) == ["blk.0.ffn_up.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                           "output_norm.weight", "blk.0.iq.weight"]
        assert [(x.type_name, x.scheme, x.shape) for x in t.values()] == [
            ("Q4_K", "gguf_q4_k", (N, K)), ("Q8_0", "gguf_q8_0", (N, K)),
            ("F16", "gguf_f16", (N, K)), ("F32", None, (K,)), ("IQ2_XXS", None, (N, K))]
        assert t["blk.0.ffn_up.weight"].raw_shape == (N, 144)
        assert t["blk.0.ffn_up.weight"].nbytes == N * 144
        assert f.metadata["general.architecture"] == "llama"
        assert f.metadata["llama.block_count"] == 1
        assert f.metadata["tokenizer.ggml.tokens"] == ["a", "bc", "d"]
        assert "blk.0.ffn_up.weight: Q4_K -> gguf_q4_k [8x256]" in f.describe()


def test_weights_are_the_file_bytes(model: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, data = model
    with rlx.gguf.load(path) as f:
        up = f.weight("blk.0.ffn_up.weight")
        assert up.dtype == np.int8
        assert up.shape == (N, 144)
        assert np.array_equal(up.view(np.uint8), data["blk.0.ffn_up.weight"])
        assert not up.flags.writeable                      # a view of the mapped file
        assert np.array_equal(f.weight("blk.0.attn_k.weight").view(np.float16),
                              data["blk.0.attn_k.weight"].reshape(N, -1).view(np.float16))
        assert np.array_equal(f.array("blk.0.attn_k.weight"), data["blk.0.attn_k.weight"])
        assert np.array_equal(f.weight("output_norm.weight"), data["output_norm.weight"])
        with pytest.raises(WeightError, match=r"tensor 'blk.0.iq.weight' is IQ2_XXS, which "
                                              r"rlx cannot dequantize"):
            f.weight("blk.0.iq.weight")
        with pytest.raises(WeightError, match=r"tensor 'blk.0.ffn_up.weight' is Q4_K, a block "
                                              r"format"):
            f.array("blk.0.ffn_up.weight")
        with pytest.raises(WeightError, match=r"no tensor 'nope'"):
            f.raw("nope")


def test_scheme_table_matches_ggml() -> None:
    """QUANT_SCHEMES' GGML type ids and block sizes are ggml's."""
    for name, s in QUANT_SCHEMES.items():
        if not s.gguf:
            continue
        qtype = T(s.ggml_type)
        assert rlx.gguf.scheme_of(qtype.name) == name
        assert gguf.GGML_QUANT_SIZES[qtype] == (s.block_elems, s.block_bytes)


def test_ggml_type_table_matches_the_gguf_package() -> None:
    """rlx.gguf reads files without the gguf package (a runtime-only install): its GGML type
    table and format constants are the package's."""
    mine = {t.id: (t.name, t.block_elems, t.block_bytes) for t in GGML_TYPES.values()}
    theirs = {t.value: (t.name, *gguf.GGML_QUANT_SIZES[t]) for t in T}
    assert mine == theirs
    assert (GGUF_MAGIC, GGUF_DEFAULT_ALIGNMENT, ALIGNMENT_KEY) == (
        gguf.GGUF_MAGIC, gguf.GGUF_DEFAULT_ALIGNMENT, gguf.Keys.General.ALIGNMENT)


def test_weights_run_from_dict_gguf_and_irpa(tmp_path: Path) -> None:
    """The same results from params_for(...), the .gguf path itself (IREE's own GGUF reader;
    it rejects files holding types it does not know, such as IQ2_XXS) and a saved .irpa."""
    path = tmp_path / "m.gguf"
    write_model(path, np.random.default_rng(0), iq=False)
    h = decode_module()
    vmfb = rlx.compile(h, "llvm-cpu")
    x = np.random.default_rng(1).standard_normal((1, K)).astype(np.float32)
    with rlx.gguf.load(path) as f:
        assert set(f.params_for(h)) == set(f.params_for(vmfb))
        params = f.params_for(vmfb)
        from_dict = rlx.runtime.load(vmfb, "local-task", params).main(x)
        f.save_irpa(tmp_path / "m.irpa", params)
        expected = [x.astype(np.float64) @ ref.dequantize_gguf(f.raw(n), s).T.astype(np.float64)
                    for n, s in [("blk.0.ffn_up.weight", "gguf_q4_k"),
                                 ("blk.0.attn_q.weight", "gguf_q8_0"),
                                 ("blk.0.attn_k.weight", "gguf_f16")]]
    from_gguf = rlx.runtime.load(vmfb, "local-task", path).main(x)
    from_irpa = rlx.runtime.load(vmfb, "local-task", tmp_path / "m.irpa").main(x)
    for got, same, same2, want in zip(from_dict, from_gguf, from_irpa, expected, strict=True):
        assert np.array_equal(got, same)
        assert np.array_equal(got, same2)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    assert gguf.GGUFReader(str(path)).tensors[0].name == "blk.0.ffn_up.weight"


def test_params_for_a_module_with_leads(tmp_path: Path) -> None:
    """A module whose raw weights have a ``lead`` (as rlx's GGUF model builders write them)
    gets each weight's entry from params_for: the tensor and the file's bytes before it.
    Results equal the lead-free module's."""
    path = tmp_path / "m.gguf"
    write_model(path, np.random.default_rng(0), iq=False)
    x = np.random.default_rng(1).standard_normal((1, K)).astype(np.float32)
    outs = []
    for lead in (0, 32):
        h = rlx.HirModule("m")
        xi = h.input("x", (1, K))
        w = h.param("blk.0.attn_q.weight", (N, K // 32 * 34), "i8", lead=lead)
        h.set_outputs([h.dequant_matmul(xi, w, scheme="gguf_q8_0")])
        vmfb = rlx.compile(h, "llvm-cpu")
        with rlx.gguf.load(path) as f:
            params = f.params_for(vmfb)
            assert params["blk.0.attn_q.weight"].shape == ((N, K // 32 * 34) if not lead else
                                                            (lead + N * (K // 32 * 34),))
            outs.append(rlx.runtime.load(vmfb, "local-task", params).main(x))
    assert np.array_equal(outs[0], outs[1])
    with rlx.gguf.load(path) as f:
        t = f.tensors["blk.0.ffn_up.weight"]
        for lead in (-1, t.offset + 1):              # none before the file's first byte
            with pytest.raises(WeightError, match=rf"tensor 'blk.0.ffn_up.weight' starts "
                                                  rf"{t.offset} bytes into the file: no "
                                                  rf"{lead} bytes before it"):
                f.raw_with_lead("blk.0.ffn_up.weight", lead)


def test_shape_mismatch_and_missing_tensor_name_the_weight(
        model: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = model
    h = rlx.HirModule("m")
    x = h.input("x", (1, 512))
    h.set_outputs([h.dequant_matmul(x, h.param("w", (N, 288), "i8"), scheme="gguf_q4_k")])
    with rlx.gguf.load(path) as f:
        with pytest.raises(WeightError, match=r"weight 'w' \(tensor 'blk.0.ffn_up.weight'\): "
                                              r"the module expects \[8, 288\] i8, the file has "
                                              r"Q4_K \[8, 256\] \(gguf_q4_k bytes \[8, 144\] i8\)"):
            f.params_for(h, rename={"w": "blk.0.ffn_up.weight"})
        with pytest.raises(WeightError, match=r"weight 'w' \(\[8, 288\] i8\) has no tensor "
                                              r"'w' in the file"):
            f.params_for(h)


# -- corrupt files --------------------------------------------------------------------


def _patch(path: Path, offset: int, fmt: str, value: int) -> Path:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    out = path.with_name(f"patched_{offset}.gguf")
    out.write_bytes(bytes(data))
    return out


def _info_offset(path: Path, name: str) -> int:
    """Offset of the n_dims field that follows tensor ``name``'s name in the header."""
    data = path.read_bytes()
    at = data.find(name.encode())
    assert at > 0
    return at + len(name)


def test_not_a_gguf_file(tmp_path: Path) -> None:
    with pytest.raises(WeightError, match="GGUF file not found"):
        rlx.gguf.load(tmp_path / "none.gguf")
    bad = tmp_path / "text.gguf"
    bad.write_text("hello, this is not a model")
    with pytest.raises(WeightError, match=r"not a GGUF file \(magic"):
        rlx.gguf.load(bad)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(WeightError, match="truncated or corrupt file: magic"):
        rlx.gguf.load(empty)


def test_header_fields_are_checked(model: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = model
    cases = [
        (4, "<I", 7, r"unsupported GGUF version 7"),
        (8, "<Q", 1 << 60, r"tensor count = \d+ cannot fit in the \d+ bytes left"),
        (16, "<Q", 1 << 62, r"metadata count = \d+ cannot fit"),
        (24, "<Q", 1 << 40, r"metadata key #0: string of \d+ bytes"),
    ]
    info = _info_offset(path, "blk.0.ffn_up.weight")
    cases += [
        (info, "<I", 9, r"tensor 'blk.0.ffn_up.weight': 9 dimensions"),
        (info + 4, "<Q", 1 << 40, r"tensor 'blk.0.ffn_up.weight': data \[\d+, \d+\) runs past "
                                  r"the end of the file"),
        (info + 4, "<Q", 100, r"tensor 'blk.0.ffn_up.weight': Q4_K rows hold blocks of 256 "
                              r"elements, but a row has 100"),
        (info + 4, "<Q", 0, r"tensor 'blk.0.ffn_up.weight': dims \[0, 8\]"),
        (info + 4 + 16, "<I", 99, r"tensor 'blk.0.ffn_up.weight': unknown GGML type 99"),
        (info + 4 + 16 + 4, "<Q", 3, r"tensor 'blk.0.ffn_up.weight': data offset 3 is not a "
                                     r"multiple of the alignment 32"),
    ]
    for offset, fmt, value, message in cases:
        with pytest.raises(WeightError, match=message):
            rlx.gguf.load(_patch(path, offset, fmt, value))


def test_every_truncation_is_one_weight_error(model: tuple[Path, dict[str, np.ndarray]],
                                              tmp_path: Path) -> None:
    """Cut the file at every byte of the header and in each tensor's data: always a
    WeightError (never a numpy / struct / index error), naming the tensor when it is in the
    data."""
    path, _ = model
    data = path.read_bytes()
    with rlx.gguf.load(path) as f:
        header_end = f.data_offset
        starts = {t.name: t.offset for t in f.tensors.values()}
    cut = tmp_path / "cut.gguf"
    for size in [*range(0, header_end + 1), *(s + 1 for s in starts.values())]:
        if size >= len(data):
            continue
        cut.write_bytes(data[:size])
        with pytest.raises(WeightError) as e:
            rlx.gguf.load(cut)
        assert str(e.value).startswith(f"{cut}: error: ")
    cut.write_bytes(data[:starts["blk.0.ffn_up.weight"] + 5])
    with pytest.raises(WeightError, match=r"tensor 'blk.0.ffn_up.weight': data .* runs past"):
        rlx.gguf.load(cut)


def test_random_corruption_never_escapes(model: tuple[Path, dict[str, np.ndarray]],
                                         tmp_path: Path) -> None:
    """Random bytes written over the header: the file loads or raises a WeightError."""
    path, _ = model
    data = path.read_bytes()
    with rlx.gguf.load(path) as f:
        header_end = f.data_offset
    rng = np.random.default_rng(7)
    bad = tmp_path / "bad.gguf"
    outcomes = {"loaded": 0, "rejected": 0}
    for _ in range(300):
        corrupt = bytearray(data)
        for at in rng.integers(4, header_end, rng.integers(1, 4)):
            corrupt[at] = int(rng.integers(0, 256))
        bad.write_bytes(bytes(corrupt))
        try:
            rlx.gguf.load(bad).close()
            outcomes["loaded"] += 1
        except WeightError as e:
            message = str(e)
            outcomes["rejected"] += 1
            assert message.startswith(f"{bad}: error: "), message
    assert outcomes["rejected"] > 50, outcomes
