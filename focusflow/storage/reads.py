"""Verified reads: an artifact is seen only through its checked manifest, and its files only when they match it.

On a local store a fetch is the artifact's own folder (nothing is copied); on a remote store the files
are downloaded once into this machine's fetch cache (``<cache>/<store slug>/…``) and re-verified on
every fetch. ``verify`` is what a cache hit costs: sizes and hashes on local disk (a file's hash is
computed once per process while it is unchanged), sizes from one listing on S3.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from pathlib import Path

from focusflow.storage.artifact import (
    MANIFEST,
    Artifact,
    check_file,
    check_manifest,
    file_digest,
    missing_file,
    parse_manifest,
    remove_advice,
)
from focusflow.storage.errors import ArtifactNotFound, CorruptArtifactError
from focusflow.storage.keys import redact_uri, validate_relative_path, validate_segment
from focusflow.storage.transport import Transport, store_slug

log = logging.getLogger(__name__)


class Reader:
    """Manifests and files of one store, checked against what the manifest says."""

    def __init__(self, transport: Transport, cache_dir: Path) -> None:
        self.transport, self.cache_dir = transport, cache_dir

    @property
    def fetch_cache(self) -> Path:
        """This store's folder in the machine's fetch cache."""
        return self.cache_dir / store_slug(self.transport.uri)

    def manifest(self, stage: str, key: str) -> Artifact:
        """The committed artifact, or ArtifactNotFound (a missing local store or bucket is an error)."""
        validate_segment(stage, "stage"), validate_segment(key, "key")
        transport = self.transport
        path = transport.path(stage, key, MANIFEST)

        def read() -> bytes:
            try:
                return transport.fs.cat_file(path)
            except FileNotFoundError:
                if transport.is_local and not Path(transport.root).is_dir():
                    raise ArtifactNotFound(transport.no_store()) from None
                if not transport.is_local:
                    transport.require_root()  # a missing bucket is an error, not a cache miss that starts a build
                raise ArtifactNotFound(f"no artifact {stage}/{key} in {redact_uri(transport.uri)}") from None

        return parse_manifest(transport.retry("read manifest", read), transport.uri, stage, key)

    def remote(self, artifact: Artifact, name: str) -> str:
        check_manifest(artifact)
        relative = validate_relative_path(name)
        if relative not in artifact.files:
            raise FileNotFoundError(f"{relative!r} is not a file of artifact {artifact.stage}/{artifact.key}")
        return self.transport.path(artifact.stage, artifact.key, artifact.data_dir, relative)

    def read_bytes(self, artifact: Artifact, name: str) -> bytes:
        """A file's bytes, verified against the manifest."""
        remote = self.remote(artifact, name)
        try:
            data = self.transport.retry(f"read {name}", lambda: self.transport.fs.cat_file(remote))
        except FileNotFoundError:
            raise missing_file(artifact, name) from None
        check_file(artifact, name, len(data), hashlib.sha256(data).hexdigest())
        return data

    def verify(self, artifact: Artifact, hashes: bool | None = None) -> None:
        """CorruptArtifactError unless every file is there with the manifest's size and, on a local store (or
        with ``hashes=True``, which fetches the files), its sha256."""
        check_manifest(artifact)
        if self.transport.is_local if hashes is None else hashes:
            self.fetch(artifact)
            return
        sizes = self.transport.sizes(self.transport.path(artifact.stage, artifact.key, artifact.data_dir))
        for name in artifact.files:
            if name not in sizes:
                raise missing_file(artifact, name)
            check_file(artifact, name, sizes[name])

    def fetch(self, artifact: Artifact, files: list[str] | None = None, verify: bool = True) -> Path:
        """A local folder holding the artifact's files, verified against the manifest."""
        check_manifest(artifact)
        transport = self.transport
        if transport.is_local:
            boundary = Path(transport.path(artifact.stage, artifact.key))
        else:
            boundary = self.fetch_cache / artifact.stage / artifact.key
        folder = boundary / artifact.data_dir
        for name in files or list(artifact.files):
            remote = self.remote(artifact, name)
            local = folder / name
            if not _inside(local, boundary):  # a symlink on the way that leads out of the artifact
                raise CorruptArtifactError(f"file {name!r} of artifact {artifact.stage}/{artifact.key} resolves "
                                           f"outside the artifact; {remove_advice(artifact.uri)}")
            if not transport.is_local and not (local.exists() and local.stat().st_size == artifact.files[name]["size"]):
                self._download(artifact, name, remote, local)
            if not local.exists():
                raise missing_file(artifact, name)
            if verify:
                try:
                    check_file(artifact, name, local.stat().st_size, file_digest(local))
                except CorruptArtifactError:
                    if transport.is_local:
                        raise
                    # the cached copy, not the stored one, may be what changed (a fetched folder saved into):
                    # fetched again, the store's own copy decides
                    log.warning("the cached copy of %s in %s/%s differs from its manifest; fetching it again", name,
                                artifact.stage, artifact.key)
                    self._download(artifact, name, remote, local)
                    check_file(artifact, name, local.stat().st_size, file_digest(local))
        return folder

    def _download(self, artifact: Artifact, name: str, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(local.name + f".part-{uuid.uuid4().hex[:8]}")
        try:
            self.transport.retry(f"download {name}", lambda: self.transport.fs.get_file(remote, str(partial)))
        except FileNotFoundError:
            raise missing_file(artifact, name) from None
        os.replace(partial, local)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside ``folder``."""
    return path.resolve().is_relative_to(folder.resolve())
