"""The publish stage's record (``storage.records``): the repository and, once pushed, the push."""

from __future__ import annotations

from typing import Any

from focusflow.storage.records import StageRecord


class PublishRecord(StageRecord):
    """Where the model was published: the repository id and the push (URL, commit), None before a push."""

    stages = ("publish",)
    repo_id: str | None = None
    push: dict[str, Any] | None = None
