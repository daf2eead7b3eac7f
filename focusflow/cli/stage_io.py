"""How a stage command meets the store: inputs as stored artifacts, ``--out`` as an export.

Every stage command runs its stage through ``focusflow.pipeline.run_stage``, so what the CLI
computes is a cache hit in a flow and the other way round. An input may be an artifact URI, a
folder of a stored artifact, or a local file or folder; local ones are imported into the store by
content (stage ``import``), so the same bytes give the same key wherever they lie.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from focusflow.config import ConfigError, PipelineConfig, load_config
from focusflow.storage import Artifact, ArtifactStore
from focusflow.storage.atomic import atomic_folder
from focusflow.storage.fingerprint import folder_fingerprint
from focusflow.storage.keys import artifact_key

IMPORT_STAGE = "import"
IMPORT_VERSION = 1

StoreOption = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE",
                           help="Artifact store URI (default: FOCUSFLOW_STORE or the user cache).")
SetOption = typer.Option([], "--set", help="Override a setting, e.g. --set dedup.threshold=0.7 (repeatable).")
ConfigOption = typer.Option(None, "--config", "-c", help="YAML run configuration (its sections are used).")


def run_config(config: Path | None, overrides: list[str], explicit: dict[str, Any] | None = None,
               language: str | None = None) -> PipelineConfig:
    """The one configuration loader of the commands: YAML < ``--set`` < explicit options (``None`` = not
    given); unknown sections are errors."""
    given: dict[str, Any] = {}
    for section, values in (explicit or {}).items():
        if isinstance(values, dict):  # a section: the options given
            values = {k: v for k, v in values.items() if v is not None} or None
        if values is not None:
            given[section] = values
    if language is None and not _names_language(config):
        language = "xx"  # stages that do not depend on the language
    return load_config(config, overrides, language=language, **given)


def _names_language(config: Path | None) -> bool:
    if config is None or not config.is_file():
        return False
    import yaml

    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return True  # load_config reports it
    return not isinstance(data, dict) or "language" in data


def _stored(store: ArtifactStore, value: str) -> Artifact | None:
    """The artifact ``value`` names: a URI of this store, or a local path to an artifact (or its data folder)."""
    if "://" in value and not value.startswith("file://"):
        return store.resolve(value.rstrip("/"))
    path = Path(value.removeprefix("file://")).expanduser()
    if not path.exists():
        return None
    path = path.resolve()
    for candidate in (path, path.parent):
        if (candidate / "_manifest.json").is_file():
            other = ArtifactStore(candidate.parent.parent.as_uri())
            return other.get(candidate.parent.name, candidate.name)
    return None


def import_folder(store: ArtifactStore, kind: str, folder: Path) -> Artifact:
    """Store a local folder by content (same bytes, same artifact) so stages can take it as an input."""
    key = artifact_key(IMPORT_STAGE, {"kind": kind, "content": folder_fingerprint(folder)}, {}, IMPORT_VERSION)
    found = store.find(IMPORT_STAGE, key)
    return found or store.put_dir(IMPORT_STAGE, key, folder, params={"kind": kind}, metadata={"kind": kind})


def stage_input(store: ArtifactStore, value: str | Path, kind: str,
                layout: Callable[[Path, Path], None] | None = None) -> Artifact:
    """``value`` as an artifact of this store: found if it is one, else imported (``layout`` arranges files)."""
    text = str(value)
    found = _stored(store, text)
    if found is not None:
        if found.store_uri != store.uri:  # an artifact of another local store: import its files
            return stage_input(store, ArtifactStore(found.store_uri).fetch(found), kind, layout)
        return found
    path = Path(text).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{kind} input {text} does not exist")
    if layout is None:
        if not path.is_dir():
            raise FileNotFoundError(f"{kind} input {text} must be a folder")
        if kind == "model":
            from focusflow.models.loading import require_weights

            require_weights(path)
        return import_folder(store, kind, path)
    with tempfile.TemporaryDirectory(prefix=f"focusflow-import-{kind}-") as staging:
        layout(path, Path(staging))
        return import_folder(store, kind, Path(staging))


def documents_layout(name: str) -> Callable[[Path, Path], None]:
    """A corpus file (jsonl/txt, optionally .gz) or a folder holding ``name`` → ``name`` as JSON Lines."""
    def arrange(path: Path, staging: Path) -> None:
        from focusflow.corpus.io import read_texts, write_texts

        source = path / name if path.is_dir() else path
        if not source.is_file():
            raise FileNotFoundError(f"folder {path} has no {name}")
        write_texts(staging / name, read_texts(source))
    return arrange


def split_layout(heldout: Path | None = None) -> Callable[[Path, Path], None]:
    """A split folder (train.jsonl + heldout.jsonl) or a train file (+ an optional held-out file)."""
    def arrange(path: Path, staging: Path) -> None:
        from focusflow.corpus.io import read_texts, write_texts

        if path.is_dir():
            train = next((path / n for n in ("train.jsonl", "train.jsonl.gz", "documents.jsonl") if (path / n).is_file()),
                         None)
            if train is None:
                raise FileNotFoundError(f"folder {path} has no train.jsonl (or documents.jsonl)")
            held = heldout or next((path / n for n in ("heldout.jsonl", "heldout.jsonl.gz") if (path / n).is_file()),
                                   None)
        else:
            train, held = path, heldout
        write_texts(staging / "train.jsonl", read_texts(train))
        if held is not None:
            write_texts(staging / "heldout.jsonl", read_texts(held))
    return arrange


def export(store: ArtifactStore, artifact: Artifact, out: Path | None) -> None:
    """Write the artifact's files to ``out`` as one atomic unit (all of them or none)."""
    if out is None:
        return
    folder = store.fetch(artifact)
    with atomic_folder(out) as staging:
        for name in artifact.files:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, target)


def echo_result(artifact: Artifact, extra: dict[str, Any] | None = None) -> None:
    """The stage's metrics as JSON, then where its artifact is stored."""
    shown = {**dict(artifact.metadata), **(extra or {}), "artifact": artifact.uri}
    typer.echo(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


__all__ = ["ConfigError", "ConfigOption", "SetOption", "StoreOption", "documents_layout", "echo_result", "export",
           "import_folder", "run_config", "split_layout", "stage_input"]
