"""What a store holds: its stages, the artifact folders of each (committed or broken), keys and where the space is.

A root counts as a store only when it holds at least one ``<stage>/<key>/_manifest.json``: ``rm`` and
``gc`` refuse anything else, so a mistyped root (a home folder, a bucket of backups) is never cleaned.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from focusflow.storage.artifact import MANIFEST, Artifact, BrokenArtifact
from focusflow.storage.errors import ArtifactNotFound, CorruptArtifactError, StoreError
from focusflow.storage.keys import (
    ELISION,
    UnsafeNameError,
    key_matches,
    redact_uri,
    step_suffix,
    validate_segment,
    validate_shown_key,
)
from focusflow.storage.reads import Reader
from focusflow.storage.transport import Transport

log = logging.getLogger(__name__)

# Folders that layers above keep in every store beside the stages (their records about artifacts), by name.
_RECORDS_FOLDERS: set[str] = set()


def keep_records(folder: str) -> str:
    """Register ``folder`` as one that a layer above keeps its records in: the layer owns the name, the store
    only knows it is no stage (never listed, scanned or collected; its files removed by pattern only)."""
    _RECORDS_FOLDERS.add(validate_segment(folder, "records folder"))
    return folder


def is_records_folder(name: str) -> bool:
    return name in _RECORDS_FOLDERS


class Catalog:
    """Listings of one store."""

    def __init__(self, transport: Transport, reader: Reader) -> None:
        self.transport, self.reader = transport, reader

    def stage_names(self) -> list[str]:
        return [s for s in self.transport.names() if not s.startswith(".") and not is_records_folder(s)]

    def stages(self) -> list[str]:
        """The stages with at least one key folder (a folder of another program's files is none)."""
        self.transport.require_root()
        return [stage for stage in self.stage_names() if self.transport.names(stage, folders=True)]

    def keys(self, stage: str) -> list[str]:
        """Names of the key folders of a stage (committed or not): what a key prefix is matched against."""
        return self.transport.names(validate_segment(stage, "stage"))

    def scan(self, stage: str | None = None) -> list[Artifact | BrokenArtifact]:
        """Every artifact folder with a manifest: committed artifacts, and the ones whose manifest is unreadable."""
        self.transport.require_root()
        stages = [validate_segment(stage, "stage")] if stage else self.stage_names()
        found: list[Artifact | BrokenArtifact] = []
        for name in stages:
            for key in self.transport.names(name, folders=True):  # a key is a folder: a file beside them is not ours
                try:
                    validate_segment(key, "key")
                    found.append(self.reader.manifest(name, key))
                except ArtifactNotFound:
                    continue  # a folder without a manifest: a write in progress or an orphan (see gc)
                except (CorruptArtifactError, UnsafeNameError) as exc:
                    found.append(BrokenArtifact(self.transport.uri, name, key, str(exc)))
        return sorted(found, key=lambda a: a.manifest.get("created", "") if isinstance(a, Artifact) else "")

    def list(self, stage: str | None = None) -> list[Artifact]:
        """Committed artifacts of one stage (or all), oldest first; unreadable ones are skipped with a warning."""
        found: list[Artifact] = []
        for entry in self.scan(stage):
            if isinstance(entry, BrokenArtifact):
                log.warning("skipping %s/%s: %s", entry.stage, entry.key, entry.error)
            else:
                found.append(entry)
        return found

    def is_store(self) -> bool:
        """Whether the root holds at least one ``<stage>/<key>/_manifest.json``."""
        return any(MANIFEST in self.transport.names(stage, key)
                   for stage in self.stage_names() for key in self.transport.names(stage))

    def require_store(self) -> None:
        """StoreError unless the root exists and holds artifacts (see :meth:`is_store`)."""
        self.transport.require_root()
        if not self.is_store():
            raise StoreError(f"{redact_uri(self.transport.uri)} is not an artifact store "
                             f"(no <stage>/<key>/{MANIFEST} under it)")

    def match_key(self, stage: str, prefix: str) -> str:
        """The one key of ``stage`` that ``prefix`` names: a key as ``store ls`` prints it, any unique prefix, or a
        shortened checkpoint key ``<head>…-step-00000040`` (see :func:`~focusflow.storage.keys.key_matches`)."""
        validate_shown_key(prefix)
        keys = self.keys(stage)
        if prefix in keys:
            return prefix
        candidates = [key for key in keys if key_matches(key, prefix)]
        if not candidates:
            raise ArtifactNotFound(f"no artifact {stage}/{prefix} in {redact_uri(self.transport.uri)}")
        if len(candidates) > 1:
            shown = ", ".join(candidates[:10]) + (f" and {len(candidates) - 10} more" if len(candidates) > 10 else "")
            raise StoreError(f"{stage}/{prefix} is ambiguous in {redact_uri(self.transport.uri)}: {shown}")
        return candidates[0]


def _shortest_prefixes(names: list[str], minimum: int) -> dict[str, str]:
    """Each name's shortest prefix (at least ``minimum`` characters) that no other of ``names`` starts with."""
    ordered = sorted(set(names))
    shortest: dict[str, str] = {}
    for index, name in enumerate(ordered):
        neighbours = ordered[max(0, index - 1):index] + ordered[index + 1:index + 2]
        shared = max((len(os.path.commonprefix([name, other])) for other in neighbours), default=0)
        shortest[name] = name[:max(minimum, shared + 1)]
    return shortest


def unique_prefixes(keys: list[str], minimum: int = 16) -> dict[str, str]:
    """Each key's shortest form that names it alone among ``keys`` (what ``match_key`` resolves): its shortest
    prefix of at least ``minimum`` characters that no other key starts with; a checkpoint key keeps its step whole,
    ``<shortest unique head>…-step-00000040`` (the whole key where that is no shorter)."""
    shortest = _shortest_prefixes(keys, minimum)
    heads: dict[str, list[str]] = {}  # step suffix -> the heads of the checkpoint keys that end with it
    for key in set(keys):
        suffix = step_suffix(key)
        if suffix:
            heads.setdefault(suffix, []).append(key[:-len(suffix)])
    for suffix, same_step in heads.items():
        for head, prefix in _shortest_prefixes(same_step, minimum).items():
            key = head + suffix
            shortened = prefix + ELISION + suffix
            shortest[key] = shortened if len(shortened) < len(key) else key
    return shortest


@dataclass(frozen=True)
class Usage:
    """Where a store's space is, from its manifests: bytes and artifact counts per stage, the largest artifacts."""

    stages: dict[str, tuple[int, int]]  # stage -> (artifacts, bytes), largest first
    largest: list[Artifact]
    broken: int  # artifact folders whose manifest is unreadable (sizes unknown; see ``store ls``)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.stages.values())


def disk_usage(entries: Iterable[Artifact | BrokenArtifact], top: int = 10) -> Usage:
    """The space committed artifacts take (from ``scan()``), per stage and for the ``top`` largest artifacts."""
    entries = list(entries)
    artifacts = [entry for entry in entries if isinstance(entry, Artifact)]
    per_stage: dict[str, tuple[int, int]] = {}
    for artifact in artifacts:
        count, size = per_stage.get(artifact.stage, (0, 0))
        per_stage[artifact.stage] = (count + 1, size + artifact.total_bytes)
    ordered = dict(sorted(per_stage.items(), key=lambda item: -item[1][1]))
    largest = sorted(artifacts, key=lambda artifact: artifact.total_bytes, reverse=True)[:top]
    return Usage(ordered, largest, len(entries) - len(artifacts))
