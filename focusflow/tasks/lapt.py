"""The LAPT task: resumable training whose every stored checkpoint becomes a Prefect event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from focusflow.orchestration.events import emit_checkpoint_event
from focusflow.pipeline.lapt_stage import LAPT_STAGE, LAPT_VERSION, run_lapt_stage
from focusflow.storage import ArtifactStore, redact_uri
from focusflow.tasks.common import ArtifactKeyPolicy, artifact_key_name, publish_stage, run_name, stage_slot


@task(name="lapt", cache_policy=ArtifactKeyPolicy(stage=LAPT_STAGE, version=LAPT_VERSION), persist_result=True,
      result_serializer="json", tags=["stage:lapt", "gpu"], timeout_seconds=72 * 3600, task_run_name=run_name("lapt"))
def lapt_task(store_uri: str, params: dict[str, Any], inputs: dict[str, str], language: str | None = None,
              lineage: dict[str, str] | None = None, label: str | None = None) -> str:
    """Continue pretraining ``inputs['model']`` on ``inputs['split']`` with ``params['lapt']``; returns the URI."""
    logger = get_run_logger()
    store = ArtifactStore(store_uri)
    total = max(1, _total_steps(params["lapt"]))
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key_name(language or "run", "lapt-progress"),
                                           description=f"LAPT progress ({total} optimizer steps)")

    def on_checkpoint(uri: str, step: int, metrics: Mapping[str, Any]) -> None:
        update_progress_artifact(progress_id, progress=min(100.0, 100.0 * step / total))
        emit_checkpoint_event(uri, language, step, metrics)
        logger.info("checkpoint at step %d stored: %s", step, redact_uri(uri))

    with stage_slot("lapt"):
        artifact = run_lapt_stage(store, params, inputs, language=language, on_checkpoint=on_checkpoint,
                                  lineage=lineage)
    update_progress_artifact(progress_id, progress=100.0)
    publish_stage("lapt", language, artifact.uri, dict(artifact.metadata), label)
    return artifact.uri


def _total_steps(lapt: Mapping[str, Any]) -> int:
    from focusflow.config import LaptSpec

    return LaptSpec(**lapt).total_steps
