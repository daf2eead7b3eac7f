"""Overlap between a source and a target vocabulary (DESIGN.md §3).

Rules, in order, for each target token:
1. special tokens match by role (cls/bos = start, sep/eos = end, pad, unk, mask; other specials by content);
2. exact canonical match (same bytes, same word-start flag); among several source candidates a
   regular token beats a ``<0xNN>`` byte piece, then the lowest id wins;
3. fuzzy match for symbolic tokens (digits/punctuation/symbols/whitespace only): case and word start
   ignored, and only against symbolic source tokens.
``match="symbolic"`` keeps only rules 1 and 3 plus exact matches of symbolic tokens (the paper's ablation).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq, itemgetter, methodcaller, ne
from typing import Any, Literal

import numpy as np

from focusflow.errors import InputError
from focusflow.tokenizer.canonical import (
    CanonicalToken,
    canonical_vocab,
    field_matches,
    fuzzy_key,
    gc_paused,
    is_symbolic,
)

MatchMode = Literal["full", "symbolic"]


@dataclass
class Overlap:
    """Target ids that copy a source row, which source row, and why (exact / fuzzy / special)."""

    target_ids: np.ndarray
    source_ids: np.ndarray
    kinds: np.ndarray
    n_target: int

    def __len__(self) -> int:
        return len(self.target_ids)

    def as_dict(self) -> dict[int, int]:
        return dict(zip(self.target_ids.tolist(), self.source_ids.tolist(), strict=False))

    @classmethod
    def from_pairs(cls, pairs: dict[int, int], n_target: int, kind: str = "exact") -> Overlap:
        """An explicit overlap (e.g. to reproduce another implementation's choice)."""
        target = np.array(sorted(pairs), dtype=np.int64)
        source = np.array([pairs[t] for t in target.tolist()], dtype=np.int64)
        return cls(target, source, np.full(len(target), kind, dtype=object), n_target)


# A whole token without letters: no character of ``_LETTER`` (``[^\W\d_]``); ``{separator}`` is filled in.
_LETTER_FREE = r"(?:[^\w{separator}]|[\d_])*"


def _decoded_vocabulary(datas: list[bytes]) -> tuple[str, str]:
    """The tokens' texts joined into one string, and the separator. Partial UTF-8 decodes to surrogates
    (surrogateescape); 0xFF, never part of UTF-8, separates them when no token holds that byte."""
    blob = b"\xff".join(datas)
    if blob.count(b"\xff") == len(datas) - 1:
        return blob.decode("utf-8", "surrogateescape"), "\udcff"
    # U+D800 never comes out of surrogateescape (it yields U+DC80-U+DCFF only)
    return "\ud800".join(map(methodcaller("decode", "utf-8", "surrogateescape"), datas)), "\ud800"


def _fuzzy_keys(forms: list[CanonicalToken]) -> dict[int, str]:
    """id -> ``fuzzy_key`` of the forms that have one; letter-free tokens are found by one regex pass over the
    whole decoded vocabulary (surrogates from partial UTF-8 count as letter-free; fuzzy_key drops those)."""
    joined, separator = _decoded_vocabulary(list(map(itemgetter(2), forms)))
    keys: dict[int, str] = {}
    for index, _ in field_matches(joined, separator, _LETTER_FREE.format(separator=separator)):
        form = forms[index]
        if form.kind != "special":
            key = fuzzy_key(form)
            if key is not None:
                keys[form.id] = key
    return keys


def _first_by_key(forms: list[CanonicalToken], keys: list[Any]) -> dict[Any, int]:
    """key -> id of ``forms`` (``keys`` aligned with them): regular tokens beat byte pieces, then lower ids."""
    kinds = list(map(itemgetter(4), forms))
    ids = list(map(itemgetter(0), forms))
    others = list(compress(range(len(kinds)), map(ne, kinds, repeat("regular"))))  # specials, byte pieces
    regular_keys = list(keys)
    for index in others:
        regular_keys[index] = _NO_KEY
    # reversed: for a key held by several tokens the lowest id is written last and wins
    first = dict(zip(reversed(regular_keys), reversed(ids), strict=False))
    first.pop(_NO_KEY, None)
    for index in others:
        if kinds[index] == "byte":
            first.setdefault(keys[index], ids[index])
    return first


_NO_KEY = object()


def compute_overlap(source_tokenizer: Any, target_tokenizer: Any, match: MatchMode = "full",
                    source_forms: list[CanonicalToken] | None = None,
                    target_forms: list[CanonicalToken] | None = None) -> Overlap:
    """Which target tokens copy which source rows (dict lookups only; no decode())."""
    if match not in ("full", "symbolic"):
        raise InputError(f"match must be 'full' or 'symbolic', got {match!r}")
    source_forms = source_forms if source_forms is not None else canonical_vocab(source_tokenizer)
    target_forms = target_forms if target_forms is not None else canonical_vocab(target_tokenizer)
    with gc_paused():
        return _overlap(source_forms, target_forms, match)


def _overlap(source_forms: list[CanonicalToken], target_forms: list[CanonicalToken], match: MatchMode) -> Overlap:
    by_role = {}
    for form in compress(source_forms, map(eq, map(itemgetter(4), source_forms), repeat("special"))):
        for role in form.role.split("|"):
            by_role.setdefault(role, form.id)
    exact = _first_by_key(source_forms, list(map(itemgetter(2, 3), source_forms)))
    source_fuzzy = _fuzzy_keys(source_forms)
    fuzzy = _first_by_key([source_forms[i] for i in source_fuzzy], list(source_fuzzy.values()))
    target_fuzzy = _fuzzy_keys(target_forms)
    # rule 2 for every target token at once (C-level map of dict lookups); rules 1 and 3 touch few tokens
    sources = np.fromiter(map(exact.get, map(itemgetter(2, 3), target_forms), repeat(-1)), np.int64, len(target_forms))
    kinds = np.where(sources >= 0, "exact", "").astype(object)
    for form in compress(target_forms, map(eq, map(itemgetter(4), target_forms), repeat("special"))):
        sources[form.id] = next((by_role[r] for r in form.role.split("|") if r in by_role), -1)
        kinds[form.id] = "special"
    if match == "symbolic":
        for token_id in np.flatnonzero(kinds == "exact").tolist():
            if not is_symbolic(target_forms[token_id].text):
                sources[token_id], kinds[token_id] = -1, ""
    for token_id, key in target_fuzzy.items():
        if sources[token_id] < 0 and key in fuzzy:
            sources[token_id], kinds[token_id] = fuzzy[key], "fuzzy"
    targets = np.flatnonzero(sources >= 0)
    return Overlap(targets.astype(np.int64), sources[targets], kinds[targets], len(target_forms))
