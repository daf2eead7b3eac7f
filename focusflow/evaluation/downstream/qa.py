"""Extractive QA: question + context windows (doc stride), span extraction from token offsets.

Long contexts are split into overlapping windows of ``max_length`` tokens (``stride`` tokens of
overlap); a training window that does not contain the whole answer is labelled with position 0
("no answer here"), as in the reference ``run_qa.py``. At prediction time the best span over
all windows of a question wins: start/end restricted to context tokens, end ≥ start, at most
``max_answer_tokens`` long (by default the longest training answer in this tokenizer's tokens, at least
:data:`ANSWER_TOKENS`: a byte-level tokenizer spends 36–87 tokens on a 3–4-word Telugu or Amharic answer, which a
fixed 30 made impossible to predict); the answer is the context substring between the character offsets.

Questions too long to leave room for the context are cut to ``max_question_tokens`` tokens
(counted in ``stats``); answers that cannot be located in their context are kept for scoring
but not trained on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from focusflow.errors import InputError
from focusflow.evaluation.downstream.base import pad_id_of, pair_separator, uses_token_types
from focusflow.evaluation.downstream.datasets import QaExample, TaskData
from focusflow.evaluation.downstream.finetune import Feature, predict_logits
from focusflow.evaluation.downstream.metrics import squad_scores

#: The fewest tokens a predicted answer may span (the reference run_qa.py's max_answer_length)
ANSWER_TOKENS = 30


class QaTask:
    kind = "qa"
    main_metric = "f1"

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 384, stride: int = 128,
                 max_answer_tokens: int | None = None, config: Any = None) -> None:
        if stride >= max_length // 2:
            raise InputError(f"doc stride {stride} must be below half the window ({max_length})")
        self.data = data
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.stride = stride
        self.max_answer_tokens = max_answer_tokens
        self.with_types = uses_token_types(tokenizer, config)
        specials = tokenizer.num_special_tokens_to_add(pair=True)
        self.max_question_tokens = max(8, max_length - stride - specials - 16)
        self.stats = {"questions_cut": 0, "train_windows_without_answer": 0, "unlocatable_train_answers": 0,
                      "test_windows": 0, "test_questions_over_one_window": 0, "longest_train_answer_tokens": 0}
        self._encoded: dict[str, tuple[list[Feature], list[dict[str, Any]]]] = {}

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def _questions(self, examples: list[QaExample]) -> list[str]:
        """Questions, each cut to ``max_question_tokens`` tokens by its character offsets if longer."""
        questions = [e.question.lstrip() for e in examples]
        encoded = self.tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
        for index, offsets in enumerate(encoded["offset_mapping"]):
            if len(offsets) > self.max_question_tokens:
                questions[index] = questions[index][:offsets[self.max_question_tokens - 1][1]]
                self.stats["questions_cut"] += 1
        return questions

    def _encode(self, split: str) -> tuple[list[Feature], list[dict[str, Any]]]:
        """Features and, per feature, its example index, context offsets and context mask."""
        if split in self._encoded:
            return self._encoded[split]
        examples: list[QaExample] = getattr(self.data, split)
        side = self.tokenizer.padding_side
        if side != "right":
            raise InputError("QA windows assume right padding; load the tokenizer with padding_side='right'")
        separator = pair_separator(self.tokenizer)  # its characters shift the context's offsets
        encoding = self.tokenizer(self._questions(examples), [separator + e.context for e in examples],
                                  truncation="only_second", max_length=self.max_length, stride=self.stride,
                                  return_overflowing_tokens=True, return_offsets_mapping=True)
        owners = encoding["overflow_to_sample_mapping"]
        features: list[Feature] = []
        windows: list[dict[str, Any]] = []
        for index, ids in enumerate(encoding["input_ids"]):
            sequence_ids = encoding.sequence_ids(index)
            raw = np.asarray(encoding["offset_mapping"][index], dtype=np.int64).reshape(-1, 2)
            context = np.array([s == 1 for s in sequence_ids], dtype=bool)
            if separator:  # the separator's token is no part of the context: it ends where the context starts
                context &= raw[:, 1] > len(separator)
            offsets = np.where(context[:, None], np.maximum(raw - len(separator), 0), 0)
            feature: Feature = {"input_ids": list(ids)}
            if self.with_types and "token_type_ids" in encoding:
                feature["token_type_ids"] = list(encoding["token_type_ids"][index])
            example = examples[owners[index]]
            if split == "train":
                feature["start_positions"], feature["end_positions"] = self._answer_positions(
                    example, offsets, context)
            features.append(feature)
            windows.append({"example": int(owners[index]), "offsets": offsets, "context": context})
        if split == "test":
            self.stats["test_windows"] = len(features)
            counts = np.bincount(np.asarray(owners, dtype=np.int64), minlength=len(examples))
            self.stats["test_questions_over_one_window"] = int((counts > 1).sum())
        self._encoded[split] = (features, windows)
        return features, windows

    def _answer_positions(self, example: QaExample, offsets: np.ndarray, context: np.ndarray) -> tuple[int, int]:
        text, start_char = example.answers[0]
        if start_char < 0:
            self.stats["unlocatable_train_answers"] += 1
            return 0, 0
        end_char = start_char + len(text)
        tokens = np.nonzero(context)[0]
        if len(tokens) == 0 or offsets[tokens[0], 0] > start_char or offsets[tokens[-1], 1] < end_char:
            self.stats["train_windows_without_answer"] += 1
            return 0, 0
        start_token = tokens[np.searchsorted(offsets[tokens, 1], start_char, side="right")]
        end_token = max(start_token, tokens[np.searchsorted(offsets[tokens, 0], end_char, side="left") - 1])
        longest = self.stats["longest_train_answer_tokens"]
        self.stats["longest_train_answer_tokens"] = max(longest, int(end_token - start_token + 1))
        return int(start_token), int(end_token)

    def answer_cap(self) -> int:
        """How many tokens a predicted answer may span: as given, else the longest training answer in this
        tokenizer's tokens (the training split is encoded for it), at least :data:`ANSWER_TOKENS`."""
        if self.max_answer_tokens is not None:
            return self.max_answer_tokens
        self._encode("train")
        return max(ANSWER_TOKENS, self.stats["longest_train_answer_tokens"])

    def train_features(self) -> list[Feature]:
        return self._encode("train")[0]

    def predict(self, model: Any, split: str, batch_size: int) -> dict[str, str]:
        features, windows = self._encode(split)
        examples: list[QaExample] = getattr(self.data, split)
        outputs = predict_logits(model, features, batch_size, pad_id_of(self.tokenizer))
        best: dict[int, tuple[float, str]] = {}
        cap = self.answer_cap()
        for (starts, ends), window in zip(outputs, windows, strict=True):
            mask = window["context"]
            if not mask.any():
                continue
            start = np.where(mask, starts, -np.inf)
            end = np.where(mask, ends, -np.inf)
            scores = start[:, None] + end[None, :]
            length = np.arange(len(mask))[None, :] - np.arange(len(mask))[:, None]
            scores[(length < 0) | (length >= cap)] = -np.inf
            flat = int(np.argmax(scores))
            i, j = divmod(flat, len(mask))
            score = float(scores[i, j])
            owner = window["example"]
            if np.isfinite(score) and (owner not in best or score > best[owner][0]):
                context = examples[owner].context
                best[owner] = (score, context[window["offsets"][i, 0]:window["offsets"][j, 1]])
        return {examples[owner].id: answer for owner, (_, answer) in best.items()}

    def evaluate(self, model: Any, split: str, batch_size: int) -> dict[str, float]:
        examples: list[QaExample] = getattr(self.data, split)
        gold = {e.id: [text for text, _ in e.answers] for e in examples}
        return squad_scores(gold, self.predict(model, split, batch_size))
