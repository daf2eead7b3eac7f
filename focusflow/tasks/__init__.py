"""Thin Prefect tasks over the core stages: cache policy = artifact key, results (URIs) in the store."""

from __future__ import annotations

from prefect import Task

from focusflow.tasks.common import result_storage_for
from focusflow.tasks.lapt import lapt_task
from focusflow.tasks.report import downstream_task, report_task
from focusflow.tasks.stages import STAGE_TASKS


def tasks_for(store_uri: str) -> dict[str, Task]:
    """Every focusflow task with its results persisted in this store (call inside a flow run)."""
    storage = result_storage_for(store_uri)
    every = {**STAGE_TASKS, "lapt": lapt_task, "downstream": downstream_task, "report": report_task}
    return {name: task.with_options(result_storage=storage) for name, task in every.items()}
