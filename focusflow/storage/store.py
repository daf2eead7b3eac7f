"""ArtifactStore: content-addressed, atomically committed artifacts over fsspec (local disk or S3).

Layout under the store root::

    <stage>/<key>/_manifest.json        the commit marker, written last, atomically
    <stage>/<key>/d-<uuid>/<files...>   the data of one writer

The store is the public API over its parts, each in its own module: what a committed artifact is
(:mod:`~focusflow.storage.artifact`), the transport with its limits, retries and atomic writes
(:mod:`~focusflow.storage.transport`), the commit protocol (:mod:`~focusflow.storage.commit`), verified
reads (:mod:`~focusflow.storage.reads`), listings (:mod:`~focusflow.storage.listing`) and deletion and
garbage collection (:mod:`~focusflow.storage.housekeeping`). The store root is created by the first
write; reading a local store that does not exist is an error, so a misspelled path is not an empty store.
Layers above that keep records about artifacts name their folder with :func:`keep_records` and register an
:func:`on_delete` hook; the store knows nothing else of them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from platformdirs import user_cache_dir

from focusflow.storage import housekeeping
from focusflow.storage.artifact import MANIFEST, Artifact, BrokenArtifact, input_hashes
from focusflow.storage.commit import commit_folder
from focusflow.storage.errors import ArtifactNotFound, CorruptArtifactError, StoreError
from focusflow.storage.keys import artifact_key, redact_uri, shorten_key, validate_relative_path, validate_segment
from focusflow.storage.listing import Catalog
from focusflow.storage.reads import Reader
from focusflow.storage.transport import Transport, default_store_uri

__all__ = ["MANIFEST", "Artifact", "ArtifactNotFound", "ArtifactStore", "BrokenArtifact",
           "CorruptArtifactError", "StoreError", "default_store_uri", "on_delete", "redact_uri"]

log = logging.getLogger(__name__)

DeleteHook = Callable[["ArtifactStore", str, str], None]
_DELETE_HOOKS: list[DeleteHook] = []


def on_delete(hook: DeleteHook) -> DeleteHook:
    """Register ``hook(store, stage, key)``, called after an artifact is deleted: a layer above that keeps
    records about artifacts (the orchestrator's cached task results) removes them there. Registering twice is a no-op."""
    if hook not in _DELETE_HOOKS:
        _DELETE_HOOKS.append(hook)
    return hook


def normalize_store_uri(raw: str) -> str:
    """An absolute store URI; a ``.``/``..`` in a URI (``file://``, ``s3://``) is refused, never resolved, and a
    local path's ``..`` only steps out of a folder that exists (as the shell would), so a store command never
    acts on a store other than the one it was given."""
    if "://" in raw:
        segments = urlsplit(raw).path.split("/")
        if any(segment in (".", "..") for segment in segments):
            raise StoreError(f"store {redact_uri(raw)} contains '.' or '..': give the store's own URI")
        return raw
    path = Path(raw).expanduser()
    parts = path.parts
    for index, part in enumerate(parts):
        if part == ".." and not Path(*parts[:index]).is_dir():
            raise StoreError(f"store {raw}: {Path(*parts[:index])} is not a folder, so its '..' names nothing; "
                             "give the store's own path")
    return path.resolve().as_uri()


class ArtifactStore:
    """Put, find and read artifacts addressed by ``(stage, key)`` under one root URI."""

    def __init__(self, uri: str | os.PathLike[str] | None = None, *, retries: int | None = None,
                 backoff_s: float = 0.5, cache_dir: str | os.PathLike[str] | None = None) -> None:
        raw = normalize_store_uri(str(uri) if uri is not None else default_store_uri())
        self.uri = raw.rstrip("/")
        self.transport = Transport(self.uri, retries=retries, backoff_s=backoff_s)
        self.cache_dir = Path(cache_dir or user_cache_dir("focusflow")) / "fetched"
        self.reader = Reader(self.transport, self.cache_dir)
        self.catalog = Catalog(self.transport, self.reader)

    def __repr__(self) -> str:
        return f"ArtifactStore({redact_uri(self.uri)!r})"

    # the transport's facts, as the store's callers have always read them
    fs = property(lambda self: self.transport.fs)
    root = property(lambda self: self.transport.root)
    is_local = property(lambda self: self.transport.is_local)
    retries = property(lambda self: self.transport.retries)
    endpoint = property(lambda self: self.transport.endpoint)

    def key(self, stage: str, params: Mapping[str, Any] | None = None,
            inputs: Mapping[str, Artifact | str] | None = None, version: int | str = 1) -> str:
        """The content-addressed key for a stage run.

        Inputs count by content hash: give artifacts, artifact URIs of this store, or hashes.
        """
        resolved = {name: self.resolve(value) if isinstance(value, str) and "://" in value else value
                    for name, value in (inputs or {}).items()}
        return artifact_key(stage, params, input_hashes(resolved), version)

    def staging_prefix(self, stage: str, pid: int | None = None) -> str:
        """Name prefix of a writer's local staging folder: it names this store, so ``gc`` of another leaves it."""
        return housekeeping.staging_prefix(self.uri, stage, pid)

    # ----------------------------------------------------------------- queries
    def exists(self, stage: str, key: str) -> bool:
        validate_segment(stage, "stage"), validate_segment(key, "key")
        path = self.transport.path(stage, key, MANIFEST)
        return self.transport.retry("exists", lambda: self.fs.exists(path))

    def get(self, stage: str, key: str) -> Artifact:
        """The committed artifact, or ArtifactNotFound."""
        return self.reader.manifest(stage, key)

    def find(self, stage: str, key: str) -> Artifact | None:
        try:
            return self.get(stage, key)
        except ArtifactNotFound:
            return None

    def resolve(self, uri: str) -> Artifact:
        """The artifact at ``<store>/<stage>/<key>`` (a URI printed by this store)."""
        prefix = self.uri + "/"
        if not uri.startswith(prefix):
            raise StoreError(f"{redact_uri(uri)} is not inside store {redact_uri(self.uri)}")
        parts = uri[len(prefix):].strip("/").split("/")
        if len(parts) != 2:
            raise StoreError(f"{redact_uri(uri)} is not an artifact URI (<store>/<stage>/<key>)")
        return self.get(parts[0], parts[1])

    def require_root(self) -> None:
        """StoreError unless the store exists: a local folder, or a bucket that answers (a missing prefix is empty)."""
        self.transport.require_root()

    def stages(self) -> list[str]:
        return self.catalog.stages()

    def scan(self, stage: str | None = None) -> list[Artifact | BrokenArtifact]:
        """Every artifact folder with a manifest: committed artifacts, and the ones whose manifest is unreadable."""
        return self.catalog.scan(stage)

    def list(self, stage: str | None = None) -> list[Artifact]:
        """Committed artifacts of one stage (or all), oldest first; unreadable ones are skipped with a warning."""
        return self.catalog.list(stage)

    def keys(self, stage: str) -> list[str]:
        return self.catalog.keys(stage)

    def match_key(self, stage: str, prefix: str) -> str:
        """The one key of ``stage`` starting with ``prefix``; an ambiguous prefix is a StoreError naming the keys."""
        return self.catalog.match_key(stage, prefix)

    def is_store(self) -> bool:
        """Whether the root holds at least one ``<stage>/<key>/_manifest.json``: a folder ``rm`` and ``gc`` may touch."""
        return self.catalog.is_store()

    def require_store(self) -> None:
        self.catalog.require_store()

    # ----------------------------------------------------------------- writes
    @contextlib.contextmanager
    def writer(self, stage: str, key: str, *, params: Mapping[str, Any] | None = None,
               inputs: Mapping[str, Artifact | str] | None = None,
               metadata: Mapping[str, Any] | None = None) -> Iterator[Path]:
        """Yield an empty local folder; on a clean exit its files are uploaded and committed.

        On an exception nothing is committed and the local folder is removed. A local store that cannot be written
        (a read-only file system, a file where a folder belongs) is a StoreError before the caller fills the folder.
        """
        validate_segment(stage, "stage"), validate_segment(key, "key")
        self.transport.require_writable(stage, key)
        staging = Path(tempfile.mkdtemp(prefix=self.staging_prefix(stage)))
        try:
            yield staging
            commit_folder(self.reader, stage, key, staging, params=params, inputs=inputs, metadata=metadata)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def build_or_get(self, stage: str, build: Callable[[Path], Mapping[str, Any] | None], *,
                     params: Mapping[str, Any] | None = None, inputs: Mapping[str, Artifact | str] | None = None,
                     version: int | str = 1, key: str | None = None) -> Artifact:
        """The artifact for these inputs: found (and verified) if it exists, else built into a folder and committed.

        ``build(folder)`` writes the artifact's files and may return metadata (metrics, counts, timings)
        that goes into the manifest, with the build's host and ``build_seconds``: outside the content hash.
        ``key``: these arguments' key (``self.key(stage, params, inputs, version)``) when the caller has it.
        """
        key = key or self.key(stage, params, inputs, version)
        found = self.find(stage, key)
        if found is not None:
            self.verify(found)
            log.info("cache hit %s/%s", stage, shorten_key(key))
            return found
        metadata: dict[str, Any] = {"host": socket.gethostname()}  # volatile facts live here, outside the content
        started = time.perf_counter()
        with self.writer(stage, key, params=params, inputs=inputs, metadata=metadata) as folder:
            metadata.update(build(folder) or {})
            metadata["build_seconds"] = round(time.perf_counter() - started, 3)
        return self.get(stage, key)

    def put_dir(self, stage: str, key: str, local_dir: str | os.PathLike[str], **kwargs: Any) -> Artifact:
        """Upload a whole folder (e.g. a Hugging Face model folder) as one artifact."""
        local = Path(local_dir)
        if not local.is_dir():
            raise StoreError(f"{local} is not a directory")
        return commit_folder(self.reader, stage, key, local, **kwargs)

    def put_file(self, stage: str, key: str, local_file: str | os.PathLike[str], name: str | None = None,
                 **kwargs: Any) -> Artifact:
        local = Path(local_file)
        if not local.is_file():
            raise StoreError(f"{local} is not a file")
        return self.put_bytes(stage, key, name or local.name, local, **kwargs)

    def put_bytes(self, stage: str, key: str, name: str, data: bytes | Path, **kwargs: Any) -> Artifact:
        """One file as an artifact: ``data`` is its bytes, or a local file to copy."""
        with self.writer(stage, key, **kwargs) as folder:
            target = folder / validate_relative_path(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, Path):
                shutil.copy2(data, target)
            else:
                target.write_bytes(data)
        return self.get(stage, key)

    # ----------------------------------------------------------------- reads
    def read_bytes(self, artifact: Artifact, name: str) -> bytes:
        """A file's bytes, verified against the manifest."""
        return self.reader.read_bytes(artifact, name)

    def read_json(self, artifact: Artifact, name: str) -> Any:
        return json.loads(self.read_bytes(artifact, name))

    @contextlib.contextmanager
    def open(self, artifact: Artifact, name: str) -> Iterator[BinaryIO]:
        """A verified local file handle for one file of the artifact."""
        path = self.fetch(artifact, files=[name]) / name
        with open(path, "rb") as handle:
            yield handle

    def verify(self, artifact: Artifact, hashes: bool | None = None) -> None:
        """CorruptArtifactError unless every file of the artifact is there with the manifest's size and, on a
        local store (or with ``hashes=True``), its sha256. On a remote store sizes cost one listing and hashes
        are checked when the files are fetched (``hashes=True`` fetches them)."""
        self.reader.verify(artifact, hashes)

    def fetch(self, artifact: Artifact, files: list[str] | None = None, verify: bool = True) -> Path:
        """A local folder holding the artifact's files, verified against the manifest.

        On a local store this is the artifact's own folder (nothing is copied); on a remote
        store the files are downloaded once into the cache and re-verified on every call.
        """
        return self.reader.fetch(artifact, files, verify)

    # ----------------------------------------------------------------- housekeeping
    def delete(self, stage: str, key: str) -> bool:
        """Remove an artifact (whether or not its manifest is readable), or what a killed write left of one;
        False when there was nothing to remove. A key folder holding anything the store does not write is
        refused (StoreError): it is not an artifact. Then every :func:`on_delete` hook runs."""
        removed = housekeeping.delete_artifact(self.transport, stage, key)
        for hook in _DELETE_HOOKS:
            hook(self, stage, key)
        return removed

    def remove_records(self, folder: str, pattern: str) -> int:
        """Remove the files of a records folder (:func:`keep_records`) whose names match the glob ``pattern``
        (for the layer that keeps its records there, see :func:`on_delete`); how many were removed."""
        return housekeeping.remove_records(self.transport, folder, pattern)

    def gc(self, grace_s: float = 24 * 3600, dry_run: bool = False) -> list[str]:
        """Remove what killed or losing writers left, untouched for ``grace_s``; return what was (or would be) removed.

        In the store: data folders no manifest names and pending manifests (``.manifest-*``), ``.tmp-*``
        files; on this machine: this store's writers' staging folders of dead processes and partial downloads
        in its fetch cache. Artifacts with an unreadable manifest are left alone (``focusflow store rm`` them);
        a root that holds folders but no artifact is not a store, and is refused.
        """
        return housekeeping.collect_garbage(self.catalog, self.reader, grace_s, dry_run)
