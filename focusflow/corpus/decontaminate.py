"""Remove evaluation text from the training corpus.

Public corpora contain the sentences that evaluation sets were built from (the Swahili text
in our shared data holds most of MasakhaNER's test sentences verbatim). A tokenizer, fastText
or LAPT that has seen test text inflates every downstream number, so lines that share a long
normalized substring with any evaluation dev/test text are dropped before the split.

Matching ignores case, spacing and punctuation (CoNLL files split ``Kikwete,`` into
``Kikwete ,``): both sides are reduced to their letters and digits. Every ``window``-character
substring of the evaluation text is indexed; corpus lines are probed every ``stride``
characters, so any shared run of ``window + stride - 1`` normalized characters is found.
Evaluation texts shorter than the window are matched as whole lines.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from focusflow.corpus.io import DOCUMENTS, STATS, read_texts, write_stats, write_texts
from focusflow.errors import InputError

_NOT_ALNUM = re.compile(r"[\W_]+")


def normalize_for_matching(text: str) -> str:
    """Letters and digits only, case-folded, in one Unicode form (NFKC): evaluation text written decomposed (NFD)
    or with compatibility characters still matches the corpus, which the cleaner writes composed."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text.casefold()))


def _hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


@dataclass
class EvaluationIndex:
    """Hashes of every window of the long evaluation texts, and of the short ones whole."""

    window: int
    windows: set[int] = field(default_factory=set)
    whole: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.windows or self.whole)


def build_index(texts: Iterable[str], window: int, min_whole: int = 12) -> EvaluationIndex:
    """Index evaluation texts: substrings of ``window`` normalized characters; shorter texts
    (at least ``min_whole`` characters, below that matches are coincidence) as a whole."""
    index = EvaluationIndex(window)
    for text in texts:
        normalized = normalize_for_matching(text)
        if len(normalized) < window:
            if len(normalized) >= min_whole:
                index.whole.add(_hash(normalized))
            continue
        index.windows.update(_hash(normalized[i:i + window]) for i in range(len(normalized) - window + 1))
    return index


def is_contaminated(line: str, index: EvaluationIndex, stride: int) -> bool:
    """The line shares a window with a long evaluation text, or equals a short one."""
    normalized = normalize_for_matching(line)
    window = index.window
    if len(normalized) < window:
        return _hash(normalized) in index.whole
    last = len(normalized) - window
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)
    return any(_hash(normalized[i:i + window]) in index.windows for i in starts)


def decontaminate(documents: Path, evaluation_texts: Iterable[str], out_dir: Path, *, window: int = 50,
                  stride: int = 25) -> dict[str, Any]:
    """Write ``out_dir/documents.jsonl`` without the lines that overlap evaluation text; return counts."""
    if window < 10 or not 1 <= stride <= window:
        raise InputError(f"need window >= 10 and 1 <= stride <= window, got window={window} stride={stride}")
    started = time.perf_counter()
    index = build_index(evaluation_texts, window)
    counts = {"documents_in": 0, "documents_out": 0, "documents_emptied": 0, "lines_removed": 0,
              "chars_removed": 0, "evaluation_windows": len(index.windows), "evaluation_short_texts": len(index.whole),
              "window": window, "stride": stride}

    def cleaned() -> Iterable[str]:
        for document in read_texts(documents):
            counts["documents_in"] += 1
            kept = []
            for line in document.split("\n"):
                if index and is_contaminated(line, index, stride):
                    counts["lines_removed"] += 1
                    counts["chars_removed"] += len(line)
                else:
                    kept.append(line)
            text = "\n".join(kept).strip()
            if text:
                counts["documents_out"] += 1
                yield text
            else:
                counts["documents_emptied"] += 1

    out = Path(out_dir)
    write_texts(out / DOCUMENTS, cleaned())
    counts["seconds"] = round(time.perf_counter() - started, 3)
    write_stats(out / STATS, counts)
    return counts
