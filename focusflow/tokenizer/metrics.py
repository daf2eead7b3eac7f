"""Tokenizer efficiency on held-out text, for any tokenizer family: fertility, chars/token, continued words, unk.

Words are whitespace-separated words of the original text (the same for every tokenizer, so
source and target are comparable); tokens are mapped to words by their character offsets.
Special tokens added by the post-processor are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from focusflow.errors import InputError
from focusflow.languages import whitespace_words, word_spans

BATCH = 1024


def text_batches(texts: Iterable[str], size: int = BATCH) -> Iterator[list[str]]:
    """``texts`` in lists of ``size`` (the last shorter): what a tokenizer encodes at once."""
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _encode_batch(tokenizer, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return [(e.ids, e.offsets) for e in backend.encode_batch(texts, add_special_tokens=False)]
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return list(zip(encoded["input_ids"], encoded["offset_mapping"], strict=False))


def _word_starts(text: str) -> np.ndarray:
    """Character offsets where words start: whitespace-separated, and units of a script written without spaces
    (:func:`focusflow.languages.word_spans`: a line of Thai or Chinese is not one word)."""
    if not text:
        return np.empty(0, dtype=np.int64)
    if not whitespace_words(text):
        return np.asarray([start for start, _ in word_spans(text)], dtype=np.int64)
    is_space = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    space = np.isin(is_space, _SPACE_CODES)
    starts = np.flatnonzero(~space & np.r_[True, space[:-1]])
    return starts


_SPACE_CODES = np.array([ord(c) for c in " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003"
                         "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"], dtype=np.uint32)


def tokenizer_metrics(tokenizer, texts: Iterable[str]) -> dict:
    """Efficiency of ``tokenizer`` on ``texts``.

    tokens_per_word (fertility), chars_per_token (non-space characters), continued_word_share
    (words split into ≥ 2 tokens), unk_rate (share of tokens that are the unknown token),
    vocab_used_share (distinct ids used / vocabulary size), plus raw counts.
    """
    unk_id = getattr(tokenizer, "unk_token_id", None)
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special_ids.discard(unk_id)
    vocab_size = len(tokenizer)
    used = np.zeros(vocab_size + 1, dtype=bool)
    n_tokens = n_words = n_chars = n_unk = n_continued = n_texts = 0

    def consume(batch: list[str]) -> None:
        nonlocal n_tokens, n_words, n_chars, n_unk, n_continued, n_texts
        for text, (ids, offsets) in zip(batch, _encode_batch(tokenizer, batch), strict=False):
            n_texts += 1
            ids_array = np.asarray(ids, dtype=np.int64)
            keep = ~np.isin(ids_array, list(special_ids)) if special_ids else np.ones(ids_array.size, dtype=bool)
            ids_array = ids_array[keep]
            starts = _word_starts(text)
            n_words += starts.size
            n_chars += len(text) - sum(text.count(c) for c in " \t\n")
            n_tokens += ids_array.size
            if unk_id is not None:
                n_unk += int((ids_array == unk_id).sum())
            used[np.clip(ids_array, 0, vocab_size)] = True
            if starts.size and ids_array.size:
                token_starts = np.asarray([o[0] for o in offsets], dtype=np.int64)[keep]
                word_of_token = np.searchsorted(starts, token_starts, side="right") - 1
                per_word = np.bincount(word_of_token[word_of_token >= 0], minlength=starts.size)
                n_continued += int((per_word >= 2).sum())

    for batch in text_batches(texts):
        consume(batch)
    if n_tokens == 0:
        raise InputError("no tokens: the texts are empty")
    return {
        "tokens_per_word": n_tokens / max(n_words, 1),
        "chars_per_token": n_chars / n_tokens,
        "continued_word_share": n_continued / max(n_words, 1),
        "unk_rate": n_unk / n_tokens,
        "vocab_used_share": float(used[:vocab_size].sum()) / vocab_size,
        "vocab_size": vocab_size,
        "tokens": n_tokens, "words": n_words, "chars": n_chars, "texts": n_texts,
    }


def compare_tokenizers(source, target, texts: Iterable[str]) -> dict:
    """Source and target metrics side by side, with target/source ratios of the main numbers."""
    texts = list(texts)
    result = {"source": tokenizer_metrics(source, texts), "target": tokenizer_metrics(target, texts)}
    result["target_over_source"] = {
        key: (result["target"][key] / result["source"][key] if result["source"][key] else None)
        for key in ("tokens_per_word", "chars_per_token", "continued_word_share", "tokens")}
    return result


def segmentation_agreement(source, target, texts: Iterable[str]) -> dict[str, float | int | None]:
    """How much of ``texts`` ``target`` cuts into the same pieces as ``source`` (a pruned or extended vocabulary
    against the one it came from): the share of texts and of whitespace words whose pieces are the same strings
    at the same places."""
    same_texts = n_texts = same_words = n_words = 0

    def pieces(tokenizer, texts: list[str]) -> list[list[tuple[str, int, int]]]:
        encoded = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
        return [list(zip(e.tokens, (o[0] for o in e.offsets), (o[1] for o in e.offsets), strict=True))
                for e in encoded]

    def consume(batch: list[str]) -> None:
        nonlocal same_texts, n_texts, same_words, n_words
        for text, theirs, ours in zip(batch, pieces(source, batch), pieces(target, batch), strict=True):
            n_texts += 1
            same_texts += theirs == ours
            starts = _word_starts(text)
            n_words += starts.size
            if theirs == ours:
                same_words += starts.size
                continue
            by_word: list[dict[int, list]] = [{}, {}]
            for side, cut in enumerate((theirs, ours)):
                token_starts = np.asarray([start for _, start, _ in cut], dtype=np.int64)
                words = np.searchsorted(starts, token_starts, side="right") - 1
                for word, piece in zip(words.tolist(), cut, strict=True):
                    by_word[side].setdefault(word, []).append(piece)
            same_words += sum(by_word[0].get(word) == by_word[1].get(word) for word in range(starts.size))

    for batch in text_batches(texts):
        consume(batch)
    return {"sentences": same_texts / n_texts if n_texts else None,  # no text: not measured, never 0%
            "words": same_words / n_words if n_words else None, "texts": n_texts, "word_count": n_words}


def metrics_table(comparison: dict) -> str:
    """A Markdown table of ``compare_tokenizers`` (or ``{"target": metrics}``) output."""
    columns = [name for name in ("source", "target") if name in comparison]
    keys = ["tokens_per_word", "chars_per_token", "continued_word_share", "unk_rate", "vocab_used_share",
            "vocab_size", "tokens"]
    lines = ["| metric | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for key in keys:
        cells = []
        for name in columns:
            value = comparison[name][key]
            cells.append(f"{value:,}" if isinstance(value, int) else f"{value:.4f}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
