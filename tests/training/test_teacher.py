"""The teacher's word states, stored once: a distillation that reads them learns as one that computes them at every
step (the same losses, to the float16 the states are stored in), without loading the teacher model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from focusflow.config import LaptSpec
from focusflow.corpus.io import write_texts
from focusflow.training import run_lapt
from focusflow.training.teacher import TeacherStates, compute_teacher_states, distillation_texts
from tests.tiny_models import sample_texts
from tests.training.test_distill import _scrambled


def _spec(**changes):
    return LaptSpec(**{"steps": 6, "batch_size": 16, "micro_batch_size": 16, "seq_len": 64, "lr": 2e-3,
                       "warmup_fraction": 0.1, "eval_every": 3, "checkpoint_every": 6, "log_every": 3,
                       "eval_sequences": 32, "objective": "distill", "precision": "fp32", **changes})


@pytest.fixture()
def stored(tiny_dirs, lapt_corpus, tmp_path):
    source = tiny_dirs("xlmr")
    spec = _spec()
    texts = distillation_texts(*lapt_corpus, spec.eval_sequences)
    index = compute_teacher_states(source, texts, spec.seq_len, [1, 2], "fp32", tmp_path / "teacher")
    return source, tmp_path / "teacher", index, texts


def test_every_word_the_source_covers_is_stored_once_per_text(stored):
    _, folder, index, texts = stored
    assert index["layers"] == [1, 2] and index["pool"] == "mean"
    states = TeacherStates(folder)
    assert states.texts("train") == len(texts["train"]) and states.texts("heldout") == len(texts["heldout"])
    assert index["splits"]["train"]["words"] > len(texts["train"])
    (row,) = states.rows("train", [0], [np.array([0])])
    layers = states.gather("train", np.array([row]))
    assert [tuple(layer.shape) for layer in layers] == [(1, 32), (1, 32)] and float(layers[0].abs().sum()) > 0
    with pytest.raises(ValueError, match="do not cover"):
        states.rows("train", [0], [np.array([10_000])])


def test_a_distillation_from_stored_states_learns_as_one_that_computes_them(stored, lapt_corpus, tmp_path,
                                                                           monkeypatch):
    source, folder, _, _ = stored
    student = _scrambled(source, tmp_path / "student")
    computed = run_lapt(student, *lapt_corpus, _spec(), tmp_path / "computed", source_dir=source)
    import focusflow.training.distill as distill

    def no_teacher(*args, **kwargs):
        raise AssertionError("the teacher model was loaded although its states are stored")

    monkeypatch.setattr(distill, "load_source", no_teacher)
    read = run_lapt(student, *lapt_corpus, _spec(), tmp_path / "read", source_dir=source, teacher_dir=folder)
    assert read["teacher"] == "stored states" and computed["teacher"] == "computed every step"
    assert read["initial_heldout_loss"] == pytest.approx(computed["initial_heldout_loss"], rel=1e-3)
    assert read["final_heldout_loss"] == pytest.approx(computed["final_heldout_loss"], rel=1e-2)


def test_states_stored_for_other_settings_are_refused(stored, lapt_corpus, tmp_path):
    source, folder, _, _ = stored
    student = _scrambled(source, tmp_path / "student")
    with pytest.raises(Exception, match="stored teacher states hold layers"):
        run_lapt(student, *lapt_corpus, _spec(distill_layers=[2]), tmp_path / "run", source_dir=source,
                 teacher_dir=folder)
    with pytest.raises(Exception, match="computed for other heldout texts"):
        run_lapt(student, *lapt_corpus, _spec(eval_sequences=8), tmp_path / "run2", source_dir=source,
                 teacher_dir=folder)
    train, heldout = lapt_corpus
    texts = [json.loads(line)["text"] for line in train.read_text().splitlines()]
    other = tmp_path / "other.jsonl"
    write_texts(other, [texts[1], texts[0], *texts[2:]])  # as many texts, two in another order
    with pytest.raises(Exception, match="computed for other train texts"):
        run_lapt(student, other, heldout, _spec(), tmp_path / "run3", source_dir=source, teacher_dir=folder)


def test_a_decoders_states_are_stored_in_float32_and_read_back(tmp_path):
    """A decoder's residual stream can hold values float16 loses: its word states are stored in float32."""
    from focusflow.corpus.io import write_texts
    from tests.tiny_decoders import save_tiny_gemma
    from tests.tiny_models import sample_texts

    source = save_tiny_gemma(tmp_path / "source", sample_texts(300, seed=1))
    write_texts(tmp_path / "train.jsonl", sample_texts(40, seed=2))
    write_texts(tmp_path / "heldout.jsonl", sample_texts(10, seed=3))
    texts = distillation_texts(tmp_path / "train.jsonl", tmp_path / "heldout.jsonl", 8)
    index = compute_teacher_states(source, texts, 32, [1, 2], "fp32", tmp_path / "teacher")
    assert index["pool"] == "last" and index["dtype"] == "float32"
    states = TeacherStates(tmp_path / "teacher")
    rows = states.rows("heldout", [0], [np.array([0, 1])])
    assert [tuple(layer.shape) for layer in states.gather("heldout", rows)] == [(2, 32), (2, 32)]


def test_the_texts_a_distillation_needs_are_a_sample_of_the_whole_corpus_not_its_first_source(tiny_dirs):
    """A corpus file holds its sources one after another: the chosen texts come from all of them, as many as the
    tokens asked for (the last one reaching them), and the choice depends on the texts, not on their order."""
    from transformers import AutoTokenizer

    from focusflow.training.teacher import select_distillation_texts, selected_texts

    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs("xlmr"))
    first, second = sample_texts(300, seed=1), [f"{text} second" for text in sample_texts(300, seed=2)]
    texts = first + second
    chosen = select_distillation_texts(texts, tokenizer, 32, 2_000)
    assert list(chosen) == sorted(chosen) and 0 < (chosen < 300).sum() and 0 < (chosen >= 300).sum()
    lengths = [len(row) for row in tokenizer(selected_texts(texts, chosen), truncation=True, max_length=32)["input_ids"]]
    assert sum(lengths) >= 2_000 and sum(lengths) - max(lengths) < 2_000
    again = select_distillation_texts(second + first, tokenizer, 32, 2_000)
    assert sorted(texts[i] for i in chosen) == sorted((second + first)[i] for i in again)
    assert select_distillation_texts(texts, tokenizer, 32, 10**9) is None, "a small corpus is read whole"
    with pytest.raises(ValueError, match="larger corpus"):
        selected_texts(texts[:10], chosen)


def test_a_distillation_does_not_resume_on_other_texts(tiny_dirs, lapt_corpus, tmp_path):
    """Its batches are a function of its texts: a checkpoint of a run on other texts (another corpus, or states
    selected for another step count) is refused, not continued on a different batch list."""
    source = tiny_dirs("xlmr")
    student = _scrambled(source, tmp_path / "student")
    train, heldout = lapt_corpus
    run_lapt(student, train, heldout, _spec(steps=3, checkpoint_every=3), tmp_path / "run", source_dir=source)
    texts = [json.loads(line)["text"] for line in train.read_text().splitlines()]
    other = tmp_path / "other.jsonl"
    write_texts(other, [texts[1], texts[0], *texts[2:]])
    with pytest.raises(Exception, match="distillation of other texts"):
        run_lapt(student, other, heldout, _spec(steps=6, checkpoint_every=3), tmp_path / "run", source_dir=source)
    resumed = run_lapt(student, train, heldout, _spec(steps=6, checkpoint_every=3), tmp_path / "run", source_dir=source)
    assert resumed["steps"] == 6 and resumed["resumed_from"]
