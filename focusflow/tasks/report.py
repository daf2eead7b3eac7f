"""Downstream evaluation and report tasks; the report is also shown in the Prefect UI."""

from __future__ import annotations

import base64
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from focusflow.pipeline.evaluation_stages import (
    DOWNSTREAM_STAGE,
    DOWNSTREAM_VERSION,
    REPORT_STAGE,
    REPORT_VERSION,
    build_report,
    run_downstream_stage,
)
from focusflow.storage import ArtifactStore, redact_uri
from focusflow.tasks.common import ArtifactKeyPolicy, artifact_key_name, publish_stage, stage_slot


class _DownstreamKeyPolicy(ArtifactKeyPolicy):
    """Downstream keys use the evaluation data's content fingerprint instead of its path."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):  # type: ignore[override]
        from focusflow.pipeline.evaluation_stages import downstream_params

        translated = {"store_uri": inputs["store_uri"], "params": downstream_params(inputs["params"]),
                      "inputs": {"model": inputs["inputs"]["model"]}}
        return super().compute_key(task_ctx, translated, flow_parameters, **kwargs)


@task(name="downstream", cache_policy=_DownstreamKeyPolicy(stage=DOWNSTREAM_STAGE, version=DOWNSTREAM_VERSION),
      persist_result=True, result_serializer="json", tags=["stage:downstream", "gpu"], timeout_seconds=48 * 3600,
      task_run_name="downstream[{name}]")
def downstream_task(store_uri: str, params: dict[str, Any], inputs: dict[str, str], language: str | None = None,
                    name: str = "model") -> str:
    """Fine-tune ``inputs['model']`` on ``params['tasks']`` over seeds; returns the results' URI."""
    store = ArtifactStore(store_uri)
    with stage_slot("downstream"):
        artifact = run_downstream_stage(store, params, inputs["model"], name)
    results = artifact.metadata.get("results", [])
    if results:
        create_table_artifact(table=results, key=artifact_key_name(language or "run", "downstream", name),
                              description=f"Downstream results of **{name}** (mean ± std over seeds)")
    return artifact.uri


@task(name="report", cache_policy=ArtifactKeyPolicy(stage=REPORT_STAGE, version=REPORT_VERSION),
      persist_result=True, result_serializer="json", tags=["stage:report"], task_run_name="report[{language}]")
def report_task(store_uri: str, params: dict[str, Any], inputs: dict[str, str], language: str | None = None) -> str:
    """Write the run report to the store and show it in the Prefect UI."""
    store = ArtifactStore(store_uri)
    artifact = build_report(store, params["language"], inputs)
    publish_report(store, artifact, params["language"])
    return artifact.uri


def publish_report(store: ArtifactStore, artifact: Any, language: str) -> None:
    """The report's Markdown (chart inlined) and its comparison table as Prefect artifacts."""
    markdown = store.read_bytes(artifact, "report.md").decode("utf-8")
    if "comparison.png" in artifact.files:
        encoded = base64.b64encode(store.read_bytes(artifact, "comparison.png")).decode("ascii")
        markdown = markdown.replace("](comparison.png)", f"](data:image/png;base64,{encoded})")
    markdown += f"\n\n---\nStored at `{redact_uri(artifact.uri)}`\n"
    create_markdown_artifact(markdown=markdown, key=artifact_key_name(language, "report"),
                             description=f"focusflow report for {language}")
    if "comparison.csv" in artifact.files:
        import io

        import pandas as pd

        frame = pd.read_csv(io.BytesIO(store.read_bytes(artifact, "comparison.csv")))
        create_table_artifact(table=frame.round(4).astype(object).where(frame.notna(), None).to_dict("records"),
                              key=artifact_key_name(language, "comparison"),
                              description=f"Initialization methods compared on held-out {language} text")
    publish_stage("report", language, artifact.uri, {})
