"""The teacher stage stores the source's word states for the texts one distillation reads; the distilling LAPT given
them reads exactly those, not the teacher model."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from focusflow.corpus.io import write_texts
from focusflow.errors import InputError
from focusflow.pipeline import run_stage
from focusflow.storage import ArtifactStore
from focusflow.training.teacher import TeacherStates
from tests.tiny_models import sample_texts, save_tiny

LAPT = {"steps": 2, "batch_size": 4, "micro_batch_size": 4, "seq_len": 32, "checkpoint_every": 2, "eval_every": 2,
        "eval_sequences": 4, "objective": "distill"}
TEACHER = {"seq_len": 32, "eval_sequences": 4, "batch_size": 4}


@pytest.fixture()
def staged(tmp_path, monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    source = save_tiny("xlmr", tmp_path / "model")
    split = tmp_path / "split"
    split.mkdir()
    write_texts(split / "train.jsonl", sample_texts(120, seed=1))
    write_texts(split / "heldout.jsonl", sample_texts(20, seed=2))
    store = ArtifactStore(tmp_path / "store")
    inputs = {"source": store.put_dir("source", "s" * 64, source), "split": store.put_dir("split", "t" * 64, split),
              "model": store.put_dir("init", "m" * 64, source)}
    return store, inputs, source


def _tokens(tokenizer, texts):
    return [len(row) for row in tokenizer(texts, truncation=True, max_length=32)["input_ids"]]


def test_the_states_are_of_the_texts_the_distillations_steps_read_and_the_lapt_reads_those(staged):
    store, inputs, source = staged
    teacher = run_stage(store, "teacher", {**TEACHER, "steps": 2}, inputs)
    stored = TeacherStates(store.fetch(teacher))
    chosen = stored.selected()
    assert teacher.metadata["layers"] == [1, 2] and teacher.metadata["splits"]["train"]["texts"] == len(chosen) < 120
    assert {"teacher.json", "train-offsets.npy", "train-layer01.npy", "heldout-layer02.npy"} <= set(teacher.files)
    texts = sample_texts(120, seed=1)
    lengths = _tokens(AutoTokenizer.from_pretrained(source), [texts[i] for i in chosen])
    assert sum(lengths) >= 2 * 4 * 32 > sum(lengths) - max(lengths), "as many tokens as 2 steps of 4 x 32 read"
    trained = run_stage(store, "lapt", {"lapt": LAPT}, {**inputs, "teacher": teacher})
    assert trained.metadata["teacher"] == "stored states" and trained.metadata["steps"] == 2
    assert trained.metadata["train_texts"] == len(chosen)


def test_a_minutes_budget_stores_the_states_for_its_planned_steps(staged, tmp_path):
    store, inputs, _ = staged
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "budget.json").write_text(json.dumps({"minutes": 1.0, "steps": 6, "checkpoint_minutes": [],
                                                  "checkpoint_steps": []}))
    budget = store.put_dir("lapt-budget", "b" * 64, plan)
    by_plan = run_stage(store, "teacher", TEACHER, {**inputs, "budget": budget})
    by_steps = run_stage(store, "teacher", {**TEACHER, "steps": 2}, inputs)
    assert by_steps.metadata["splits"]["train"]["texts"] < by_plan.metadata["splits"]["train"]["texts"] < 120
    with pytest.raises(InputError, match="needs its step plan"):
        run_stage(store, "teacher", TEACHER, inputs)
    with pytest.raises(InputError, match="budget input .* was given"):
        run_stage(store, "teacher", {**TEACHER, "steps": 2}, {**inputs, "budget": budget})


def test_a_corpus_smaller_than_the_run_reads_is_stored_whole(staged):
    store, inputs, _ = staged
    teacher = run_stage(store, "teacher", {**TEACHER, "steps": 10_000}, inputs)
    assert teacher.metadata["splits"]["train"]["texts"] == 120
    assert TeacherStates(store.fetch(teacher)).selected() is None
