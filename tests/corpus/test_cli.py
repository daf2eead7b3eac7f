"""The corpus → dedup → split → tokenizer → tokenizer-stats commands, chained as a user would."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from focusflow.cli import app
from tests.tiny_models import sample_texts


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout  # stderr has the stage lines


def test_cli_chain(tmp_path: Path):
    texts = sample_texts(3000, seed=3)
    (tmp_path / "raw.txt").write_text("\n".join(texts + texts[:100]) + "\n", encoding="utf-8")
    corpus = json.loads(_run("corpus", "--source", "local", "--path", str(tmp_path / "raw.txt"), "--language", "sw",
                             "--out", str(tmp_path / "c"), "--set", "cleaning.min_chars=10"))
    assert corpus["documents"] == corpus["cleaning"]["documents_kept"] > 2000
    dedup = json.loads(_run("dedup", str(tmp_path / "c"), "--out", str(tmp_path / "d"), "--workers", "1"))
    assert dedup["document"]["exact_duplicates"] >= 100
    split = json.loads(_run("split", str(tmp_path / "d"), "--out", str(tmp_path / "s")))
    assert split["heldout_documents"] == 200
    tok = json.loads(_run("tokenizer", "--corpus", str(tmp_path / "s"), "--out", str(tmp_path / "t"),
                          "--vocab-size", "auto"))
    assert tok["vocab_size"] == tok["supported_vocab_size"] and "heldout" in tok  # held-out found beside train
    table = _run("tokenizer-stats", "--tokenizer", str(tmp_path / "t"), "--texts", str(tmp_path / "s"))
    assert "| tokens_per_word |" in table


def test_cli_errors_are_one_line(tmp_path: Path):
    result = CliRunner().invoke(app, ["corpus", "--source", "oscar", "--language", "ny", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "oscar has no language 'ny'" in result.output
    (tmp_path / "train.jsonl").write_text('{"text": "kidogo sana"}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["tokenizer", "--corpus", str(tmp_path), "--out", str(tmp_path / "t"),
                                      "--vocab-size", "50000"])
    assert result.exit_code == 2 and "tokenizer.vocab_size=" in result.output
