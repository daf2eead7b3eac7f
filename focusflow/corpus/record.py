"""The corpus stage's record (``storage.records``): how much text the run collected."""

from __future__ import annotations

from focusflow.storage.records import StageRecord


class CorpusRecord(StageRecord):
    """The collected corpus: its documents, UTF-8 bytes and characters."""

    stages = ("corpus",)
    documents: int | None = None
    bytes: int | None = None
    chars: int | None = None
