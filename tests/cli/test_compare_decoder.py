"""``focusflow compare`` on a decoder source of Gemma's family (tiny Gemma3ForCausalLM, Gemma-like tokenizer)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from focusflow.cli import app
from tests.tiny_decoders import save_tiny_gemma
from tests.tiny_models import sample_texts

pytestmark = pytest.mark.slow  # tokenizer + fastText + four initializations + evaluations


def test_compare_specializes_a_gemma_like_decoder(tmp_path):
    save_tiny_gemma(tmp_path / "source", sample_texts(600, seed=1))
    (tmp_path / "corpus.txt").write_text("\n".join(sample_texts(2500, seed=2)), encoding="utf-8")
    args = ["compare", "--corpus", str(tmp_path / "corpus.txt"), "--language", "sw", "--source",
            str(tmp_path / "source"), "--vocab-size", "600", "--heldout-sentences", "60", "--store",
            str(tmp_path / "store"), "--methods", "focus,fvt,mean,random", "--out", str(tmp_path / "out"),
            "--set", "fasttext.dim=16", "--set", "fasttext.epochs=2", "--set", "fasttext.min_count=2",
            "--set", "fasttext.threads=1", "--set", "tokenizer.threads=1", "--set", "cleaning.min_chars=10",
            "--set", "split.min_heldout_documents=100", "--set", "tokenizer.chars_per_vocab_entry=1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "out" / "comparison.csv").set_index("method")
    assert {"original", "focus", "fvt", "mean", "random"} <= set(frame.index)
    assert frame["bits_per_byte"].notna().all() and (frame["bits_per_byte"] > 0).all()
    # the language-model columns of a decoder's records (issue 47: the table dropped them, and so the unigram flag)
    assert frame["clm_loss"].notna().all() and frame["clm_accuracy"].notna().all() and "mlm_loss" not in frame
    assert frame.loc["focus", "vocab_size"] == 600
    # a specialized model loads as a Gemma3 causal LM with Gemma's special ids and its tied, scaled embeddings
    models = [path.parent for path in (tmp_path / "store").rglob("transfer_report.parquet")]
    assert models
    model = AutoModelForCausalLM.from_pretrained(models[0])
    tokenizer = AutoTokenizer.from_pretrained(models[0])
    assert type(model).__name__ == "Gemma3ForCausalLM" and model.config.tie_word_embeddings
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id) == (0, 1, 2)
    assert (model.config.pad_token_id, model.config.eos_token_id, model.config.bos_token_id) == (0, 1, 2)
    text = "Kamata mawa kina sana."
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    assert json.loads((models[0] / "config.json").read_text())["vocab_size"] == len(tokenizer)
