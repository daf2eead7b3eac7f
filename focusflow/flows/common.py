"""Shared by the flows: a run's configuration from their parameters, and its task runner."""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from focusflow.config import PipelineConfig, load_config


def load_run_config(language: str, config: dict[str, Any] | None = None, config_path: str | None = None,
                    overrides: list[str] | None = None) -> PipelineConfig:
    """YAML file (optional) < ``config`` mapping < ``section.field=value`` overrides; language always wins.

    A flow calls this once, first; everything in the run reads the configuration it returns."""
    return load_config(config_path, overrides, layers=[config], language=language)


def runner_for(cfg: PipelineConfig) -> TaskRunner[Any]:
    """Threads (default), processes, or a Dask cluster (needs ``prefect-dask``) for independent branches."""
    workers = cfg.orchestration.max_workers
    if cfg.orchestration.task_runner == "processes":
        return ProcessPoolTaskRunner(max_workers=workers)
    if cfg.orchestration.task_runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:
            raise RuntimeError("orchestration.task_runner=dask needs `pip install prefect-dask`") from exc
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1})
    return ThreadPoolTaskRunner(max_workers=workers)
