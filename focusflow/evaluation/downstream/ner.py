"""NER: words → sub-tokens with the label on one sub-token per word (others ignored, -100): an encoder's first,
a causal decoder's last (its first has not seen the rest of the word: a byte-level piece of Amharic is a lead byte
every word of the script shares); a word's prediction is the argmax there.

The words are encoded as the running text they came from (joined by spaces, each token mapped to its word by its
character offsets), not word by word: a byte-level or Gemma-style tokenizer given words alone drops their word-start
marker (``Obama``, not ``▁Obama``/``ĠObama``), input the model never read in pretraining.

Documented handling of what cannot be encoded: words past the model's window (sentence longer
than ``max_length`` sub-tokens) are predicted ``O`` and still scored against their gold tags (so they cost recall,
never inflate it); a word the tokenizer turns into no token at all (a zero-width or no-break space alone) continues
the entity its neighbours are predicted inside (``I-X`` between ``X`` and ``I-X``), else is ``O`` (an ``O`` inside a
predicted entity cut it in two wrong entities); their counts are in ``stats``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from focusflow.evaluation.downstream.base import features_from, pad_id_of
from focusflow.evaluation.downstream.datasets import DataFormatError, NerExample, TaskData
from focusflow.evaluation.downstream.finetune import Feature, predict_logits
from focusflow.evaluation.downstream.metrics import ner_scores
from focusflow.models.model_type import config_is_decoder
from focusflow.training.wordpool import token_words

log = logging.getLogger(__name__)


def check_tags(examples: list[NerExample], labels: list[str], split: str) -> None:
    """Every tag must be in the label set; the error names the first offender."""
    known = set(labels)
    for number, example in enumerate(examples):
        for tag in example.tags:
            if tag not in known:
                raise DataFormatError(f"{split} sentence {number}: tag {tag!r} is outside the label set {labels}")


def _running_text(example: NerExample) -> tuple[str, np.ndarray]:
    """The sentence as text (its words joined by spaces) and each word's character span in it."""
    lengths = np.fromiter(map(len, example.words), dtype=np.int64, count=len(example.words))
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]) if lengths.size else lengths
    return " ".join(example.words), np.stack([starts, starts + lengths], axis=1).reshape(-1, 2)


def _bridge_untokenized(tags: list[str], found: np.ndarray) -> list[str]:
    """A word without tokens between a word predicted in entity X and the next word predicted ``I-X`` is ``I-X``."""
    missing = np.flatnonzero(~found)
    if not missing.size or not found.any():
        return tags
    seen = np.flatnonzero(found)
    for word in missing.tolist():
        before, after = seen[seen < word], seen[seen > word]
        if not before.size or not after.size:
            continue  # before the first or past the last encoded word (truncated): O
        previous, following = tags[before[-1]], tags[after[0]]
        if previous != "O" and following.startswith("I-") and following[2:] == previous[2:]:
            tags[word] = following
    return tags


class NerTask:
    kind = "ner"
    main_metric = "f1"

    def __init__(self, data: TaskData, tokenizer: Any, max_length: int = 256, config: Any = None) -> None:
        if not data.labels:
            raise DataFormatError(f"{data.name}: no NER labels found")
        for split in ("train", "dev", "test"):
            check_tags(getattr(data, split), data.labels, split)
        unseen = sorted({t[2:] for s in (data.dev, data.test) for e in s for t in e.tags if t != "O"}
                        - {t[2:] for e in data.train for t in e.tags if t != "O"})
        if unseen:
            log.warning("%s: entity types %s occur in dev/test but never in train", data.name, unseen)
        self.data = data
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.label_to_id = {label: i for i, label in enumerate(data.labels)}
        # a causal decoder's word is read at its last sub-token
        self.label_last = config is not None and config_is_decoder(config)
        self.stats = {"truncated_words": 0, "untokenized_words": 0}
        self._encoded: dict[str, tuple[list[Feature], list[np.ndarray]]] = {}

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": len(self.data.labels), "id2label": dict(enumerate(self.data.labels)),
                "label2id": dict(self.label_to_id)}

    def _encode(self, split: str) -> tuple[list[Feature], list[np.ndarray]]:
        """Features plus, per sentence, the labelled sub-token's position of every word (-1: none)."""
        if split in self._encoded:
            return self._encoded[split]
        examples: list[NerExample] = getattr(self.data, split)
        texts, spans = zip(*map(_running_text, examples), strict=True) if examples else ((), ())
        encoding = self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                                  return_offsets_mapping=True)
        features = features_from(encoding, with_types=False)
        label_positions = []
        for index, (example, feature) in enumerate(zip(examples, features, strict=True)):
            positions = self._word_positions(encoding, index, spans[index])
            missing = positions < 0
            if missing.any():
                last_seen = int(np.max(np.nonzero(~missing)[0])) if (~missing).any() else -1
                truncated = int(missing[last_seen + 1:].sum())
                self.stats["truncated_words"] += truncated if split == "test" else 0
                self.stats["untokenized_words"] += int(missing.sum()) - truncated if split == "test" else 0
            labels = [-100] * len(feature["input_ids"])
            for word, position in enumerate(positions):
                if position >= 0:
                    labels[position] = self.label_to_id[example.tags[word]]
            feature["labels"] = labels
            label_positions.append(positions)
        self._encoded[split] = (features, label_positions)
        return features, label_positions

    def _word_positions(self, encoding: Any, index: int, spans: np.ndarray) -> np.ndarray:
        """Each word's labelled sub-token (its first, or a causal model's last; -1: the word has none)."""
        offsets = np.asarray(encoding["offset_mapping"][index], dtype=np.int64).reshape(-1, 2)
        words = token_words(offsets, spans)
        words[[sequence is None for sequence in encoding.sequence_ids(index)]] = -1  # special tokens
        tokens = np.flatnonzero(words >= 0)
        positions = np.full(len(spans), -1, dtype=np.int64)
        if not tokens.size:
            return positions
        order = tokens[::-1] if self.label_last else tokens
        found, first = np.unique(words[order], return_index=True)  # each word's first in ``order``
        positions[found] = order[first]
        return positions

    def train_features(self) -> list[Feature]:
        return self._encode("train")[0]

    def predict(self, model: Any, split: str, batch_size: int) -> list[list[str]]:
        features, label_positions = self._encode(split)
        logits = predict_logits(model, features, batch_size, pad_id_of(self.tokenizer))
        labels = np.asarray(self.data.labels, dtype=object)
        predictions = []
        for sentence_logits, positions in zip(logits, label_positions, strict=True):
            tags = np.full(len(positions), "O", dtype=object)
            found = positions >= 0
            if found.any():
                tags[found] = labels[sentence_logits[positions[found]].argmax(-1)]
            predictions.append(_bridge_untokenized(tags.tolist(), found))
        return predictions

    def evaluate(self, model: Any, split: str, batch_size: int) -> dict[str, float]:
        gold = [list(e.tags) for e in getattr(self.data, split)]
        return ner_scores(gold, self.predict(model, split, batch_size))
