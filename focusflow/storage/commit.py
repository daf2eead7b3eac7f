"""The commit protocol: a local folder becomes ``<stage>/<key>`` at once, or not at all.

A writer uploads its files into its own ``d-<uuid>`` folder, checks every size, then writes the
manifest only if none exists: the first writer wins, and a later writer of the same key removes its
own data folder and returns the winner's artifact. Readers see an artifact only through its manifest,
so a crash mid-write leaves nothing that reads as complete (``gc`` removes what it left).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from focusflow.stopping import unstoppable
from focusflow.storage.artifact import DATA_PREFIX, MANIFEST, Artifact, local_files, new_manifest
from focusflow.storage.errors import StoreError
from focusflow.storage.keys import validate_segment
from focusflow.storage.reads import Reader

log = logging.getLogger(__name__)


def commit_folder(reader: Reader, stage: str, key: str, local: Path, *, params: Mapping[str, Any] | None = None,
                  inputs: Mapping[str, Artifact | str] | None = None,
                  metadata: Mapping[str, Any] | None = None, skip_hidden: bool = False) -> Artifact:
    """Upload ``local``'s files and commit them as ``<stage>/<key>``; the winner's artifact if another was first.
    ``skip_hidden``: leave out dot names (``storage.artifact.is_hidden``), for a user's folder."""
    validate_segment(stage, "stage"), validate_segment(key, "key")
    transport = reader.transport
    files = local_files(local, skip_hidden)
    if not files:
        raise StoreError(f"refusing to commit an empty artifact {stage}/{key}")

    data_dir = f"{DATA_PREFIX}{uuid.uuid4().hex}"
    try:
        for relative in files:
            remote = transport.path(stage, key, data_dir, relative)
            transport.retry(f"upload {relative}", lambda r=remote, f=relative: transport.upload(local / f, r))
        # verify: every file is there with the size we wrote, before anything reads as committed
        for relative, info in files.items():
            remote = transport.path(stage, key, data_dir, relative)
            size = transport.retry(f"verify {relative}", lambda r=remote: transport.fs.info(r)["size"])
            if size != info["size"]:
                raise StoreError(f"upload of {relative} is {size} bytes, expected {info['size']}")
    except BaseException:  # a full disk, a lost endpoint: leave nothing half-written (gc is the backstop)
        with contextlib.suppress(Exception):
            transport.fs.rm(transport.path(stage, key, data_dir), recursive=True)
        raise

    manifest = new_manifest(stage, key, data_dir, files, params=params, inputs=inputs, metadata=metadata)
    payload = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
    try:
        with unstoppable():  # the manifest is what commits: written whole or not at all
            transport.retry("commit manifest", lambda: transport.commit_manifest(transport.path(stage, key, MANIFEST),
                                                                                  payload))
    except FileExistsError:
        winner = reader.manifest(stage, key)
        if winner.data_dir != data_dir:  # (equal when our own PUT landed but its answer was lost)
            log.info("%s/%s was committed by another writer; removing our copy", stage, key)
            transport.retry("remove redundant data",
                            lambda: transport.fs.rm(transport.path(stage, key, data_dir), recursive=True))
            return winner
    first = transport.path(stage, key, data_dir, next(iter(files)))
    if not transport.retry("check data", lambda: transport.fs.exists(first)):  # a `store rm` took it meanwhile
        with contextlib.suppress(Exception):
            if reader.manifest(stage, key).data_dir == data_dir:  # ours still, not a later writer's
                transport.fs.rm_file(transport.path(stage, key, MANIFEST))
        raise StoreError(f"{stage}/{key}: its files were deleted while it was committed (a `focusflow store rm` "
                         "of that key beside this run?); run again to make it")
    log.info("stored %s/%s (%d files, %d bytes)", stage, key, len(files), manifest["total_bytes"])
    return Artifact(transport.uri, stage, key, manifest)
