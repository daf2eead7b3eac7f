"""Content-addressed artifact storage over fsspec (``file://`` by default, ``s3://`` through s3fs).

Modules by job: ``artifact`` (what a committed artifact is: manifest, checks, content hash), ``transport``
(fsspec/S3, limits, retries, atomic writes, conditional put), ``commit`` (the commit protocol), ``reads``
(verified reads), ``listing`` (stages, keys, space), ``housekeeping`` (delete, gc), ``store`` (the public
API over them), ``addresses`` (what a user's address names), ``keys`` and ``atomic``.
"""

from focusflow.storage.addresses import locate
from focusflow.storage.artifact import Artifact, BrokenArtifact
from focusflow.storage.atomic import sha256_file
from focusflow.storage.errors import ArtifactNotFound, CorruptArtifactError, StoreError
from focusflow.storage.keys import UnsafeNameError, artifact_key, canonical_json, redact_uri, shorten_key
from focusflow.storage.listing import Usage, disk_usage, keep_records, unique_prefixes
from focusflow.storage.store import ArtifactStore, on_delete
from focusflow.storage.transport import default_store_uri

__all__ = [
    "Artifact",
    "ArtifactNotFound",
    "ArtifactStore",
    "BrokenArtifact",
    "CorruptArtifactError",
    "StoreError",
    "UnsafeNameError",
    "Usage",
    "artifact_key",
    "canonical_json",
    "default_store_uri",
    "disk_usage",
    "keep_records",
    "locate",
    "on_delete",
    "redact_uri",
    "sha256_file",
    "shorten_key",
    "unique_prefixes",
]
