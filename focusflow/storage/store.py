"""ArtifactStore: content-addressed, atomically committed artifacts over fsspec (local disk or S3).

Layout under the store root::

    <stage>/<key>/_manifest.json        the commit marker, written last, atomically
    <stage>/<key>/d-<uuid>/<files...>   the data of one writer

A writer uploads its files into its own ``d-<uuid>`` folder, checks every size, then writes
the manifest (an atomic rename on local disk, a single PUT on S3). Readers see an artifact
only through its manifest, so a crash mid-write leaves nothing that reads as complete, and
two writers of one key never mix files: each manifest names its own data folder. Every file
is verified against the sha256 in the manifest when read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit, urlunsplit

import fsspec
from platformdirs import user_cache_dir

from focusflow.storage.atomic import atomic_write, sha256_file
from focusflow.storage.keys import (
    artifact_key,
    redact_secrets,
    validate_relative_path,
    validate_segment,
)

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
RESULTS_FOLDER = "prefect-results"  # where Prefect persists task results (URIs) in the store
MANIFEST_FORMAT = 1
T = TypeVar("T")


class StoreError(RuntimeError):
    """The store could not complete an operation (after retries, where retrying made sense)."""


class ArtifactNotFound(StoreError):
    """No committed artifact at that stage and key."""


class CorruptArtifactError(StoreError):
    """A committed artifact's file is missing or does not match its manifest hash."""


def default_store_uri() -> str:
    """``FOCUSFLOW_STORE`` if set, else a folder in the user's cache directory."""
    env = os.environ.get("FOCUSFLOW_STORE")
    if env:
        return env
    return Path(user_cache_dir("focusflow")).joinpath("store").as_uri()


def redact_uri(uri: str) -> str:
    """Drop user:password@ from a URI so that it can be logged or stored."""
    parts = urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return uri


@dataclass(frozen=True)
class Artifact:
    """A committed artifact: where it lives and what its manifest says."""

    store_uri: str
    stage: str
    key: str
    manifest: dict[str, Any] = field(repr=False)

    @property
    def uri(self) -> str:
        return f"{self.store_uri.rstrip('/')}/{self.stage}/{self.key}"

    @property
    def data_dir(self) -> str:
        return self.manifest["data_dir"]

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        """Relative file name -> {"size": bytes, "sha256": hex}."""
        return self.manifest["files"]

    @property
    def content_hash(self) -> str:
        """Hash of the artifact's content alone (file names, sizes and hashes): the input identity downstream."""
        return self.manifest["content_hash"]

    @property
    def params(self) -> dict[str, Any]:
        return self.manifest.get("params", {})

    @property
    def metadata(self) -> dict[str, Any]:
        return self.manifest.get("metadata", {})


def content_hash_of(files: Mapping[str, Mapping[str, Any]]) -> str:
    listing = "\n".join(f"{name}\t{files[name]['size']}\t{files[name]['sha256']}" for name in sorted(files))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


class ArtifactStore:
    """Put, find and read artifacts addressed by ``(stage, key)`` under one root URI."""

    def __init__(
        self,
        uri: str | os.PathLike[str] | None = None,
        *,
        retries: int = 3,
        backoff_s: float = 0.5,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        raw = str(uri) if uri is not None else default_store_uri()
        if "://" not in raw:
            raw = Path(raw).expanduser().resolve().as_uri()
        self.uri = raw.rstrip("/")
        self.retries = max(1, retries)
        self.backoff_s = backoff_s
        self.fs, self.root = self._filesystem(self.uri)
        self.is_local = self.fs.protocol in ("file", "local") or "file" in tuple(self.fs.protocol)
        if self.is_local:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        self.cache_dir = Path(cache_dir or user_cache_dir("focusflow")) / "fetched"

    @staticmethod
    def _filesystem(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
        scheme = urlsplit(uri).scheme
        options: dict[str, Any] = {}
        if scheme == "s3":
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            client_kwargs: dict[str, Any] = {}
            if endpoint:
                client_kwargs["endpoint_url"] = endpoint
            options = {
                "client_kwargs": client_kwargs,
                # Fail fast on a dead endpoint; our own retry loop bounds the total time.
                "config_kwargs": {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2}},
                "skip_instance_cache": True,
            }
        try:
            fs, root = fsspec.core.url_to_fs(uri, **options)
        except (ImportError, ValueError) as exc:
            raise StoreError(f"cannot open store {redact_uri(uri)}: {exc}") from exc
        return fs, root.rstrip("/")

    def __repr__(self) -> str:
        return f"ArtifactStore({redact_uri(self.uri)!r})"

    # ----------------------------------------------------------------- helpers
    def key(self, stage: str, params: Mapping[str, Any] | None = None,
            inputs: Mapping[str, Artifact | str] | None = None, version: int | str = 1) -> str:
        """The content-addressed key for a stage run.

        Inputs count by content hash: give artifacts, artifact URIs of this store, or hashes.
        """
        resolved = {name: self.resolve(value) if isinstance(value, str) and "://" in value else value
                    for name, value in (inputs or {}).items()}
        return artifact_key(stage, params, _input_hashes(resolved), version)

    def _path(self, *segments: str) -> str:
        return "/".join([self.root, *segments])

    def _retry(self, what: str, operation: Callable[[], T]) -> T:
        delay = self.backoff_s
        for attempt in range(1, self.retries + 1):
            try:
                return operation()
            except (FileNotFoundError, ArtifactNotFound, CorruptArtifactError):
                raise
            except Exception as exc:  # noqa: BLE001 — any transport error is retried, then reported
                if attempt == self.retries:
                    raise StoreError(
                        f"{what} failed on {redact_uri(self.uri)} after {attempt} attempts: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                log.warning("%s failed (attempt %d/%d): %s; retrying", what, attempt, self.retries, exc)
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    # ----------------------------------------------------------------- queries
    def exists(self, stage: str, key: str) -> bool:
        validate_segment(stage, "stage"), validate_segment(key, "key")
        return self._retry("exists", lambda: self.fs.exists(self._path(stage, key, MANIFEST)))

    def get(self, stage: str, key: str) -> Artifact:
        """The committed artifact, or ArtifactNotFound."""
        validate_segment(stage, "stage"), validate_segment(key, "key")
        path = self._path(stage, key, MANIFEST)

        def read() -> bytes:
            try:
                return self.fs.cat_file(path)
            except FileNotFoundError:
                raise ArtifactNotFound(f"no artifact {stage}/{key} in {redact_uri(self.uri)}") from None

        raw = self._retry("read manifest", read)
        try:
            manifest = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorruptArtifactError(f"manifest of {stage}/{key} is not valid JSON: {exc}") from exc
        return Artifact(self.uri, stage, key, manifest)

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

    def stages(self) -> list[str]:
        def listing() -> list[str]:
            if not self.fs.exists(self.root):
                return []
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.root, detail=False))

        return [s for s in self._retry("list stages", listing) if not s.startswith(".") and s != RESULTS_FOLDER]

    def list(self, stage: str | None = None) -> list[Artifact]:
        """Committed artifacts of one stage (or all), oldest first."""
        stages = [stage] if stage else self.stages()
        found: list[Artifact] = []
        for name in stages:
            validate_segment(name, "stage")
            pattern = self._path(name, "*", MANIFEST)
            for path in sorted(self._retry("list artifacts", lambda p=pattern: self.fs.glob(p))):
                key = path.rstrip("/").split("/")[-2]
                artifact = self.find(name, key)
                if artifact is not None:
                    found.append(artifact)
        return sorted(found, key=lambda a: a.manifest.get("created", ""))

    # ----------------------------------------------------------------- writes
    @contextlib.contextmanager
    def writer(
        self,
        stage: str,
        key: str,
        *,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Artifact | str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Iterator[Path]:
        """Yield an empty local folder; on a clean exit its files are uploaded and committed.

        On an exception nothing is committed and the local folder is removed.
        """
        validate_segment(stage, "stage"), validate_segment(key, "key")
        staging = Path(tempfile.mkdtemp(prefix=f"focusflow-{stage}-"))
        try:
            yield staging
            self._commit_dir(stage, key, staging, params=params, inputs=inputs, metadata=metadata)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def build_or_get(
        self,
        stage: str,
        build: Callable[[Path], Mapping[str, Any] | None],
        *,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Artifact | str] | None = None,
        version: int | str = 1,
    ) -> Artifact:
        """The artifact for these inputs: found if it exists, else built into a folder and committed.

        ``build(folder)`` writes the artifact's files and may return metadata (metrics, counts)
        that goes into the manifest.
        """
        key = self.key(stage, params, inputs, version)
        found = self.find(stage, key)
        if found is not None:
            log.info("cache hit %s/%s", stage, key[:12])
            return found
        metadata: dict[str, Any] = {}
        with self.writer(stage, key, params=params, inputs=inputs, metadata=metadata) as folder:
            metadata.update(build(folder) or {})
        return self.get(stage, key)

    def put_dir(self, stage: str, key: str, local_dir: str | os.PathLike[str], **kwargs: Any) -> Artifact:
        """Upload a whole folder (e.g. a Hugging Face model folder) as one artifact."""
        local = Path(local_dir)
        if not local.is_dir():
            raise StoreError(f"{local} is not a directory")
        return self._commit_dir(stage, key, local, **kwargs)

    def put_file(self, stage: str, key: str, local_file: str | os.PathLike[str], name: str | None = None,
                 **kwargs: Any) -> Artifact:
        local = Path(local_file)
        if not local.is_file():
            raise StoreError(f"{local} is not a file")
        with self.writer(stage, key, **kwargs) as folder:
            target = folder / validate_relative_path(name or local.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(local, target)
        return self.get(stage, key)

    def put_bytes(self, stage: str, key: str, name: str, data: bytes, **kwargs: Any) -> Artifact:
        with self.writer(stage, key, **kwargs) as folder:
            target = folder / validate_relative_path(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return self.get(stage, key)

    def _commit_dir(
        self,
        stage: str,
        key: str,
        local: Path,
        *,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Artifact | str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Artifact:
        validate_segment(stage, "stage"), validate_segment(key, "key")
        files: dict[str, dict[str, Any]] = {}
        for path in sorted(p for p in local.rglob("*") if p.is_file() or p.is_symlink()):
            if path.is_symlink():
                raise StoreError(f"refusing to store symlink {path.relative_to(local)}")
            relative = validate_relative_path(path.relative_to(local).as_posix())
            if relative == MANIFEST:
                raise StoreError(f"{MANIFEST} is reserved for the store")
            files[relative] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
        if not files:
            raise StoreError(f"refusing to commit an empty artifact {stage}/{key}")

        data_dir = f"d-{uuid.uuid4().hex}"
        for relative in files:
            remote = self._path(stage, key, data_dir, relative)
            self._retry(f"upload {relative}", lambda r=remote, f=relative: self._upload(local / f, r))
        # verify: every file is there with the size we wrote, before anything reads as committed
        for relative, info in files.items():
            remote = self._path(stage, key, data_dir, relative)
            size = self._retry(f"verify {relative}", lambda r=remote: self.fs.info(r)["size"])
            if size != info["size"]:
                raise StoreError(f"upload of {relative} is {size} bytes, expected {info['size']}")

        manifest = {
            "format": MANIFEST_FORMAT,
            "stage": stage,
            "key": key,
            "data_dir": data_dir,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(),
            "params": redact_secrets(dict(params or {})),
            "inputs": _input_hashes(inputs),
            "metadata": redact_secrets(dict(metadata or {})),
            "files": files,
            "content_hash": content_hash_of(files),
            "total_bytes": sum(f["size"] for f in files.values()),
        }
        payload = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
        self._retry("commit manifest", lambda: self._write_atomic(self._path(stage, key, MANIFEST), payload))
        log.info("stored %s/%s (%d files, %d bytes)", stage, key, len(files), manifest["total_bytes"])
        return Artifact(self.uri, stage, key, manifest)

    def _upload(self, local: Path, remote: str) -> None:
        if self.is_local:
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, remote)
        else:
            self.fs.put_file(str(local), remote)

    def _write_atomic(self, remote: str, payload: bytes) -> None:
        if self.is_local:
            atomic_write(remote, payload)
        else:  # an object PUT is atomic: readers see the old object or the new one
            self.fs.pipe_file(remote, payload)

    # ----------------------------------------------------------------- reads
    def _remote(self, artifact: Artifact, name: str) -> str:
        relative = validate_relative_path(name)
        if relative not in artifact.files:
            raise FileNotFoundError(f"{relative!r} is not a file of artifact {artifact.stage}/{artifact.key}")
        return self._path(artifact.stage, artifact.key, artifact.data_dir, relative)

    def read_bytes(self, artifact: Artifact, name: str) -> bytes:
        """A file's bytes, verified against the manifest."""
        remote = self._remote(artifact, name)
        try:
            data = self._retry(f"read {name}", lambda: self.fs.cat_file(remote))
        except FileNotFoundError:
            raise CorruptArtifactError(
                f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; delete and recompute it"
            ) from None
        _check(artifact, name, len(data), hashlib.sha256(data).hexdigest())
        return data

    def read_json(self, artifact: Artifact, name: str) -> Any:
        return json.loads(self.read_bytes(artifact, name))

    @contextlib.contextmanager
    def open(self, artifact: Artifact, name: str) -> Iterator[BinaryIO]:
        """A verified local file handle for one file of the artifact."""
        path = self.fetch(artifact, files=[name]) / name
        with open(path, "rb") as handle:
            yield handle

    def fetch(self, artifact: Artifact, files: list[str] | None = None, verify: bool = True) -> Path:
        """A local folder holding the artifact's files, verified against the manifest.

        On a local store this is the artifact's own folder (nothing is copied); on a remote
        store the files are downloaded once into the cache and re-verified on every call.
        """
        wanted = files or list(artifact.files)
        if self.is_local:
            folder = Path(self._path(artifact.stage, artifact.key, artifact.data_dir))
        else:
            folder = self.cache_dir / _slug(self.uri) / artifact.stage / artifact.key / artifact.data_dir
        for name in wanted:
            remote = self._remote(artifact, name)
            local = folder / name
            if not self.is_local and not (local.exists() and local.stat().st_size == artifact.files[name]["size"]):
                local.parent.mkdir(parents=True, exist_ok=True)
                partial = local.with_name(local.name + f".part-{uuid.uuid4().hex[:8]}")
                try:
                    self._retry(f"download {name}", lambda r=remote, p=partial: self.fs.get_file(r, str(p)))
                except FileNotFoundError:
                    raise CorruptArtifactError(
                        f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}"
                    ) from None
                os.replace(partial, local)
            if not local.exists():
                raise CorruptArtifactError(
                    f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; delete and recompute it"
                )
            if verify:
                _check(artifact, name, local.stat().st_size, sha256_file(local))
        return folder

    def delete(self, stage: str, key: str) -> None:
        """Remove an artifact: the manifest first, so it stops reading as committed at once."""
        validate_segment(stage, "stage"), validate_segment(key, "key")
        manifest = self._path(stage, key, MANIFEST)
        if self.fs.exists(manifest):
            self._retry("delete manifest", lambda: self.fs.rm_file(manifest))
        if self.fs.exists(self._path(stage, key)):
            self._retry("delete data", lambda: self.fs.rm(self._path(stage, key), recursive=True))
        # the orchestrator's cache records for this artifact (see focusflow.tasks.common)
        pattern = self._path(RESULTS_FOLDER, f"*-{stage}-*-{key}")
        for record in self._retry("list cache records", lambda: self.fs.glob(pattern)):
            self._retry("delete cache record", lambda r=record: self.fs.rm_file(r))


def _check(artifact: Artifact, name: str, size: int, digest: str) -> None:
    expected = artifact.files[name]
    if size != expected["size"] or digest != expected["sha256"]:
        raise CorruptArtifactError(
            f"file {name!r} of artifact {artifact.stage}/{artifact.key} is corrupt "
            f"({size} bytes, sha256 {digest[:12]}…; manifest says {expected['size']} bytes, "
            f"{expected['sha256'][:12]}…); delete the artifact and recompute it"
        )


def _input_hashes(inputs: Mapping[str, Artifact | str] | None) -> dict[str, str]:
    return {
        str(name): (value.content_hash if isinstance(value, Artifact) else str(value))
        for name, value in (inputs or {}).items()
    }


def _slug(uri: str) -> str:
    return hashlib.sha256(redact_uri(uri).encode()).hexdigest()[:16]
