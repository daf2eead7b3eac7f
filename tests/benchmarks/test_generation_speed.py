"""benchmarks/generation_speed.py: one JSON line comparing greedy generation of a source and a specialized decoder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import generation_speed  # noqa: E402


def test_generation_speed_prints_bytes_per_second_for_both_models(tmp_path, capsys) -> None:
    from focusflow.corpus.io import write_texts
    from focusflow.embeddings import initialize_model
    from tests.tiny_models import sample_texts, save_tiny, train_tokenizer

    texts = sample_texts(300, seed=2)
    source = save_tiny("llama", tmp_path / "source", texts)
    write_texts(tmp_path / "train.jsonl", texts)
    target = train_tokenizer("llama", texts, vocab_size=300)
    target.save_pretrained(tmp_path / "target_tok")
    initialize_model(source, tmp_path / "target_tok", tmp_path / "model", "fvt")
    (tmp_path / "prompts.txt").write_text("\n".join(texts[:3]) + "\n", encoding="utf-8")

    assert generation_speed.main(["--source", str(source), "--model", str(tmp_path / "model"), "--texts",
                                  str(tmp_path / "prompts.txt"), "--prompts", "3", "--new-tokens", "6"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert result["prompts"] == 3 and result["new_tokens"] == 6
    for side in ("source", "model"):
        assert result[f"{side}_bytes_per_s"] > 0
        assert result[f"{side}_bytes_per_token"] > 0
    assert abs(result["ratio"] - result["model_bytes_per_s"] / result["source_bytes_per_s"]) < 0.01
    assert result["model_vocab"] == len(target)
