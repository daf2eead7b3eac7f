"""The one fingerprint of files on disk that a key counts by content: a local source model folder, the
evaluation data a run reads, a model a fine-tuning run was given. Moving the files keeps it; editing, adding or
removing one changes it."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from pathlib import Path

from focusflow.storage.artifact import MANIFEST, content_hash_of, file_hashes, is_hidden, parse_manifest
from focusflow.storage.atomic import sha256_file
from focusflow.storage.errors import CorruptArtifactError


def folder_fingerprint(root: Path, parts: Iterable[Path] | None = None,
                       suffixes: Collection[str] | None = None, bare_names: Collection[str] = ()) -> str:
    """sha256 over the names (relative to ``root``) and hashes of the files under ``root``.

    ``parts`` (folders inside ``root``) narrow it to the files a run reads, so that a folder appearing
    beside them changes nothing; ``suffixes`` keep only files with those endings (data, not READMEs), and files
    without an ending only where ``bare_names`` names them (WikiANN's ``train``, not a LICENSE). Dot names
    (``.git/``, ``.gitattributes``, an export's marker) are a tool's bookkeeping, not content: left out.
    """
    root = Path(root)
    folders = [root] if parts is None else [Path(part) for part in parts]
    files = {path for folder in folders for path in Path(folder).rglob("*")
             if path.is_file() and (suffixes is None or path.suffix in suffixes
                                    or (not path.suffix and path.name in bare_names))
             and not is_hidden(path.relative_to(root))}
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + sha256_file(path).encode())
    return digest.hexdigest()


def content_identity(folder: Path) -> str:
    """What a local folder holds, by content: the content hash of its files (names, sizes, sha256) as the store
    computes it for an artifact, so that a stored artifact, its fetched or exported copy and any other copy of the
    same files are one identity. Where the folder is a committed artifact's data folder (``<stage>/<key>/d-…``
    beside ``_manifest.json``) whose files are unchanged since the commit (the same names and sizes, none written
    after the manifest), the manifest's hash is read instead of rehashing the files."""
    folder = Path(folder)
    stored = _stored_content_hash(folder)
    return stored if stored is not None else content_hash_of(file_hashes(folder, skip_hidden=True))


def _stored_content_hash(folder: Path) -> str | None:
    manifest_file = folder.parent / MANIFEST
    try:
        artifact = parse_manifest(manifest_file.read_bytes(), str(folder.parent.parent.parent), folder.parent.parent.name,
                                  folder.parent.name)
        committed = manifest_file.stat().st_mtime_ns
    except (OSError, CorruptArtifactError):
        return None
    if artifact.data_dir != folder.name:
        return None
    on_disk = {path.relative_to(folder).as_posix(): path.stat() for path in folder.rglob("*") if path.is_file()}
    unchanged = {name: stat.st_size for name, stat in on_disk.items()} == {
        name: info["size"] for name, info in artifact.files.items()} and all(
        stat.st_mtime_ns <= committed for stat in on_disk.values())
    return artifact.content_hash if unchanged else None
