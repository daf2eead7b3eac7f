"""Words shared by two tokenizations of the same text, and vectorized pooling of token states per word.

A word is a whitespace-separated span of the raw text. A token belongs to the first word its character
span overlaps (zero-length tokens such as added specials belong to none). A word is kept only when both
tokenizations give it at least one token and cover it completely (truncation can cut a word on one side),
so the pooled vectors of the two models describe the same characters.

The index arrays are built once per text (numpy, vectorized over tokens); per batch they become flat
``positions`` (row * length + token) and ``segments`` (word id) tensors, and pooling is one ``index_add_``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

_WORD = re.compile(r"\S+")


def word_span_array(text: str) -> np.ndarray:
    """``[n_words, 2]`` character spans (start, end) of the whitespace-separated words of ``text``. Not the units
    of :func:`focusflow.languages.word_spans`: a run of Thai cut four letters at a time would put a token that crosses
    a cut into different units on the two sides, and the pooled vectors would describe different characters; a
    tokenizer never crosses whitespace."""
    spans = [match.span() for match in _WORD.finditer(text)]
    return np.asarray(spans, dtype=np.int64).reshape(-1, 2)


def token_words(offsets: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Word index of each token (``-1``: overlaps no word) from its character ``offsets`` ``[n_tokens, 2]``."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = offsets[:, 0], offsets[:, 1]
    first = np.searchsorted(spans[:, 1], starts, side="right")  # first word ending after the token starts
    inside = first < len(spans)
    overlaps = inside & (ends > starts)
    overlaps[inside] &= spans[first[inside], 0] < ends[inside]
    return np.where(overlaps, first, -1)


@dataclass(frozen=True)
class SharedWords:
    """One text's word index per token on both sides (compact ids ``0..n_words-1``; ``-1`` for no word), and which
    of the text's words (indices into :func:`word_span_array`) the compact ids are."""

    source: np.ndarray
    target: np.ndarray
    n_words: int
    spans: np.ndarray | None = None


def covered_words(spans: np.ndarray, offsets: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Which words one tokenization covers completely (a boolean per word span): at least one token of its own and
    no cut by truncation (its end within the last token's)."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    covered_to = offsets[words >= 0, 1].max() if (words >= 0).any() else 0
    return (np.bincount(words[words >= 0], minlength=len(spans)) > 0) & (spans[:, 1] <= covered_to)


def shared_words(text: str, source_offsets: np.ndarray, target_offsets: np.ndarray) -> SharedWords:
    """The words both tokenizations cover completely, each with at least one token on either side."""
    spans = word_span_array(text)
    sides = [token_words(offsets, spans) for offsets in (source_offsets, target_offsets)]
    keep = np.ones(len(spans), dtype=bool)
    for offsets, words in zip((source_offsets, target_offsets), sides, strict=False):
        keep &= covered_words(spans, offsets, words)
    compact = np.where(keep, np.cumsum(keep) - 1, -1)
    source, target = (np.where(words >= 0, compact[np.maximum(words, 0)], -1) for words in sides)
    return SharedWords(source, target, int(keep.sum()), np.flatnonzero(keep))


def flat_word_index(word_rows: list[np.ndarray], counts: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    """For a batch of texts padded to ``length`` (each text's word index per token and its word count):
    ``positions`` (flat token indices that belong to a word), ``segments`` (batch-wide word id of each)
    and ``sentence`` (the text each batch word comes from)."""
    counts = np.asarray(counts, dtype=np.int64)
    first_word = np.concatenate([[0], np.cumsum(counts)[:-1]])
    positions, segments = [], []
    for row_index, row in enumerate(word_rows):
        tokens = np.flatnonzero(row >= 0)
        positions.append(row_index * length + tokens)
        segments.append(row[tokens] + first_word[row_index])
    sentence = np.repeat(np.arange(len(word_rows)), counts)
    return np.concatenate(positions).astype(np.int64), np.concatenate(segments).astype(np.int64), sentence


def segment_mean(rows: torch.Tensor, segments: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Mean of ``rows`` per segment id (float32), with a single ``index_add_``."""
    sums = torch.zeros(n_segments, rows.shape[-1], dtype=torch.float32, device=rows.device)
    sums.index_add_(0, segments, rows.float())
    counts = torch.bincount(segments, minlength=n_segments).clamp_min(1).to(sums.dtype)
    return sums / counts[:, None]


def pool_words(hidden: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor, n_words: int,
               pool: str = "mean") -> torch.Tensor:
    """``[n_words, hidden]``: per word, the mean hidden state over its tokens (``pool="mean"``) or the state at its
    last token (``"last"``) (``hidden``: ``[batch, length, H]``)."""
    flat = hidden.reshape(-1, hidden.shape[-1])
    if pool == "last":
        last = torch.full((n_words,), -1, dtype=positions.dtype, device=positions.device)
        last = last.scatter_reduce(0, segments, positions, reduce="amax")
        return flat.index_select(0, last).float()
    return segment_mean(flat.index_select(0, positions), segments, n_words)
