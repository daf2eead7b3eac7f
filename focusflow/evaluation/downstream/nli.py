"""NLI: (premise, hypothesis) pairs → 3-way sequence classification, scored by accuracy.

Pairs longer than ``max_length`` are truncated longest-first (counted in ``stats``)."""

from __future__ import annotations

from typing import Any

from focusflow.evaluation.downstream.base import pair_separator
from focusflow.evaluation.downstream.datasets import DataFormatError, NliExample, TaskData
from focusflow.evaluation.downstream.metrics import accuracy
from focusflow.evaluation.downstream.sequence import SequenceClassification


class NliTask(SequenceClassification):
    kind = "nli"
    main_metric = "accuracy"
    truncation_stat = "truncated_pairs"
    scores = staticmethod(accuracy)

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 256, config: Any = None) -> None:
        for split in ("train", "dev", "test"):
            for number, example in enumerate(getattr(data, split)):
                if example.label not in data.labels:
                    raise DataFormatError(f"{split} pair {number}: label {example.label!r} is outside {data.labels}")
        super().__init__(data, tokenizer, max_length, config)

    def _tokenize(self, examples: list[NliExample]) -> Any:
        separator = pair_separator(self.tokenizer)
        return self.tokenizer([e.premise for e in examples], [separator + e.hypothesis for e in examples],
                              truncation="longest_first", max_length=self.max_length)
