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
from typing import Any, Literal

import numpy as np

from focusflow.tokenizer.canonical import _LETTER, CanonicalToken, canonical_vocab, fuzzy_key, gc_paused, is_symbolic

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
        return dict(zip(self.target_ids.tolist(), self.source_ids.tolist()))

    @classmethod
    def from_pairs(cls, pairs: dict[int, int], n_target: int, kind: str = "exact") -> Overlap:
        """An explicit overlap (e.g. to reproduce another implementation's choice)."""
        target = np.array(sorted(pairs), dtype=np.int64)
        source = np.array([pairs[t] for t in target.tolist()], dtype=np.int64)
        return cls(target, source, np.full(len(target), kind, dtype=object), n_target)


def _fuzzy_keys(forms: list[CanonicalToken]) -> list[str | None]:
    """``fuzzy_key`` of every form; tokens with a letter (nearly all) are ruled out by one regex search."""
    search = _LETTER.search
    keys: list[str | None] = [None] * len(forms)
    for index, form in enumerate(forms):
        if form.kind == "special":
            continue
        try:
            text = form.data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not search(text):
            keys[index] = fuzzy_key(form)
    return keys


def _first_by_key(forms: list[CanonicalToken], keys: list[Any]) -> dict[Any, int]:
    """key -> source id, preferring regular tokens over byte pieces, then lower ids."""
    regular = {}
    for form, value in zip(reversed(forms), reversed(keys)):  # reversed: the lowest id is written last and wins
        if value is not None and form.kind == "regular":
            regular[value] = form.id
    for form, value in zip(forms, keys):
        if value is not None and form.kind == "byte":
            regular.setdefault(value, form.id)
    return regular


def compute_overlap(source_tokenizer: Any, target_tokenizer: Any, match: MatchMode = "full",
                    source_forms: list[CanonicalToken] | None = None,
                    target_forms: list[CanonicalToken] | None = None) -> Overlap:
    """Which target tokens copy which source rows (dict lookups only; no decode())."""
    if match not in ("full", "symbolic"):
        raise ValueError(f"match must be 'full' or 'symbolic', got {match!r}")
    source_forms = source_forms if source_forms is not None else canonical_vocab(source_tokenizer)
    target_forms = target_forms if target_forms is not None else canonical_vocab(target_tokenizer)
    with gc_paused():
        return _overlap(source_forms, target_forms, match)


def _overlap(source_forms: list[CanonicalToken], target_forms: list[CanonicalToken], match: MatchMode) -> Overlap:
    by_role = {}
    for form in source_forms:
        if form.kind == "special":
            for role in form.role.split("|"):
                by_role.setdefault(role, form.id)
    exact = _first_by_key(source_forms, [(form.data, form.word_start) for form in source_forms])
    fuzzy = _first_by_key(source_forms, _fuzzy_keys(source_forms))
    target_fuzzy = _fuzzy_keys(target_forms)
    targets, sources, kinds = [], [], []
    for form, key in zip(target_forms, target_fuzzy):
        if form.kind == "special":
            source_id = next((by_role[r] for r in form.role.split("|") if r in by_role), None)
            kind = "special"
        else:
            source_id, kind = exact.get(form.key), "exact"
            if source_id is not None and match == "symbolic" and not is_symbolic(form.text):
                source_id = None
            if source_id is None:
                source_id, kind = (fuzzy.get(key), "fuzzy") if key is not None else (None, "")
        if source_id is not None:
            targets.append(form.id)
            sources.append(source_id)
            kinds.append(kind)
    return Overlap(np.asarray(targets, dtype=np.int64), np.asarray(sources, dtype=np.int64),
                   np.asarray(kinds, dtype=object), len(target_forms))
