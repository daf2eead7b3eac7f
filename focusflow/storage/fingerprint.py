"""The one fingerprint of files on disk that a key counts by content: a local source model folder, the
evaluation data a run reads, a model a fine-tuning run was given. Moving the files keeps it; editing, adding or
removing one changes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from pathlib import Path

from focusflow.storage.artifact import MANIFEST, is_hidden
from focusflow.storage.atomic import sha256_file


def folder_fingerprint(root: Path, parts: Iterable[Path] | None = None,
                       suffixes: Collection[str] | None = None) -> str:
    """sha256 over the names (relative to ``root``) and hashes of the files under ``root``.

    ``parts`` (folders inside ``root``) narrow it to the files a run reads, so that a folder appearing
    beside them changes nothing; ``suffixes`` keep only files with those endings (data, not READMEs). Dot names
    (``.git/``, ``.gitattributes``, an export's marker) are a tool's bookkeeping, not content: left out.
    """
    root = Path(root)
    folders = [root] if parts is None else [Path(part) for part in parts]
    files = {path for folder in folders for path in Path(folder).rglob("*")
             if path.is_file() and (suffixes is None or path.suffix in suffixes)
             and not is_hidden(path.relative_to(root))}
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + sha256_file(path).encode())
    return digest.hexdigest()


def content_identity(folder: Path) -> str:
    """What a local folder holds, by content: the content hash its artifact's manifest records when the folder is
    a stored artifact's data folder (``<stage>/<key>/d-…`` beside ``_manifest.json``, listing exactly these files
    with these sizes: the store hashed them when it committed them), otherwise :func:`folder_fingerprint`. A
    folder copied to another machine or path keeps its identity; one rewritten in place does not."""
    folder = Path(folder)
    stored = _stored_content_hash(folder)
    return f"artifact:{stored}" if stored is not None else f"files:{folder_fingerprint(folder)}"


def _stored_content_hash(folder: Path) -> str | None:
    manifest_file = folder.parent / MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("data_dir") != folder.name:
        return None
    files, content_hash = manifest.get("files"), manifest.get("content_hash")
    if not isinstance(files, dict) or not isinstance(content_hash, str):
        return None
    on_disk = {path.relative_to(folder).as_posix(): path.stat().st_size
               for path in folder.rglob("*") if path.is_file()}
    listed = {name: info.get("size") if isinstance(info, dict) else None for name, info in files.items()}
    return content_hash if on_disk == listed else None
