"""MLM masking (BERT's 15% with 80/10/10, optionally whole words), deterministic per sample.

Each sample's mask is drawn from a generator keyed by ``(seed, stream, sample index)``, so the
masks of a run do not depend on batch layout, world size or how often it was resumed: a resumed
run sees exactly the masks the uninterrupted run saw.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import numpy as np

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
    """Draws BERT-style MLM inputs and labels for rows of token ids."""

    mask_token_id: int
    vocab_size: int
    special: np.ndarray
    probability: float = 0.15
    word_starts: np.ndarray | None = None
    seed: int = 0

    @classmethod
    def for_tokenizer(cls, tokenizer, probability: float, whole_word: bool, seed: int) -> Masker:
        if tokenizer.mask_token_id is None:
            raise ValueError("MLM needs a tokenizer with a mask token (encoders such as XLM-R/BERT); "
                             "decoders train with the causal objective")
        return cls(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
                   special=special_token_table(tokenizer), probability=probability,
                   word_starts=word_start_table(tokenizer) if whole_word else None, seed=seed)

    def __post_init__(self) -> None:
        self._replacements = np.flatnonzero(~self.special)

    def __call__(self, ids: np.ndarray, samples: np.ndarray, stream: int = TRAIN_STREAM) -> tuple[np.ndarray, np.ndarray]:
        """``ids`` [B, T] int64 and each row's global sample index → (inputs, labels with -100 off-mask)."""
        inputs = ids.copy()
        labels = np.full_like(ids, IGNORE_INDEX)
        special = self.special[ids]
        for row, sample in enumerate(np.asarray(samples, dtype=np.int64)):
            rng = np.random.default_rng([self.seed, stream, int(sample)])
            if self.word_starts is not None:
                word_of_token = np.cumsum(self.word_starts[ids[row]]) - 1
                draws = rng.random(int(word_of_token[-1]) + 1)[np.maximum(word_of_token, 0)]
            else:
                draws = rng.random(ids.shape[1])
            selected = (draws < self.probability) & ~special[row]
            action = rng.random(ids.shape[1])
            random_ids = self._replacements[rng.integers(0, len(self._replacements), ids.shape[1])]
            labels[row, selected] = ids[row, selected]
            to_mask = selected & (action < 0.8)
            to_random = selected & (action >= 0.8) & (action < 0.9)
            inputs[row, to_mask] = self.mask_token_id
            inputs[row, to_random] = random_ids[to_random]
        return inputs, labels
