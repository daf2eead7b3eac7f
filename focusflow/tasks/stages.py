"""One Prefect task per registered stage, each a thin wrapper over ``focusflow.pipeline.run_stage``.

The cache key is ``stage_key`` (what ``run_stage`` stores under), results are artifact URIs persisted
in the store, and each stage publishes its metrics to the Prefect UI. The few stage-specific
behaviours (LAPT's progress artifact and checkpoint events, the downstream table, the report page)
are hooks, not separate tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.context import TaskRunContext

from focusflow.pipeline import STAGES, run_stage
from focusflow.storage import Artifact, ArtifactStore
from focusflow.tasks.common import ArtifactKeyPolicy, publish_stage, run_name, stage_slot
from focusflow.tasks.lapt import lapt_checkpoint_callback
from focusflow.tasks.report import publish_downstream, publish_report

# Stages that read from the network or object storage are retried with backoff.
_IO_STAGES = {"corpus", "source"}
# Downloads can hang on a dead mirror; training is bounded by its own budget, the limits only report
# (Prefect cannot interrupt a blocking call in a worker thread).
_TIMEOUT_S = {"corpus": 6 * 3600, "source": 3 * 3600, "lapt": 72 * 3600, "downstream": 48 * 3600}
_GPU_STAGES = {"lapt", "downstream"}

Publisher = Callable[[ArtifactStore, Artifact, str | None, str | None], None]


def _publish_metrics(store: ArtifactStore, artifact: Artifact, language: str | None, label: str | None) -> None:
    publish_stage(artifact.stage, language, artifact.uri, dict(artifact.metadata), label)


_PUBLISHERS: dict[str, Publisher] = {"downstream": publish_downstream, "report": publish_report}


def _make(stage: str) -> Task[..., str]:
    def run(store_uri: str, params: dict[str, Any], inputs: dict[str, str] | None = None,
            language: str | None = None, label: str | None = None) -> str:
        store = ArtifactStore(store_uri)
        language = language or params.get("language")
        in_flow = TaskRunContext.get() is not None
        on_checkpoint = lapt_checkpoint_callback(params, language) if stage == "lapt" and in_flow else None
        with stage_slot(STAGES[stage].uses_model):
            artifact = run_stage(store, stage, params, inputs or {}, language=language, on_checkpoint=on_checkpoint,
                                 label=label)
        if in_flow:
            _PUBLISHERS.get(stage, _publish_metrics)(store, artifact, language, label)
        return artifact.uri

    run.__name__ = f"{stage.replace('-', '_')}_stage"
    run.__doc__ = STAGES[stage].description
    return task(
        run,
        name=stage,
        cache_policy=ArtifactKeyPolicy(stage=stage),
        persist_result=True,
        result_serializer="json",
        retries=2 if stage in _IO_STAGES else 0,
        retry_delay_seconds=[10, 60] if stage in _IO_STAGES else 0,
        timeout_seconds=_TIMEOUT_S.get(stage),
        tags=[f"stage:{stage}", *(["gpu"] if stage in _GPU_STAGES else [])],
        task_run_name=run_name(stage),
    )


STAGE_TASKS: dict[str, Task[..., str]] = {name: _make(name) for name in STAGES}
