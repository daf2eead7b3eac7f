"""The fasttext stage's record (``storage.records``): how the auxiliary token vectors were trained."""

from __future__ import annotations

from focusflow.storage.records import StageRecord

#: An initialized model's record of its rows (one per target token: fate, source pieces) and their totals.
REPORT_FILE, TOTALS_FILE = "transfer_report.parquet", "transfer_totals.json"


class FastTextRecord(StageRecord):
    """The token-level fastText training: its seconds and the share of the target vocabulary it covers."""

    stages = ("fasttext",)
    seconds: float | None = None
    target_vocab_coverage: float | None = None
