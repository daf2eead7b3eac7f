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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from pydantic import Field

from focusflow.config import LaptSpec
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, register
from focusflow.storage import Artifact, ArtifactStore
from focusflow.storage.atomic import atomic_folder, atomic_write

log = logging.getLogger(__name__)

LAPT_STAGE, CHECKPOINT_STAGE, LAPT_VERSION = "lapt", "lapt-checkpoint", 1


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


def restore_checkpoint(store: ArtifactStore, run_key: str, work: Path) -> Path | None:
    """Make the newest good checkpoint of this run the local resume point; return it (None: start afresh).

    The local checkpoints are verified first (a damaged one is moved aside with a warning naming it); a
    store copy newer than the newest good local one is fetched (verified by the store) and copied in.
    Run on rank 0 only.
    """
    from focusflow.storage import CorruptArtifactError
    from focusflow.training.checkpoint import CHECKPOINTS, LATEST, MANIFEST, step_name, verified_checkpoint, write_manifest

    local = verified_checkpoint(work)
    local_step = int(local.name.removeprefix("step-")) if local is not None else -1
    for stored in reversed(stored_checkpoints(store, run_key)):
        step = int(stored.metadata["step"])
        if step <= local_step:
            break
        try:
            source = store.fetch(stored)
        except CorruptArtifactError as exc:
            log.warning("stored LAPT checkpoint %s is damaged (%s); trying an older one", stored.uri, exc)
            continue
        name = step_name(step)
        with atomic_folder(work / CHECKPOINTS / name, replace=True) as staging:
            shutil.copytree(source, staging, dirs_exist_ok=True)
            if not (staging / MANIFEST).is_file():  # stored before checkpoints had one: the store verified it
                write_manifest(staging)
        atomic_write(work / CHECKPOINTS / LATEST, name)
        log.info("restored LAPT checkpoint %s from the store", name)
        return work / CHECKPOINTS / name
    return local


class LaptSettings(StageSettings):
    lapt: LaptSpec
    lineage: dict[str, Any] = Field(default_factory=dict, alias="_lineage")  # artifact URIs, outside the key
    work_root: str | None = Field(None, alias="_work_root")

    @property
    def total_steps(self) -> int:  # what a checkpoint hook shows progress against
        return self.lapt.total_steps


class NotMainRank(Exception):
    """Raised on every torchrun rank but 0 once training is done: rank 0 alone commits the artifact."""


def _lapt(run: StageRun) -> dict[str, Any]:
    """Train (or resume) in a local work folder keyed by the artifact key; every checkpoint is committed.

    ``_lineage`` (artifact URIs such as the source model) is recorded with every checkpoint so that
    a checkpoint can be evaluated on its own (``evaluate_checkpoint``).
    """
    from focusflow.training import run_lapt

    store, run_key, settings = run.store, run.key, run.settings
    spec = settings.lapt
    lineage = {**{name: artifact.uri for name, artifact in run.artifacts.items()}, **settings.lineage}
    work = Path(settings.work_root or default_work_root()) / LAPT_STAGE / run_key
    work.mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) == 0:  # the other ranks wait for rank 0 inside run_lapt
        restore_checkpoint(store, run_key, work)

    def checkpoint_committed(folder: Path, step: int, metrics: Mapping[str, Any]) -> None:
        artifact = store.put_dir(CHECKPOINT_STAGE, checkpoint_key(run_key, step), folder,
                                 params={"run_key": run_key, "step": step},
                                 metadata={"run_key": run_key, "step": step, "language": run.language,
                                           "lineage": lineage, "total_steps": spec.total_steps,
                                           "metrics": dict(metrics)})
        for old in stored_checkpoints(store, run_key)[:-spec.keep_last]:
            store.delete(CHECKPOINT_STAGE, old.key)
        if run.on_checkpoint is not None:
            run.on_checkpoint(artifact.uri, step, metrics)

    split_dir = run.inputs["split"]
    summary = run_lapt(run.inputs["model"], split_dir / "train.jsonl", split_dir / "heldout.jsonl", spec, work,
                       resume=True, on_checkpoint=checkpoint_committed, progress=run.progress)
    if int(os.environ.get("RANK", "0")) != 0:
        raise NotMainRank()
    shutil.copytree(work / "final", run.out, dirs_exist_ok=True)
    for extra in ("metrics.csv", "loss_curve.png", "summary.json"):
        if (work / extra).exists():
            shutil.copy2(work / extra, run.out / extra)
    # committed: the store keeps the last K checkpoints
    run.after_commit.append(lambda: shutil.rmtree(work / "checkpoints", ignore_errors=True))
    return {**summary, "language": run.language, "lineage": lineage}


LAPT = register(Stage(LAPT_STAGE, LAPT_VERSION, ("model", "split"), _lapt,
                      "language-adaptive pretraining, resumable, every checkpoint stored", uses_model=True,
                      work=("tokens", "tokens"), settings=LaptSettings,
                      hints=RunHints(timeout_s=72 * 3600, gpu=True, checkpoints=True)))
