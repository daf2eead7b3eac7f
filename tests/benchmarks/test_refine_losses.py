"""benchmarks/refine_losses.py: every loss refines the same base in one store, and the table reads their records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from focusflow.corpus.io import write_texts
from tests.tiny_models import sample_texts, save_tiny

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import refine_losses  # noqa: E402


@pytest.mark.slow  # a whole comparison per loss on a tiny decoder: ~15 s
def test_each_loss_refines_the_base_and_its_row_shows_its_record(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    write_texts(tmp_path / "corpus.jsonl", sample_texts(1500, seed=1))
    save_tiny("llama", tmp_path / "source")
    config = {"language": "ny", "store": (tmp_path / "store").as_uri(), "source_model": str(tmp_path / "source"),
              "corpus": {"source": "local", "paths": [str(tmp_path / "corpus.jsonl")]},
              "cleaning": {"min_chars": 10, "min_words": 3}, "split": {"min_heldout_documents": 40},
              "tokenizer": {"vocab_size": 400, "chars_per_vocab_entry": 100, "threads": 1},
              "fasttext": {"dim": 16, "epochs": 2, "min_count": 1, "threads": 1},
              "init": {"refine": {"batch_tokens": 256, "eval_every": 2, "checkpoint_every": 2}},
              "evaluation": {"heldout_sentences": 20}, "dedup": {"decontaminate": False}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")

    assert refine_losses.main(["--config", str(tmp_path / "run.yaml"), "--losses", "mse,kl", "--steps", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    rows = [line for line in printed if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| source", "| fvt", "| fvt+align (loss mse)",
                                                     "| fvt+align (loss kl)"]
    assert all(row.split(" | ")[7] == "2" for row in rows[2:])  # each refinement's own record: its two steps
    result = json.loads(printed[-1])
    assert set(result) == {"base", "base_bits_per_byte", "steps", "mse", "kl"} and result["steps"] == 2
