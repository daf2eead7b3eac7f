"""Quiet by default: library messages that tell a focusflow user nothing are dropped at the logger
that emits them, every other warning stays, and verbose mode shows everything.

One policy for every entry point: the CLI root applies it (``--verbose``), the flows apply it when
they start (a worker learns verbose mode from ``FOCUSFLOW_VERBOSE=1``). Filters attach to loggers
by name, so this module imports neither torch, transformers nor Prefect, and works before they load.
Warnings that come from our own calls are avoided where we make them instead (e.g. ``verbose=False``
where whole documents are tokenized on purpose, for statistics or packing).
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time
from collections.abc import Iterable

from focusflow.errors import FocusflowError
from focusflow.stopping import stop_requested

VERBOSE_ENV = "FOCUSFLOW_VERBOSE"

#: Logger name → fragments of the (unformatted) messages dropped from it unless verbose.
NOISE: dict[str, tuple[str, ...]] = {
    # transformers 5 logs a key-by-key LOAD REPORT as a warning whenever a checkpoint has keys the
    # class does not use or lacks keys it has: focusflow loads bodies without heads and adds task heads
    # on purpose, and checks the weights it needs itself (a wrong size still raises).
    "transformers.modeling_utils": (" LOAD REPORT",),
    # Prefect warns on every run of a task with ``timeout_seconds`` in a worker thread (the default
    # task runner) that the timeout cannot interrupt blocking calls: our timeouts are day-long
    # backstops, the warning says nothing about the run.
    "prefect.task_runs": ("configured for this task, but the task is running in a worker thread",),
    # Prefect's background senders report their queue while they drain at exit ("Still processing items: 1 items
    # remaining..."): the items are still sent, and the line came after a command's own error line.
    "EventsWorker": ("Still processing items",),
    "APILogWorker": ("Still processing items",),
}


class NoiseFilter(logging.Filter):
    """Drops records whose message template contains one of ``fragments``."""

    def __init__(self, fragments: Iterable[str]) -> None:
        super().__init__()
        self.fragments = tuple(fragments)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        return not any(fragment in message for fragment in self.fragments)


#: Loggers that report a failed task or flow run with the traceback of its error.
RUN_FAILURE_LOGGERS = ("prefect.task_runs", "prefect.flow_runs")


class UserErrorTraceback(logging.Filter):
    """Keeps a failed run's one-line message but drops its traceback when the error is a ``FocusflowError``:
    its message already says what to fix, and the command ends with it as ``error: ...``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], FocusflowError):
            record.exc_info, record.exc_text = None, None
            record.focusflow_user_error = True
        elif (found := _FAILED_STATE.search(str(record.msg))) and found.group(1) in _user_error_names():
            record.focusflow_user_error = True  # the task's closing "Finished in state Failed(...)" line
        return True


#: How Prefect's closing line of a failed task run names the exception (the message is preformatted).
_FAILED_STATE = re.compile(r"Task run encountered an exception (\w+):")


def _user_error_names() -> set[str]:
    """The names of ``FocusflowError`` and every subclass defined so far."""
    names, pending = set(), [FocusflowError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return names


class UserErrorConsole(logging.Filter):
    """For the CLI's console handler: drops a failed run's record of a ``FocusflowError`` (marked by
    :class:`UserErrorTraceback`), which the command prints anyway as its one ``error: ...`` line, and, once a stop
    was asked for, Prefect's records of the runs it ends (NotReady, Cancelled): the command's one ``stopped by``
    line says it. The Prefect UI, whose handler sits on the run loggers themselves, still receives them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if stop_requested() and record.name.startswith("prefect"):
            return False
        return not getattr(record, "focusflow_user_error", False)


#: transformers' progress bars over local, sub-second work (one per model load or save): hidden unless
#: verbose. Download bars and our own stage bars stay.
LOCAL_PROGRESS_BARS = frozenset({"Loading weights", "Writing model shards"})
#: Prefect's console and Dask's (every worker process's too) show warnings and errors unless verbose; the Prefect
#: UI still receives every log. Both read these variables when they configure their logging.
QUIET_ENVIRONMENT = {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING", "DASK_LOGGING__DISTRIBUTED": "warning"}


def _progress_hook(factory, args, kwargs):  # transformers.utils.logging.set_tqdm_hook's signature
    if kwargs.get("desc") in LOCAL_PROGRESS_BARS and not is_verbose():
        kwargs = {**kwargs, "disable": True}
    return factory(*args, **kwargs)


def quiet_transformers_progress() -> None:
    """Hide transformers' per-load progress bars unless verbose (decided per bar, so the order of calls
    does not matter). Called by the module through which focusflow loads models."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_tqdm_hook(_progress_hook)


def is_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def clock(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


#: The logger of the stage lines (started / cache hit / done in N s) that ``focusflow.pipeline.run_stage`` writes.
STAGE_LOGGER = "focusflow.stages"


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (a test's capture, a redirected shell)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it
        pass


def show_stage_lines(show: bool = True) -> None:
    """One line per stage on stderr (``HH:MM:SS stage: started``, ``cache hit``, ``done in N s``): the CLI's
    default, so that a long command says what it is doing. Idempotent; ``show=False`` removes the lines."""
    logger = logging.getLogger(STAGE_LOGGER)
    for installed in [h for h in logger.handlers if isinstance(h, _CurrentStderr)]:
        logger.removeHandler(installed)
    if show:
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    logger.propagate = not show  # shown once, not again by a verbose root handler


class RunFormatter(logging.Formatter):
    """``LEVEL logger: message``, naming the Prefect task or flow run a record comes from when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        run = getattr(record, "task_run_name", None) or getattr(record, "flow_run_name", None)
        return f"[{run}] {text}" if run else text


def configure_output(verbose: bool | None = None) -> bool:
    """Install the noise filters, or remove them when verbose; returns whether output is verbose.

    ``verbose=None`` reads ``FOCUSFLOW_VERBOSE``; ``True`` also sets it, so that flows and child
    processes started from here are verbose too. Idempotent.
    """
    if verbose is None:
        verbose = is_verbose()
    elif verbose:
        os.environ[VERBOSE_ENV] = "1"
    if not verbose:  # read when Prefect configures its logging, i.e. before it is imported
        for name, value in QUIET_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
    for name, fragments in NOISE.items():
        logger = logging.getLogger(name)
        for installed in [f for f in logger.filters if isinstance(f, NoiseFilter)]:
            logger.removeFilter(installed)
        if not verbose:
            logger.addFilter(NoiseFilter(fragments))
    for name in RUN_FAILURE_LOGGERS:
        logger = logging.getLogger(name)
        for installed in [f for f in logger.filters if isinstance(f, UserErrorTraceback)]:
            logger.removeFilter(installed)
        if not verbose:
            logger.addFilter(UserErrorTraceback())
    return verbose


PROGRESS_LINE_S = 30.0  # seconds between progress lines when stderr is not a terminal
progress_lines = logging.getLogger(f"{STAGE_LOGGER}.progress")


class ProgressBar:
    """One rich bar of optimizer steps with the last train loss on a terminal; elsewhere (a log file, a CI job, a
    worker) one progress line every ~30 s on the stage lines, so a long stage is never silent."""

    def __init__(self, name: str, total: int, completed: int = 0, show_loss: bool = True):
        self.name, self.total, self.completed = name, total, completed
        self._started = self._last_line = time.perf_counter()
        self._first = completed
        self._progress = None
        if not sys.stderr.isatty():
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(TextColumn(name), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("loss {task.fields[loss]:.3f}" if show_loss else ""),
                                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                  TimeRemainingColumn())
        self._task = self._progress.add_task(name, total=total, completed=completed, loss=float("nan"), note="")
        self._progress.start()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def update(self, completed: int, loss: float = float("nan"), note: str = "") -> None:
        """``note``: what else the line says (``MFU 31%``)."""
        self.completed = completed
        if self._progress is not None:
            self._progress.update(self._task, completed=completed, loss=loss, note=note)
            return
        now = time.perf_counter()
        if now - self._last_line < PROGRESS_LINE_S or completed >= self.total or completed <= self._first:
            return
        self._last_line = now
        elapsed = now - self._started
        eta = elapsed / (completed - self._first) * (self.total - completed)
        shown = (f", loss {loss:.3f}" if math.isfinite(loss) else "") + (f", {note}" if note else "")
        progress_lines.info("%s: %d/%d%s, %s, ETA %s", self.name, completed, self.total, shown, clock(elapsed),
                            clock(eta))

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
