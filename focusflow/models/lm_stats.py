"""Language-model statistics shared by training and evaluation: BERT masking and unigram counts.

One masker serves LAPT, MLM-head training and intrinsic evaluation. A row's mask is drawn from
the generator its caller passes: training keys it by ``(seed, stream, sample index)`` so a
resumed run sees exactly the masks of the uninterrupted run, evaluation by ``(seed, document
index)`` so every method with the same tokenizer is scored on the same positions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from focusflow.errors import InputError

log = logging.getLogger(__name__)

IGNORE_INDEX = -100
TRAIN_STREAM = 0
EVAL_STREAM = 1


def special_token_table(tokenizer) -> np.ndarray:
    """Boolean per vocabulary id: special tokens (never masked, never a random replacement)."""
    table = np.zeros(len(tokenizer), dtype=bool)
    ids = [i for i in tokenizer.all_special_ids if i is not None and 0 <= i < len(table)]
    table[ids] = True
    return table


def word_start_table(tokenizer) -> np.ndarray:
    """Boolean per vocabulary id: does this token begin a word? (for whole-word masking)

    WordPiece marks continuations (``##``); SentencePiece (``▁``) and byte-level BPE (``Ġ``)
    mark word starts. Special tokens always start a word.
    """
    tokens = np.array(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))), dtype=str)
    model_type = ""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        model = json.loads(backend.to_str()).get("model", {})
        model_type = model.get("type", "")
        prefix = model.get("continuing_subword_prefix") or "##"
    if model_type == "WordPiece":
        starts = ~np.char.startswith(tokens, prefix)
    elif np.char.startswith(tokens, "▁").any():
        starts = np.char.startswith(tokens, "▁")
    elif np.char.startswith(tokens, "Ġ").any():
        starts = np.char.startswith(tokens, "Ġ")
    else:
        log.warning("whole-word masking: no word-boundary marker found in the vocabulary; masking tokens")
        starts = np.ones(len(tokens), dtype=bool)
    return starts | special_token_table(tokenizer)


@dataclass
class Masker:
    """Draws BERT-style MLM inputs (15% selected; of those 80% ``<mask>``, 10% random token, 10% unchanged).

    Random replacements come from the non-special tokens; ``random_from_any_token`` draws them
    from the whole vocabulary instead (what intrinsic evaluation has always used, so its
    masks, and the metrics stored for them, stay the same).
    """

    mask_token_id: int
    vocab_size: int
    special: np.ndarray
    probability: float = 0.15
    word_starts: np.ndarray | None = None
    seed: int = 0
    random_from_any_token: bool = False

    @classmethod
    def for_tokenizer(cls, tokenizer, probability: float = 0.15, whole_word: bool = False, seed: int = 0,
                      random_from_any_token: bool = False) -> Masker:
        if tokenizer.mask_token_id is None:
            raise InputError("MLM needs a tokenizer with a mask token (encoders such as XLM-R/BERT); "
                             "decoders train with the causal LM loss")
        return cls(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
                   special=special_token_table(tokenizer), probability=probability,
                   word_starts=word_start_table(tokenizer) if whole_word else None, seed=seed,
                   random_from_any_token=random_from_any_token)

    def __post_init__(self) -> None:
        self._replacements = (np.arange(self.vocab_size) if self.random_from_any_token
                              else np.flatnonzero(~self.special))

    def mask(self, ids: np.ndarray, special: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One row of token ids → (inputs, selected positions); ``special`` positions are never selected."""
        if self.word_starts is not None and len(ids):
            # pieces before the block's first word start (a word cut by the block's edge, a run of Thai or Chinese
            # with no start at all) are a word of their own, 0: they shared the first whole word's draw, or crashed
            word_of_token = np.cumsum(self.word_starts[ids])
            draws = rng.random(int(word_of_token[-1]) + 1)[word_of_token]
        else:
            draws = rng.random(len(ids))
        selected = (draws < self.probability) & ~special
        action = rng.random(len(ids))
        random_ids = self._replacements[rng.integers(0, len(self._replacements), len(ids))]
        inputs = ids.copy()
        inputs[selected & (action < 0.8)] = self.mask_token_id
        to_random = selected & (action >= 0.8) & (action < 0.9)
        inputs[to_random] = random_ids[to_random]
        return inputs, selected

    def __call__(self, ids: np.ndarray, samples: np.ndarray, stream: int = TRAIN_STREAM
                 ) -> tuple[np.ndarray, np.ndarray]:
        """``ids`` [B, T] int64 and each row's global sample index → (inputs, labels with -100 off-mask)."""
        inputs = np.empty_like(ids)
        labels = np.full_like(ids, IGNORE_INDEX)
        special = self.special[ids]
        for row, sample in enumerate(np.asarray(samples, dtype=np.int64)):
            rng = np.random.default_rng([self.seed, stream, int(sample)])
            inputs[row], selected = self.mask(ids[row], special[row], rng)
            labels[row, selected] = ids[row, selected]
        return inputs, labels


def unigram_counts(tokenizer, texts: Sequence[str], batch_size: int = 1000) -> np.ndarray:
    """How often each token id occurs in ``texts`` (no special tokens): the unigram reference's data."""
    counts = np.zeros(len(tokenizer), dtype=np.int64)
    for start in range(0, len(texts), batch_size):
        rows = tokenizer(list(texts[start:start + batch_size]), add_special_tokens=False, verbose=False)["input_ids"]
        if rows:
            flat = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]) if any(rows) else np.zeros(0, np.int64)
            counts += np.bincount(flat, minlength=len(counts))[: len(counts)]
    return counts


def unigram_log_probs(counts: np.ndarray, smoothing: float = 0.5, *, per_seen_type: bool = False) -> np.ndarray:
    """Add-``smoothing`` log probabilities (natural log) over the whole vocabulary. ``per_seen_type``: the smoothing
    mass is ``smoothing`` per token type seen, spread over the vocabulary, so that a reference level does not depend
    on the vocabulary's size (add-0.5 over e5's 250k rows outweighed 15k counted tokens: its unigram level was 2 nats
    worse than a 30k vocabulary's on the same tokens)."""
    counts = counts.astype(np.float64)
    if per_seen_type:
        smoothing = smoothing * max(int(np.count_nonzero(counts)), 1) / max(counts.size, 1)
    counts = counts + smoothing
    return np.log(counts / counts.sum()).astype(np.float32)


def pad_rows(rows: Sequence[np.ndarray], value: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 ids and their 0/1 attention mask for rows of different lengths."""
    width = max(len(row) for row in rows)
    ids = np.full((len(rows), width), value, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def length_batches(lengths: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Text indices grouped by similar length so that ``count × longest ≤ batch_tokens`` (at least one text each)."""
    order = np.argsort(lengths, kind="stable")
    batches, current, longest = [], [], 0
    for index in order.tolist():
        longest_with = max(longest, int(lengths[index]))
        if current and longest_with * (len(current) + 1) > batch_tokens:
            batches.append(np.asarray(current, dtype=np.int64))
            current, longest_with = [], int(lengths[index])
        current.append(index)
        longest = longest_with
    if current:
        batches.append(np.asarray(current, dtype=np.int64))
    return batches


def layer_count(config: Any) -> int:
    """A model configuration's number of transformer layers (``num_hidden_layers``, GPT-2's ``n_layer``)."""
    return int(getattr(config, "num_hidden_layers", None) or config.n_layer)


def padding_id(tokenizer: Any) -> int:
    """The id a batch pads with: the tokenizer's pad, else its eos, else its unk, else 0."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if candidate is not None:
            return int(candidate)
    return 0
