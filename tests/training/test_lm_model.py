"""The language model LAPT trains (``training.lm_model``): a model without its head is refused before it loads."""

from __future__ import annotations

import pytest

from focusflow.errors import InputError
from tests.tiny_models import sample_texts, save_tiny


def test_a_bare_encoder_is_refused_from_its_config_before_transformers_loads_it(tmp_path, monkeypatch, capfd):
    """Loading it first made transformers warn that the checkpoint 'seems corrupted' before the one error line."""
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    import focusflow.training.lm_model as lm_model

    model = save_tiny("bert", tmp_path / "model", sample_texts(40))
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    BertModel.from_pretrained(model).save_pretrained(tmp_path / "bare")
    hf_logging.set_verbosity(verbosity)
    capfd.readouterr()

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before its head was checked")

    monkeypatch.setattr(lm_model, "model_class", loaded)
    with pytest.raises(InputError, match="bare BertModel without an MLM head.*random head"):
        lm_model.load_model(tmp_path / "bare", "sdpa")
    captured = capfd.readouterr()
    assert captured.out == captured.err == ""
