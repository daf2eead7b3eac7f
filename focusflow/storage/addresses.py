"""What a user's artifact address names: ``<stage>/<key-prefix>`` in a store, or an artifact's URI or folder.

Used by ``store show`` and ``store rm``: an address resolves against the configured store, or against the
store a URI names when that root holds artifacts; a ``..`` is refused, never resolved.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from focusflow.storage.errors import StoreError
from focusflow.storage.keys import redact_uri
from focusflow.storage.store import ArtifactStore

log = logging.getLogger(__name__)


def locate(address: str, store: str | os.PathLike[str] | None = None) -> tuple[ArtifactStore, str, str]:
    """The store, stage and key an address names: ``<stage>/<key-prefix>`` in ``store`` (default: the configured
    one), or an artifact's URI or local folder ``<store>/<stage>/<key-prefix>``, in ``store`` when it lies
    inside it, else in the store it names, which must hold artifacts (:meth:`ArtifactStore.require_store`).
    A key prefix may be a key as ``store ls`` prints it, a checkpoint's as ``<head>…-step-00000040``.

    A ``..`` or ``.`` anywhere is refused, never resolved; a key prefix must match exactly one key.
    """
    address = str(address)
    path = unquote(urlsplit(address).path if "://" in address else address)
    if any(segment in (".", "..") for segment in path.split("/")):
        raise StoreError(f"{redact_uri(address)} contains '.' or '..': give the artifact's own address "
                         "(<stage>/<key>, or <store>/<stage>/<key>)")
    configured = ArtifactStore(store)
    if "://" not in address and not address.startswith(("/", "~")):
        parts = address.strip("/").split("/")
        if len(parts) != 2:
            raise StoreError(f"{address} is not an artifact address (<stage>/<key> in --store, or a full artifact URI)")
        configured.require_root()
        return configured, parts[0], configured.match_key(parts[0], parts[1])
    uri = address.rstrip("/") if "://" in address else Path(address).expanduser().absolute().as_uri()
    if uri.startswith(configured.uri + "/"):
        artifact_store, rest = configured, uri[len(configured.uri) + 1:]
    else:
        parts = uri.rsplit("/", 2)
        if len(parts) != 3 or "://" not in parts[0] or parts[0].endswith(":/"):
            raise StoreError(f"{redact_uri(address)} is not an artifact URI (<store>/<stage>/<key>)")
        artifact_store, rest = ArtifactStore(parts[0]), "/".join(parts[1:])
    stage_key = [unquote(part) for part in rest.split("/")]  # a folder path's URI quotes a shortened key's "…"
    if len(stage_key) != 2:
        raise StoreError(f"{redact_uri(address)} is not an artifact of store {redact_uri(artifact_store.uri)} "
                         "(<store>/<stage>/<key>)")
    artifact_store.require_store()
    return artifact_store, stage_key[0], artifact_store.match_key(*stage_key)
