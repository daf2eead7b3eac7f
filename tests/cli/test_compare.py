"""``focusflow compare`` end to end on a tiny XLM-R-family source: the registry graph without Prefect."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from focusflow.cli import app
from focusflow.storage import ArtifactStore
from focusflow.storage.records import StageRecord
from tests.tiny_models import sample_texts, save_tiny

pytestmark = pytest.mark.slow  # tokenizer + fastText + initializations + align + evaluations: about a minute

CONTRACT = ["method", "stage", "fidelity", "retrieval_top1", "mlm_loss", "mlm_accuracy", "bits_per_byte", "vocab_size",
            "n_params", "tokens_per_word"]


def _compare(root, *extra: str):
    args = ["compare", "--corpus", str(root / "corpus.txt"), "--language", "sw", "--source", str(root / "source"),
            "--vocab-size", "300", "--heldout-sentences", "60", "--store", str(root / "store"),
            "--set", "fasttext.dim=16", "--set", "fasttext.epochs=2", "--set", "fasttext.min_count=2",
            "--set", "fasttext.threads=1", "--set", "tokenizer.threads=1", "--set", "cleaning.min_chars=10",
            "--set", "split.min_heldout_documents=100", "--set", "init.refine.steps=30", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    save_tiny("xlmr", root / "source", texts=sample_texts(600, seed=1), vocab_size=400)
    (root / "corpus.txt").write_text("\n".join(sample_texts(2500, seed=2)), encoding="utf-8")
    return root


def test_compare_writes_the_report_with_every_method_and_refinement(root):
    output = _compare(root, "--methods", "focus,random,focus+align", "--out", str(root / "out"))
    assert "## Method comparison" in output and "report: file://" in output
    frame = pd.read_csv(root / "out" / "comparison.csv")
    assert set(CONTRACT) <= set(frame.columns) and list(frame.columns[:2]) == ["method", "stage"]
    assert list(zip(frame["method"], frame["stage"], strict=True)) == [
        ("original", "init"), ("focus", "init"), ("random", "init"), ("focus", "align"), ("prune", "init"),
        ("prune+extend", "init")]
    rows = frame.set_index(["method", "stage"])
    assert rows.loc[("original", "init"), "fidelity"] == pytest.approx(1.0, abs=1e-5)
    # the floor beside the methods (init.candidates): the source's own vectors for the pieces the corpus uses
    assert rows.loc[("prune", "init"), "fidelity"] == pytest.approx(1.0, abs=1e-5)
    assert rows.loc[("prune", "init"), "vocab_size"] < rows.loc[("original", "init"), "vocab_size"]
    # the refinement trains towards the source's states: closer than the initialization it started from
    assert rows.loc[("focus", "align"), "fidelity"] > rows.loc[("focus", "init"), "fidelity"]
    # the fates of the initialization it refined are carried along
    assert rows.loc[("focus", "align"), "copied_share"] == rows.loc[("focus", "init"), "copied_share"] > 0
    assert (root / "out" / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_changed_align_settings_recompute_only_the_refinement(root):
    store = ArtifactStore(root / "store")
    _compare(root, "--methods", "focus,focus+align")
    before = {stage: {a.key for a in store.list(stage)} for stage in ("tokenizer", "fasttext", "init", "align")}
    _compare(root, "--methods", "focus,focus+align", "--set", "init.refine.steps=20")
    after = {stage: {a.key for a in store.list(stage)} for stage in before}
    assert {stage: after[stage] - before[stage] for stage in before} == {
        "tokenizer": set(), "fasttext": set(), "init": set(), "align": after["align"] - before["align"]}
    assert len(after["align"] - before["align"]) == 1


def test_compare_builds_the_vocabulary_its_configuration_names(root, tmp_path):
    """No option left at its default overrides the file: ``tokenizer.vocab_size`` and ``init.methods`` come from
    ``--config`` when neither --vocab-size nor --methods is typed."""
    config = tmp_path / "run.yaml"
    config.write_text("tokenizer: {vocab_size: 250}\ninit: {methods: [random], candidates: []}\n", encoding="utf-8")
    args = ["compare", "--config", str(config), "--corpus", str(root / "corpus.txt"), "--language", "sw",
            "--source", str(root / "source"), "--heldout-sentences", "60", "--store", str(tmp_path / "store"),
            "--set", "tokenizer.threads=1", "--set", "cleaning.min_chars=10", "--set", "split.min_heldout_documents=100",
            "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [tokenizer] = ArtifactStore(tmp_path / "store").list("tokenizer")
    assert StageRecord.of(tokenizer).shown()["vocab_size"] == 250
    frame = pd.read_csv(tmp_path / "out" / "comparison.csv").set_index(["method", "stage"])
    assert list(frame.index) == [("original", "init"), ("random", "init")]
    assert frame.loc[("random", "init"), "vocab_size"] == 250
