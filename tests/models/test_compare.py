"""compare_methods end to end on a tiny XLM-R-family source and a pseudo-language corpus."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from focusflow.config import FastTextSpec, TokenizerSpec
from focusflow.evaluation.compare import CSV_COLUMNS, compare_methods, markdown_table
from tests.tiny_models import sample_texts, save_tiny

CONTRACT = ["method", "fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte", "vocab_size",
            "n_params", "tokens_per_word"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    source = save_tiny("xlmr", root / "source", texts=sample_texts(600, seed=1), vocab_size=400)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(sample_texts(2500, seed=2)), encoding="utf-8")
    result = compare_methods(str(source), corpus, "xx", root / "out", methods=["focus", "random", "mean"],
                             tokenizer_spec=TokenizerSpec(vocab_size=300, threads=1),
                             fasttext_spec=FastTextSpec(dim=16, epochs=2, min_count=2, threads=1),
                             heldout_sentences=60, max_length=64)
    return root, result


@pytest.mark.slow  # tokenizer + fastText + three initializations + four evaluations: ~30 s quiet, 100 s shared
def test_comparison_files_and_contract(tiny_run):
    root, result = tiny_run
    out = root / "out"
    frame = pd.read_csv(out / "comparison.csv")
    assert list(frame.columns[: len(CONTRACT)]) == CONTRACT and set(CSV_COLUMNS) <= set(frame.columns)
    assert list(frame["method"]) == ["original", "focus", "random", "mean"]
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| focus |" in (out / "comparison.md").read_text()
    assert json.loads((out / "comparison.json").read_text())[0]["method"] == "original"
    original = frame.iloc[0]
    # the source against itself: identical embeddings, every sentence retrieves itself
    assert original["fidelity"] == pytest.approx(1.0, abs=1e-5) and original["retrieval_top1"] == 1.0
    assert original["vocab_size"] == 401 and (frame["vocab_size"].iloc[1:] == 300).all()  # 400 pieces + <mask>
    assert (frame["n_sentences"] == frame["n_sentences"].iloc[0]).all() and frame["n_sentences"].iloc[0] >= 50
    initialized = frame.iloc[1:]
    assert initialized["n_scored"].nunique() == 1  # same tokenizer, same fixed masks for every method
    assert (initialized["tokens_per_word"] == initialized["tokens_per_word"].iloc[0]).all()
    assert initialized["fidelity"].between(-1, 1).all() and initialized["retrieval_top1"].between(0, 1).all()
    assert (frame["bits_per_byte"] > 0).all() and (frame["mlm_loss"] > 0).all()
    assert frame.set_index("method").loc["random", "random"] > 0 or frame.set_index("method").loc["random", "copied"] > 0


@pytest.mark.slow
def test_rerun_reuses_stages(tiny_run):
    root, result = tiny_run
    marker = root / "out" / "work" / "tokenizer" / "_focusflow_stage.json"
    before = marker.stat().st_mtime_ns
    again = compare_methods(result["source"], root / "corpus.txt", "xx", root / "out", methods=["focus"],
                            tokenizer_spec=TokenizerSpec(vocab_size=300, threads=1),
                            fasttext_spec=FastTextSpec(dim=16, epochs=2, min_count=2, threads=1),
                            heldout_sentences=60, max_length=64)
    assert marker.stat().st_mtime_ns == before
    first = {r["method"]: r for r in result["rows"]}
    second = {r["method"]: r for r in again["rows"]}
    assert second["focus"]["mlm_loss"] == pytest.approx(first["focus"]["mlm_loss"])
    assert second["focus"]["fidelity"] == pytest.approx(first["focus"]["fidelity"])


def test_bad_inputs_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="one document per line"):
        compare_methods("x", tmp_path / "missing.txt", "xx", tmp_path / "out")
    (tmp_path / "c.txt").write_text("a b c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown method"):
        compare_methods("x", tmp_path / "c.txt", "xx", tmp_path / "out", methods=["magic"])


def test_markdown_table_formats_numbers():
    table = markdown_table(pd.DataFrame([{"method": "focus", "fidelity": 0.91234, "n_params": 117_000_000,
                                          "vocab_size": 300, "mlm_loss": None}]))
    assert "| focus | 0.912 | – | 300 | 117.0M |" in table
