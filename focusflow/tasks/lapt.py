"""LAPT in a flow: a progress artifact, and every stored checkpoint becomes a Prefect event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from focusflow.orchestration.events import emit_checkpoint_event
from focusflow.pipeline.registry import CheckpointCallback
from focusflow.storage import redact_uri
from focusflow.tasks.common import artifact_key_name


def lapt_checkpoint_callback(params: Mapping[str, Any], language: str | None) -> CheckpointCallback:
    """Progress in the UI and one event per stored checkpoint (what re-evaluation deployments trigger on)."""
    from focusflow.config import LaptSpec

    logger = get_run_logger()
    total = max(1, LaptSpec(**params["lapt"]).total_steps)
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key_name(language or "run", "lapt-progress"),
                                           description=f"LAPT progress ({total} optimizer steps)")

    def on_checkpoint(uri: str, step: int, metrics: Mapping[str, Any]) -> None:
        update_progress_artifact(progress_id, progress=min(100.0, 100.0 * step / total))
        emit_checkpoint_event(uri, language, step, metrics)
        logger.info("checkpoint at step %d stored: %s", step, redact_uri(uri))

    return on_checkpoint
