"""A stage task runs its stage through the registry with progress on: a long training stage in a flow is never
silent (a bar on a terminal, a line every 30 s in a log)."""

from __future__ import annotations

from types import SimpleNamespace

import focusflow.tasks.stages as stage_tasks
from focusflow.tasks import tasks_for


def test_a_stage_task_asks_for_progress(tmp_path, monkeypatch):
    seen = {}

    def fake_run_stage(store, spec, params, inputs, **options):
        seen.update(options, stage=spec.name)
        return SimpleNamespace(uri="file:///artifact")

    monkeypatch.setattr(stage_tasks, "run_stage", fake_run_stage)
    task = tasks_for((tmp_path / "store").as_uri())["lapt"]
    assert task.fn((tmp_path / "store").as_uri(), {"lapt": {"steps": 1}}, {}) == "file:///artifact"
    assert seen["stage"] == "lapt" and seen["progress"] is True
