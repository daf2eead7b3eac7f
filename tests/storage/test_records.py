"""A stage's record: what its build wrote in the manifest, read typed, with defaults for what an older build did not
write and the undeclared rest kept."""

from __future__ import annotations

import pytest

from focusflow.storage import CorruptArtifactError, StoreError
from focusflow.storage.records import StageRecord


class BuildRecord(StageRecord):
    stages = ("build",)
    steps: int | None = None
    loss: float | None = None


def _stored(store, metadata: dict, stage: str = "build"):
    return store.put_bytes(stage, "k" * 16, "file.txt", b"content", metadata=metadata)


def test_a_record_reads_its_fields_typed_and_keeps_the_rest_as_stored(local_store):
    artifact = _stored(local_store, {"steps": 3, "loss": 2, "note": {"why": "kept"}, "language": "sw"})
    record = BuildRecord.of(artifact)
    assert (record.steps, record.loss, record.language) == (3, 2.0, "sw")
    assert record.shown() == {"steps": 3, "loss": 2, "note": {"why": "kept"}, "language": "sw"}  # as stored
    assert record.scalars() == {"steps": 3, "loss": 2, "language": "sw"}


def test_a_field_an_older_build_did_not_write_reads_as_its_default(local_store):
    record = BuildRecord.of(_stored(local_store, {}))
    assert (record.steps, record.loss, record.lineage, record.language) == (None, None, {}, None)


def test_a_record_refuses_another_stages_artifact(local_store):
    other = _stored(local_store, {"steps": 3}, stage="other")
    with pytest.raises(StoreError, match="'other' artifact; BuildRecord is the record of 'build' artifacts"):
        BuildRecord.of(other)
    assert StageRecord.of(other).shown() == {"steps": 3}  # the base reads any stage's, for views of it whole


def test_a_record_of_the_wrong_type_is_a_corrupt_artifact(local_store):
    with pytest.raises(CorruptArtifactError, match="not a BuildRecord.*steps"):
        BuildRecord.of(_stored(local_store, {"steps": "many"}))


def test_of_optional_passes_none_through(local_store):
    assert BuildRecord.of_optional(None) is None
