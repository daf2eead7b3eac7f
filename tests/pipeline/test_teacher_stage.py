"""The teacher stage stores the source's word states once; a distilling LAPT given them reads them, not the teacher."""

from __future__ import annotations

from focusflow.corpus.io import write_texts
from focusflow.pipeline import run_stage
from focusflow.storage import ArtifactStore
from tests.tiny_models import sample_texts, save_tiny


def test_a_distilling_lapt_reads_the_teacher_states_the_teacher_stage_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    source = save_tiny("xlmr", tmp_path / "model")
    split = tmp_path / "split"
    split.mkdir()
    write_texts(split / "train.jsonl", sample_texts(120, seed=1))
    write_texts(split / "heldout.jsonl", sample_texts(20, seed=2))
    store = ArtifactStore(tmp_path / "store")
    inputs = {"source": store.put_dir("source", "s" * 64, source), "split": store.put_dir("split", "t" * 64, split)}
    lapt = {"steps": 2, "batch_size": 4, "micro_batch_size": 4, "seq_len": 32, "checkpoint_every": 2, "eval_every": 2,
            "eval_sequences": 4, "objective": "distill"}
    teacher = run_stage(store, "teacher", {"seq_len": 32, "eval_sequences": 4}, inputs)
    assert teacher.metadata["layers"] == [1, 2] and teacher.metadata["splits"]["train"]["texts"] == 120
    assert {"teacher.json", "train-offsets.npy", "train-layer01.npy", "heldout-layer02.npy"} <= set(teacher.files)
    model = store.put_dir("init", "m" * 64, source)
    trained = run_stage(store, "lapt", {"lapt": lapt}, {"model": model, "split": inputs["split"],
                                                         "source": inputs["source"], "teacher": teacher})
    assert trained.metadata["teacher"] == "stored states" and trained.metadata["steps"] == 2
