"""Task metrics: seqeval entity F1 (NER), accuracy (NLI), accuracy and macro-F1 (classification),
SQuAD v1.1 F1/EM (QA).

All scores are fractions in [0, 1] (reports multiply by 100 for display).

The SQuAD functions follow the official v1.1 evaluation script (``evaluate-v1.1.py``) exactly for text written
with spaces: lower-case, drop ASCII punctuation, drop the English articles a/an/the, collapse whitespace; F1 over the
bag of whitespace tokens; the maximum over the gold answers; the mean over questions. TyDiQA GoldP is scored with the
same script by its authors. Text of a script written without spaces (Chinese, Japanese, Thai, Khmer …) is cut into
its characters, as MLQA's script does for Chinese ("mixed segmentation"), its punctuation left out: a whole sentence
would otherwise be one token, and F1 no more than exact match.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def ner_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro precision/recall/F1 by seqeval (default CoNLL-eval mode)."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    for number, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {number}: {len(g)} gold tags but {len(p)} predicted")
    gold_lists, predicted_lists = [list(g) for g in gold], [list(p) for p in predicted]
    return {
        "f1": float(f1_score(gold_lists, predicted_lists, zero_division=0)),
        "precision": float(precision_score(gold_lists, predicted_lists, zero_division=0)),
        "recall": float(recall_score(gold_lists, predicted_lists, zero_division=0)),
    }


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, float]:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predicted")
    if not gold:
        raise ValueError("accuracy of an empty set is undefined")
    return {"accuracy": sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)}


def classification_scores(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, float]:
    """Accuracy and macro-F1: the unweighted mean of per-class F1 over the classes in gold or predicted
    (``sklearn.metrics.f1_score(average="macro")``; a class never predicted scores 0)."""
    scores = accuracy(gold, predicted)
    f1s = []
    for label in sorted(set(gold) | set(predicted)):
        true_positive = sum(g == p == label for g, p in zip(gold, predicted, strict=True))
        gold_count, predicted_count = sum(g == label for g in gold), sum(p == label for p in predicted)
        denominator = gold_count + predicted_count
        f1s.append(2 * true_positive / denominator if denominator else 0.0)
    return scores | {"macro_f1": sum(f1s) / len(f1s)}


def normalize_answer(text: str) -> str:
    """SQuAD v1.1: lower case, remove punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """The normalized answer's whitespace tokens, a token of a script written without spaces cut into its characters
    (with their marks) and their punctuation left out (MLQA's mixed segmentation)."""
    from focusflow.languages import UNSPACED, words

    normalized = normalize_answer(text)
    if not UNSPACED.search(normalized):
        return normalized.split()
    units = words(normalized, letters_per_word=1)
    return [unit for unit in units if not all(unicodedata.category(char).startswith("P") for char in unit)]


def squad_f1(prediction: str, truth: str) -> float:
    predicted_tokens = answer_tokens(prediction)
    truth_tokens = answer_tokens(truth)
    common = Counter(predicted_tokens) & Counter(truth_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted_tokens)
    recall = overlap / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_exact(prediction: str, truth: str) -> float:
    """The normalized answers are the same: the same tokens in the same order (for text written with spaces, the
    official script's string equality)."""
    return float(answer_tokens(prediction) == answer_tokens(truth))


def squad_scores(gold: Mapping[str, Sequence[str]], predicted: Mapping[str, str]) -> dict[str, float]:
    """Mean over gold questions of the max F1/EM against any gold answer; a question without a
    prediction scores 0 (as in the official script, which warns and counts it)."""
    if not gold:
        raise ValueError("no gold questions to score")
    f1 = exact = 0.0
    for question_id, truths in gold.items():
        if not truths:
            raise ValueError(f"question {question_id!r} has no gold answer")
        prediction = predicted.get(question_id)
        if prediction is None:
            continue
        f1 += max(squad_f1(prediction, truth) for truth in truths)
        exact += max(squad_exact(prediction, truth) for truth in truths)
    return {"f1": f1 / len(gold), "exact_match": exact / len(gold)}
