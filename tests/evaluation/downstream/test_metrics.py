"""Metric code checked on hand-made predictions: perfect = 1, empty = 0, and hand-computed partial cases."""

from __future__ import annotations

import pytest

from focusflow.evaluation.downstream.metrics import accuracy, ner_scores, normalize_answer, squad_scores

GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG", "O", "B-DATE"]]  # 4 entities


def test_ner_perfect_prediction_scores_one():
    assert ner_scores(GOLD, GOLD) == {"f1": 1.0, "precision": 1.0, "recall": 1.0}


def test_ner_empty_prediction_scores_zero():
    empty = [["O"] * len(s) for s in GOLD]
    assert ner_scores(GOLD, empty) == {"f1": 0.0, "precision": 0.0, "recall": 0.0}


def test_ner_partial_prediction_matches_hand_computation():
    # PER correct, LOC correct, ORG span truncated (wrong), DATE missed, one spurious PER: 2 TP, 2 FP, 2 FN.
    predicted = [["B-PER", "I-PER", "B-PER", "B-LOC"], ["O", "B-ORG", "O", "O", "O"]]
    scores = ner_scores(GOLD, predicted)
    precision, recall = 2 / 4, 2 / 4
    assert scores["precision"] == pytest.approx(precision)
    assert scores["recall"] == pytest.approx(recall)
    assert scores["f1"] == pytest.approx(2 * precision * recall / (precision + recall))


def test_ner_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="sentence 1"):
        ner_scores(GOLD, [GOLD[0], GOLD[1][:-1]])


def test_accuracy_perfect_empty_partial():
    gold = ["entailment", "neutral", "contradiction", "neutral"]
    assert accuracy(gold, gold)["accuracy"] == 1.0
    assert accuracy(gold, ["x"] * 4)["accuracy"] == 0.0
    assert accuracy(gold, ["entailment", "neutral", "neutral", "entailment"])["accuracy"] == 0.5


def test_squad_normalization_is_the_official_v1_1_one():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("«Dar es Salaam»") == "«dar es salaam»"  # only ASCII punctuation is removed


def test_text_without_spaces_is_scored_character_by_character():
    """A Chinese or Thai answer was one whitespace token: F1 was exact match (是中国 against 中国 scored 0). Its
    characters are the tokens (MLQA's mixed segmentation), its punctuation left out; spaced text scores as the
    official script does."""
    from focusflow.evaluation.downstream.metrics import answer_tokens, squad_exact, squad_f1

    assert squad_f1("是中国", "中国") == pytest.approx(0.8) and squad_exact("東京。", "東京") == 1.0
    assert 0.8 < squad_f1("กรุงเทพมหานครเป็น", "กรุงเทพมหานคร") < 1.0
    assert answer_tokens("Bei 12 東京OK") == ["bei", "12", "東", "京", "ok"]
    assert squad_exact("Dar, es Salaam", "dar es salaam") == 1.0 and squad_f1("the cat", "a dog") == 0.0
    assert squad_exact("«Dar»", "Dar") == 0.0, "spaced text: the official script's ASCII punctuation only"


def test_squad_perfect_empty_partial():
    gold = {"q1": ["Dar es Salaam"], "q2": ["the cat sat on the mat", "a dog"]}
    assert squad_scores(gold, {"q1": "dar es salaam.", "q2": "A dog"}) == {"f1": 1.0, "exact_match": 1.0}
    assert squad_scores(gold, {}) == {"f1": 0.0, "exact_match": 0.0}
    assert squad_scores(gold, {"q1": "", "q2": ""}) == {"f1": 0.0, "exact_match": 0.0}
    # q1: "es" vs "dar es salaam" → P 1, R 1/3, F1 0.5; q2: "cat sat" vs "cat sat on mat" → P 1, R 1/2, F1 2/3
    scores = squad_scores(gold, {"q1": "es", "q2": "The cat sat"})
    assert scores["f1"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert scores["exact_match"] == 0.0


def test_squad_takes_the_best_gold_answer():
    gold = {"q": ["Nairobi city", "Nairobi"]}
    assert squad_scores(gold, {"q": "Nairobi"}) == {"f1": 1.0, "exact_match": 1.0}
