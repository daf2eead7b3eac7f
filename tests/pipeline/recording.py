"""A stage caller that records the graph's calls instead of building anything: the graph's wiring as data."""

from __future__ import annotations

from typing import Any


class RecordingStage:
    """A stage caller with the task signature that records its calls and returns ``<stage>:<label>``."""

    def __init__(self, stage: str, calls: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        self.stage, self.calls = stage, calls

    def __call__(self, store_uri: str, params: dict[str, Any], inputs: dict[str, Any] | None = None,
                 language: str | None = None, label: str | None = None) -> str:
        self.calls.append((self.stage, params, dict(inputs or {})))
        return f"{self.stage}:{label or ''}"

    def submit(self, *args: Any, **kwargs: Any) -> str:
        return self(*args, **kwargs)
