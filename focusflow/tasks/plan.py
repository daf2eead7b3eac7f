"""The run's plan in the Prefect UI: what a flow will do, shown as it starts (``pipeline.run_view``)."""

from __future__ import annotations

import logging

from prefect.artifacts import create_markdown_artifact

from focusflow.config import PipelineConfig
from focusflow.pipeline.run_view import plan_run
from focusflow.storage import ArtifactStore
from focusflow.tasks.common import artifact_key_name

log = logging.getLogger(__name__)


def publish_plan(cfg: PipelineConfig, store_uri: str) -> None:
    """The plan as a Markdown artifact (``<language>-plan``): the run's models, which may be its product, and every
    stage call with whether it is stored or to be built. A plan that cannot be made is said and the run goes on:
    the run itself then meets the same problem and says it where it happens."""
    try:
        view = plan_run(cfg, ArtifactStore(store_uri))
        create_markdown_artifact(markdown=view.markdown(), key=artifact_key_name(cfg.language, "plan"),
                                 description=f"What this run of {cfg.language} does, before it does it")
    except Exception as exc:  # noqa: BLE001  (the plan is a view; the run is what must not fail for it)
        log.warning("the run's plan could not be shown: %s", exc)


__all__ = ["publish_plan"]
