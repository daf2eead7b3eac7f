"""Which task runner a run configuration selects, and where its Dask cluster is."""

from __future__ import annotations

import pytest

from focusflow.config import DASK_ADDRESS_ENV, ConfigError, load_config
from focusflow.flows.common import runner_for


def test_threads_by_default_with_max_workers():
    from prefect.task_runners import ThreadPoolTaskRunner

    runner = runner_for(load_config(language="sw", overrides=["orchestration.max_workers=3"]))
    assert isinstance(runner, ThreadPoolTaskRunner) and runner._max_workers == 3


def test_dask_joins_the_configured_cluster_else_the_environment_s_else_starts_a_local_one(monkeypatch):
    pytest.importorskip("prefect_dask", reason="the dask extra")
    monkeypatch.delenv(DASK_ADDRESS_ENV, raising=False)
    dask = ["orchestration.task_runner=dask", "orchestration.max_workers=3"]

    local = runner_for(load_config(language="sw", overrides=dask))
    assert local.address is None
    assert local.cluster_kwargs == {"n_workers": 3, "threads_per_worker": 1, "processes": True,
                                     "dashboard_address": None}

    monkeypatch.setenv(DASK_ADDRESS_ENV, "tcp://scheduler.from.env:8786")
    assert runner_for(load_config(language="sw", overrides=dask)).address == "tcp://scheduler.from.env:8786"
    configured = runner_for(load_config(language="sw", overrides=[*dask, "orchestration.dask_address=tcp://s:8786"]))
    assert configured.address == "tcp://s:8786"


def test_dask_without_the_extra_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    with pytest.raises(ConfigError, match=r"focusflow\[dask\]"):
        runner_for(load_config(language="sw", overrides=["orchestration.task_runner=dask"]))
