"""``focusflow store ls|du|show|rm|gc``: look inside the artifact store and keep it clean."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from focusflow.cli.app import FocusflowTyper, app
from focusflow.storage import (
    ArtifactStore,
    BrokenArtifact,
    StoreError,
    disk_usage,
    locate,
    redact_uri,
    unique_prefixes,
)

store_app = FocusflowTyper(help="Inspect and clean the artifact store.", no_args_is_help=True)
app.add_typer(store_app, name="store")
StoreOption = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE", help="Store URI (file://… or s3://…).")
UriArgument = typer.Argument(..., help="Artifact URI <store>/<stage>/<key>, or <stage>/<key> in --store "
                             "(the default store); any unique prefix of the key.")


@store_app.command("ls")
def list_artifacts(
    stage: str = typer.Argument(None, help="Only this stage."),
    store: str = StoreOption,
) -> None:
    """List artifacts: stage, key, files, size, created; an unreadable manifest is one row marked BAD.

    Keys are shown by their shortest unique prefix in the stage (at least 16 characters), a checkpoint's with
    its step whole (``<prefix>…-step-00000040``): what ``show`` and ``rm`` accept. Stage names and keys are
    never cut (at 80 columns too): the other columns wrap instead."""
    artifact_store = ArtifactStore(store)
    entries = artifact_store.scan(stage)
    short: dict[str, dict[str, str]] = {}
    for name in {entry.stage for entry in entries}:
        short[name] = unique_prefixes(artifact_store.keys(name))
    rows = []
    for entry in entries:
        key = short[entry.stage].get(entry.key, entry.key)
        if isinstance(entry, BrokenArtifact):
            rows.append(((entry.stage, key, "BAD", "", entry.error), "red"))
        else:
            size = entry.manifest.get("total_bytes")
            created = str(entry.manifest.get("created", ""))[:19].replace("T", " ")  # to the second, as stored (UTC)
            rows.append(((entry.stage, key, str(len(entry.files)), _size(size) if isinstance(size, int) else "",
                          created), None))
    table = Table(title=f"artifacts in {redact_uri(artifact_store.uri)}")
    for index, column in enumerate(("stage", "key")):  # what `show` and `rm` take: whole, however narrow the terminal
        table.add_column(column, no_wrap=True, min_width=max((len(row[index]) for row, _ in rows), default=None))
    for column in ("files", "size", "created"):
        table.add_column(column, overflow="fold", justify="left" if column == "created" else "right")
    for row, style in rows:
        table.add_row(*row, style=style)
    Console().print(table)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


@store_app.command("du")
def usage(
    store: str = StoreOption,
    top: int = typer.Option(10, "--top", min=0, help="How many of the largest artifacts to list."),
) -> None:
    """Where the space is: bytes per stage, and the largest artifacts with their largest files (from manifests)."""
    artifact_store = ArtifactStore(store)
    found = disk_usage(artifact_store.scan(), top=top)
    total = found.total_bytes
    count = sum(artifacts for artifacts, _ in found.stages.values())
    typer.echo(f"{_size(total)} in {count} artifact(s) in {redact_uri(artifact_store.uri)}")
    table = Table(title="space per stage")
    for column in ("stage", "artifacts", "size", "share"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for stage, (count, size) in found.stages.items():
        table.add_row(stage, str(count), _size(size), f"{100 * size / max(total, 1):.0f}%")
    console = Console()
    console.print(table)
    if found.largest:
        keys = {stage: unique_prefixes(artifact_store.keys(stage)) for stage in {a.stage for a in found.largest}}
        addresses = [f"{artifact.stage}/{keys[artifact.stage][artifact.key]}" for artifact in found.largest]
        largest = Table(title="largest artifacts")
        largest.add_column("artifact", no_wrap=True, min_width=max(len(address) for address in addresses))  # never cut
        largest.add_column("size", justify="right", overflow="fold")
        largest.add_column("largest files", overflow="fold")
        for address, artifact in zip(addresses, found.largest, strict=True):
            files = sorted(artifact.files.items(), key=lambda item: -item[1]["size"])[:2]
            largest.add_row(address, _size(sum(info["size"] for info in artifact.files.values())),
                            ", ".join(f"{name} {_size(info['size'])}" for name, info in files))
        console.print(largest)
    if found.broken:
        typer.echo(f"{found.broken} artifact(s) with an unreadable manifest are not counted (see `focusflow store ls`)")


@store_app.command("show")
def show_artifact(
    uri: str = UriArgument,
    store: str = StoreOption,
    verify: bool = typer.Option(False, "--verify", help="Also check every file's hash."),
) -> None:
    """Print an artifact's manifest (and verify its files with --verify)."""
    artifact_store, stage, key = locate(uri, store)
    artifact_store.require_root()
    artifact = artifact_store.get(stage, key)
    if verify:
        artifact_store.fetch(artifact)
    typer.echo(json.dumps({"uri": redact_uri(artifact.uri), **artifact.manifest}, indent=2, ensure_ascii=False))
    if verify:
        typer.echo(f"verified {len(artifact.files)} files")


@store_app.command("rm")
def remove_artifact(uri: str = UriArgument, store: str = StoreOption) -> None:
    """Delete one artifact (also one whose manifest is corrupt); the next run of its stage recomputes it."""
    import focusflow.tasks.common  # noqa: F401 — registers the removal of the tasks' cache records

    artifact_store, stage, key = locate(uri, store)
    if not artifact_store.delete(stage, key):
        raise StoreError(f"no artifact {stage}/{key} in {redact_uri(artifact_store.uri)}")
    typer.echo(f"removed {redact_uri(artifact_store.uri)}/{stage}/{key}")


@store_app.command("gc")
def gc_command(
    store: str = StoreOption,
    grace_hours: float = typer.Option(24.0, "--grace-hours", min=0.0,
                                      help="Only remove leftovers untouched for this long (a write may be running)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be removed."),
) -> None:
    """Remove what killed or concurrent runs left: unreferenced data folders, pending manifests, staging folders."""
    artifact_store = ArtifactStore(store)
    removed = artifact_store.gc(grace_s=grace_hours * 3600, dry_run=dry_run)
    for path in removed:
        typer.echo(("would remove " if dry_run else "removed ") + redact_uri(path))
    typer.echo(f"{len(removed)} leftover(s) {'found' if dry_run else 'removed'}")
