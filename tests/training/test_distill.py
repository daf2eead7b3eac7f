"""LAPT by distillation: the specialized model learns the source's word-pooled states at several layers."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from focusflow.config import LaptSpec
from focusflow.training import run_lapt


def _scrambled(source, folder):
    """A copy of the source whose embedding rows are shuffled: a model that reads the language badly."""
    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    name = next(n for n in weights if "word_embeddings" in n)
    weights[name] = weights[name][torch.randperm(len(weights[name]), generator=torch.Generator().manual_seed(0))]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("objective", ["distill", "mlm+distill"])
def test_distillation_brings_the_model_toward_the_source_and_checkpoints_like_lapt(tiny_dirs, lapt_corpus, tmp_path,
                                                                                  objective):
    source = tiny_dirs("xlmr")
    student = _scrambled(source, tmp_path / "student")
    spec = LaptSpec(steps=16, batch_size=16, micro_batch_size=16, seq_len=64, lr=2e-3, warmup_fraction=0.1,
                    eval_every=8, checkpoint_every=8, log_every=4, eval_sequences=32, objective=objective)
    with pytest.raises(Exception, match="needs the source model as teacher"):
        run_lapt(student, *lapt_corpus, spec, tmp_path / "nosource")
    summary = run_lapt(student, *lapt_corpus, spec, tmp_path / "run", source_dir=source)
    assert summary["objective"] == objective and summary["layers"] == [1, 2] and summary["steps"] == 16
    assert summary["final_heldout_loss"] < summary["initial_heldout_loss"] * 0.8, summary
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
    assert summary["weights_check"]["passed"] and summary["mfu"] is not None and summary["work_seconds"] > 0
    again = run_lapt(student, *lapt_corpus, spec, tmp_path / "run", source_dir=source)  # resumes: nothing left
    assert again["resumed_from"].endswith("step-00000016")


def test_a_distillation_shows_its_progress_from_reading_its_texts_on(tiny_dirs, tmp_path, monkeypatch, caplog):
    """Reading a large corpus with both tokenizers took a minute before the first step, with no bar and no line:
    off a terminal the run's progress lines start with it (here one a chunk of texts: no 30 s between lines)."""
    import logging

    from focusflow import logs
    from focusflow.corpus.io import write_texts
    from tests.tiny_models import sample_texts

    texts = sample_texts(2600, seed=5)
    write_texts(tmp_path / "train.jsonl", texts[:2500])
    write_texts(tmp_path / "heldout.jsonl", texts[2500:])
    monkeypatch.setattr(logs, "PROGRESS_LINE_S", 0.0)
    caplog.set_level(logging.INFO, logger=logs.progress_lines.name)
    spec = LaptSpec(steps=3, batch_size=16, micro_batch_size=16, seq_len=32, eval_every=3, checkpoint_every=3,
                    eval_sequences=16, objective="distill")
    source = tiny_dirs("xlmr")
    run_lapt(source, tmp_path / "train.jsonl", tmp_path / "heldout.jsonl", spec, tmp_path / "run", source_dir=source,
             progress=True)
    said = [record.getMessage().split(",")[0] for record in caplog.records if record.name == logs.progress_lines.name]
    assert said[:2] == ["LAPT: reading the training texts: 1000/2500", "LAPT: reading the training texts: 2000/2500"]
    assert said[2:] == ["LAPT: 1/3", "LAPT: 2/3"]
