"""Prefect's thread-timeout warning (every task with ``timeout_seconds`` in the default thread runner)
is absent from a run's output by default and shown with verbose output."""

from __future__ import annotations

import logging

import pytest

from focusflow.logs import configure_output

THREAD_TIMEOUT = "running in a worker thread"


@pytest.fixture(autouse=True)
def _output_policy(restore_output_policy):
    """Every test here changes the output policy; conftest's fixture undoes it."""


def _run_a_timed_task_in_threads() -> int:
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    @task(timeout_seconds=3600)
    def double(x: int) -> int:
        return 2 * x

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=2))
    def timed(x: int) -> int:
        return double.submit(x).result()

    return timed(21)


class _Seen(logging.Handler):
    """Beside Prefect's console and API handlers: sees what they see."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def saw(self, fragment: str) -> bool:
        return any(fragment in message for message in self.messages)


def test_thread_timeout_warning_is_absent_by_default_and_shown_when_verbose(prefect_server):
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()  # Prefect's own setup replaces the handlers of its loggers: first, not after ours
    task_runs = logging.getLogger("prefect.task_runs")
    seen = _Seen()
    task_runs.addHandler(seen)
    try:
        configure_output(verbose=False)
        assert _run_a_timed_task_in_threads() == 42
        assert seen.messages and not seen.saw(THREAD_TIMEOUT)  # the task's own messages still come through

        configure_output(verbose=True)
        assert _run_a_timed_task_in_threads() == 42
        assert seen.saw(THREAD_TIMEOUT)
    finally:
        task_runs.removeHandler(seen)
