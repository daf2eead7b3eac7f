"""ArtifactStore: content-addressed, atomically committed artifacts over fsspec (local disk or S3).

Layout under the store root::

    <stage>/<key>/_manifest.json        the commit marker, written last, atomically
    <stage>/<key>/d-<uuid>/<files...>   the data of one writer

A writer uploads its files into its own ``d-<uuid>`` folder, checks every size, then writes
the manifest only if none exists (a hard link on local disk, a conditional PUT on S3): the
first writer wins, and a later writer of the same key removes its own data folder and returns
the winner's artifact. Readers see an artifact only through its manifest, so a crash mid-write
leaves nothing that reads as complete (``gc`` removes what it left). A manifest names only
files inside its own artifact (checked on every read) and every file is verified against the
sha256 in the manifest when read. The store root is created by the first write; reading a
local store that does not exist is an error, so a misspelled path is not an empty store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import logging
import os
import shutil
import socket
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

from focusflow.errors import FocusflowError
from focusflow.storage.atomic import atomic_write, sha256_file
from focusflow.storage.keys import (
    UnsafeNameError,
    artifact_key,
    redact_secrets,
    validate_relative_path,
    validate_segment,
)

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
RESULTS_FOLDER = "prefect-results"  # where Prefect persists task results (URIs) in the store
MANIFEST_FORMAT = 1
DATA_PREFIX = "d-"  # data folders: d-<uuid>
PENDING_PREFIX = ".manifest-"  # a manifest being written
STAGING_PREFIX = "focusflow-"  # a writer's local folder: focusflow-<stage>-pid<pid>-<random>
T = TypeVar("T")
# S3 transport limits (seconds, attempts): one attempt is bounded by connect + read timeout, and only our
# retry loop retries, so an endpoint that accepts TCP and never answers fails within retries x (connect + read).
S3_CONNECT_TIMEOUT = ("FOCUSFLOW_S3_CONNECT_TIMEOUT", 5.0)
S3_READ_TIMEOUT = ("FOCUSFLOW_S3_READ_TIMEOUT", 15.0)
S3_RETRIES = ("FOCUSFLOW_S3_RETRIES", 3)


class StoreError(FocusflowError, RuntimeError):
    """The store could not complete an operation (after retries, where retrying made sense)."""


class ArtifactNotFound(StoreError):
    """No committed artifact at that stage and key."""


class CorruptArtifactError(StoreError):
    """A committed artifact's file is missing or does not match its manifest hash."""


def _env_number(setting: tuple[str, float | int]) -> Any:
    """The value of a ``(variable, default)`` setting, of the default's type, or a StoreError naming the variable."""
    name, default = setting
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = type(default)(raw)
    except ValueError:
        value = None
    if value is None or value <= 0:
        raise StoreError(f"{name}={raw!r} must be a positive {type(default).__name__}")
    return value


def _s3_session() -> Any:
    """An aiobotocore session whose requests never wait for ``100 Continue``.

    botocore sends ``Expect: 100-continue`` with uploads, and aiohttp waits for the interim answer
    without any timeout: an endpoint that accepts the connection and never answers hung every PUT.
    """
    from aiobotocore.session import AioSession

    def drop_expect(request: Any, **_: Any) -> None:
        if "Expect" in request.headers:
            del request.headers["Expect"]

    session = AioSession()
    session.register("before-sign.s3", drop_expect)
    return session


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


@dataclass(frozen=True)
class BrokenArtifact:
    """An artifact folder whose manifest cannot be read or is refused: listed, never used."""

    store_uri: str
    stage: str
    key: str
    error: str

    @property
    def uri(self) -> str:
        return f"{self.store_uri.rstrip('/')}/{self.stage}/{self.key}"


def content_hash_of(files: Mapping[str, Mapping[str, Any]]) -> str:
    listing = "\n".join(f"{name}\t{files[name]['size']}\t{files[name]['sha256']}" for name in sorted(files))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


class ArtifactStore:
    """Put, find and read artifacts addressed by ``(stage, key)`` under one root URI."""

    def __init__(
        self,
        uri: str | os.PathLike[str] | None = None,
        *,
        retries: int | None = None,
        backoff_s: float = 0.5,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        raw = str(uri) if uri is not None else default_store_uri()
        if "://" not in raw:
            raw = Path(raw).expanduser().resolve().as_uri()
        self.uri = raw.rstrip("/")
        self.backoff_s = backoff_s
        self.fs, self.root = self._filesystem(self.uri)
        self.is_local = self.fs.protocol in ("file", "local") or "file" in tuple(self.fs.protocol)
        self.retries = max(1, retries if retries is not None else 3 if self.is_local else _env_number(S3_RETRIES))
        self.endpoint = None if self.is_local else (
            os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "the default AWS endpoint")
        self.cache_dir = Path(cache_dir or user_cache_dir("focusflow")) / "fetched"

    @staticmethod
    def _filesystem(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
        scheme = urlsplit(uri).scheme
        if scheme not in ("file", "s3"):  # fsspec would open anything, e.g. connect to an ftp:// host here
            raise StoreError(f"store {redact_uri(uri)} has an unsupported scheme {scheme!r}: use a local folder, "
                             "file:///path or s3://bucket/prefix")
        options: dict[str, Any] = {}
        if scheme == "s3":
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            client_kwargs: dict[str, Any] = {}
            if endpoint:
                client_kwargs["endpoint_url"] = endpoint
            options = {
                "client_kwargs": client_kwargs,
                # Every attempt is bounded by these timeouts and botocore makes one attempt: only our own
                # retry loop (``_retry``) retries, so the total time is bounded too.
                "config_kwargs": {"connect_timeout": _env_number(S3_CONNECT_TIMEOUT),
                                  "read_timeout": _env_number(S3_READ_TIMEOUT),
                                  "retries": {"total_max_attempts": 1}},
                "skip_instance_cache": True,
                "use_listings_cache": False,  # concurrent writers: a listing must show what is there now
            }
        try:
            if scheme == "s3":
                options["session"] = _s3_session()
            fs, root = fsspec.core.url_to_fs(uri, **options)
        except (ImportError, ValueError) as exc:
            raise StoreError(f"cannot open store {redact_uri(uri)}: {exc}") from exc
        if scheme == "s3":
            fs.retries = 1  # s3fs's own retry loop (5 attempts with backoff by default) would multiply ours
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

    def _where(self) -> str:
        return redact_uri(self.uri) + (f" (endpoint {redact_uri(self.endpoint)})" if self.endpoint else "")

    def _retry(self, what: str, operation: Callable[[], T]) -> T:
        delay = self.backoff_s
        for attempt in range(1, self.retries + 1):
            try:
                return operation()
            except (FileNotFoundError, FileExistsError, StoreError, UnsafeNameError):
                raise
            except PermissionError as exc:  # 403: retrying cannot help
                raise StoreError(f"{what} refused on {self._where()}: access denied ({exc}); "
                                 "check the credentials and the bucket policy") from exc
            except Exception as exc:  # noqa: BLE001 — any transport error is retried, then reported
                if attempt == self.retries:
                    raise StoreError(
                        f"{what} failed on {self._where()} after {attempt} attempts: "
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
                if self.is_local and not Path(self.root).is_dir():
                    raise ArtifactNotFound(self._no_store()) from None
                if not self.is_local:
                    self.require_root()  # a missing bucket is an error, not a cache miss that starts a build
                raise ArtifactNotFound(f"no artifact {stage}/{key} in {redact_uri(self.uri)}") from None

        raw = self._retry("read manifest", read)
        artifact_uri = f"{self.uri}/{stage}/{key}"
        try:
            manifest = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorruptArtifactError(
                f"manifest of {stage}/{key} is not valid JSON ({exc}); {_remove_advice(artifact_uri)}") from exc
        artifact = Artifact(self.uri, stage, key, manifest)
        check_manifest(artifact)
        return artifact

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

    def _no_store(self) -> str:
        return f"no store at {redact_uri(self.uri)} (it is created by the first stage that writes)"

    def _names(self, *segments: str) -> list[str]:
        """Names of the entries in a folder of the store; [] for a folder that does not exist (yet)."""
        def listing() -> list[str]:
            try:
                return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self._path(*segments), detail=False))
            except FileNotFoundError:
                return []

        return self._retry("list " + "/".join(segments or ("store",)), listing)

    def require_root(self) -> None:
        """StoreError unless the store exists: a local folder, or a bucket that answers (a missing prefix is empty)."""
        if self.is_local:
            if not Path(self.root).is_dir():
                raise StoreError(self._no_store())
            return
        bucket = self.root.split("/", 1)[0]
        try:
            self._retry("open bucket", lambda: self.fs.info(bucket))
        except FileNotFoundError:
            raise StoreError(f"no bucket {bucket!r} at {self._where()}") from None

    def stages(self) -> list[str]:
        self.require_root()
        return self._stage_names()

    def _stage_names(self) -> list[str]:
        return [s for s in self._names() if not s.startswith(".") and s != RESULTS_FOLDER]

    def scan(self, stage: str | None = None) -> list[Artifact | BrokenArtifact]:
        """Every artifact folder with a manifest: committed artifacts, and the ones whose manifest is unreadable."""
        self.require_root()
        stages = [validate_segment(stage, "stage")] if stage else self._stage_names()
        found: list[Artifact | BrokenArtifact] = []
        for name in stages:
            for key in self._names(name):
                try:
                    validate_segment(key, "key")
                    found.append(self.get(name, key))
                except ArtifactNotFound:
                    continue  # a folder without a manifest: a write in progress or an orphan (see gc)
                except (CorruptArtifactError, UnsafeNameError) as exc:
                    found.append(BrokenArtifact(self.uri, name, key, str(exc)))
        return sorted(found, key=lambda a: a.manifest.get("created", "") if isinstance(a, Artifact) else "")

    def list(self, stage: str | None = None) -> list[Artifact]:
        """Committed artifacts of one stage (or all), oldest first; unreadable ones are skipped with a warning."""
        found: list[Artifact] = []
        for entry in self.scan(stage):
            if isinstance(entry, BrokenArtifact):
                log.warning("skipping %s/%s: %s", entry.stage, entry.key, entry.error)
            else:
                found.append(entry)
        return found

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
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{stage}-pid{os.getpid()}-"))
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

        ``build(folder)`` writes the artifact's files and may return metadata (metrics, counts, timings)
        that goes into the manifest, with the build's host and ``build_seconds``: outside the content hash.
        """
        key = self.key(stage, params, inputs, version)
        found = self.find(stage, key)
        if found is not None:
            log.info("cache hit %s/%s", stage, key[:12])
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

        data_dir = f"{DATA_PREFIX}{uuid.uuid4().hex}"
        try:
            for relative in files:
                remote = self._path(stage, key, data_dir, relative)
                self._retry(f"upload {relative}", lambda r=remote, f=relative: self._upload(local / f, r))
            # verify: every file is there with the size we wrote, before anything reads as committed
            for relative, info in files.items():
                remote = self._path(stage, key, data_dir, relative)
                size = self._retry(f"verify {relative}", lambda r=remote: self.fs.info(r)["size"])
                if size != info["size"]:
                    raise StoreError(f"upload of {relative} is {size} bytes, expected {info['size']}")
        except BaseException:  # a full disk, a lost endpoint: leave nothing half-written (gc is the backstop)
            with contextlib.suppress(Exception):
                self.fs.rm(self._path(stage, key, data_dir), recursive=True)
            raise

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
        try:
            self._retry("commit manifest", lambda: self._commit_manifest(self._path(stage, key, MANIFEST), payload))
        except FileExistsError:
            winner = self.get(stage, key)
            if winner.data_dir != data_dir:  # (equal when our own PUT landed but its answer was lost)
                log.info("%s/%s was committed by another writer; removing our copy", stage, key)
                self._retry("remove redundant data", lambda: self.fs.rm(self._path(stage, key, data_dir),
                                                                         recursive=True))
                return winner
        log.info("stored %s/%s (%d files, %d bytes)", stage, key, len(files), manifest["total_bytes"])
        return Artifact(self.uri, stage, key, manifest)

    def _commit_manifest(self, remote: str, payload: bytes) -> None:
        """Write the manifest only where none exists (first writer wins), else FileExistsError."""
        if not self.is_local:  # a conditional PUT (If-None-Match: *)
            self.fs.pipe_file(remote, payload, mode="create")
            return
        pending = f"{remote.rsplit('/', 1)[0]}/{PENDING_PREFIX}{uuid.uuid4().hex}"
        self._write_atomic(pending, payload)
        try:
            os.link(pending, remote)  # atomic and never replaces
        except OSError as exc:
            if isinstance(exc, FileExistsError) or exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV):
                raise
            if os.path.exists(remote):  # no hard links on this file system: check, then rename
                raise FileExistsError(remote) from exc
            os.replace(pending, remote)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pending)

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
        check_manifest(artifact)
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
                f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; {_remove_advice(artifact.uri)}"
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
        check_manifest(artifact)
        wanted = files or list(artifact.files)
        if self.is_local:
            boundary = Path(self._path(artifact.stage, artifact.key))
        else:
            boundary = self.cache_dir / _slug(self.uri) / artifact.stage / artifact.key
        folder = boundary / artifact.data_dir
        for name in wanted:
            remote = self._remote(artifact, name)
            local = folder / name
            if not _inside(local, boundary):  # a symlink on the way that leads out of the artifact
                raise CorruptArtifactError(f"file {name!r} of artifact {artifact.stage}/{artifact.key} resolves "
                                           f"outside the artifact; {_remove_advice(artifact.uri)}")
            if not self.is_local and not (local.exists() and local.stat().st_size == artifact.files[name]["size"]):
                local.parent.mkdir(parents=True, exist_ok=True)
                partial = local.with_name(local.name + f".part-{uuid.uuid4().hex[:8]}")
                try:
                    self._retry(f"download {name}", lambda r=remote, p=partial: self.fs.get_file(r, str(p)))
                except FileNotFoundError:
                    raise CorruptArtifactError(
                        f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; "
                        f"{_remove_advice(artifact.uri)}"
                    ) from None
                os.replace(partial, local)
            if not local.exists():
                raise CorruptArtifactError(
                    f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; "
                    f"{_remove_advice(artifact.uri)}"
                )
            if verify:
                _check(artifact, name, local.stat().st_size, sha256_file(local))
        return folder

    def delete(self, stage: str, key: str) -> bool:
        """Remove an artifact (whether or not its manifest is readable); False when there was nothing to remove.

        The manifest goes first, so the artifact stops reading as committed at once.
        """
        validate_segment(stage, "stage"), validate_segment(key, "key")
        self.require_root()
        manifest = self._path(stage, key, MANIFEST)
        removed = False
        if self._retry("find manifest", lambda: self.fs.exists(manifest)):
            self._retry("delete manifest", lambda: self.fs.rm_file(manifest))
            removed = True
        if self._names(stage, key):
            self._retry("delete data", lambda: self.fs.rm(self._path(stage, key), recursive=True))
            removed = True
        # the orchestrator's cache records for this artifact (see focusflow.tasks.common)
        pattern = self._path(RESULTS_FOLDER, f"*-{stage}-*-{key}")
        for record in self._retry("list cache records", lambda: self.fs.glob(pattern)):
            self._retry("delete cache record", lambda r=record: self.fs.rm_file(r))
        return removed

    def gc(self, grace_s: float = 24 * 3600, dry_run: bool = False) -> list[str]:
        """Remove what killed or losing writers left, untouched for ``grace_s``; return what was (or would be) removed.

        In the store: data folders no manifest names and pending manifests (``.manifest-*``), ``.tmp-*``
        files; on this machine: writers' staging folders of dead processes and partial downloads in the
        fetch cache. Artifacts with an unreadable manifest are left alone (``focusflow store rm`` them).
        """
        self.require_root()
        stale: list[str] = []
        for stage in self._stage_names():
            for key in self._names(stage):
                try:
                    named = {self.get(stage, key).data_dir}
                except ArtifactNotFound:
                    named = set()
                except (CorruptArtifactError, UnsafeNameError):
                    continue
                for entry in self._names(stage, key):
                    leftover = (entry.startswith(DATA_PREFIX) and entry not in named) or \
                        entry.startswith(PENDING_PREFIX) or ".tmp-" in entry
                    path = self._path(stage, key, entry)
                    if leftover and self._age_s(path) > grace_s:
                        stale.append(path)
        local = [p for p in Path(tempfile.gettempdir()).glob(f"{STAGING_PREFIX}*-pid*-*") if _dead_writer(p)]
        local += list(self.cache_dir.glob("**/*.part-*")) if self.cache_dir.is_dir() else []
        local_stale = [str(p) for p in local if time.time() - _newest_mtime(p) > grace_s]
        if not dry_run:
            for path in stale:
                self._retry("remove leftover", lambda p=path: self.fs.rm(p, recursive=True))
                if self.is_local:  # a key folder that only held a killed writer's data
                    with contextlib.suppress(OSError):
                        os.rmdir(Path(path).parent)
            for path in map(Path, local_stale):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return [f"{self.fs.unstrip_protocol(p)}" if not self.is_local else p for p in stale] + local_stale

    def _age_s(self, path: str) -> float:
        """Seconds since anything under ``path`` last changed."""
        if self.is_local:
            return time.time() - _newest_mtime(Path(path))
        found = self._retry("inspect leftover", lambda: self.fs.find(path, detail=True, withdirs=False))
        times = [info["LastModified"].timestamp() for info in found.values() if info.get("LastModified")]
        return time.time() - max(times) if times else float("inf")


def _check(artifact: Artifact, name: str, size: int, digest: str) -> None:
    expected = artifact.files[name]
    if size != expected["size"] or digest != expected["sha256"]:
        raise CorruptArtifactError(
            f"file {name!r} of artifact {artifact.stage}/{artifact.key} is corrupt "
            f"({size} bytes, sha256 {digest[:12]}…; manifest says {expected['size']} bytes, "
            f"{expected['sha256'][:12]}…); {_remove_advice(artifact.uri)}"
        )


def _remove_advice(uri: str) -> str:
    return f"remove it with `focusflow store rm {redact_uri(uri)}` and run the stage again"


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside ``folder``."""
    return path.resolve().is_relative_to(folder.resolve())


def check_manifest(artifact: Artifact) -> None:
    """Refuse a manifest whose data folder or file names could point outside its artifact, or that is malformed."""
    manifest = artifact.manifest

    def refuse(problem: str) -> None:
        raise CorruptArtifactError(f"manifest of {artifact.stage}/{artifact.key} is refused: {problem}; "
                                   f"{_remove_advice(artifact.uri)}")

    if not isinstance(manifest, dict):
        refuse("it is not a JSON object")
    data_dir, files = manifest.get("data_dir"), manifest.get("files")
    try:
        validate_segment(data_dir, "data_dir")
    except UnsafeNameError:
        refuse(f"data_dir {data_dir!r} is not a folder name inside the artifact")
    if not isinstance(files, dict) or not files:
        refuse("it lists no files")
    for name, info in files.items():
        try:
            safe = validate_relative_path(name) == name and name != MANIFEST
        except UnsafeNameError:
            safe = False
        if not safe:
            refuse(f"file name {name!r} is not a relative path inside the artifact")
        if not (isinstance(info, dict) and isinstance(info.get("size"), int) and isinstance(info.get("sha256"), str)):
            refuse(f"file {name!r} has no size and sha256")
    if not isinstance(manifest.get("content_hash"), str):
        refuse("it has no content_hash")


def _newest_mtime(path: Path) -> float:
    times = [path.lstat().st_mtime] + ([p.lstat().st_mtime for p in path.rglob("*")] if path.is_dir() else [])
    return max(times)


def _dead_writer(staging: Path) -> bool:
    """Whether a writer's staging folder (``focusflow-<stage>-pid<pid>-…``) belongs to a process that is gone."""
    try:
        pid = int(staging.name.rsplit("-pid", 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _input_hashes(inputs: Mapping[str, Artifact | str] | None) -> dict[str, str]:
    return {
        str(name): (value.content_hash if isinstance(value, Artifact) else str(value))
        for name, value in (inputs or {}).items()
    }


def _slug(uri: str) -> str:
    return hashlib.sha256(redact_uri(uri).encode()).hexdigest()[:16]
