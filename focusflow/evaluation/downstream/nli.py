"""NLI: (premise, hypothesis) pairs → 3-way sequence classification, scored by accuracy.

Pairs longer than ``max_length`` are truncated longest-first (counted in ``stats``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from focusflow.evaluation.downstream.base import features_from, pad_id_of, uses_token_types
from focusflow.evaluation.downstream.datasets import DataFormatError, NliExample, TaskData
from focusflow.evaluation.downstream.finetune import Feature, predict_logits
from focusflow.evaluation.downstream.metrics import accuracy


class NliTask:
    kind = "nli"
    main_metric = "accuracy"

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 256, config: Any = None) -> None:
        self.data = data
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.with_types = uses_token_types(tokenizer, config)
        self.label_to_id = {label: i for i, label in enumerate(data.labels)}
        for split in ("train", "dev", "test"):
            for number, example in enumerate(getattr(data, split)):
                if example.label not in self.label_to_id:
                    raise DataFormatError(f"{split} pair {number}: label {example.label!r} is outside {data.labels}")
        self.stats = {"truncated_pairs": 0}
        self._encoded: dict[str, list[Feature]] = {}

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": len(self.data.labels), "id2label": dict(enumerate(self.data.labels)),
                "label2id": dict(self.label_to_id)}

    def _encode(self, split: str) -> list[Feature]:
        if split not in self._encoded:
            examples: list[NliExample] = getattr(self.data, split)
            encoding = self.tokenizer([e.premise for e in examples], [e.hypothesis for e in examples],
                                      truncation="longest_first", max_length=self.max_length)
            features = features_from(encoding, self.with_types)
            for feature, example in zip(features, examples, strict=True):
                feature["labels"] = self.label_to_id[example.label]
            if split == "test":
                self.stats["truncated_pairs"] = sum(len(f["input_ids"]) >= self.max_length for f in features)
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
        return accuracy(gold, self.predict(model, split, batch_size))
