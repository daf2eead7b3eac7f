"""What every task adapter provides to the runner, and the helpers they share."""

from __future__ import annotations

from typing import Any, Protocol

from focusflow.evaluation.downstream.datasets import TaskData
from focusflow.evaluation.downstream.finetune import Feature


class TaskAdapter(Protocol):
    """Encodes one task's data for one tokenizer and scores a model on dev/test."""

    kind: str
    main_metric: str
    data: TaskData
    stats: dict[str, int]

    def model_kwargs(self) -> dict[str, Any]: ...

    def train_features(self) -> list[Feature]: ...

    def evaluate(self, model: Any, split: str, batch_size: int) -> dict[str, float]: ...


def uses_token_types(tokenizer: Any, config: Any) -> bool:
    """Pass segment ids only to models that have more than one segment embedding."""
    return "token_type_ids" in getattr(tokenizer, "model_input_names", ()) and \
        getattr(config, "type_vocab_size", 0) > 1


def pad_id_of(tokenizer: Any) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def features_from(encoding: Any, with_types: bool) -> list[Feature]:
    features = []
    for index, ids in enumerate(encoding["input_ids"]):
        feature: Feature = {"input_ids": list(ids)}
        if with_types and "token_type_ids" in encoding:
            feature["token_type_ids"] = list(encoding["token_type_ids"][index])
        features.append(feature)
    return features


#: What goes between a pair's two texts where the tokenizer's pair template puts nothing there (SmolLM2 and other
#: byte-level decoders): a line break, as a decoder reads two paragraphs, not one run-on word
PAIR_BREAK = "\n"


def pair_separator(tokenizer: Any) -> str:
    """:data:`PAIR_BREAK` where the tokenizer's pair template adds no token between the two texts (``Paka
    alikaa.Mbwa`` read as one sentence, the second text's first word without its word-start marker), else ``""``."""
    return "" if tokenizer.num_special_tokens_to_add(pair=True) > tokenizer.num_special_tokens_to_add(pair=False) \
        else PAIR_BREAK
