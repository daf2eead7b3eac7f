"""One Prefect task per registered stage, each a thin wrapper over ``focusflow.pipeline.run_stage``.

The cache key is ``stage_key`` (what ``run_stage`` stores under), results are artifact URIs persisted
in the store, and each stage publishes its metrics to the Prefect UI. Retries, timeouts, GPU tags and
the checkpoint hook come from the stage's row (``Stage.hints``); the UI pages of the downstream table
and the report are the only per-stage code here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.client.schemas.objects import TaskRun
from prefect.context import TaskRunContext
from prefect.states import State

from focusflow.errors import is_permanent
from focusflow.pipeline import STAGES, Stage, run_stage
from focusflow.pipeline.registry import log_cache_hit
from focusflow.stopping import stop_on_signals
from focusflow.storage import Artifact, ArtifactStore
from focusflow.storage.records import StageRecord
from focusflow.tasks.checkpoints import checkpoint_callback
from focusflow.tasks.common import ArtifactKeyPolicy, publish_stage, run_name, stage_slot, taken_call
from focusflow.tasks.publish import publish_link
from focusflow.tasks.report import publish_downstream, publish_report

Publisher = Callable[[ArtifactStore, Artifact, str | None, str | None], None]


def _publish_metrics(store: ArtifactStore, artifact: Artifact, language: str | None, label: str | None) -> None:
    publish_stage(artifact.stage, language, artifact.uri, StageRecord.of(artifact).shown(), label)


_PUBLISHERS: dict[str, Publisher] = {"downstream": publish_downstream, "report": publish_report,
                                     "publish": publish_link}


def retry_transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry only what may pass (``errors.is_permanent``, the store's rule too): a ``FocusflowError`` explains a
    problem of the input, a read-only or full disk stays so; a retry would repeat them."""
    error = state.data if isinstance(state.data, BaseException) else state.result(raise_on_failure=False)
    return not (isinstance(error, BaseException) and is_permanent(error))


def say_cache_hit(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> None:
    """A task Prefect answers from its cache never calls ``run_stage``: it says its stage line here, the same line
    (``init[focus]: cache hit (init/3f2a…)``), so that a second run of a flow says what it took from the store."""
    if state.name != "Cached":
        return
    uri = state.result(raise_on_failure=False)
    if isinstance(uri, str) and uri.count("/") >= 2:  # the artifact's URI: <store>/<stage>/<key>
        stage, key = uri.rstrip("/").rsplit("/", 2)[1:]
        log_cache_hit(task_run.name, stage, key)


def _make(spec: Stage) -> Task[..., str]:
    """The stage's task, configured from its row: its run hints are the task's retries, timeout and tags."""
    hints = spec.hints

    def run(store_uri: str, params: dict[str, Any], inputs: dict[str, str] | None = None,
            language: str | None = None, label: str | None = None) -> str:
        context = TaskRunContext.get()
        call = taken_call(context, store_uri, params, inputs or {})  # identified by the cache policy, once
        store = call.store if call is not None else ArtifactStore(store_uri)
        language = language or params.get("language")
        in_flow = context is not None
        on_checkpoint = (checkpoint_callback(spec.name, spec.parse(params).total_steps, language)
                         if hints.checkpoints and in_flow else None)
        # a process runner's worker runs this in its main thread: a forwarded SIGTERM stops the stage there as here
        with stop_on_signals(), stage_slot(spec.uses_model):
            # progress: a long training stage is never silent (a bar on a terminal, a line every 30 s elsewhere);
            # model stages take turns, so at most one bar is drawn
            artifact = run_stage(store, spec, params, inputs or {}, language=language, on_checkpoint=on_checkpoint,
                                 label=label, progress=True, call=call)
        if in_flow:
            _PUBLISHERS.get(spec.name, _publish_metrics)(store, artifact, language, label)
        return artifact.uri

    run.__name__ = f"{spec.name.replace('-', '_')}_stage"
    run.__doc__ = spec.description
    return task(
        run,
        name=spec.name,
        cache_policy=ArtifactKeyPolicy(stage=spec.name),
        persist_result=True,
        result_serializer="json",
        retries=hints.retries,
        retry_delay_seconds=list(hints.retry_delays_s) or 0,
        retry_condition_fn=retry_transient,
        on_completion=[say_cache_hit],
        timeout_seconds=hints.timeout_s,
        tags=[f"stage:{spec.name}", *(["gpu"] if hints.gpu else [])],
        task_run_name=run_name(spec.name),
    )


STAGE_TASKS: dict[str, Task[..., str]] = {name: _make(spec) for name, spec in STAGES.items()}
