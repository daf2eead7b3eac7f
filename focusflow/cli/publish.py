"""``focusflow publish``: a stored model's Hub repository (model card from stored results), pushed or exported.

The repository folder is the ``publish`` stage's artifact; ``--out`` writes it to a folder without
pushing, otherwise it is uploaded to the Hub (``HF_TOKEN`` or the saved login, ``HF_ENDPOINT``) and
committed to the store only once the push succeeded.
"""

from __future__ import annotations

from pathlib import Path

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import StoreOption, check_out, echo_result, export, stage_input
from focusflow.storage import ArtifactStore


@app.command("publish")
def publish_command(
    model: str = typer.Argument(..., help="A stored model (init, align, lapt or lapt-checkpoint artifact): its URI or "
                                          "folder, or an exported copy of one."),
    repo_id: str = typer.Option(..., "--repo-id", help="Hub repository, e.g. user/e5-small-sw-focus."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the repository folder here instead of pushing."),
    private: bool = typer.Option(False, "--private/--public", help="Create the repository private."),
    revision: str = typer.Option(None, "--revision", "--branch", help="Branch to push to (created if missing)."),
    commit_message: str = typer.Option(None, "--commit-message", "-m", help="Commit message of the upload."),
    store: str = StoreOption,
) -> None:
    """Write the model card from the stored results and push the repository (or export it with --out)."""
    from focusflow.pipeline import run_stage
    from focusflow.pipeline.publish_stage import publish_inputs, publish_params

    params = publish_params(repo_id, private=private, revision=revision, commit_message=commit_message,
                            push=out is None)
    artifact_store = ArtifactStore(store)
    check_out(artifact_store, out)
    inputs = publish_inputs(artifact_store, stage_input(artifact_store, model, "model"))
    artifact = run_stage(artifact_store, "publish", params, inputs)
    export(artifact_store, artifact, out)
    echo_result(artifact)
    pushed = artifact.metadata.get("push")
    if pushed:
        typer.echo(f"published: {pushed['url']}" + (f" (commit {pushed['commit']})" if pushed.get("commit") else ""))
    elif out is not None:
        typer.echo(f"repository folder: {out}")
