"""The run's product: the fewest tokens per word among the candidates at parity with the source on dev."""

from __future__ import annotations

import pandas as pd

from focusflow.pipeline.product import Candidate, add_verdicts, candidates_markdown, choose_product

TASK = "cls:sib200:sw"


def _runs(dev: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": model, "task": TASK, "seed": seed, "main": True, "dev": value, "value": value}
                         for model, values in dev.items() for seed, value in enumerate(values, start=1)])


def test_the_fewest_tokens_per_word_at_parity_on_dev_is_the_product():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.595, 0.618, 0.606, 0.626),
                  "prune": (0.60, 0.621, 0.611, 0.629)})
    candidates = [add_verdicts(Candidate("focus+lapt", 26_300_000, 2.00), runs, [TASK]),
                  add_verdicts(Candidate("prune", 27_200_000, 2.93), runs, [TASK])]
    product = choose_product(candidates, "focus+lapt")
    assert product.name == "focus+lapt" and product.measured and "fewest tokens per word (2.00)" in product.reason
    table = candidates_markdown(candidates, product, {"n_params": 117_900_000, "tokens_per_word": 2.89})
    assert table.startswith("**Product: focus+lapt**") and "| original | 117.9M | 2.89 |" in table
    assert table.index("**focus+lapt**") < table.index("| prune |")


def test_below_parity_the_floor_is_the_product_and_the_reason_says_why():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.40, 0.43, 0.41, 0.42),
                  "prune": (0.60, 0.621, 0.611, 0.629)})
    candidates = [add_verdicts(Candidate("focus+lapt", tokens_per_word=2.0), runs, [TASK]),
                  add_verdicts(Candidate("prune", tokens_per_word=2.93), runs, [TASK])]
    assert choose_product(candidates, "focus+lapt").name == "prune"
    nobody = _runs({"original": (0.60, 0.62, 0.61, 0.63), "focus+lapt": (0.40, 0.43, 0.41, 0.42),
                    "prune": (0.50, 0.52, 0.51, 0.53)})
    candidates = [add_verdicts(Candidate(name, tokens_per_word=2.0), nobody, [TASK]) for name in ("focus+lapt", "prune")]
    product = choose_product(candidates, "focus+lapt")
    assert product.name == "prune" and "no candidate reached parity" in product.reason and "came closest" in product.reason


def test_the_test_score_never_picks():
    runs = _runs({"original": (0.60, 0.62, 0.61, 0.63), "a": (0.60, 0.62, 0.61, 0.63)})
    runs.loc[runs["model"] == "a", "value"] = 0.1  # a catastrophic test score: reported, not used to pick
    candidate = add_verdicts(Candidate("a", tokens_per_word=2.0), runs, [TASK])
    assert candidate.at_parity_on_dev and candidate.test_verdicts[TASK].parity is False


def test_without_downstream_results_the_configured_model_is_the_product_unmeasured():
    product = choose_product([Candidate("focus+lapt")], "focus+lapt")
    assert product.name == "focus+lapt" and not product.measured and "not measured" in product.reason
