"""Shared by the flows: a run's configuration from their parameters, and its task runner."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from prefect.states import Cancelled, State
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from focusflow.config import DASK_ADDRESS_ENV, ConfigError, PipelineConfig, load_config
from focusflow.errors import cause_chain
from focusflow.stopping import StopRequested, armed_depth, stop_message, stop_on_signals, stop_requested
from focusflow.stopping import reset as reset_stop

T = TypeVar("T")

# The configuration a caller in this process validated and hands to a flow as its whole dump (``handing_over``):
# the flow takes it back instead of validating the same mapping again.
_HANDED_OVER: ContextVar[tuple[str, dict[str, Any], PipelineConfig] | None] = ContextVar("focusflow_run_config",
                                                                                        default=None)


def load_run_config(language: str, config: dict[str, Any] | None = None, config_path: str | None = None,
                    overrides: list[str] | None = None) -> PipelineConfig:
    """YAML file (optional) < ``config`` mapping < ``section.field=value`` overrides; language always wins.

    A flow calls this once, first; everything in the run reads the configuration it returns. The configuration a
    caller in this process already validated and handed over whole is taken back as it is."""
    given = _HANDED_OVER.get()
    if given is not None and config_path is None and not overrides and given[:2] == (language, config):
        return given[2]
    return load_config(config_path, overrides, layers=[config], language=language)


@contextmanager
def handing_over(cfg: PipelineConfig) -> Iterator[dict[str, Any]]:
    """``cfg`` whole, as a flow's ``config`` parameter (what the UI shows); the flow called inside takes ``cfg``
    back instead of validating the mapping a second time."""
    dumped = cfg.model_dump(mode="json")
    token = _HANDED_OVER.set((cfg.language, dumped, cfg))
    try:
        yield dumped
    finally:
        _HANDED_OVER.reset(token)


def cancelled_when_stopped(body: Callable[..., T]) -> Callable[..., T | State]:
    """A flow body that stops on SIGTERM and SIGINT (``focusflow.stopping``): the running stages stop at their safe
    points (LAPT and align keep a checkpoint at the step they reached), the stages not yet started never start, and
    the flow run ends **Cancelled** with the stop's message (what was kept) instead of Crashed."""
    @functools.wraps(body)
    def run(*args: Any, **kwargs: Any) -> T | State:
        outermost = armed_depth() == 0  # called from Python, not inside a command that handles the stop itself
        with stop_on_signals():
            try:
                return body(*args, **kwargs)
            except BaseException as exc:
                if not _a_stop(exc):
                    raise
                cancelled = Cancelled(message=stop_message())
                if outermost:
                    reset_stop()  # this process may run another flow; a command reads the stop, then resets it
                return cancelled
    return run


def _a_stop(error: BaseException) -> bool:
    """Whether ``error`` is the stop itself, or what a stage that did not run because of it raised."""
    from prefect.exceptions import CancelledRun, TerminationSignal, UnfinishedRun

    if any(isinstance(e, (StopRequested, KeyboardInterrupt)) for e in cause_chain(error)):
        return True
    return stop_requested() and isinstance(error, (CancelledRun, UnfinishedRun, TerminationSignal))


def runner_for(cfg: PipelineConfig) -> TaskRunner[Any]:
    """Threads (default), processes, or a Dask cluster (needs ``prefect-dask``) for independent branches.

    Dask: the cluster at ``orchestration.dask_address`` (or ``$FOCUSFLOW_DASK_ADDRESS``) when one is given,
    else a local cluster of ``max_workers`` single-threaded worker processes started for the run."""
    workers = cfg.orchestration.max_workers
    if cfg.orchestration.task_runner == "processes":
        return ProcessPoolTaskRunner(max_workers=workers)
    if cfg.orchestration.task_runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise ConfigError("orchestration.task_runner=dask needs the dask extra: "
                              "pip install 'focusflow[dask]'") from None
        address = cfg.orchestration.dask_address or os.environ.get(DASK_ADDRESS_ENV)
        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": None})
    return ThreadPoolTaskRunner(max_workers=workers)
