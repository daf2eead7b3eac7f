"""One Prefect task per pipeline stage, each a thin wrapper over ``focusflow.pipeline.run_stage``."""

from __future__ import annotations

from typing import Any

from prefect import Task, task
from prefect.context import TaskRunContext

from focusflow.pipeline.stages import STAGES, run_stage
from focusflow.storage import ArtifactStore
from focusflow.tasks.common import ArtifactKeyPolicy, publish_stage, run_name, stage_slot

# Stages that read from the network or object storage are retried with backoff.
_IO_STAGES = {"corpus", "source"}
# Downloads can hang on a dead mirror; compute stages are bounded by their own budgets instead
# (Prefect cannot interrupt a blocking call in a worker thread, so a timeout there only reports).
_TIMEOUT_S = {"corpus": 6 * 3600, "source": 3 * 3600}


def _language_of(params: dict[str, Any]) -> str | None:
    return params.get("language")


def _make(stage: str) -> Task[..., str]:
    def run(store_uri: str, params: dict[str, Any], inputs: dict[str, str] | None = None,
            language: str | None = None, label: str | None = None) -> str:
        store = ArtifactStore(store_uri)
        with stage_slot(stage):
            artifact = run_stage(store, stage, params, inputs or {})
        if TaskRunContext.get() is not None:
            publish_stage(stage, language or _language_of(params), artifact.uri, dict(artifact.metadata), label)
        return artifact.uri

    run.__name__ = f"{stage}_stage"
    run.__doc__ = STAGES[stage].description
    return task(
        run,
        name=stage,
        cache_policy=ArtifactKeyPolicy(stage=stage, version=STAGES[stage].version),
        persist_result=True,
        result_serializer="json",
        retries=2 if stage in _IO_STAGES else 0,
        retry_delay_seconds=[10, 60] if stage in _IO_STAGES else 0,
        timeout_seconds=_TIMEOUT_S.get(stage),
        tags=[f"stage:{stage}"],
        task_run_name=run_name(stage),
    )


STAGE_TASKS: dict[str, Task[..., str]] = {name: _make(name) for name in STAGES}
corpus_task = STAGE_TASKS["corpus"]
dedup_task = STAGE_TASKS["dedup"]
split_task = STAGE_TASKS["split"]
source_task = STAGE_TASKS["source"]
tokenizer_task = STAGE_TASKS["tokenizer"]
fasttext_task = STAGE_TASKS["fasttext"]
init_task = STAGE_TASKS["init"]
intrinsic_task = STAGE_TASKS["intrinsic"]

