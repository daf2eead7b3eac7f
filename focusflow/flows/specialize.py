"""``specialize_language``: the whole pipeline for one language, as one Prefect flow of cached tasks.

corpus → dedup → split → tokenizer → fastText → init (each method) → intrinsic eval
→ LAPT (selected methods) → downstream eval → report → publish (when `publish.repo_id` is set)
(the graph: ``focusflow.pipeline.graph``)
"""

from __future__ import annotations

from typing import Any

from prefect import flow, tags

from focusflow.config import PipelineConfig
from focusflow.flows.common import cancelled_when_stopped, handing_over, load_run_config, runner_for
from focusflow.logs import configure_output
from focusflow.pipeline.graph import specialize
from focusflow.publish.record import PublishRecord
from focusflow.storage import ArtifactStore
from focusflow.tasks import tasks_for
from focusflow.tasks.plan import publish_plan


@flow(name="specialize-language", log_prints=True)
@cancelled_when_stopped
def specialize_language(language: str, config: dict[str, Any] | None = None,
                        config_path: str | None = None) -> dict[str, Any]:
    """Specialize the source model to ``language``; returns the URIs of every stored artifact."""
    configure_output()
    cfg = load_run_config(language, config, config_path)
    store_uri = ArtifactStore(cfg.store).uri
    publish_plan(cfg, store_uri)
    with tags(f"language:{cfg.language}"):
        resolved = specialize(cfg, store_uri, tasks_for(store_uri))
    print(f"report: {resolved['report']}")
    store = ArtifactStore(store_uri)
    for label, uri in resolved.get("publish", {}).items():
        pushed = PublishRecord.of(store.resolve(uri)).push
        print(f"published {label}: {pushed['url']}" if pushed else f"repository folder of {label}: {uri}")
    return resolved


def run_specialize(cfg: PipelineConfig) -> dict[str, Any]:
    """Run the flow on a loaded configuration with the task runner it selects.

    The flow receives the configuration whole (every field, as the UI shows its parameters): the
    file and the layers were read once, by whoever loaded ``cfg``."""
    with handing_over(cfg) as config:
        return specialize_language.with_options(task_runner=runner_for(cfg))(cfg.language, config)
