"""LAPT as a stored, resumable stage.

Training runs in a persistent local work folder keyed by the artifact key, so a killed run
resumes from its last checkpoint when started again. Every checkpoint is also committed to the
store (stage ``lapt-checkpoint``), so a run moved to a fresh machine resumes from there, and
``on_checkpoint(uri, step, metrics)`` tells the caller (the Prefect task emits an event).
The final model is committed as the ``lapt`` artifact: a ``save_pretrained`` folder with the
loss curve, metrics CSV and summary beside it.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from focusflow.storage import Artifact, ArtifactStore
from focusflow.storage.atomic import atomic_folder, atomic_write

log = logging.getLogger(__name__)

LAPT_STAGE, CHECKPOINT_STAGE, LAPT_VERSION = "lapt", "lapt-checkpoint", 1
CheckpointCallback = Callable[[str, int, Mapping[str, Any]], None]


def default_work_root() -> Path:
    """Local scratch for resumable work: ``FOCUSFLOW_WORK_DIR`` or the user cache directory."""
    configured = os.environ.get("FOCUSFLOW_WORK_DIR")
    return Path(configured) if configured else Path(user_cache_dir("focusflow")) / "work"


def checkpoint_key(run_key: str, step: int) -> str:
    return f"{run_key[:40]}-step-{step:08d}"


def stored_checkpoints(store: ArtifactStore, run_key: str) -> list[Artifact]:
    """This run's checkpoints in the store, oldest step first."""
    mine = [a for a in store.list(CHECKPOINT_STAGE) if a.metadata.get("run_key") == run_key]
    return sorted(mine, key=lambda a: a.metadata.get("step", 0))


def _restore_from_store(store: ArtifactStore, run_key: str, work: Path) -> None:
    from focusflow.training import latest_checkpoint
    from focusflow.training.checkpoint import CHECKPOINTS, LATEST, step_name

    if latest_checkpoint(work) is not None:
        return
    checkpoints = stored_checkpoints(store, run_key)
    if not checkpoints:
        return
    newest = checkpoints[-1]
    name = step_name(int(newest.metadata["step"]))
    with atomic_folder(work / CHECKPOINTS / name) as staging:
        shutil.copytree(store.fetch(newest), staging, dirs_exist_ok=True)
    atomic_write(work / CHECKPOINTS / LATEST, name)
    log.info("restored LAPT checkpoint %s from the store", name)


def run_lapt_stage(store: ArtifactStore, params: Mapping[str, Any], inputs: Mapping[str, Artifact | str],
                   language: str | None = None, work_root: Path | None = None,
                   on_checkpoint: CheckpointCallback | None = None, progress: bool = False,
                   lineage: Mapping[str, str] | None = None) -> Artifact:
    """Train (or resume, or find) the LAPT model for ``inputs['model']`` on ``inputs['split']``.

    ``lineage`` (artifact URIs such as the source model and the split) is recorded with every
    checkpoint so that a checkpoint can be evaluated on its own (``evaluate_checkpoint``).
    """
    from focusflow.config import LaptSpec
    from focusflow.training import run_lapt

    artifacts = {k: store.resolve(v) if isinstance(v, str) else v for k, v in inputs.items()}
    run_key = store.key(LAPT_STAGE, params, artifacts, LAPT_VERSION)
    found = store.find(LAPT_STAGE, run_key)
    if found is not None:
        return found
    spec = LaptSpec(**params["lapt"])
    lineage_uris = {name: artifact.uri for name, artifact in artifacts.items()}
    work = (work_root or default_work_root()) / LAPT_STAGE / run_key
    work.mkdir(parents=True, exist_ok=True)
    _restore_from_store(store, run_key, work)

    def checkpoint_committed(folder: Path, step: int, metrics: Mapping[str, Any]) -> None:
        artifact = store.put_dir(CHECKPOINT_STAGE, checkpoint_key(run_key, step), folder,
                                 params={"run_key": run_key, "step": step},
                                 metadata={"run_key": run_key, "step": step, "language": language,
                                           "lineage": {**lineage_uris, **dict(lineage or {})},
                                           "total_steps": spec.total_steps, "metrics": dict(metrics)})
        for old in stored_checkpoints(store, run_key)[:-spec.keep_last]:
            store.delete(CHECKPOINT_STAGE, old.key)
        if on_checkpoint is not None:
            on_checkpoint(artifact.uri, step, metrics)

    model_dir = store.fetch(artifacts["model"])
    split_dir = store.fetch(artifacts["split"])
    summary = run_lapt(model_dir, split_dir / "train.jsonl", split_dir / "heldout.jsonl", spec, work,
                       resume=True, on_checkpoint=checkpoint_committed, progress=progress)
    with store.writer(LAPT_STAGE, run_key, params=params, inputs=artifacts,
                      metadata={**summary, "language": language,
                                "lineage": {**lineage_uris, **dict(lineage or {})}}) as folder:
        shutil.copytree(work / "final", folder, dirs_exist_ok=True)
        for extra in ("metrics.csv", "loss_curve.png", "summary.json"):
            if (work / extra).exists():
                shutil.copy2(work / extra, folder / extra)
    artifact = store.get(LAPT_STAGE, run_key)
    shutil.rmtree(work / "checkpoints", ignore_errors=True)  # committed; the store keeps the last K
    return artifact
