"""Sentence classification: text → one label, scored by accuracy and macro-F1.

Every model family goes through ``AutoModelForSequenceClassification``: encoders classify from the
first token (``<s>``/``[CLS]``), decoders from the last non-pad token, which the model finds with
``config.pad_token_id`` (``load_tokenizer`` sets a pad token where the tokenizer has none, and
``load_task_model`` writes it into the config). Batches are right-padded for both.
Texts longer than ``max_length`` sub-tokens are cut (counted in ``stats``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from focusflow.evaluation.downstream.base import features_from, pad_id_of, uses_token_types
from focusflow.evaluation.downstream.datasets import ClsExample, TaskData, check_labels
from focusflow.evaluation.downstream.finetune import Feature, predict_logits
from focusflow.evaluation.downstream.metrics import classification_scores


class ClsTask:
    kind = "cls"

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 128, config: Any = None,
                 main_metric: str = "accuracy") -> None:
        check_labels({split: getattr(data, split) for split in ("train", "dev", "test")}, data.labels,
                     f"the label set of {data.name}")
        self.data = data
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.main_metric = main_metric
        self.with_types = uses_token_types(tokenizer, config)
        self.label_to_id = {label: i for i, label in enumerate(data.labels)}
        self.stats = {"truncated_texts": 0}
        self._encoded: dict[str, list[Feature]] = {}

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": len(self.data.labels), "id2label": dict(enumerate(self.data.labels)),
                "label2id": dict(self.label_to_id)}

    def _encode(self, split: str) -> list[Feature]:
        if split not in self._encoded:
            examples: list[ClsExample] = getattr(self.data, split)
            encoding = self.tokenizer([e.text for e in examples], truncation=True, max_length=self.max_length)
            features = features_from(encoding, self.with_types)
            for feature, example in zip(features, examples, strict=True):
                feature["labels"] = self.label_to_id[example.label]
            if split == "test":
                self.stats["truncated_texts"] = sum(len(f["input_ids"]) >= self.max_length for f in features)
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
        return classification_scores(gold, self.predict(model, split, batch_size))
