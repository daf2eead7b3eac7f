"""What the publish stage shows in the Prefect UI: the Hub repository link (or where the folder is stored)."""

from __future__ import annotations

from prefect.artifacts import create_link_artifact, create_markdown_artifact

from focusflow.publish.record import PublishRecord
from focusflow.storage import Artifact, ArtifactStore, redact_uri
from focusflow.tasks.common import artifact_key_name


def publish_link(store: ArtifactStore, artifact: Artifact, language: str | None, label: str | None) -> None:
    """A link artifact to the pushed repository and the card's head; without a push, where the folder is stored."""
    record = PublishRecord.of(artifact)
    repo_id, pushed = record.repo_id or "?", record.push
    key = artifact_key_name(language or "run", "publish", label or "model")
    if pushed:
        create_link_artifact(link=pushed["url"], link_text=repo_id, key=key,
                             description=f"**{label or 'model'}** published to the Hub as `{repo_id}`"
                                         + (f" (commit {pushed['commit'][:12]})" if pushed.get("commit") else ""))
        return
    card = store.read_bytes(artifact, "README.md").decode("utf-8") if "README.md" in artifact.files else ""
    create_markdown_artifact(
        markdown=f"Repository folder for `{repo_id}` stored at `{redact_uri(artifact.uri)}` (not pushed: "
                 f"`publish.push` is false).\n\n---\n\n{card}", key=key,
        description=f"**{label or 'model'}**: Hub repository folder, not pushed")
