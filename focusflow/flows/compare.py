"""``compare_methods``: every initialization method on the same tokenizer, fastText and held-out text."""

from __future__ import annotations

from typing import Any

from prefect import flow, tags

from focusflow.config import merge_layers
from focusflow.flows.common import cancelled_when_stopped, load_run_config
from focusflow.logs import configure_output
from focusflow.pipeline.graph import compare
from focusflow.storage import ArtifactStore
from focusflow.tasks import tasks_for


@flow(name="compare-methods", log_prints=True)
@cancelled_when_stopped
def compare_methods(language: str, methods: list[str] | None = None, config: dict[str, Any] | None = None,
                    config_path: str | None = None) -> str:
    """Initialize with each method (no LAPT), evaluate all on held-out text; returns the report URI."""
    configure_output()
    cfg = load_run_config(language, merge_layers(config, {"init": {"methods": methods}} if methods else None),
                          config_path)
    store_uri = ArtifactStore(cfg.store).uri
    with tags(f"language:{cfg.language}", "compare-methods"):
        report = compare(cfg, store_uri, tasks_for(store_uri))
    print(f"report: {report}")
    return report
