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

from focusflow.errors import InputError
from focusflow.stopping import unstoppable

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
        with unstoppable():  # once the file is written, it is put in place whole
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


class FolderInUseError(InputError):
    """A folder to write already holds files that focusflow was not told it may replace."""


@contextlib.contextmanager
def atomic_folder(out: str | os.PathLike[str], *, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of ``out`` to fill; on success it becomes ``out`` by rename.

    ``out`` must be absent or an empty folder, unless ``replace`` (a folder focusflow itself owns: a
    checkpoint, a conversion cache, an export checked by :mod:`focusflow.storage.export`), so a caller's
    folder of their own is never deleted. A crash or exception leaves ``out`` as it was, never half written.
    """
    target = Path(out)
    if not replace:
        _require_new_or_empty(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    mine = f".{target.name}.tmp-{_host()}-pid"  # a shared folder (NFS, a volume) holds other machines' writers too
    for left in target.parent.glob(f"{mine}*-*"):  # a killed writer's copy of this machine, hidden beside it
        if dead_writer(left):
            shutil.rmtree(left, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{mine}{os.getpid()}-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp's 0o700 would make shared caches unreadable to other users
    try:
        yield staging
        if not replace:
            _require_new_or_empty(target)  # checked again: something may have appeared while we wrote
        with unstoppable():  # the old folder moved aside and the new one renamed in, or neither
            _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _host() -> str:
    """This machine's name as a file name may hold it."""
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9]+", "_", socket.gethostname())[:40] or "host"


def dead_writer(staging: Path) -> bool:
    """Whether a writer's staging folder (``…-pid<pid>-…``) belongs to a process that is gone on this machine."""
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


def _require_new_or_empty(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise FolderInUseError(f"{target} exists and is not a folder; give a new or empty folder")
    if target.is_dir() and any(target.iterdir()):
        raise FolderInUseError(f"{target} already holds files; give a new or empty folder (focusflow never "
                               "replaces a folder it did not write)")


def _swap_in(staging: Path, target: Path) -> None:
    """Rename ``staging`` onto ``target``; an old ``target`` is moved aside first and removed only after."""
    if not target.exists():
        os.replace(staging, target)
        return
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
        os.replace(staging, target)
        return
    aside = target.with_name(f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.replace(target, aside)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)
