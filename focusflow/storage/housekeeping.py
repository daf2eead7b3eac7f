"""Deleting artifacts and collecting what killed writers left: only ever what a store wrote.

``delete`` removes a key folder only when everything in it is the store's (a manifest, data folders,
pending manifests, temporaries); ``gc`` works only on a root that holds artifacts, and on this machine
only on its own store's staging folders (named after the store) and fetch cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from focusflow.storage.artifact import MANIFEST, check_manifest, is_leftover, parse_manifest
from focusflow.storage.atomic import dead_writer
from focusflow.storage.errors import ArtifactNotFound, CorruptArtifactError, StoreError
from focusflow.storage.keys import UnsafeNameError, redact_uri, validate_segment
from focusflow.storage.listing import Catalog, is_records_folder
from focusflow.storage.reads import Reader
from focusflow.storage.transport import Transport, newest_mtime, store_slug

log = logging.getLogger(__name__)

STAGING_PREFIX = "focusflow-"  # a writer's local folder: focusflow-<store slug>-<stage>-pid<pid>-<random>


def staging_prefix(store_uri: str, stage: str, pid: int | None = None) -> str:
    """Name prefix of a writer's local staging folder: it names the store, so ``gc`` of another leaves it."""
    return f"{STAGING_PREFIX}{store_slug(store_uri)}-{stage}-pid{pid if pid is not None else os.getpid()}-"


def delete_artifact(transport: Transport, stage: str, key: str) -> bool:
    """Remove an artifact (whether or not its manifest is readable), or what a killed write left of one;
    False when there was nothing. A key folder holding anything the store does not write is refused."""
    validate_segment(stage, "stage"), validate_segment(key, "key")
    transport.require_root()
    if is_records_folder(stage):
        raise StoreError(f"{stage}/{key} is not an artifact (other layers' records about artifacts live there)")
    entries = transport.names(stage, key)
    foreign = [entry for entry in entries if entry != MANIFEST and not is_leftover(entry)]
    if foreign:
        raise StoreError(f"{stage}/{key} in {redact_uri(transport.uri)} is not an artifact (it holds "
                         f"{', '.join(foreign[:3])}{' …' if len(foreign) > 3 else ''}, which the store "
                         "never writes): refusing to delete it")
    removed = False
    named = _named_data_dir(transport, stage, key) if MANIFEST in entries else None
    if MANIFEST in entries:  # first, so that the artifact stops reading as committed at once
        transport.retry("delete manifest", lambda: transport.fs.rm_file(transport.path(stage, key, MANIFEST)))
        removed = True
    # a readable manifest's own data only: another writer of the key may be uploading beside it (its folder is
    # left to gc, or committed by it); without one (a killed write, a corrupt manifest) every leftover goes
    doomed = [named] if named is not None else [entry for entry in entries if entry != MANIFEST]
    for entry in doomed:
        path = transport.path(stage, key, entry)
        if transport.fs.exists(path):
            transport.retry("delete data", lambda p=path: transport.fs.rm(p, recursive=True))
            removed = True
    if transport.is_local:
        with contextlib.suppress(OSError):  # the key folder, if empty now (a writer's new folder keeps it)
            os.rmdir(transport.path(stage, key))
    return removed


def _named_data_dir(transport: Transport, stage: str, key: str) -> str | None:
    """The data folder an artifact's manifest names, read and checked as every reader checks it (a hostile
    ``data_dir`` never leads the deletion out of the key folder); None when the manifest cannot be read."""
    try:
        artifact = parse_manifest(transport.fs.cat_file(transport.path(stage, key, MANIFEST)), transport.uri, stage,
                                  key)
        check_manifest(artifact)
        return artifact.data_dir
    except (OSError, CorruptArtifactError):
        return None


def remove_records(transport: Transport, folder: str, pattern: str) -> int:
    """Remove the files of a records folder whose names match the glob ``pattern``; how many were removed."""
    validate_segment(folder, "records folder"), validate_segment(pattern.replace("*", "x"), "record pattern")
    if not is_records_folder(folder):
        raise StoreError(f"{folder} is no records folder (a layer registers its own with storage.keep_records)")
    records = transport.retry("list records", lambda: transport.fs.glob(transport.path(folder, pattern)))
    for record in records:
        transport.retry("delete record", lambda r=record: transport.fs.rm_file(r))
    return len(records)


def collect_garbage(catalog: Catalog, reader: Reader, grace_s: float, dry_run: bool) -> list[str]:
    """What killed or losing writers left, untouched for ``grace_s``: removed unless ``dry_run``; returned."""
    transport = catalog.transport
    transport.require_root()
    if catalog.stage_names():
        catalog.require_store()
    stale = [path for path in _unreferenced(catalog, reader) if transport.age_s(path) > grace_s]
    slug = store_slug(transport.uri)
    local = [p for p in Path(tempfile.gettempdir()).glob(f"{STAGING_PREFIX}{slug}-*-pid*-*") if dead_writer(p)]
    fetched = reader.fetch_cache
    local += list(fetched.glob("**/*.part-*")) if fetched.is_dir() else []
    local_stale = [str(p) for p in local if time.time() - newest_mtime(p) > grace_s]
    if not dry_run:
        for path in stale:
            transport.retry("remove leftover", lambda p=path: transport.fs.rm(p, recursive=True))
            if transport.is_local:  # a key folder that only held a killed writer's data
                with contextlib.suppress(OSError):
                    os.rmdir(Path(path).parent)
        for path in map(Path, local_stale):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return [transport.shown(p) for p in stale] + local_stale


def _unreferenced(catalog: Catalog, reader: Reader) -> list[str]:
    """Leftover entries of key folders that no readable manifest names (unreadable manifests: left alone)."""
    transport, found = catalog.transport, []
    for stage in catalog.stage_names():
        for key in transport.names(stage, folders=True):
            try:
                named = {reader.manifest(stage, key).data_dir}
            except ArtifactNotFound:
                named = set()
            except (CorruptArtifactError, UnsafeNameError):
                continue
            found += [transport.path(stage, key, entry) for entry in transport.names(stage, key)
                      if is_leftover(entry) and entry not in named]
    return found
