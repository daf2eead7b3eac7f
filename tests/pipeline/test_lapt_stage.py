"""The stored LAPT artifact: its content depends on what was trained, never on how fast the machine trained it."""

from __future__ import annotations

import csv

from focusflow.corpus.io import write_texts
from focusflow.pipeline import run_stage
from focusflow.storage import ArtifactStore
from focusflow.training.monitor import TIMING_COLUMNS
from tests.tiny_models import sample_texts, save_tiny

TINY_LAPT = {"steps": 4, "batch_size": 4, "micro_batch_size": 2, "seq_len": 32, "checkpoint_every": 2,
             "eval_every": 2, "eval_sequences": 4}


def test_the_same_lapt_trained_twice_stores_the_same_bytes_and_its_timings_in_the_manifest(tmp_path, monkeypatch):
    source = save_tiny("xlmr", tmp_path / "model")
    split = tmp_path / "split"
    split.mkdir()
    write_texts(split / "train.jsonl", sample_texts(200, seed=1))
    write_texts(split / "heldout.jsonl", sample_texts(20, seed=2))
    built = []
    for name in ("one", "two"):
        monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / f"work-{name}"))
        store = ArtifactStore(tmp_path / name)
        inputs = {"model": store.put_dir("init", "m" * 64, source), "split": store.put_dir("split", "s" * 64, split)}
        built.append((store, run_stage(store, "lapt", {"lapt": TINY_LAPT}, inputs)))
    (store, first), (_, second) = built
    assert first.key == second.key and first.content_hash == second.content_hash
    assert "summary.json" not in first.files, "the summary is the manifest's metadata"
    with store.fetch(first).joinpath("metrics.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == ["0", "2", "4"] and not set(TIMING_COLUMNS) & set(rows[0])
    timings = first.metadata["timings"]
    assert [row["step"] for row in timings] == [0, 2, 4] and all(row["tokens_per_s"] > 0 for row in timings[1:])
    assert first.metadata["steps"] == 4


def test_compile_travels_as_set_and_keys_as_it_did_before_auto():
    """The stage reads the setting it was given (auto stays auto: the probe decides where it runs); the key holds
    ``false`` for auto, as every stored LAPT's key did, so compiling never retrains a stored run."""
    from focusflow.config import LaptSpec
    from focusflow.pipeline.lapt_stage import LaptSettings
    from focusflow.pipeline.registry import get_stage

    stage = get_stage("lapt")
    for setting in ("auto", True, False):
        params = LaptSettings(lapt=LaptSpec(steps=10, compile=setting)).to_params()
        assert stage.parse(params).lapt.compile == setting
    keys = {setting: stage.key_params(LaptSettings(lapt=LaptSpec(steps=10, compile=setting)).to_params())
            for setting in ("auto", True, False)}
    assert keys["auto"] == keys[False] != keys[True]
