"""Local checkpoints carry a manifest of their files' hashes, written last; a run resumes only from one that matches."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from focusflow.training.checkpoint import (
    CHECKPOINTS,
    MANIFEST,
    checkpoint_problem,
    latest_checkpoint,
    save_checkpoint,
    verified_checkpoint,
)


def _save(out: Path, step: int) -> Path:
    def write_model(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4 + step.to_bytes(2, "little"))

    return save_checkpoint(out, step, write_model, {"step": step}, {"rng": {"cpu": torch.zeros(2)}}, keep_last=3)


def flip_a_byte(path: Path) -> None:
    """Damage a file the way a bad disk does: same size, one byte changed."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_checkpoint_interrupted_mid_write_is_never_latest_and_is_cleaned(tmp_path):
    from focusflow.storage.atomic import atomic_folder
    from focusflow.training.checkpoint import CHECKPOINTS, clean_partial, latest_checkpoint, save_checkpoint

    def write_model(folder):
        (folder / "config.json").write_text("{}")

    first = save_checkpoint(tmp_path, 5, write_model, {"step": 5}, {"rng": {"cpu": torch.zeros(2)}}, keep_last=2)

    def crashing_model(folder):
        write_model(folder)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(tmp_path, 10, crashing_model, {"step": 10}, {}, keep_last=2)
    assert latest_checkpoint(tmp_path) == first
    assert sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir()) == ["latest", first.name]
    killed = atomic_folder(tmp_path / CHECKPOINTS / "step-00000015")  # a kill -9 leaves its staging folder
    (killed.__enter__() / "config.json").write_text("{}")
    assert latest_checkpoint(tmp_path) == first
    clean_partial(tmp_path)
    assert sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir()) == ["latest", first.name]


def test_the_manifest_lists_every_other_file_with_size_and_sha256(tmp_path):
    folder = _save(tmp_path, 5)
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert sorted(files) == ["config.json", "model.safetensors", "trainer/rng.pt", "trainer_state.json"]
    assert files["model.safetensors"]["size"] == (folder / "model.safetensors").stat().st_size
    assert checkpoint_problem(folder) is None and verified_checkpoint(tmp_path) == folder


@pytest.mark.parametrize("damage, reason", [
    (lambda f: flip_a_byte(f / "model.safetensors"), "model.safetensors does not match its sha256"),
    (lambda f: (f / "trainer" / "rng.pt").unlink(), "trainer/rng.pt is missing"),
    (lambda f: (f / "model.safetensors").write_bytes(b"short"), "model.safetensors has 5 bytes"),
    (lambda f: (f / "model.safetensors.index.json").write_text("{}"), "model.safetensors.index.json is not in"),
    (lambda f: (f / MANIFEST).unlink(), "incomplete"),
])
def test_a_damaged_or_incomplete_latest_checkpoint_is_moved_aside_for_the_previous_good_one(tmp_path, caplog, damage,
                                                                                           reason):
    good, bad = _save(tmp_path, 5), _save(tmp_path, 10)
    damage(bad)
    assert reason in checkpoint_problem(bad)
    with caplog.at_level(logging.WARNING, logger="focusflow.training.checkpoint"):
        assert verified_checkpoint(tmp_path) == good
    assert str(bad) in caplog.text and reason in caplog.text
    assert not bad.exists() and (tmp_path / CHECKPOINTS / "rejected-step-00000010").is_dir()  # kept for inspection
    assert latest_checkpoint(tmp_path) == good  # what the other ranks read once rank 0 has verified


def test_no_good_checkpoint_means_a_fresh_start(tmp_path, caplog):
    flip_a_byte(_save(tmp_path, 5) / "trainer_state.json")
    assert verified_checkpoint(tmp_path) is None
    assert verified_checkpoint(tmp_path / "elsewhere") is None


def test_the_lapt_stage_restores_the_stores_copy_of_a_damaged_local_checkpoint(local_store, tmp_path, caplog):
    """The newest checkpoint is damaged locally but its store copy is sound: resume from the store's copy, not from
    the older local one."""
    from focusflow.pipeline.lapt_stage import CHECKPOINT_STAGE, checkpoint_key, restore_checkpoint

    work, run_key = tmp_path / "work", "k" * 64
    _save(work, 5)
    newest = _save(work, 10)
    local_store.put_dir(CHECKPOINT_STAGE, checkpoint_key(run_key, 10), newest, params={"run_key": run_key, "step": 10},
                        metadata={"run_key": run_key, "step": 10})
    expected = (newest / "model.safetensors").read_bytes()
    flip_a_byte(newest / "model.safetensors")
    with caplog.at_level(logging.WARNING):
        restored = restore_checkpoint(local_store, run_key, work)
    assert restored == newest and "step-00000010" in caplog.text
    assert (restored / "model.safetensors").read_bytes() == expected
    assert verified_checkpoint(work) == newest
    assert restore_checkpoint(local_store, run_key, work) == newest  # nothing newer in the store: the local one


def test_a_store_copy_from_before_checkpoint_manifests_gets_one(local_store, tmp_path):
    from focusflow.pipeline.lapt_stage import CHECKPOINT_STAGE, checkpoint_key, restore_checkpoint

    old = _save(tmp_path / "old", 7)
    (old / MANIFEST).unlink()
    local_store.put_dir(CHECKPOINT_STAGE, checkpoint_key("r", 7), old, params={"run_key": "r", "step": 7},
                        metadata={"run_key": "r", "step": 7})
    restored = restore_checkpoint(local_store, "r", tmp_path / "work")
    assert restored is not None and restored.name == "step-00000007" and checkpoint_problem(restored) is None


def test_a_lapt_stage_killed_after_a_checkpoint_resumes_from_the_store_when_its_local_copy_is_damaged(
        local_store, tiny_dirs, lapt_corpus, tmp_path, caplog):
    """Issue 20: the damaged local checkpoint was loaded and the damaged run committed as the final ``lapt``
    artifact. Now the stage takes the store's verified copy and commits what the uninterrupted run commits."""
    from safetensors.torch import load_file

    from focusflow.config import LaptSpec
    from focusflow.pipeline import run_stage
    from focusflow.storage import ArtifactStore

    split = tmp_path / "split"
    split.mkdir()
    for name, path in zip(("train.jsonl", "heldout.jsonl"), lapt_corpus, strict=True):
        (split / name).write_bytes(path.read_bytes())
    spec = LaptSpec(objective="mlm", steps=4, batch_size=8, micro_batch_size=8, seq_len=64, lr=2e-3, eval_every=2,
                    checkpoint_every=2, log_every=2, eval_sequences=8, keep_last=2).model_dump(mode="json")

    def run(store: ArtifactStore, work: Path, on_checkpoint=None):
        inputs = {"model": store.put_dir("import", "m" * 64, tiny_dirs("gpt2")),
                  "split": store.put_dir("import", "s" * 64, split)}
        return run_stage(store, "lapt", {"lapt": spec, "_work_root": str(work)}, inputs, on_checkpoint=on_checkpoint)

    class Killed(Exception):
        pass

    def killed_at_the_last_checkpoint(uri, step, metrics):
        if step == 4:
            raise Killed

    with pytest.raises(Killed):
        run(local_store, tmp_path / "work", killed_at_the_last_checkpoint)
    newest = next((tmp_path / "work").glob("lapt/*/checkpoints/step-00000004"))
    flip_a_byte(newest / "model.safetensors")
    with caplog.at_level(logging.WARNING):
        resumed = run(local_store, tmp_path / "work")
    assert "step-00000004" in caplog.text and "failed verification" in caplog.text
    assert resumed.metadata["resumed_from"].endswith("step-00000004")

    reference = run(ArtifactStore(tmp_path / "reference-store"), tmp_path / "reference-work")
    assert resumed.key == reference.key
    expected = load_file(tmp_path / "reference-store" / "lapt" / reference.key / reference.data_dir / "model.safetensors")
    got = load_file(local_store.fetch(resumed) / "model.safetensors")
    assert all(torch.equal(got[name], expected[name]) for name in expected)
