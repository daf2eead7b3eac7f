"""The tokenizer stage's record (``storage.records``): the tokenizer's efficiency on held-out text."""

from __future__ import annotations

from typing import Any

from focusflow.storage.records import StageRecord


class TokenizerRecord(StageRecord):
    """Held-out efficiency by side (``source``, ``target``): tokens per word and the other measures."""

    stages = ("tokenizer",)
    heldout: dict[str, dict[str, Any]] = {}

    def tokens_per_word(self, side: str) -> float | None:
        value = self.heldout.get(side, {}).get("tokens_per_word")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
