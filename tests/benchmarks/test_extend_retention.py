"""benchmarks/extend_retention.py: extend a tiny SmolLM2-like decoder and measure English bits per byte and
target tokens per word before and after, through the stage registry and its store."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import extend_retention  # noqa: E402

TINY = ["--set", "fasttext.dim=16", "--set", "fasttext.epochs=2", "--set", "fasttext.min_count=2",
        "--set", "fasttext.threads=1", "--set", "tokenizer.threads=1", "--set", "cleaning.min_chars=10",
        "--set", "split.min_heldout_documents=100", "--set", "tokenizer.chars_per_vocab_entry=1"]


@pytest.fixture()
def tiny_case(tmp_path: Path) -> dict[str, Path]:
    from tests.tiny_decoders import save_tiny_smollm
    from tests.tiny_models import sample_texts

    # two pseudo-languages: the source's "English" (seed 1) and the target language (seed 2)
    english = sample_texts(600, seed=1)
    save_tiny_smollm(tmp_path / "source", english, vocab_size=400)
    (tmp_path / "corpus.txt").write_text("\n".join(sample_texts(1500, seed=2)), encoding="utf-8")
    rows = [f"{i}\tscience\t{text}" for i, text in enumerate(sample_texts(60, seed=11))]
    (tmp_path / "english.tsv").write_text("index_id\tcategory\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return {"root": tmp_path, "source": tmp_path / "source", "corpus": tmp_path / "corpus.txt",
            "english": tmp_path / "english.tsv"}


def run(case: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> tuple[str, dict]:
    from focusflow.logs import show_stage_lines

    args = ["--source", str(case["source"]), "--corpus", str(case["corpus"]), "--language", "sw",
            "--english", str(case["english"]), "--add", "30", "--vocab-size", "600",
            "--work-dir", str(case["root"] / "work"), *TINY]
    try:
        assert extend_retention.main(args) == 0
    finally:
        show_stage_lines(False)
    out = capsys.readouterr().out.strip().splitlines()
    return "\n".join(out[:-1]), json.loads(out[-1])


def test_extend_retention_reports_english_bpb_and_tokens_per_word_and_reruns_from_the_store(
        tiny_case, capsys, restore_output_policy) -> None:
    table, result = run(tiny_case, capsys)
    assert "English bits per byte" in table and "sw tokens per word" in table
    for key in ("source_english_bpb", "extended_english_bpb", "english_bpb_change_pct", "within_1pct",
                "source_tokens_per_word", "extended_tokens_per_word", "added", "seconds", "load"):
        assert key in result, key
    assert result["added"] == 30 == result["requested"]
    for key in ("source_english_bpb", "extended_english_bpb"):
        assert math.isfinite(result[key]) and result[key] > 0
    change = 100 * (result["extended_english_bpb"] - result["source_english_bpb"]) / result["source_english_bpb"]
    assert result["english_bpb_change_pct"] == pytest.approx(change, abs=1e-3)
    assert result["within_1pct"] == (result["english_bpb_change_pct"] <= 1.0)
    # the appended pieces only join source pieces: the target language gets shorter, never longer
    assert result["extended_tokens_per_word"] < result["source_tokens_per_word"]
    assert result["english_sentences"] == 60 and result["heldout_documents"] > 0
    assert len(result["load"]) == 2

    artifacts = sorted(p.parent for p in (tiny_case["root"] / "work" / "store").rglob("manifest.json"))
    again = run(tiny_case, capsys)[1]  # every stage from the store: same model, same numbers
    assert sorted(p.parent for p in (tiny_case["root"] / "work" / "store").rglob("manifest.json")) == artifacts
    assert again["extended_model"] == result["extended_model"]
    assert again["extended_english_bpb"] == result["extended_english_bpb"]


def test_read_sentences_takes_a_tsv_text_column_or_plain_lines(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text('index_id\tcategory\ttext\n1\tx\t"Quoted" words here.\n2\ty\t\n', encoding="utf-8")
    (tmp_path / "b.txt").write_text("One line here.\n\n  Two  \n", encoding="utf-8")
    assert extend_retention.read_sentences(tmp_path / "a.tsv") == ['"Quoted" words here.']
    assert extend_retention.read_sentences(tmp_path / "b.txt") == ["One line here.", "Two"]
