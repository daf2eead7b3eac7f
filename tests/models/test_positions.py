"""One answer to "how long may a sequence be" for every model family (LAPT, align, downstream and surgery ask it)."""

from __future__ import annotations

import pytest
from transformers import BertConfig, CamembertConfig, GPT2Config, LlamaConfig, XLMRobertaConfig, XmodConfig

from focusflow.models.loading import usable_positions, uses_padding_offset


@pytest.mark.parametrize("config, expected", [
    (XLMRobertaConfig(max_position_embeddings=514, pad_token_id=1), 512),  # positions start after pad (1) + 1
    (CamembertConfig(max_position_embeddings=514, pad_token_id=1), 512),
    (XmodConfig(max_position_embeddings=130, pad_token_id=1), 128),
    (XLMRobertaConfig(max_position_embeddings=130, pad_token_id=0), 129),  # a new tokenizer moved pad to id 0
    (BertConfig(max_position_embeddings=512, pad_token_id=0), 512),
    (GPT2Config(n_positions=1024), 1024),
    (LlamaConfig(max_position_embeddings=2048), 2048),
])
def test_usable_positions_is_the_table_less_the_roberta_padding_offset(config, expected):
    assert usable_positions(config) == expected
    assert uses_padding_offset(config) == (config.model_type in ("xlm-roberta", "camembert", "xmod"))


def test_a_config_without_a_position_table_has_no_limit():
    class Rotary:
        model_type = "mystery"

    assert usable_positions(Rotary()) is None
