"""What every focusflow Prefect task shares: the artifact-key cache policy, result storage in the
artifact store, and publishing a stage's metrics to the Prefect UI."""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect.cache_policies import CachePolicy
from prefect.context import TaskRunContext
from prefect.filesystems import RemoteFileSystem, WritableFileSystem

from focusflow.orchestration.results import RESULTS_FOLDER
from focusflow.pipeline import StageCall, get_stage, stage_call
from focusflow.pipeline.report import flatten_metrics
from focusflow.storage import ArtifactStore, CorruptArtifactError, on_delete, redact_uri

# transformers' from_pretrained initializes on the meta device through process-global state and
# is not thread-safe; torch already spreads one model's work over every core. So in a thread
# runner the model stages take turns; process and Dask runners still run them in parallel.
_MODEL_LOCK = threading.Lock()


@contextlib.contextmanager
def stage_slot(uses_model: bool) -> Iterator[None]:
    """Hold the per-process model lock while a stage that loads a model runs."""
    if not uses_model:
        yield
        return
    with _MODEL_LOCK:
        yield


@dataclass
class ArtifactKeyPolicy(CachePolicy):
    """Cache key = the stage's artifact key, computed by the registry's ``stage_key`` (what ``run_stage``
    stores under): parameters + input content hashes + stage version.

    Never the run id and never a path string: the same inputs on another machine that shares the store hit
    the same key. The record lives in the store next to the artifacts (``prefect-results/<cache key>``);
    deleting the artifact removes it too (the hook registered below), so that a cache hit never returns the
    URI of a deleted artifact, and an artifact that fails :meth:`ArtifactStore.verify` is no cache hit.
    """

    stage: str = ""

    def compute_key(self, task_ctx: TaskRunContext, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        spec = get_stage(self.stage)
        store = ArtifactStore(inputs["store_uri"])
        call = stage_call(store, spec, inputs.get("params") or {}, inputs.get("inputs") or {})
        if task_ctx is not None:
            _hand_over(task_ctx.task_run.id, (inputs["store_uri"], call.params, inputs.get("inputs") or {}), call)
        try:
            found = store.find(spec.name, call.key)
            if found is not None:
                store.verify(found)
        except CorruptArtifactError:
            return None  # no cache hit: the task runs, and run_stage refuses the artifact in one clear line
        if found is None:  # an artifact deleted by hand, or by a `store rm` killed before its hooks ran: its
            remove_cache_records(store, spec.name, call.key)  # record would be a hit on an address of nothing
        return cache_record_name(spec.name, spec.version, call.key)


# The stage call a task run's cache policy identified, until the task run takes it (``taken_call``): a task reads
# its inputs' manifests and computes its key once. A cache hit never runs the task, so the oldest are dropped.
Arguments = tuple[str, Any, Any]
_IDENTIFIED: dict[Any, tuple[Arguments, StageCall]] = {}
_IDENTIFIED_LOCK = threading.Lock()
_IDENTIFIED_LIMIT = 256


def _hand_over(task_run_id: Any, arguments: Arguments, call: StageCall) -> None:
    with _IDENTIFIED_LOCK:
        _IDENTIFIED[task_run_id] = (arguments, call)
        while len(_IDENTIFIED) > _IDENTIFIED_LIMIT:
            del _IDENTIFIED[next(iter(_IDENTIFIED))]


def taken_call(task_ctx: TaskRunContext | None, store_uri: str, params: dict[str, Any],
               inputs: dict[str, Any]) -> StageCall | None:
    """The call this task run's cache policy identified, if it identified these very arguments."""
    if task_ctx is None:
        return None
    with _IDENTIFIED_LOCK:
        arguments, call = _IDENTIFIED.pop(task_ctx.task_run.id, ((None, None, None), None))
    return call if arguments == (store_uri, params, inputs) else None


def cache_record_name(stage: str, version: int | str, key: str) -> str:
    """The one spelling of a task's cache record name (``version="*"`` gives the glob of every version)."""
    return f"focusflow-{stage}-v{version}-{key}"


@on_delete
def remove_cache_records(store: ArtifactStore, stage: str, key: str) -> None:
    """When an artifact is deleted, its cache records go too (whatever stage version wrote them)."""
    store.remove_records(RESULTS_FOLDER, cache_record_name(stage, "*", key))


def result_storage_for(store_uri: str) -> Path | WritableFileSystem:
    """Prefect's persisted results (URIs, as JSON) live in the artifact store too.

    A local store is a plain path; a remote one needs a block saved server-side, which is
    why this is resolved when a flow runs, not when it is defined.
    """
    base = f"{store_uri.rstrip('/')}/{RESULTS_FOLDER}"
    if base.startswith("file://"):
        return Path(base[len("file://"):])
    block = RemoteFileSystem(basepath=base)
    slug = hashlib.sha256(redact_uri(base).encode()).hexdigest()[:12]
    block.save(f"focusflow-results-{slug}", overwrite=True)
    return block


def artifact_key_name(*parts: str) -> str:
    """A Prefect artifact key: lowercase letters, digits and dashes only."""
    joined = "-".join(parts).lower()
    return re.sub(r"[^a-z0-9-]+", "-", joined).strip("-")[:100] or "focusflow"


def run_name(stage: str) -> Callable[[], str]:
    """Task-run names that say which branch they are: ``init[focus]``, ``intrinsic[original]``."""

    def name() -> str:
        from prefect.runtime import task_run

        label = (task_run.parameters or {}).get("label")
        return f"{stage}[{label}]" if label else stage

    return name


def publish_stage(stage: str, language: str | None, artifact_uri: str, metadata: dict[str, Any],
                  label: str | None = None) -> None:
    """A table of the stage's metrics and where its artifact is stored, in the Prefect UI."""
    from prefect.artifacts import create_table_artifact

    rows = [{"metric": k, "value": _short(v)} for k, v in flatten_metrics(metadata).items()]
    rows.append({"metric": "artifact", "value": redact_uri(artifact_uri)})
    create_table_artifact(
        table=rows,
        key=artifact_key_name(language or "run", stage, *([label] if label else [])),
        description=f"**{stage}{f' [{label}]' if label else ''}** stage of {language or 'this run'} — "
                    f"stored at `{redact_uri(artifact_uri)}`",
    )


def _short(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)[:200]
