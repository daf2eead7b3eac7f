"""Local files and folders that appear complete or not at all, and the one file hash.

Every writer of a result file goes through :func:`atomic_path` (or :func:`atomic_write` for bytes
and text already in memory): readers, resumed runs and caches then never see half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

_HASH_CHUNK = 8 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in chunks (files may be larger than memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success it is fsync-ed and renamed onto ``path``.

    For writers that need a file name (``DataFrame.to_csv``, ``savefig``, safetensors' ``save_file``):
    the temporary name keeps ``path``'s suffix, so writers that infer the format from it still work.
    A crash or exception leaves ``path`` as it was (absent or the previous version) and no temporary file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{target.suffix}")
    try:
        yield temporary
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes | str, encoding: str = "utf-8") -> None:
    """Write ``data`` (text is encoded with ``encoding``) to ``path`` through :func:`atomic_path`."""
    payload = data.encode(encoding) if isinstance(data, str) else data
    with atomic_path(path) as temporary:
        temporary.write_bytes(payload)


@contextlib.contextmanager
def atomic_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling of ``out`` to fill; on success it replaces ``out`` by rename.

    A crash or exception leaves ``out`` as it was (absent or the previous version), never half written.
    """
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp's 0o700 would make shared caches unreadable to other users
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
