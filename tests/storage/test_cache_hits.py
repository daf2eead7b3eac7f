"""A cache hit never hands out a tampered artifact: sizes and hashes are checked before it is returned."""

from __future__ import annotations

from pathlib import Path

import pytest

from focusflow.pipeline.registry import Stage, run_stage
from focusflow.storage import ArtifactStore, CorruptArtifactError

BUILDS: list[str] = []


def _write(run) -> dict:
    BUILDS.append(run.key)
    (run.out / "weights.bin").write_bytes(b"0123456789")
    (run.out / "config.json").write_text('{"a": 1}')
    return {}


def _read(run) -> dict:
    (run.out / "copy.bin").write_bytes((run.inputs["model"] / "weights.bin").read_bytes())
    return {}


PRODUCER = Stage("producer", 1, (), _write)
CONSUMER = Stage("consumer", 1, ("model",), _read)


def _tamper(store: ArtifactStore, artifact, name: str, data: bytes) -> None:
    (Path(store.root) / artifact.stage / artifact.key / artifact.data_dir / name).write_bytes(data)


@pytest.mark.parametrize("data", [b"9123456789", b"012345678"], ids=["same size", "other size"])
def test_a_rerun_over_a_tampered_artifact_refuses_it(local_store, data):
    artifact = run_stage(local_store, PRODUCER, {"n": 1})
    assert run_stage(local_store, PRODUCER, {"n": 1}).key == artifact.key, "an intact artifact is a cache hit"
    _tamper(local_store, artifact, "weights.bin", data)
    with pytest.raises(CorruptArtifactError, match=f"weights.bin.*focusflow store rm {artifact.uri}"):
        run_stage(local_store, PRODUCER, {"n": 1})


def test_a_consuming_stage_refuses_a_tampered_input(local_store):
    artifact = run_stage(local_store, PRODUCER, {"n": 2})
    _tamper(local_store, artifact, "weights.bin", b"9123456789")
    with pytest.raises(CorruptArtifactError, match="weights.bin"):
        run_stage(local_store, CONSUMER, {}, {"model": artifact})
    assert local_store.list("consumer") == []


@pytest.mark.s3
def test_a_cache_hit_on_s3_checks_sizes_and_a_fetch_checks_hashes(s3_store):
    artifact = run_stage(s3_store, PRODUCER, {"n": 3})
    remote = f"{s3_store.root}/producer/{artifact.key}/{artifact.data_dir}/weights.bin"
    s3_store.fs.pipe_file(remote, b"012")
    with pytest.raises(CorruptArtifactError, match="weights.bin"):
        run_stage(s3_store, PRODUCER, {"n": 3})
    s3_store.fs.pipe_file(remote, b"9123456789")  # same size: found when a stage reads it
    assert run_stage(s3_store, PRODUCER, {"n": 3}).key == artifact.key
    with pytest.raises(CorruptArtifactError, match="weights.bin"):
        run_stage(s3_store, CONSUMER, {}, {"model": artifact})


def test_the_task_cache_is_no_hit_for_a_tampered_artifact(local_store):
    from focusflow.pipeline import run_stage as run_registered
    from focusflow.tasks.common import ArtifactKeyPolicy

    text = local_store.put_bytes("import", "k" * 64, "documents.jsonl", b'{"text": "a b c d"}\n{"text": "e f g"}\n')
    params = {"split": {"min_heldout_documents": 1}}
    split = run_registered(local_store, "split", params, {"dedup": text})
    policy = ArtifactKeyPolicy(stage="split")
    task_inputs = {"store_uri": local_store.uri, "params": params, "inputs": {"dedup": text.uri}}
    assert policy.compute_key(None, task_inputs, {}) is not None
    name = sorted(split.files)[0]
    path = Path(local_store.root) / "split" / split.key / split.data_dir / name
    path.write_bytes(b"x" * path.stat().st_size)
    assert policy.compute_key(None, task_inputs, {}) is None
