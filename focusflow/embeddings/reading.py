"""Which of the source's pieces a pruned vocabulary keeps so that it reads new text of the language as the source
does. A text is cut as the source cuts it exactly when every piece of the source's cut is kept (Unigram, WordPiece
and BPE alike, with ``modes.prune_tokenizer`` keeping merge ingredients), so the rule ranks the source's pieces by
how likely new text of the language is to need them, and a budget of rows takes them in that order:

1. the pieces the corpus used (always kept);
2. the other casing of a piece the corpus used (``▁Kwa`` for ``▁kwa``: a sentence's first word, a name);
3. numbers (``▁1895``, ``802.11``): every language writes them and no corpus holds them all;
4. the pieces that occur inside the corpus's words (a stem with another prefix, another inflection);
5. the rest of the source's pieces, most probable first.

Only pieces written with the corpus's characters are eligible; within each class the source's most probable piece
comes first. Measured on SIB-200's sentences (sw, ha, sn; e5-small at 0.35× its parameters), classes 2-4 raise the
share of sentences read as the source from 88.4/86.8/82.4% to 91.3/89.4/85.8% (``benchmarks/RESULTS-lapt-parity.md``):
what stays unread is mostly names and loanwords, an open class.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from focusflow.errors import InputError
from focusflow.tokenizer.canonical import CanonicalToken, backend_spec, canonical_vocab, detect_scheme, scheme_spec

#: The rule's version, in a pruned model's key: a stored prune of an earlier rule is not this rule's (1: the
#: corpus's pieces, then by probability; 2: the classes above).
READING_RULE = 2
#: A character seen fewer times in the corpus is a typo or a stray quotation, not the language's alphabet.
MIN_CHARACTER_COUNT = 2
#: Word types are counted on the corpus's first characters only (pieces inside words saturate long before).
WORD_SAMPLE_CHARACTERS = 50_000_000
#: The most frequent word types whose inside is searched for the source's pieces.
MAX_WORD_TYPES = 300_000
#: Longer pieces (runs of "=" or spaces in a decoder's vocabulary) are not looked for inside words.
MAX_PIECE_CHARACTERS = 32
#: Pieces are looked for inside the most frequent words' first characters only (sw's 105,582 word types: 0.8M).
SCAN_CHARACTERS = 2_000_000
#: A longer "word" (a line of a script written without spaces) is read in windows of this many characters.
MAX_WORD_CHARACTERS = 48
#: What a number piece may hold besides digits.
_NUMBER_MARKS = frozenset(".,:/-%")


@dataclass(frozen=True)
class CorpusSpelling:
    """How the corpus writes its language: its characters and its most frequent word types."""

    characters: set[str]
    words: list[str] = field(default_factory=list)


def corpus_characters(texts: Iterable[str], min_count: int = MIN_CHARACTER_COUNT) -> set[str]:
    """The characters the corpus writes the language with (each seen at least ``min_count`` times)."""
    return corpus_spelling(texts, min_count, max_words=0).characters


def corpus_spelling(texts: Iterable[str], min_count: int = MIN_CHARACTER_COUNT,
                    max_words: int = MAX_WORD_TYPES, sample_characters: int = WORD_SAMPLE_CHARACTERS
                    ) -> CorpusSpelling:
    """The corpus's characters (over all of it) and its ``max_words`` most frequent whitespace words (over its first
    ``sample_characters`` characters), in one pass."""
    characters: Counter[str] = Counter()
    words: Counter[str] = Counter()
    read = 0
    for text in texts:
        characters.update(text)
        if max_words and read < sample_characters:
            words.update(text.split())
            read += len(text)
    return CorpusSpelling({char for char, count in characters.items() if count >= min_count and not char.isspace()},
                          [word for word, _ in words.most_common(max_words)])


def probability_order(tokenizer: Any) -> np.ndarray:
    """The source's ids, most probable piece first: a Unigram model's scores; a BPE model's merge ranks (its
    alphabet first, then each piece by the merge that makes it); otherwise id order (a WordPiece vocabulary lists
    its frequent pieces first)."""
    spec = backend_spec(tokenizer)
    model = spec["model"]
    size = len(tokenizer)
    if model["type"] == "Unigram":
        scores = np.full(size, -np.inf)
        values = np.asarray([score for _, score in model["vocab"]], np.float64)
        scores[:len(values)] = values
        return np.lexsort((np.arange(size), -scores))
    if model["type"] == "BPE":
        vocab = tokenizer.get_vocab()
        rank = np.full(size, np.inf)
        for position, merge in enumerate(model.get("merges") or []):
            a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
            token_id = vocab.get(a + b)
            if token_id is not None and token_id < size and rank[token_id] == np.inf:
                rank[token_id] = position
        made = np.isfinite(rank)
        rank[~made & (np.arange(size) < len(model["vocab"]))] = -1  # the alphabet, before any merge
        return np.lexsort((np.arange(size), rank))
    return np.arange(size)


def spelled_with(forms: list[CanonicalToken], characters: set[str]) -> np.ndarray:
    """Which vocabulary entries are regular pieces written only with ``characters`` (a byte piece that is part of a
    character: only with bytes of theirs)."""
    allowed_bytes = {byte for char in characters for byte in char.encode("utf-8")}
    keep = np.zeros(len(forms), bool)
    for form in forms:
        if form.kind != "regular":
            continue
        text = form.text  # "" for a bare word-start marker (SentencePiece's "▁"), which every alphabet has
        keep[form.id] = (all(char in characters for char in text) if text is not None
                         else all(byte in allowed_bytes for byte in form.data))
    return keep


#: The classes between the corpus's pieces and the most probable rest, in order (a benchmark leaves some out).
CLASSES = ("casings", "numbers", "inside_words")


def reading_order(tokenizer: Any, used: np.ndarray, spelling: CorpusSpelling | set[str],
                  classes: tuple[str, ...] = CLASSES) -> np.ndarray:
    """Every eligible piece the corpus did not use (``used``), in the order a pruned vocabulary takes them: the
    module's ``classes`` in order, then the most probable rest (``spelling``: the corpus's characters and words, or
    only its characters). Computed once per prune; a budget takes a prefix."""
    unknown = set(classes) - set(CLASSES)
    if unknown:
        raise InputError(f"unknown reading classes {sorted(unknown)}; choose from {', '.join(CLASSES)}")
    if not isinstance(spelling, CorpusSpelling):
        spelling = CorpusSpelling(set(spelling))
    forms = canonical_vocab(tokenizer)
    corpus = np.zeros(len(forms), bool)
    corpus[np.asarray(used, np.int64)] = True
    taken = corpus | ~spelled_with(forms, spelling.characters)  # never ranked: kept already, or not eligible
    order = probability_order(tokenizer)
    by_text = {(form.text, form.word_start): form.id for form in forms if form.kind == "regular" and form.text}
    wanted_by = {"casings": lambda: _other_casings(forms, corpus, by_text), "numbers": lambda: _numbers(forms),
                 "inside_words": lambda: _inside_words(spelling.words, by_text, len(forms),
                                                       detect_scheme(scheme_spec(tokenizer))[0])}
    ranked = []
    for wanted in (*(wanted_by[name] for name in classes), lambda: np.ones(len(forms), bool)):
        candidates = wanted() & ~taken
        ids = order[candidates[order]]
        taken[ids] = True
        ranked.append(ids)
    return np.concatenate(ranked)


def reading_pieces(tokenizer: Any, used: np.ndarray, spelling: CorpusSpelling | set[str], rows: int,
                   classes: tuple[str, ...] = CLASSES) -> np.ndarray:
    """The ids a pruned vocabulary keeps: every piece the corpus used (``used``), then :func:`reading_order`'s
    first pieces while there is room for ``rows`` in all."""
    used = np.unique(np.asarray(used, np.int64))
    order = reading_order(tokenizer, used, spelling, classes)
    return np.union1d(used, order[:max(0, rows - len(used))])


def _other_casings(forms: list[CanonicalToken], used: np.ndarray, by_text: dict[tuple[str, bool], int]) -> np.ndarray:
    """The pieces that are another casing (lower, capitalized, upper) of a piece the corpus used (``used``, a mask;
    only regular pieces with text have casings)."""
    wanted = np.zeros(len(forms), bool)
    for index in np.flatnonzero(used):
        form = forms[index]
        if form.kind != "regular" or not form.text:
            continue
        for text in {form.text.lower(), form.text.capitalize(), form.text[:1].upper() + form.text[1:],
                     form.text.upper()}:
            other = by_text.get((text, form.word_start))
            if other is not None:
                wanted[other] = True
    return wanted


def _numbers(forms: list[CanonicalToken]) -> np.ndarray:
    """The pieces that write a number: digits, with separators (``1,5``, ``802.11``, ``3/4``, ``50%``)."""
    wanted = np.zeros(len(forms), bool)
    for form in forms:
        text = form.text
        if form.kind == "regular" and text and any(char.isdigit() for char in text) and all(
                char.isdigit() or char in _NUMBER_MARKS for char in text):
            wanted[form.id] = True
    return wanted


def _inside_words(words: list[str], by_text: dict[tuple[str, bool], int], size: int, scheme: str) -> np.ndarray:
    """The pieces that occur inside one of ``words`` (the most frequent first, up to ``SCAN_CHARACTERS`` in all),
    as the tokenizer's ``scheme`` would place them: at a word's start a word-start piece (SentencePiece and
    byte-level BPE also a bare one, after a lone marker or at the text's start), elsewhere a continuation;
    WordPiece starts a word again after punctuation. A long "word" (a script written without spaces) is read in
    windows of ``MAX_WORD_CHARACTERS``."""
    wanted = np.zeros(size, bool)
    longest = min(MAX_PIECE_CHARACTERS, max((len(text) for text, _ in by_text), default=0))
    wordpiece = scheme == "wordpiece"
    scanned = 0
    for word in words:
        if scanned >= SCAN_CHARACTERS:
            break
        scanned += len(word)
        for offset in range(0, len(word), MAX_WORD_CHARACTERS):
            window = word[offset:offset + MAX_WORD_CHARACTERS]
            for start in range(len(window)):
                at_start = (offset == 0 and start == 0) or (wordpiece and (
                    _is_punctuation(window[start]) or (start > 0 and _is_punctuation(window[start - 1]))))
                sides = (True,) if wordpiece and at_start else (True, False) if at_start else (False,)
                for end in range(start + 1, min(len(window), start + longest) + 1):
                    piece = window[start:end]
                    for word_start in sides:
                        found = by_text.get((piece, word_start))
                        if found is not None:
                            wanted[found] = True
    return wanted


def _is_punctuation(char: str) -> bool:
    """BERT's rule (where WordPiece's pre-tokenizer splits a word): ASCII symbols and Unicode punctuation."""
    code = ord(char)
    return 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126 or \
        unicodedata.category(char).startswith("P")
