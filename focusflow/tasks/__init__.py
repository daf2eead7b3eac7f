"""Thin Prefect tasks over the stage registry: cache policy = artifact key, results (URIs) in the store."""

from __future__ import annotations

from prefect import Task

from focusflow.tasks.common import result_storage_for
from focusflow.tasks.stages import STAGE_TASKS


def tasks_for(store_uri: str) -> dict[str, Task]:
    """Every focusflow task with its results persisted in this store (call inside a flow run)."""
    storage = result_storage_for(store_uri)
    return {name: task.with_options(result_storage=storage) for name, task in STAGE_TASKS.items()}
