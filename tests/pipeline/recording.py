"""A stage caller that records the graph's calls instead of building anything: the graph's wiring as data."""

from __future__ import annotations

from concurrent.futures import CancelledError, Future
from typing import Any


class RecordingStage:
    """A stage caller with the task signature that records its calls and returns ``<stage>:<label>``."""

    def __init__(self, stage: str, calls: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        self.stage, self.calls = stage, calls

    def __call__(self, store_uri: str, params: dict[str, Any], inputs: dict[str, Any] | None = None,
                 language: str | None = None, label: str | None = None) -> str:
        # futures among the arguments are received as their results, as an orchestrator hands them over
        params = {k: ({n: _received(v) for n, v in value.items()} if k == "_lineage" else value)
                  for k, value in params.items()}
        self.calls.append((self.stage, params, {name: _received(value) for name, value in (inputs or {}).items()}))
        return f"{self.stage}:{label or ''}"

    def submit(self, *args: Any, **kwargs: Any) -> Future[str]:
        """A finished future; a cancelled one when an input's was (a runner cannot run a task whose input it
        lost)."""
        future: Future[str] = Future()
        try:
            future.set_result(self(*args, **kwargs))
        except CancelledError:
            future.cancel()
        return future


class LosingStage(RecordingStage):
    """A recording stage whose task runner loses the result of each call's first submission (``always``: of every
    submission): the future is cancelled, as a Dask future is when the worker that held its only copy dies."""

    def __init__(self, stage: str, calls: list[tuple[str, dict[str, Any], dict[str, Any]]],
                 always: bool = False) -> None:
        super().__init__(stage, calls)
        self.always = always
        self.lost: set[str | None] = set()

    def submit(self, *args: Any, **kwargs: Any) -> Future[str]:
        future = super().submit(*args, **kwargs)
        if not self.always and kwargs.get("label") in self.lost:
            return future
        self.lost.add(kwargs.get("label"))
        lost: Future[str] = Future()
        lost.cancel()
        return lost


def _received(value: Any) -> Any:
    return value.result() if isinstance(value, Future) else value
