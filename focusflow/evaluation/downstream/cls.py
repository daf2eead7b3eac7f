"""Sentence classification: text → one label, scored by accuracy and macro-F1.

Every model family goes through ``AutoModelForSequenceClassification``: encoders classify from the
first token (``<s>``/``[CLS]``), decoders from the last non-pad token, which the model finds with
``config.pad_token_id`` (``load_task_tokenizer`` sets a pad token where the tokenizer has none, and
``load_task_model`` writes it into the config). Batches are right-padded for both.
Texts longer than ``max_length`` sub-tokens are cut (counted in ``stats``).
"""

from __future__ import annotations

from typing import Any

from focusflow.evaluation.downstream.datasets import ClsExample, TaskData, check_labels
from focusflow.evaluation.downstream.metrics import classification_scores
from focusflow.evaluation.downstream.sequence import SequenceClassification


class ClsTask(SequenceClassification):
    kind = "cls"
    truncation_stat = "truncated_texts"
    scores = staticmethod(classification_scores)

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 128, config: Any = None,
                 main_metric: str = "accuracy") -> None:
        check_labels({split: getattr(data, split) for split in ("train", "dev", "test")}, data.labels,
                     f"the label set of {data.name}")
        super().__init__(data, tokenizer, max_length, config)
        self.main_metric = main_metric

    def _tokenize(self, examples: list[ClsExample]) -> Any:
        return self.tokenizer([e.text for e in examples], truncation=True, max_length=self.max_length)
