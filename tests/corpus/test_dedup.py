"""Deduplication: exact and near duplicates at document and line level, checked against exact Jaccard values."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from focusflow.config import DedupSpec
from focusflow.corpus import deduplicate
from focusflow.corpus.dedup import lsh_parameters
from focusflow.corpus.io import read_texts, write_texts
from focusflow.corpus.minhash import exact_hash, jaccard, shingle_hashes, signatures


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    syllables = ["ka", "ta", "na", "ma", "wa", "ki", "ni", "mu", "la", "sa", "ya", "zi", "ku", "po", "ha", "re"]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(size)]


def _edit(text: str, rng: random.Random, share: float, vocabulary: list[str]) -> str:
    words = text.split()
    for index in rng.sample(range(len(words)), max(1, round(share * len(words)))):
        words[index] = rng.choice(vocabulary)
    return " ".join(words)


# --------------------------------------------------------------------------- MinHash internals

def test_shingles_and_jaccard_by_hand():
    # 7 words, 5-word shingles: 3 shingles each; one changed last word changes 1 shingle → J = 2/4
    a = "one two three four five six seven"
    b = "one two three four five six eight"
    assert jaccard(a, b) == pytest.approx(2 / 4)
    assert jaccard("Hello, World!", "hello world") == 1.0  # case and ASCII punctuation do not count
    hashes, doc = shingle_hashes(["a b", "a b c d e f", ""], size=5)
    assert doc.tolist() == [0, 1, 1]  # a short text is one shingle; an empty one has none
    chars, _ = shingle_hashes(["abcdef"], shingles="char", size=3)
    assert chars.size == 4
    # a script written without spaces has word shingles too: one changed character is a near duplicate, not distinct
    chinese = "我们今天去北京大学看书然后回家吃饭晚上和朋友一起学习中文"
    assert jaccard(chinese, chinese[:-1] + "语") > 0.85


def test_signature_estimates_jaccard_without_bias():
    rng = random.Random(0)
    vocabulary = _vocabulary(rng)
    errors = []
    for _ in range(200):
        a = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 300)))
        b = _edit(a, rng, rng.choice([0.02, 0.05, 0.1, 0.3]), vocabulary)
        sig = signatures([a, b], num_perm=128)
        errors.append((sig[0] == sig[1]).mean() - jaccard(a, b))
    errors = np.asarray(errors)
    assert abs(errors.mean()) < 0.01  # unbiased
    assert errors.std() < 0.06  # ≈ sqrt(J(1-J)/128), also for short texts (densified bins)


def test_lsh_parameters_favour_recall_at_the_threshold():
    for threshold in (0.5, 0.7, 0.8, 0.9):
        bands, rows = lsh_parameters(threshold, 128)
        assert bands * rows <= 128

        def collision(j: float, rows: int = rows, bands: int = bands) -> float:
            return 1 - (1 - j ** rows) ** bands

        assert collision(threshold) > 0.8 and collision(min(1.0, threshold + 0.05)) > 0.95
        assert collision(threshold - 0.4) < 0.1  # dissimilar pairs rarely become candidates


# --------------------------------------------------------------------------- constructed corpus

def test_near_duplicates_found_and_no_false_positives_on_distinct_documents(tmp_path: Path):
    rng = random.Random(1)
    vocabulary = _vocabulary(rng)
    shared_sentence = " ".join(rng.choice(vocabulary) for _ in range(12))
    distinct = []
    for i in range(400):  # distinct documents that share vocabulary, and some a whole sentence
        words = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(100, 250)))
        distinct.append(words + (" " + shared_sentence if i % 4 == 0 else ""))
    near = [_edit(distinct[i], rng, 0.01, vocabulary) for i in range(0, 100, 2)]
    exact = [distinct[i].upper() for i in range(1, 60, 3)]  # same text up to case: an exact (normalized) duplicate
    corpus = distinct + near + exact
    order = list(range(len(corpus)))
    write_texts(tmp_path / "docs.jsonl", [corpus[i] for i in order])

    stats = deduplicate(tmp_path / "docs.jsonl", DedupSpec(threshold=0.8, workers=1), tmp_path / "out")
    kept = list(read_texts(tmp_path / "out" / "documents.jsonl"))
    assert kept == distinct  # every copy removed, every distinct document (and the first of each group) kept
    assert stats["document"]["exact_duplicates"] == len(exact)
    assert stats["document"]["near_duplicates"] == len(near)
    true_similarity = [jaccard(distinct[i], near[i // 2]) for i in range(0, 100, 2)]
    assert min(true_similarity) >= 0.85  # the injected copies really are above the threshold
    assert max(jaccard(distinct[0], distinct[i]) for i in range(4, 400, 4)) < 0.2


def test_line_level_removes_repeated_lines_and_keeps_short_ones(tmp_path: Path):
    boiler = "Tafadhali jiandikishe kupokea habari zetu kila siku bure kabisa."
    docs = [f"Habari nambari {i} kuhusu mambo ya kawaida ya mji wetu leo.\n{boiler}\nAsante." for i in range(5)]
    docs.append(f"{boiler}\nAsante.")
    write_texts(tmp_path / "d.jsonl", docs)
    stats = deduplicate(tmp_path / "d.jsonl", DedupSpec(level="line", workers=1), tmp_path / "out")
    kept = list(read_texts(tmp_path / "out" / "documents.jsonl"))
    assert kept[0] == docs[0]  # first occurrence of the boilerplate line stays
    assert all(boiler not in k for k in kept[1:])
    assert all(k.endswith("Asante.") for k in kept)  # shorter than min_line_chars: never removed
    assert stats["line"]["exact_duplicates"] == 5 and stats["line"]["documents_emptied"] == 0
    assert len(kept) == 6 and kept[5] == "Asante."


def test_parallel_workers_give_the_same_result(tmp_path: Path, monkeypatch):
    import focusflow.corpus.dedup as dedup

    rng = random.Random(2)
    vocabulary = _vocabulary(rng)
    base = [" ".join(rng.choice(vocabulary) for _ in range(80)) for _ in range(300)]
    docs = base + [_edit(t, rng, 0.01, vocabulary) for t in base[:50]] + base[50:80]
    rng.shuffle(docs)
    write_texts(tmp_path / "d.jsonl", docs)
    monkeypatch.setattr(dedup, "SHARD_BYTES", 40_000)  # several shards
    one = deduplicate(tmp_path / "d.jsonl", DedupSpec(workers=1), tmp_path / "one")
    two = deduplicate(tmp_path / "d.jsonl", DedupSpec(workers=2), tmp_path / "two")
    assert (tmp_path / "one" / "documents.jsonl").read_bytes() == (tmp_path / "two" / "documents.jsonl").read_bytes()
    assert one["documents_out"] == two["documents_out"] == 300


# --------------------------------------------------------------------------- real data

def _paragraphs(lines: list[str], size: int = 8) -> list[str]:
    return [" ".join(lines[i:i + size]) for i in range(0, len(lines) - size + 1, size)]


def test_swahili_corpus_exact_duplicates_all_removed_and_injected_edits_found(shared_data: Path, tmp_path: Path):
    lines = [line.strip() for line in (shared_data / "text" / "sw.txt").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    # 1) sw.txt as it is (one document per line; it repeats lines across its overlapping sources)
    write_texts(tmp_path / "sw.jsonl", lines)
    stats = deduplicate(tmp_path / "sw.jsonl", DedupSpec(workers=1), tmp_path / "sw")
    kept = list(read_texts(tmp_path / "sw" / "documents.jsonl"))
    hashes = [exact_hash(t) for t in kept]
    assert len(set(hashes)) == len(hashes)  # no exact (normalized) duplicate survives
    assert set(hashes) <= {exact_hash(t) for t in lines}
    n_unique = len({exact_hash(t) for t in lines})
    assert stats["document"]["exact_duplicates"] == len(lines) - n_unique > 0
    assert len(kept) == n_unique - stats["document"]["near_duplicates"]

    # 2) injected near duplicates: edited copies of long documents (2% of words replaced, a sentence changed)
    rng = random.Random(0)
    unique_lines = list(dict.fromkeys(kept))
    documents = _paragraphs(unique_lines)
    vocabulary = sorted({w for t in unique_lines[:2000] for w in t.split()})
    picked = rng.sample(range(len(documents)), 60)
    copies = []
    for i in picked:
        edited = _edit(documents[i], rng, 0.02, vocabulary)
        copies.append(edited + " " + rng.choice(unique_lines))  # plus a sentence from elsewhere
    similarity = np.array([jaccard(documents[i], c) for i, c in zip(picked, copies, strict=False)])
    write_texts(tmp_path / "inj.jsonl", documents + copies)
    threshold = 0.6
    deduplicate(tmp_path / "inj.jsonl", DedupSpec(threshold=threshold, workers=1), tmp_path / "inj")
    out = set(read_texts(tmp_path / "inj" / "documents.jsonl"))
    found = np.array([c not in out for c in copies])
    # MinHash estimates J with σ ≈ 0.04 (128 values), so the boundary itself is fuzzy: demand all copies a
    # margin above it, and nearly all of those just above it
    assert (similarity >= threshold + 0.1).sum() >= 40
    assert found[similarity >= threshold + 0.1].mean() >= 0.95
    assert found[similarity >= threshold + 0.15].all()
    assert all(d in out for d in documents)  # no distinct document removed


def test_a_letter_inserted_into_text_without_spaces_is_still_a_near_duplicate():
    thai = "วันนี้อากาศดีมากครับเราจะไปโรงเรียนกันแล้วกลับบ้านกินข้าวเย็นกับครอบครัว"
    assert jaccard(thai, "ก" + thai) > 0.85, "shingles of letters: one inserted letter shifts no boundary"
