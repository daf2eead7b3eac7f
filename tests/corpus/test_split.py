"""Held-out split: deterministic by document hash, fraction with a capped floor, no leakage."""

from __future__ import annotations

import json
from pathlib import Path

from focusflow.config import SplitSpec
from focusflow.corpus import split_corpus
from focusflow.corpus.io import read_texts, write_texts
from focusflow.corpus.split import SplitOutput, document_key, heldout_count


def test_heldout_count_fraction_floor_and_cap():
    spec = SplitSpec()  # 1%, floor 200, floor capped at 20% of the corpus
    assert heldout_count(1_000_000, spec) == 10_000
    assert heldout_count(5_000, spec) == 200
    assert heldout_count(500, spec) == 100
    assert heldout_count(3, spec) == 1
    assert heldout_count(10_000, SplitSpec(heldout_fraction=0.05, min_heldout_documents=10)) == 500


def test_split_is_deterministic_exact_and_leak_free(tmp_path: Path):
    docs = [f"hati nambari {i} yenye maandishi" for i in range(3000)]
    write_texts(tmp_path / "docs.jsonl", docs)
    stats = split_corpus(tmp_path / "docs.jsonl", SplitSpec(), tmp_path / "a")
    written = SplitOutput(tmp_path / "a")  # the layout its readers are given
    train, heldout = list(read_texts(written.train)), list(read_texts(written.heldout))
    assert stats["heldout_documents"] == len(heldout) == 200 and len(train) == 2800
    assert not set(train) & set(heldout) and sorted(train + heldout) == sorted(docs)
    assert [d for d in docs if d in set(train)] == train  # corpus order kept
    # exactly the documents with the smallest keys
    assert set(heldout) == set(sorted(docs, key=lambda d: document_key(d, 0))[:200])
    # same input and seed → same files; a document's fate does not depend on its position
    write_texts(tmp_path / "shuffled.jsonl", docs[::-1])
    split_corpus(tmp_path / "shuffled.jsonl", SplitSpec(), tmp_path / "b")
    assert set(read_texts(tmp_path / "b" / "heldout.jsonl")) == set(heldout)
    other = split_corpus(tmp_path / "docs.jsonl", SplitSpec(seed=1), tmp_path / "c")
    assert set(read_texts(tmp_path / "c" / "heldout.jsonl")) != set(heldout) and other["heldout_documents"] == 200
    assert json.loads((tmp_path / "a" / "stats.json").read_text())["train_documents"] == 2800
