"""What the downstream and report stages show in the Prefect UI."""

from __future__ import annotations

import base64

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from focusflow.evaluation.records import DownstreamRecord
from focusflow.pipeline.report import COMPARISON_FILE, REPORT_TEXT
from focusflow.storage import Artifact, ArtifactStore, redact_uri
from focusflow.tasks.common import artifact_key_name, publish_stage


def publish_downstream(store: ArtifactStore, artifact: Artifact, language: str | None, label: str | None) -> None:
    """The downstream results (mean ± std over seeds) as a table in the Prefect UI."""
    results = DownstreamRecord.of(artifact).results
    if results:
        create_table_artifact(table=results, key=artifact_key_name(language or "run", "downstream", label or "model"),
                              description=f"Downstream results of **{label or 'model'}** (mean ± std over seeds)")


def publish_report(store: ArtifactStore, artifact: Artifact, language: str | None, label: str | None = None) -> None:
    """The report's Markdown (chart inlined) and its comparison table as Prefect artifacts."""
    markdown = store.read_bytes(artifact, REPORT_TEXT).decode("utf-8")
    if "comparison.png" in artifact.files:
        encoded = base64.b64encode(store.read_bytes(artifact, "comparison.png")).decode("ascii")
        markdown = markdown.replace("](comparison.png)", f"](data:image/png;base64,{encoded})")
    markdown += f"\n\n---\nStored at `{redact_uri(artifact.uri)}`\n"
    create_markdown_artifact(markdown=markdown, key=artifact_key_name(language or "run", "report"),
                             description=f"focusflow report for {language}")
    if COMPARISON_FILE in artifact.files:
        import io

        import pandas as pd

        frame = pd.read_csv(io.BytesIO(store.read_bytes(artifact, COMPARISON_FILE)))
        create_table_artifact(table=frame.round(4).astype(object).where(frame.notna(), None).to_dict("records"),
                              key=artifact_key_name(language or "run", "comparison"),
                              description=f"Initialization methods compared on held-out {language} text")
    publish_stage("report", language, artifact.uri, {})
