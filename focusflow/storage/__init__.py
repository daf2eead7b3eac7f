"""Content-addressed artifact storage over fsspec (``file://`` by default, ``s3://`` through s3fs)."""

from focusflow.storage.atomic import sha256_file
from focusflow.storage.keys import UnsafeNameError, artifact_key, canonical_json
from focusflow.storage.store import (
    Artifact,
    ArtifactNotFound,
    ArtifactStore,
    BrokenArtifact,
    CorruptArtifactError,
    StoreError,
    Usage,
    default_store_uri,
    disk_usage,
    locate,
    on_delete,
    redact_uri,
    unique_prefixes,
)

__all__ = [
    "Artifact",
    "ArtifactNotFound",
    "ArtifactStore",
    "BrokenArtifact",
    "CorruptArtifactError",
    "StoreError",
    "UnsafeNameError",
    "artifact_key",
    "canonical_json",
    "Usage",
    "default_store_uri",
    "disk_usage",
    "locate",
    "on_delete",
    "redact_uri",
    "sha256_file",
    "unique_prefixes",
]
