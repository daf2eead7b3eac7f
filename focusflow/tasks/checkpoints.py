"""A checkpointing stage in a flow (``Stage.hints.checkpoints``): a progress artifact, and every stored
checkpoint becomes a Prefect event (what re-evaluation deployments trigger on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from focusflow.orchestration.events import emit_checkpoint_event
from focusflow.pipeline.registry import CheckpointCallback
from focusflow.storage import redact_uri
from focusflow.tasks.common import artifact_key_name


def checkpoint_callback(stage: str, total_steps: int, language: str | None) -> CheckpointCallback:
    """Progress in the UI and one event per stored checkpoint of ``stage`` (``total_steps`` optimizer steps)."""
    logger = get_run_logger()
    total = max(1, total_steps)
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key_name(language or "run", f"{stage}-progress"),
                                           description=f"{stage.upper()} progress ({total} optimizer steps)")

    def on_checkpoint(uri: str, step: int, metrics: Mapping[str, Any]) -> None:
        update_progress_artifact(progress_id, progress=min(100.0, 100.0 * step / total))
        emit_checkpoint_event(uri, language, step, metrics)
        logger.info("checkpoint at step %d stored: %s", step, redact_uri(uri))

    return on_checkpoint
