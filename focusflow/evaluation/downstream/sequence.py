"""What every sequence-classification task kind shares (``cls``: one text, ``nli``: a pair): labels as ids,
encoding once per split, prediction by the argmax of the logits. A kind supplies how its examples are
tokenized, its truncation counter and its scores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from focusflow.evaluation.downstream.base import features_from, pad_id_of, uses_token_types
from focusflow.evaluation.downstream.datasets import TaskData
from focusflow.evaluation.downstream.finetune import Feature, predict_logits


class SequenceClassification:
    """The adapter of a kind whose model is ``AutoModelForSequenceClassification`` over ``data.labels``."""

    truncation_stat: str  # the ``stats`` entry counting test inputs cut at ``max_length``
    scores: Callable[[list[str], list[str]], dict[str, float]]  # gold, predicted -> metrics

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int, config: Any) -> None:
        self.data = data
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.with_types = uses_token_types(tokenizer, config)
        self.label_to_id = {label: i for i, label in enumerate(data.labels)}
        self.stats = {self.truncation_stat: 0}
        self._encoded: dict[str, list[Feature]] = {}

    def _tokenize(self, examples: list[Any]) -> Any:
        """The tokenizer's encoding of a split's examples (truncated to ``max_length``)."""
        raise NotImplementedError

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": len(self.data.labels), "id2label": dict(enumerate(self.data.labels)),
                "label2id": dict(self.label_to_id)}

    def _encode(self, split: str) -> list[Feature]:
        if split not in self._encoded:
            examples = getattr(self.data, split)
            features = features_from(self._tokenize(examples), self.with_types)
            for feature, example in zip(features, examples, strict=True):
                feature["labels"] = self.label_to_id[example.label]
            if split == "test":
                self.stats[self.truncation_stat] = sum(len(f["input_ids"]) >= self.max_length for f in features)
            self._encoded[split] = features
        return self._encoded[split]

    def train_features(self) -> list[Feature]:
        return self._encode("train")

    def predict(self, model: Any, split: str, batch_size: int) -> list[str]:
        logits = predict_logits(model, self._encode(split), batch_size, pad_id_of(self.tokenizer))
        best = np.stack(logits).argmax(-1)
        return [self.data.labels[i] for i in best]

    def evaluate(self, model: Any, split: str, batch_size: int) -> dict[str, float]:
        gold = [e.label for e in getattr(self.data, split)]
        return self.scores(gold, self.predict(model, split, batch_size))
