"""``focusflow store ls|show``: look inside the artifact store."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from focusflow.cli.app import app
from focusflow.storage import ArtifactStore, redact_uri

store_app = typer.Typer(help="Inspect the artifact store.", no_args_is_help=True)
app.add_typer(store_app, name="store")
StoreOption = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE", help="Store URI (file://… or s3://…).")


@store_app.command("ls")
def list_artifacts(
    stage: str = typer.Argument(None, help="Only this stage."),
    store: str = StoreOption,
) -> None:
    """List committed artifacts: stage, key, files, size, created."""
    artifact_store = ArtifactStore(store)
    table = Table(title=f"artifacts in {redact_uri(artifact_store.uri)}")
    for column in ("stage", "key", "files", "bytes", "created"):
        table.add_column(column)
    for artifact in artifact_store.list(stage):
        table.add_row(artifact.stage, artifact.key[:16], str(len(artifact.files)),
                      str(artifact.manifest.get("total_bytes", "")), artifact.manifest.get("created", ""))
    Console().print(table)


@store_app.command("show")
def show_artifact(
    uri: str = typer.Argument(..., help="Artifact URI <store>/<stage>/<key>, or <stage>/<key> in the default store."),
    store: str = StoreOption,
    verify: bool = typer.Option(False, "--verify", help="Also check every file's hash."),
) -> None:
    """Print an artifact's manifest (and verify its files with --verify)."""
    if "://" in uri:
        stage_part, key = uri.rstrip("/").rsplit("/", 2)[-2:]
        artifact_store = ArtifactStore(uri.rstrip("/").rsplit("/", 2)[0])
    else:
        stage_part, key = uri.strip("/").split("/", 1)
        artifact_store = ArtifactStore(store)
    artifact = artifact_store.get(stage_part, key)
    if verify:
        artifact_store.fetch(artifact)
    typer.echo(json.dumps({"uri": redact_uri(artifact.uri), **artifact.manifest}, indent=2, ensure_ascii=False))
    if verify:
        typer.echo(f"verified {len(artifact.files)} files")
