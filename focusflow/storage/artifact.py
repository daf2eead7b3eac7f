"""What a committed artifact is: its manifest, the checks every read applies, and its content hash.

An artifact ``<stage>/<key>/`` is committed when its ``_manifest.json`` exists; the manifest names its
data folder ``d-<uuid>`` and every file in it with size and sha256. A manifest that names anything
outside its own artifact, or is malformed, is refused on every read. Nothing here does I/O on the store.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from focusflow.storage.atomic import sha256_file
from focusflow.storage.errors import CorruptArtifactError, StoreError
from focusflow.storage.keys import UnsafeNameError, redact_secrets, redact_uri, validate_relative_path, validate_segment

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
MANIFEST_FORMAT = 1
DATA_PREFIX = "d-"  # data folders: d-<uuid>
PENDING_PREFIX = ".manifest-"  # a manifest being written
# What a store writes inside ``<stage>/<key>/`` besides its manifest: the data folders of writers, pending
# manifests and atomic-write temporaries. Anything else there is not the store's, and is never deleted.
_LEFTOVER = re.compile(r"^(?:d-[0-9a-f]{8,}|\.manifest-.+|\..+\.tmp-\d+-[0-9a-f]{8}.*)$")


def is_leftover(entry: str) -> bool:
    """Whether an entry of a key folder is one a writer leaves (data folder, pending manifest, temporary file)."""
    return bool(_LEFTOVER.match(entry))


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
    def inputs(self) -> dict[str, str]:
        """Input name -> the content hash of the artifact it was built from."""
        return self.manifest.get("inputs", {})

    @property
    def created(self) -> str:
        """When it was committed (ISO 8601, UTC)."""
        return str(self.manifest.get("created", ""))

    @property
    def metadata(self) -> dict[str, Any]:
        """What its build recorded: read through its stage's record (``storage.records``), not here."""
        return self.manifest.get("metadata", {})

    @property
    def total_bytes(self) -> int:
        return sum(int(info["size"]) for info in self.files.values())


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


def input_hashes(inputs: Mapping[str, Artifact | str] | None) -> dict[str, str]:
    """Inputs by name as content hashes (an artifact counts by its content, a string is a hash already)."""
    return {
        str(name): (value.content_hash if isinstance(value, Artifact) else str(value))
        for name, value in (inputs or {}).items()
    }


def is_hidden(relative: Path) -> bool:
    """Whether a path inside a folder lies under a dot name (``.gitattributes``, ``.git/``, ``.cache/``, an export's
    ``.focusflow-export.json``): bookkeeping of a tool, never a model's or a corpus's content."""
    return any(part.startswith(".") for part in relative.parts)


def local_files(local: Path, skip_hidden: bool = False) -> dict[str, dict[str, Any]]:
    """Every file of a local folder (relative name -> size and sha256), refusing symlinks and unsafe names;
    ``skip_hidden``: leaving out what :func:`is_hidden` names (a user's folder imported as an input)."""
    for path in sorted(p for p in local.rglob("*") if p.is_file() or p.is_symlink()):
        if skip_hidden and is_hidden(path.relative_to(local)):
            continue
        if path.is_symlink():
            raise StoreError(f"refusing to store symlink {path.relative_to(local)}")
        if validate_relative_path(path.relative_to(local).as_posix()) == MANIFEST:
            raise StoreError(f"{MANIFEST} is reserved for the store")
    return file_hashes(local, skip_hidden)


def file_hashes(local: Path, skip_hidden: bool = False) -> dict[str, dict[str, Any]]:
    """Every file of a local folder, symlinks followed (relative name -> size and sha256): what
    :func:`content_hash_of` reads, for a folder the store wrote or any other."""
    return {path.relative_to(local).as_posix(): {"size": path.stat().st_size, "sha256": sha256_file(path)}
            for path in sorted(local.rglob("*"))
            if path.is_file() and not (skip_hidden and is_hidden(path.relative_to(local)))}


def new_manifest(stage: str, key: str, data_dir: str, files: dict[str, dict[str, Any]], *,
                 params: Mapping[str, Any] | None, inputs: Mapping[str, Artifact | str] | None,
                 metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manifest that commits ``files`` (in ``data_dir``) as ``<stage>/<key>``; secrets are redacted."""
    return {
        "format": MANIFEST_FORMAT,
        "stage": stage,
        "key": key,
        "data_dir": data_dir,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(),
        "params": redact_secrets(dict(params or {})),
        "inputs": input_hashes(inputs),
        "metadata": redact_secrets(dict(metadata or {})),
        "files": files,
        "content_hash": content_hash_of(files),
        "total_bytes": sum(f["size"] for f in files.values()),
    }


def parse_manifest(raw: bytes, store_uri: str, stage: str, key: str) -> Artifact:
    """The artifact a manifest's bytes describe, checked (CorruptArtifactError otherwise)."""
    try:
        manifest = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptArtifactError(f"manifest of {stage}/{key} is not valid JSON ({exc}); "
                                   f"{remove_advice(f'{store_uri}/{stage}/{key}')}") from exc
    artifact = Artifact(store_uri, stage, key, manifest)
    check_manifest(artifact)
    return artifact


def check_manifest(artifact: Artifact) -> None:
    """Refuse a manifest whose data folder or file names could point outside its artifact, or that is malformed."""
    manifest = artifact.manifest

    def refuse(problem: str) -> None:
        raise CorruptArtifactError(f"manifest of {artifact.stage}/{artifact.key} is refused: {problem}; "
                                   f"{remove_advice(artifact.uri)}")

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


def check_file(artifact: Artifact, name: str, size: int, digest: str | None = None) -> None:
    """CorruptArtifactError unless a file's size (and sha256, when given) are the manifest's."""
    expected = artifact.files[name]
    if size != expected["size"] or (digest is not None and digest != expected["sha256"]):
        found = f"{size} bytes" + (f", sha256 {digest[:12]}…" if digest is not None else "")
        said = f"{expected['size']} bytes" + (f", {expected['sha256'][:12]}…" if digest is not None else "")
        raise CorruptArtifactError(f"file {name!r} of artifact {artifact.stage}/{artifact.key} is corrupt "
                                   f"({found}; manifest says {said}); {remove_advice(artifact.uri)}")


def missing_file(artifact: Artifact, name: str) -> CorruptArtifactError:
    return CorruptArtifactError(f"artifact {artifact.stage}/{artifact.key} is missing its file {name!r}; "
                                f"{remove_advice(artifact.uri)}")


def remove_advice(uri: str) -> str:
    return f"remove it with `focusflow store rm {redact_uri(uri)}` and run the stage again"


_DIGESTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}


def file_digest(path: Path) -> str:
    """sha256 of a local file, hashed once per process while its size, inode, mtime and ctime stay the same
    (a write changes the ctime, which no user can set back): a stage that verified its input at a cache hit
    and reads it again does not hash gigabytes twice."""
    stat = path.stat()
    signature = (stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)
    known = _DIGESTS.get(str(path))
    if known is not None and known[0] == signature:
        return known[1]
    digest = sha256_file(path)
    _DIGESTS[str(path)] = (signature, digest)
    return digest
