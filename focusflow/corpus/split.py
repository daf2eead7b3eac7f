"""Deterministic held-out split by document hash, so held-out text never reaches tokenizer, fastText or LAPT.

A document's fate depends only on its text and the seed: the held-out set is the documents
with the smallest ``xxh64(seed, text)`` values, as many as ``max(fraction · n, floor)`` (the
floor capped at ``max_heldout_fraction`` of a small corpus). Two streaming passes; memory is
the heap of held-out hashes, not the corpus.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from pathlib import Path

import xxhash

from focusflow.config import SplitSpec
from focusflow.corpus.io import STATS, read_texts, write_stats, write_texts
from focusflow.errors import InputError

#: A split artifact's two files: the one place their names are written (``SplitOutput`` reads them).
TRAIN_FILE, HELDOUT_FILE = "train.jsonl", "heldout.jsonl"


@dataclass(frozen=True)
class SplitOutput:
    """A split's folder as its readers see it: the training documents and the held-out ones."""

    folder: Path

    @property
    def train(self) -> Path:
        return Path(self.folder) / TRAIN_FILE

    @property
    def heldout(self) -> Path:
        return Path(self.folder) / HELDOUT_FILE


def document_key(text: str, seed: int) -> int:
    return xxhash.xxh64_intdigest(text.encode("utf-8"), seed=seed)


def heldout_count(n_documents: int, spec: SplitSpec) -> int:
    """How many documents go to held-out: the fraction, raised to the floor, the floor capped on small corpora."""
    by_fraction = math.ceil(spec.heldout_fraction * n_documents)
    floor = min(spec.min_heldout_documents, math.floor(spec.max_heldout_fraction * n_documents))
    return max(by_fraction, floor, 1 if n_documents > 1 else 0)


def split_corpus(documents: Path, spec: SplitSpec, out_dir: Path) -> dict:
    """Write ``out_dir/train.jsonl`` and ``out_dir/heldout.jsonl`` (+ ``stats.json``); returns stats."""
    source = Path(documents)
    if not source.is_file():
        raise FileNotFoundError(f"documents file {source} does not exist; run the corpus/dedup stage first")
    out = Path(out_dir)
    n_documents = 0
    heap: list[int] = []  # max-heap (negated) of the smallest keys seen
    for _ in read_texts(source):
        n_documents += 1
    if n_documents < 2:
        raise InputError(f"{source} has {n_documents} document(s); a held-out split needs at least 2")
    wanted = heldout_count(n_documents, spec)
    for text in read_texts(source):
        key = document_key(text, spec.seed)
        if len(heap) < wanted:
            heapq.heappush(heap, -key)
        elif key < -heap[0]:
            heapq.heapreplace(heap, -key)
    cutoff = -heap[0]  # the largest held-out key

    counts = {"train": 0, "heldout": 0, "train_chars": 0, "heldout_chars": 0}

    def part(heldout: bool):
        name = "heldout" if heldout else "train"
        for text in read_texts(source):
            if (document_key(text, spec.seed) <= cutoff) == heldout:
                counts[name] += 1
                counts[f"{name}_chars"] += len(text)
                yield text

    write_texts(out / HELDOUT_FILE, part(True))
    write_texts(out / TRAIN_FILE, part(False))
    stats = {"documents": n_documents, "train_documents": counts["train"], "heldout_documents": counts["heldout"],
             "train_chars": counts["train_chars"], "heldout_chars": counts["heldout_chars"],
             "heldout_share": round(counts["heldout"] / n_documents, 6), "seed": spec.seed}
    write_stats(out / STATS, stats)
    return stats


def is_heldout_free(train: Path, heldout: Path) -> bool:
    """True when no held-out document text appears in the training file (a leak check for tests/reports)."""
    held = {document_key(t, 0) for t in read_texts(heldout)}
    return not any(document_key(t, 0) in held for t in read_texts(train))


__all__ = ["split_corpus", "heldout_count", "document_key", "is_heldout_free"]
