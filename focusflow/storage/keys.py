"""Content-addressed artifact keys, the validation of names that become storage paths, and redaction.

A key is the sha256 of the canonical JSON of (stage, stage version, parameters, content
hashes of the inputs). Same inputs and parameters give the same key on any machine, so a
stage that already ran is found instead of recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from focusflow.errors import FocusflowError

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}$")
# Credential names, matched on the whole key name: hf_token, auth_token, api_key, aws_secret_access_key,
# password… but not tokenizer, tokens, max_tokens, chars_per_token or flops_per_token, which are
# parameters and metrics that must reach keys and reports.
_SECRET_NAME = re.compile(
    r"^(?:(?:hf|huggingface|auth|access|api|bearer|github|gh|wandb|refresh|session|id)[_-]?)?token$"
    r"|(?:^|[_-])(?:secret|secret[_-]?key|secret[_-]?access[_-]?key|password|passwd|credentials?"
    r"|api[_-]?key|access[_-]?key(?:[_-]?id)?)$",
    re.I)
REDACTED = "<redacted>"


class UnsafeNameError(FocusflowError, ValueError):
    """A stage, key or file name that could escape the store or is not portable."""


def validate_segment(name: str, what: str = "name") -> str:
    """Accept one path segment made of portable characters; reject traversal and separators."""
    if not isinstance(name, str) or not _SAFE_SEGMENT.match(name) or name in {".", ".."}:
        raise UnsafeNameError(
            f"unsafe {what} {name!r}: use 1-200 characters from letters, digits and . _ = + -, "
            "starting with a letter or digit (no '/', '..', absolute paths or spaces)"
        )
    return name


# A LAPT checkpoint's key ends with its step (``<run key[:40]>-step-00000040``): a shortened key keeps it whole,
# as ``<head>…-step-00000040``, which :func:`key_matches` resolves (``...`` typed for ``…`` too).
ELISION = "…"
_STEP_SUFFIX = re.compile(r"-step-\d+$")
_SHORTENED = re.compile(r"^(?P<head>.+?)(?:…|\.\.\.)(?P<suffix>-step-\d+)$")


def step_suffix(key: str) -> str:
    """What a shortened key keeps whole: a checkpoint key's ``-step-NNNNNNNN``; ``""`` for any other key."""
    match = _STEP_SUFFIX.search(key)
    return match.group() if match else ""


def shorten_key(key: str, length: int = 12) -> str:
    """A key in a log or message line: its first ``length`` characters, followed by a checkpoint key's step
    suffix whole (``0123456789ab…-step-00000040``); :func:`key_matches` accepts both forms."""
    suffix = step_suffix(key)
    if not suffix:
        return key[:length]
    head = key[:-len(suffix)]
    return key if len(head) <= length else head[:length] + ELISION + suffix


def key_matches(key: str, shown: str) -> bool:
    """Whether ``shown`` names ``key``: a prefix of it, or a shortened checkpoint key ``<head>…-step-N`` whose
    head starts the key and whose step suffix is the key's."""
    shortened = _SHORTENED.match(shown)
    if shortened is None:
        return key.startswith(shown)
    head, suffix = shortened["head"], shortened["suffix"]
    return key.startswith(head) and step_suffix(key) == suffix and len(key) >= len(head) + len(suffix)


def validate_shown_key(shown: str) -> str:
    """Accept a key as a user gives it (a prefix, or a shortened checkpoint key): safe once its ``…`` is left out."""
    try:
        validate_segment(shown.replace(ELISION, "", 1), "key")
    except UnsafeNameError:
        validate_segment(shown, "key")  # raises, naming the key as it was given
        raise
    return shown


def validate_relative_path(path: str) -> str:
    """Accept a relative POSIX path whose every segment is safe (files inside an artifact)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
        raise UnsafeNameError(f"unsafe file path {path!r}: must be relative, POSIX, without backslashes")
    parts = PurePosixPath(path).parts
    for part in parts:
        validate_segment(part, "path segment")
    return "/".join(parts)


def redact_secrets(value: Any) -> Any:
    """Replace values whose key names look like credentials, recursively (manifests, logs, keys)."""
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if _SECRET_NAME.search(str(k)) and v is not None else redact_secrets(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_secrets(v) for v in value]
    return value


def redact_uri(uri: str) -> str:
    """Drop user:password@ from a URI so that it can be logged or stored."""
    parts = urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return uri


def _normalize(value: Any) -> Any:
    """Make a value JSON-canonical: stable types, no NaN, sorted sets, paths as strings."""
    if isinstance(value, Mapping):
        return {str(k): _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_normalize(v) for v in value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"parameter value {value!r} is not finite and cannot be part of a key")
        return value
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "model_dump"):  # pydantic models
        return _normalize(value.model_dump(mode="json"))
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"parameter of type {type(value).__name__} cannot be part of an artifact key")


def canonical_json(value: Any) -> str:
    """The one JSON spelling of a value: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(_normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def artifact_key(
    stage: str,
    params: Mapping[str, Any] | None = None,
    inputs: Mapping[str, str] | None = None,
    version: int | str = 1,
) -> str:
    """sha256 hex of the stage, its version, its (secret-free) parameters and its inputs' content hashes."""
    validate_segment(stage, "stage")
    document = {
        "stage": stage,
        "version": str(version),
        "params": redact_secrets(dict(params or {})),
        "inputs": {str(k): str(v) for k, v in (inputs or {}).items()},
    }
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
