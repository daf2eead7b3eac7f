"""Evaluation text never reaches the training corpus."""

from __future__ import annotations

import pytest

from focusflow.corpus.decontaminate import build_index, decontaminate, is_contaminated, normalize_for_matching
from focusflow.corpus.io import read_texts, write_texts

TEST_SENTENCE = "Rais Jakaya Kikwete amesema serikali itaendelea kuboresha huduma za afya vijijini mwaka huu ."


def test_normalization_ignores_case_spacing_and_punctuation():
    assert normalize_for_matching("Kikwete , amesema: HUDUMA!") == normalize_for_matching("kikwete amesema huduma")
    import unicodedata

    yoruba = "Ọjọ́ àìkú ni wọ́n dé"  # evaluation text written decomposed still matches the (composed) corpus
    assert normalize_for_matching(unicodedata.normalize("NFD", yoruba)) == normalize_for_matching(
        unicodedata.normalize("NFC", yoruba))


def test_lines_overlapping_evaluation_text_are_removed(tmp_path):
    documents = [
        "Habari za leo.\nRais Jakaya Kikwete, amesema serikali itaendelea kuboresha huduma za afya vijijini.\nAsante.",
        "Hati hii haihusiani na tathmini hata kidogo na inapaswa kubaki kama ilivyo kabisa.",
        "RAIS JAKAYA KIKWETE AMESEMA SERIKALI ITAENDELEA KUBORESHA HUDUMA ZA AFYA VIJIJINI MWAKA HUU",
    ]
    write_texts(tmp_path / "in.jsonl", documents)
    stats = decontaminate(tmp_path / "in.jsonl", [TEST_SENTENCE], tmp_path / "out", window=40, stride=20)
    kept = list(read_texts(tmp_path / "out" / "documents.jsonl"))
    assert kept == ["Habari za leo.\nAsante.", documents[1]]
    assert stats["lines_removed"] == 2 and stats["documents_emptied"] == 1 and stats["documents_out"] == 2


def test_a_shared_run_of_window_plus_stride_characters_is_always_found():
    evaluation = "abcdefghijklmnopqrstuvwxyz0123456789" * 3
    index = build_index([evaluation], window=20)
    for offset in range(0, 40):
        shared = evaluation[offset:offset + 20 + 10 - 1]
        assert is_contaminated("zz" * 7 + shared + "qq" * 9, index, stride=10), offset


def test_short_evaluation_sentences_match_whole_lines():
    index = build_index(["Asante sana, rafiki!", "Ndiyo."], window=50)
    assert is_contaminated("asante sana rafiki", index, stride=25)
    assert not is_contaminated("Asante sana rafiki yangu mpendwa", index, stride=25)
    assert not is_contaminated("ndiyo", index, stride=25), "too short to be evidence"


def test_distinct_text_is_kept(tmp_path):
    write_texts(tmp_path / "in.jsonl",
                ["Mvua kubwa imenyesha jijini Dar es Salaam usiku wa kuamkia leo na kusababisha mafuriko."])
    stats = decontaminate(tmp_path / "in.jsonl", [TEST_SENTENCE], tmp_path / "out", window=40, stride=20)
    assert stats["lines_removed"] == 0 and stats["documents_out"] == 1


def test_bad_window_is_refused(tmp_path):
    with pytest.raises(ValueError, match="window"):
        decontaminate(tmp_path / "in.jsonl", [], tmp_path / "out", window=5)


def test_shared_swahili_corpus_loses_masakhaner_test_sentences(shared_data, tmp_path):
    """The shared sw.txt contains MasakhaNER test sentences verbatim; afterwards none of them remain."""
    from focusflow.evaluation.downstream.texts import evaluation_texts

    lines = (shared_data / "text" / "sw.txt").read_text(encoding="utf-8").splitlines()[:8000]
    write_texts(tmp_path / "in.jsonl", lines)
    tests = list(evaluation_texts(["ner:masakhaner2:swa"], shared_data, splits=("test",)))
    stats = decontaminate(tmp_path / "in.jsonl", tests, tmp_path / "out", window=50, stride=25)
    assert stats["lines_removed"] > 50, stats
    corpus = normalize_for_matching(" ".join(read_texts(tmp_path / "out" / "documents.jsonl")))
    long_tests = [normalize_for_matching(t) for t in tests if len(normalize_for_matching(t)) >= 80]
    assert long_tests and not [t for t in long_tests if t in corpus]
