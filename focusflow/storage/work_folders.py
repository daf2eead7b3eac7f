"""Where builds keep local work (``FOCUSFLOW_WORK_DIR``), and who builds an artifact right now: a claim on
``<work root>/<stage>/<key>`` that one process holds.

Two runs of one configuration on one store reach the same stage with the same key. Without an owner they would
train LAPT in the same work folder (each deleting the other's checkpoints) or compute every stage twice. The first
run to reach a stage claims it; the second waits until the claim is released, and then finds the artifact in the
store (a cache hit) or, when the holder died before committing, takes the claim over and builds it itself (a
training stage resumes from the holder's checkpoints).

The claim is an exclusive ``flock`` on ``<key>.owner`` beside the work folder, which the kernel releases when its
process dies however it dies (``kill -9`` included), so a claim is taken over only from a dead holder and never
from a live one. The file holds its holder (pid, host, since when) for the waiting line. On a shared network file
system the lock is the file system's (NFS emulates ``flock`` with its own locks, released when a client's lease
ends). Where no lock can be taken (no ``fcntl``, a work root that cannot be written) the build runs unclaimed, as
it did before claims existed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

log = logging.getLogger(__name__)

OWNER_SUFFIX = ".owner"
POLL_S = 1.0


@dataclass(frozen=True)
class Holder:
    """The process that holds a claim, as it wrote itself into the claim's file."""

    pid: int | None
    host: str
    since: float | None

    def __str__(self) -> str:
        since = time.strftime(" since %H:%M:%S", time.localtime(self.since)) if self.since else ""
        return f"process {self.pid if self.pid is not None else '?'} on {self.host or 'an unknown host'}{since}"

    @classmethod
    def read(cls, path: Path) -> Holder:
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            data = {}
        data = data if isinstance(data, dict) else {}
        pid, since = data.get("pid"), data.get("since")
        return cls(pid if isinstance(pid, int) else None, str(data.get("host") or ""),
                   float(since) if isinstance(since, (int, float)) else None)


def default_work_root() -> Path:
    """Local scratch for resumable work: ``FOCUSFLOW_WORK_DIR`` or the user cache directory."""
    configured = os.environ.get("FOCUSFLOW_WORK_DIR")
    return Path(configured) if configured else Path(user_cache_dir("focusflow")) / "work"


def owner_file(folder: Path) -> Path:
    """The claim's file of a work folder: beside it, so that removing the folder never removes a held claim."""
    return folder.parent / f"{folder.name}{OWNER_SUFFIX}"


@contextmanager
def claim(folder: str | os.PathLike[str], *, waiting: Callable[[Holder], None] | None = None,
          still_wanted: Callable[[], None] | None = None) -> Iterator[bool]:
    """Hold the claim on ``folder`` for the ``with`` block; yields whether a claim is held (False: unclaimed).

    While another live process holds it, ``waiting(holder)`` is called once and ``still_wanted()`` every poll
    (it raises to give up, e.g. on a stop request); the claim is then taken as soon as its holder releases it or
    dies."""
    handle = _take(Path(folder), waiting, still_wanted)
    if handle is None:  # no lock to take here (no fcntl, a work root that cannot be written): build unclaimed
        yield False
        return
    path = owner_file(Path(folder))
    try:
        _write_holder(handle)
        yield True
    finally:
        path.unlink(missing_ok=True)  # removed while held: a process that opened it finds it gone and claims anew
        os.close(handle)


def _take(folder: Path, waiting: Callable[[Holder], None] | None,
          still_wanted: Callable[[], None] | None) -> int | None:
    """The open, locked claim file of ``folder`` (waiting for a live holder), or None where no lock can be taken.
    Decided outside any ``except`` block, so that an error of the claimed build never reads as raised during one."""
    try:
        import fcntl
    except ImportError:
        return None
    path = owner_file(folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.debug("no claim on %s (%s): building unclaimed", folder, exc)
        return None
    told = False
    while True:
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            log.debug("no claim on %s (%s): building unclaimed", folder, exc)
            return None
        locked = _lock(fcntl, handle, folder)
        if locked is None:
            os.close(handle)
            return None
        if not locked:
            os.close(handle)
            if not told and waiting is not None:
                waiting(Holder.read(path))
                told = True
            if still_wanted is not None:
                still_wanted()
            time.sleep(POLL_S)
            continue
        if _same_file(handle, path):
            return handle
        os.close(handle)  # its holder released it by removing the file: this lock guards nothing, claim anew


def _lock(fcntl: Any, handle: int, folder: Path) -> bool | None:
    """Lock ``handle`` without waiting: True, False (another holds it), None (a file system without locks)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        log.debug("no claim on %s (%s): building unclaimed", folder, exc)
        return None


def _same_file(handle: int, path: Path) -> bool:
    try:
        return os.fstat(handle).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _write_holder(handle: int) -> None:
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
    os.ftruncate(handle, 0)
    os.pwrite(handle, me.encode(), 0)


__all__ = ["OWNER_SUFFIX", "Holder", "claim", "default_work_root", "owner_file"]
