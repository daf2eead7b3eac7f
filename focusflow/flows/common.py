"""Shared by the flows: reading a run's configuration and picking its task runner."""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from focusflow.config import PipelineConfig, build_config, load_config, parse_overrides
from focusflow.config import _merge as merge_config


def load_run_config(language: str, config: dict[str, Any] | None = None, config_path: str | None = None,
                    overrides: list[str] | None = None) -> PipelineConfig:
    """YAML file (optional) < ``config`` mapping < ``section.field=value`` overrides; language always wins."""
    base = load_config(config_path, language=language).model_dump(mode="json") if config_path else {}
    data = merge_config(base, config or {})
    data = merge_config(data, parse_overrides(overrides or []))
    data["language"] = language
    return build_config(data)


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
