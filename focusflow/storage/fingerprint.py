"""The one fingerprint of files on disk that a key counts by content: a local source model folder, the
evaluation data a run reads. Moving the files keeps it; editing, adding or removing one changes it."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from pathlib import Path

from focusflow.storage.artifact import is_hidden
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
