"""The transport under the store: one fsspec file system (local disk or S3), bounded and retried.

Every remote call goes through :meth:`Transport.retry`: transport errors are retried with backoff and
then reported naming the store and endpoint; a 403, and what no retry changes (``errors.is_permanent``: a read-only
file system, a refused permission, a file where the store needs a folder, a full disk), are reported at once.
On S3 each attempt is bounded by a connect and a read timeout and botocore and s3fs make one attempt each, so an
endpoint that accepts TCP and never answers fails within retries x (connect + read). Writes are atomic: a local file
is renamed into place, an object PUT is atomic, and a manifest is written only where none exists (a hard link on
local disk, a conditional PUT on S3).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import fsspec
from platformdirs import user_cache_dir

from focusflow.errors import DISK_FULL_ERRNOS, FocusflowError, cause_chain, is_permanent
from focusflow.stopping import check_stop
from focusflow.storage.artifact import PENDING_PREFIX
from focusflow.storage.atomic import atomic_write
from focusflow.storage.errors import StoreError
from focusflow.storage.keys import redact_uri

log = logging.getLogger(__name__)

T = TypeVar("T")
# S3 transport limits (seconds, attempts): one attempt is bounded by connect + read timeout, and only our
# retry loop retries, so an endpoint that accepts TCP and never answers fails within retries x (connect + read).
S3_CONNECT_TIMEOUT = ("FOCUSFLOW_S3_CONNECT_TIMEOUT", 5.0)
S3_READ_TIMEOUT = ("FOCUSFLOW_S3_READ_TIMEOUT", 15.0)
S3_RETRIES = ("FOCUSFLOW_S3_RETRIES", 3)


def default_store_uri() -> str:
    """``FOCUSFLOW_STORE`` if set, else a folder in the user's cache directory."""
    env = os.environ.get("FOCUSFLOW_STORE")
    if env:
        return env
    return Path(user_cache_dir("focusflow")).joinpath("store").as_uri()


def store_slug(uri: str) -> str:
    """A short stable name of a store (its redacted URI's hash): names its fetch cache and staging folders."""
    return hashlib.sha256(redact_uri(uri).encode()).hexdigest()[:16]


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


def _filesystem(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    scheme = urlsplit(uri).scheme
    if scheme not in ("file", "s3"):  # fsspec would open anything, e.g. connect to an ftp:// host here
        raise StoreError(f"store {redact_uri(uri)} has an unsupported scheme {scheme!r}: use a local folder, "
                         "file:///path or s3://bucket/prefix")
    options: dict[str, Any] = {}
    if scheme == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        options = {
            "client_kwargs": {"endpoint_url": endpoint} if endpoint else {},
            # Every attempt is bounded by these timeouts and botocore makes one attempt: only our own
            # retry loop (``Transport.retry``) retries, so the total time is bounded too.
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


class Transport:
    """Paths, listings, uploads and atomic writes under one store root, each call bounded and retried."""

    def __init__(self, uri: str, *, retries: int | None = None, backoff_s: float = 0.5) -> None:
        self.uri = uri
        self.backoff_s = backoff_s
        self.fs, self.root = _filesystem(uri)
        self.is_local = self.fs.protocol in ("file", "local") or "file" in tuple(self.fs.protocol)
        self.retries = max(1, retries if retries is not None else 3 if self.is_local else _env_number(S3_RETRIES))
        self.endpoint = None if self.is_local else (
            os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "the default AWS endpoint")

    def path(self, *segments: str) -> str:
        return "/".join([self.root, *segments])

    def where(self) -> str:
        """The store (and endpoint) an error names."""
        return redact_uri(self.uri) + (f" (endpoint {redact_uri(self.endpoint)})" if self.endpoint else "")

    def shown(self, path: str) -> str:
        """A path of the store as the user sees it (a URI on S3, a plain path on local disk)."""
        return path if self.is_local else self.fs.unstrip_protocol(path)

    def retry(self, what: str, operation: Callable[[], T]) -> T:
        delay = self.backoff_s
        for attempt in range(1, self.retries + 1):
            try:
                return operation()
            except (FileNotFoundError, FileExistsError, FocusflowError):  # a StoreError, a StopRequested, a bad name
                raise
            except PermissionError as exc:  # 403: retrying cannot help
                if self.is_local:
                    raise self.cannot_write(Path(exc.filename or self.root), exc.errno, f"{what} refused") from exc
                raise StoreError(f"{what} refused on {self.where()}: access denied ({exc}); "
                                 "check the credentials and the bucket policy") from exc
            except Exception as exc:  # noqa: BLE001 — any transport error is retried, then reported
                if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
                    raise  # a full disk stays full: said at once (the CLI names the file), never retried
                if is_permanent(exc):  # a read-only store, a file where a folder belongs: said at once
                    raise self.permanent_error(what, exc) from exc
                if attempt == self.retries:
                    raise StoreError(
                        f"{what} failed on {self.where()} after {attempt} attempts: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                log.warning("%s failed (attempt %d/%d): %s; retrying", what, attempt, self.retries, exc)
                check_stop(f"while retrying {what}")
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def permanent_error(self, what: str, error: Exception) -> StoreError:
        """The one line for an error no retry changes (``errors.is_permanent``), saying what to do."""
        problem = next((e for e in cause_chain(error) if isinstance(e, OSError) and e.errno is not None), None)
        if self.is_local and problem is not None and problem.filename:
            path = Path(os.fsdecode(problem.filename))
            if problem.errno == errno.ENOTDIR:
                return StoreError(self.not_a_folder(_first_file_on(path)))
            if problem.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return self.cannot_write(path, problem.errno, f"{what} refused")
        return StoreError(f"{what} failed on {self.where()}: {type(error).__name__}: {error} (retrying cannot help)")

    def not_a_folder(self, file: Path) -> str:
        """What to say when a file stands where the store needs a folder: the root itself, or a path in it."""
        fix = "point --store (or FOCUSFLOW_STORE) at a folder, or move the file away"
        if file == Path(self.root):
            return f"the store path {self.root} is a file, not a folder: {fix}"
        return f"store {redact_uri(self.uri)}: {file} is a file where the store needs a folder: {fix}"

    def cannot_write(self, path: Path, number: int | None, what: str = "cannot write") -> StoreError:
        """A local store this process may not write (``number``, the OSError's): a read-only file system (EROFS), or
        a folder it has no permission on."""
        folder = next((p for p in (path, *path.parents) if p.is_dir()), path)
        why = ("is on a read-only file system" if number == errno.EROFS
               else "may not be written by this user (permission denied)")
        return StoreError(f"store {redact_uri(self.uri)}: {what}: {folder} {why}; point --store (or FOCUSFLOW_STORE) "
                          "at a folder you can write, or make this one writable")

    def require_writable(self, *segments: str) -> None:
        """StoreError now, before a stage computes what it could not store: a local store whose path (or a folder in
        it) is a file, or whose nearest existing folder on the way to ``segments`` cannot take a new file (read-only,
        no permission; probed with a file created and removed at once). On S3 the first upload says it, unretried."""
        if not self.is_local:
            return
        target = Path(self.path(*segments))
        existing = next(p for p in (target, *target.parents) if p.exists() or p == p.parent)
        if not existing.is_dir():
            raise StoreError(self.not_a_folder(existing))
        try:
            descriptor, probe = tempfile.mkstemp(prefix=".tmp-writable-", dir=existing)
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                raise
            raise self.cannot_write(existing, exc.errno) from exc
        os.close(descriptor)
        os.unlink(probe)

    # ----------------------------------------------------------------- the root and listings
    def no_store(self) -> str:
        if self.is_local and Path(self.root).exists() and not Path(self.root).is_dir():
            return self.not_a_folder(Path(self.root))
        return f"no store at {redact_uri(self.uri)} (it is created by the first stage that writes)"

    def require_root(self) -> None:
        """StoreError unless the store exists: a local folder, or a bucket that answers (a missing prefix is empty)."""
        if self.is_local:
            if not Path(self.root).is_dir():
                raise StoreError(self.no_store())
            return
        bucket = self.root.split("/", 1)[0]
        try:
            self.retry("open bucket", lambda: self.fs.info(bucket))
        except FileNotFoundError:
            raise StoreError(f"no bucket {bucket!r} at {self.where()}") from None

    def names(self, *segments: str, folders: bool = False) -> list[str]:
        """Names of the entries in a folder of the store (``folders``: its subfolders only); [] for a folder that
        does not exist (yet)."""
        folder = self.path(*segments)

        def listing() -> list[str]:
            try:
                entries = self.fs.ls(folder, detail=True)
            except (FileNotFoundError, NotADirectoryError):
                return []
            if len(entries) == 1 and entries[0]["name"].rstrip("/") == folder and entries[0].get("type") == "file":
                return []  # fsspec lists a file as itself: a file is no folder
            return sorted(entry["name"].rstrip("/").rsplit("/", 1)[-1] for entry in entries
                          if not folders or entry.get("type") == "directory")

        return self.retry("list " + "/".join(segments or ("store",)), listing)

    def sizes(self, folder: str) -> dict[str, int]:
        """Relative name -> size of every file under ``folder`` (one listing)."""
        found = self.retry("list files", lambda: self.fs.find(folder, detail=True, withdirs=False))
        return {path[len(folder) + 1:]: info.get("size") for path, info in found.items()}

    def age_s(self, path: str) -> float:
        """Seconds since anything under ``path`` last changed."""
        if self.is_local:
            return time.time() - newest_mtime(Path(path))
        found = self.retry("inspect leftover", lambda: self.fs.find(path, detail=True, withdirs=False))
        times = [info["LastModified"].timestamp() for info in found.values() if info.get("LastModified")]
        return time.time() - max(times) if times else float("inf")

    # ----------------------------------------------------------------- writes
    def upload(self, local: Path, remote: str) -> None:
        if self.is_local:
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(local, remote)
            except OSError as exc:  # shutil names the source (a staging file): the full disk is the store's
                if exc.errno in DISK_FULL_ERRNOS:
                    raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), remote) from exc
                raise
        else:
            self.fs.put_file(str(local), remote)

    def write_atomic(self, remote: str, payload: bytes) -> None:
        if self.is_local:
            atomic_write(remote, payload)
        else:  # an object PUT is atomic: readers see the old object or the new one
            self.fs.pipe_file(remote, payload)

    def commit_manifest(self, remote: str, payload: bytes) -> None:
        """Write the manifest only where none exists (first writer wins), else FileExistsError."""
        if not self.is_local:  # a conditional PUT (If-None-Match: *)
            self.fs.pipe_file(remote, payload, mode="create")
            return
        pending = f"{remote.rsplit('/', 1)[0]}/{PENDING_PREFIX}{uuid.uuid4().hex}"
        self.write_atomic(pending, payload)
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


def _first_file_on(path: Path) -> Path:
    """The file that a path runs through (``NotADirectoryError``): its nearest ancestor that exists."""
    return next((p for p in (*reversed(path.parents), path) if p.exists() and not p.is_dir()), path)


def newest_mtime(path: Path) -> float:
    times = [path.lstat().st_mtime] + ([p.lstat().st_mtime for p in path.rglob("*")] if path.is_dir() else [])
    return max(times)
