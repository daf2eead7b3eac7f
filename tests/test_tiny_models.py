"""The tiny test models load back through the Auto classes, as users' models would."""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from tests.tiny_models import FAMILIES, sample_texts, save_tiny


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_model_round_trip(family, tmp_path):
    folder = save_tiny(family, tmp_path / family)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    auto = AutoModelForMaskedLM if family in ("xlmr", "bert") else AutoModelForCausalLM
    model = auto.from_pretrained(folder)
    batch = tokenizer(sample_texts(2), return_tensors="pt", padding=True) if tokenizer.pad_token else \
        tokenizer(sample_texts(1), return_tensors="pt")
    logits = model(**{k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}).logits
    assert logits.shape[-1] == len(tokenizer)
