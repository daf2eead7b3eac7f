"""Resolving and classifying source models: local folders of four families, errors that say what to do."""

from __future__ import annotations

import pytest

from focusflow.models import SourceError, describe_source, load_source, prepare_source, resolve_source
from tests.tiny_models import FAMILIES, save_tiny

EXPECTED = {"xlmr": ("mlm", True), "bert": ("mlm", True), "gpt2": ("clm", False), "llama": ("clm", False)}


@pytest.mark.parametrize("family", FAMILIES)
def test_local_folders_resolve_and_classify(family, tmp_path):
    folder = save_tiny(family, tmp_path / family)
    assert resolve_source(str(folder), cache_dir=tmp_path / "cache") == folder.resolve()
    info = describe_source(folder)
    assert (info.objective, info.is_encoder) == EXPECTED[family]
    model, tokenizer, _ = load_source(folder)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) == info.vocab_size
    copied = prepare_source(str(folder), tmp_path / "copy")
    assert copied["objective"] == EXPECTED[family][0]
    assert (tmp_path / "copy" / "config.json").is_file()


def test_unusable_sources_fail_clearly(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no config.json"):
        resolve_source(str(tmp_path / "empty"))
    with pytest.raises(SourceError, match="does not exist"):
        resolve_source(str(tmp_path / "not" / "there"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match="Offline, pass a local model folder"):
        resolve_source("someone/not-a-model", cache_dir=tmp_path / "cache")
