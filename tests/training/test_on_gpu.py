"""On a CUDA device (marked ``gpu``: skipped on a machine without one, run by a session that is lent one): LAPT,
distillation and fine-tuning train there, in bf16 autocast with float32 weights. The first GPU run found every
fine-tuning failing on a table left on the CPU (``training.embedding_rows``): these keep such a mix from returning."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from focusflow.config import DownstreamSettings, LaptSpec
from focusflow.evaluation.downstream.runner import evaluate_task
from focusflow.evaluation.downstream.sources import TaskSpec
from focusflow.training import run_lapt
from tests.evaluation.downstream.test_cls import question_data
from tests.tiny_models import sample_texts, save_tiny
from tests.training.test_mlm_head import repeated_word_texts, save_bare_encoder

pytestmark = pytest.mark.gpu


def _spec(**changes) -> LaptSpec:
    base = dict(steps=8, batch_size=16, micro_batch_size=8, seq_len=64, lr=2e-3, warmup_fraction=0.1, eval_every=4,
                checkpoint_every=4, log_every=4, eval_sequences=16, objective="mlm")
    return LaptSpec(**{**base, **changes})


@pytest.mark.parametrize(("family", "objective", "trained"), [("xlmr", "mlm", "mlm"), ("gpt2", "auto", "clm")])
def test_lapt_trains_on_the_gpu_in_bf16_and_keeps_float32_weights(tiny_dirs, lapt_corpus, tmp_path, family, objective,
                                                                   trained):
    summary = run_lapt(tiny_dirs(family), *lapt_corpus, _spec(objective=objective), tmp_path / "run")
    assert summary["lm_loss"] == trained and summary["precision"] == "bfloat16"
    assert summary["peak_gpu_memory_bytes"] > 0 and summary["final_heldout_loss"] < summary["initial_heldout_loss"]
    assert all(t.dtype == torch.float32 for t in load_file(tmp_path / "run" / "final" / "model.safetensors").values())


def test_distillation_with_its_teacher_on_the_gpu(tiny_dirs, lapt_corpus, tmp_path):
    source = tiny_dirs("xlmr")
    summary = run_lapt(source, *lapt_corpus, _spec(objective="distill", micro_batch_size=16), tmp_path / "run",
                       source_dir=source)
    assert summary["objective"] == "distill" and summary["precision"] == "bfloat16" and summary["steps"] == 8


@pytest.mark.parametrize("family", ["xlmr", "gpt2"])
def test_fine_tuning_on_the_gpu_learns_with_its_trained_rows(family, tmp_path):
    folder = save_tiny(family, tmp_path / family, texts=sample_texts(600, seed=5))
    run = evaluate_task(folder, TaskSpec("cls", "questions", ""), 1, DownstreamSettings(epochs=6, lr=3e-3, batch_size=16,
                                                                     eval_every_fraction=0.25), data=question_data())
    assert run["test"]["accuracy"] >= 0.8, run["test"]



@pytest.mark.parametrize("family", ["xlmr", "gpt2"])
def test_intrinsic_evaluation_runs_on_the_gpu(tiny_dirs, family):
    from focusflow.evaluation.intrinsic import evaluate_model

    torch.cuda.reset_peak_memory_stats()
    metrics = evaluate_model(tiny_dirs(family), tiny_dirs(family), sample_texts(20, seed=3))
    assert torch.cuda.max_memory_allocated() > 0 and metrics["n_sentences"] == 20


def test_the_source_heads_encoding_runs_on_the_gpu(tmp_path):
    from focusflow.config import MlmHeadSpec
    from focusflow.training.mlm_head import train_mlm_head

    torch.cuda.reset_peak_memory_stats()
    stats = train_mlm_head(save_bare_encoder(tmp_path / "bare"), repeated_word_texts(200, 1),
                           MlmHeadSpec(steps=20, positions_per_step=64, feature_sequences=32, seq_len=32),
                           tmp_path / "head")
    assert torch.cuda.max_memory_allocated() > 0 and stats["valid_loss_best"] <= stats["valid_loss_step0"]
