"""LAPT as a stored, resumable stage.

Training runs in a persistent local work folder keyed by the artifact key, so a killed run
resumes from its last checkpoint when started again. Every checkpoint is also committed to the
store (stage ``lapt-checkpoint``), so a run moved to a fresh machine resumes from there, and
``on_checkpoint(uri, step, metrics)`` tells the caller (the Prefect task emits an event).
The final model is committed as the ``lapt`` artifact: a ``save_pretrained`` folder with the
loss curve, metrics CSV and summary beside it.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationError

from focusflow.config import LaptSpec, PipelineConfig
from focusflow.corpus.split import SplitOutput
from focusflow.errors import InputError
from focusflow.pipeline.family_defaults import with_family_defaults
from focusflow.pipeline.registry import RunHints, Stage, StageRun, StageSettings, default_key_params, register
from focusflow.storage import Artifact, ArtifactStore, CorruptArtifactError
from focusflow.storage.atomic import atomic_folder, atomic_write
from focusflow.storage.work_folders import default_work_root
from focusflow.training.lapt_budget import planned_spec
from focusflow.training.records import BudgetPlan, BudgetRecord, CheckpointRecord, LaptRecord
from focusflow.training.work import store_finished_run

log = logging.getLogger(__name__)

LAPT_STAGE, CHECKPOINT_STAGE, LAPT_VERSION = "lapt", "lapt-checkpoint", 1
BUDGET_STAGE, BUDGET_FILE = "lapt-budget", "budget.json"


def checkpoint_key(run_key: str, step: int) -> str:
    return f"{run_key[:40]}-step-{step:08d}"


def stored_checkpoints(store: ArtifactStore, run_key: str) -> list[Artifact]:
    """This run's checkpoints in the store, oldest step first."""
    mine = [a for a in store.list(CHECKPOINT_STAGE) if a.params.get("run_key") == run_key]  # another run's: unread
    return sorted(mine, key=lambda a: CheckpointRecord.of(a).step or 0)


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
        step = CheckpointRecord.of(stored).step
        if step is None:  # not a checkpoint of a step: nothing to resume from
            continue
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

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, *, lineage: Mapping[str, str] | None = None,
                    **variant: Any) -> Self:
        """``lineage`` (artifact URIs such as the source model) travels with every checkpoint, outside the key."""
        return cls(lapt=with_family_defaults(cfg).lapt, lineage=dict(lineage or {}))

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
    from focusflow.training.checkpoint import STATE_FILE
    from focusflow.training.distributed import rank

    store, run_key, settings = run.store, run.key, run.settings
    spec = settings.lapt
    lineage = {**{name: artifact.uri for name, artifact in run.artifacts.items()}, **settings.lineage}
    work = run.work  # <work root>/lapt/<key>, claimed for this run: a second run waits instead of sharing it
    work.mkdir(parents=True, exist_ok=True)
    if rank() == 0:  # the other ranks wait for rank 0 inside run_lapt
        restore_checkpoint(store, run_key, work)

    def checkpoint_committed(folder: Path, step: int, metrics: Mapping[str, Any]) -> None:
        kept = step in spec.checkpoint_steps
        marks = {"milestone": True, **({"lapt_minutes": minutes_at[step]} if step in minutes_at else {})} if kept else {}
        checked = json.loads((folder / STATE_FILE).read_text(encoding="utf-8")).get("weights_check") or {}
        artifact = store.put_dir(CHECKPOINT_STAGE, checkpoint_key(run_key, step), folder,
                                 params={"run_key": run_key, "step": step},
                                 metadata={"run_key": run_key, "step": step, "language": run.language,
                                           "lineage": lineage, "total_steps": spec.total_steps,
                                           "metrics": dict(metrics), "weights_check": checked, **marks})
        for old in stored_checkpoints(store, run_key)[:-spec.keep_last]:
            if not CheckpointRecord.of(old).milestone:
                store.delete(CHECKPOINT_STAGE, old.key)
        if run.on_checkpoint is not None and not metrics.get("stopped"):  # a stop's checkpoint is no curve point:
            run.on_checkpoint(artifact.uri, step, metrics)  # no event, no re-evaluation triggered while stopping

    split_dir = run.input("split", SplitOutput)
    budget = _planned(run, spec)
    spec = planned_spec(spec, budget) if budget else spec  # a minutes budget becomes the steps its plan fixed
    minutes_at = dict(zip(budget.checkpoint_steps, budget.checkpoint_minutes, strict=True)) if budget else {}
    teacher = run.inputs["source"] if "source" in run.artifacts else None  # lapt.objective=distill's teacher
    states = run.inputs["teacher"] if "teacher" in run.artifacts else None  # and its stored word states
    summary = run_lapt(run.inputs["model"], split_dir.train, split_dir.heldout, spec, work,
                       resume=True, on_checkpoint=checkpoint_committed, progress=run.progress, source_dir=teacher,
                       teacher_dir=states)
    if rank() != 0:
        raise NotMainRank()
    record = store_finished_run(work, run.out)
    # committed: the store keeps the last K checkpoints
    run.after_commit.append(lambda: shutil.rmtree(work / "checkpoints", ignore_errors=True))
    planned = ({"budget": {**budget.model_dump(exclude_unset=True),
                           "train_seconds": summary.get("work_seconds")}} if budget else {})
    return {**summary, "language": run.language, "lineage": lineage, **planned, **record}


def _planned(run: StageRun, spec: LaptSpec) -> BudgetPlan | None:
    """The step plan of a minutes budget (the ``budget`` input, a ``lapt-budget`` artifact); None for other budgets."""
    return planned_input(run, spec.needs_plan, "lapt.minutes", BUDGET_STAGE, "model and split",
                         "focusflow lapt --minutes and the flows do")


def planned_input(run: StageRun, needs_plan: bool, setting: str, budget_stage: str, inputs: str,
                  who: str) -> BudgetPlan | None:
    """The ``budget`` input's plan when ``setting`` (a minutes budget) needs one, None when it does not; either way
    wrong (a plan missing, or one given to a step budget) is the user's error, naming the stage that plans."""
    if needs_plan != ("budget" in run.artifacts):
        raise InputError(f"{setting} needs its step plan: run the {budget_stage} stage on the same {inputs} and pass "
                         f"it as the 'budget' input ({who})"
                         if needs_plan else f"a budget input ({budget_stage}) was given but {setting} is not set")
    return read_plan(run) if needs_plan else None


def read_plan(run: StageRun) -> BudgetPlan:
    """The ``budget`` input's plan (a ``lapt-budget`` or ``align-budget`` artifact's ``budget.json``)."""
    try:
        return BudgetPlan.model_validate_json((run.inputs["budget"] / BUDGET_FILE).read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise CorruptArtifactError(f"{run.artifacts['budget'].uri}: {BUDGET_FILE} is not a step plan "
                                   f"({exc.errors()[0]['loc']}: {exc.errors()[0]['msg']})") from None


def write_plan(run: StageRun, plan: Any, what: str) -> dict[str, Any]:
    """Store a minutes budget's step plan (``budget.json``) and return the stage's record of it."""
    from focusflow.training.lapt_budget import machine_fingerprint

    kept = {name: value for name, value in plan.to_dict().items()
            if name in ("minutes", "steps", "checkpoint_minutes", "checkpoint_steps", "clock")}
    atomic_write(run.out / BUDGET_FILE, json.dumps(kept, indent=2))
    log.info("%s budget: %.1f minutes = %d steps at %.2f s/step", what, plan.minutes, plan.steps, plan.seconds_per_step)
    return {**plan.to_dict(), "machine": machine_fingerprint(), "language": run.language,
            "note": "steps = minutes / the median time of the timed steps (on a CPU its CPU time over its threads); "
                    "evaluation and checkpoints come on top"}


class LaptBudgetSettings(StageSettings):
    lapt: LaptSpec
    work_root: str | None = Field(None, alias="_work_root")

    @classmethod
    def from_config(cls, cfg: PipelineConfig, /, **variant: Any) -> Self:
        """The LAPT settings a minutes budget is timed with (the machine joins the key at run time)."""
        return cls(lapt=with_family_defaults(cfg).lapt)


def lapt_key_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``lapt.compile: auto`` keys as ``false``, the value every LAPT key held before auto: compiling changes how fast
    a run trains, not what it learns, so no stored LAPT is trained again for it (the parameters keep ``auto``)."""
    keyed = default_key_params(params)
    lapt = keyed.get("lapt")
    if isinstance(lapt, Mapping) and lapt.get("compile") == "auto":
        keyed["lapt"] = {**lapt, "compile": False}
    return keyed


def budget_key_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A plan depends on the machine that measured it: the key names it (computed where the stage runs). A
    distillation's plan is timed on stored teacher states (it ran the teacher in every step before): said in its key,
    so that no plan of the slower steps is found again (the same inputs and settings keyed those)."""
    from focusflow.methods import LAPT_OBJECTIVES, learns_from_source
    from focusflow.training.lapt_budget import machine_fingerprint

    keyed = {**lapt_key_params(params), "machine": machine_fingerprint()}
    objective = (params.get("lapt") or {}).get("objective")
    if objective in LAPT_OBJECTIVES and learns_from_source(objective):  # ``auto``: a library call's, not keyed
        keyed["teacher"] = "stored states"
    return keyed


def _lapt_budget(run: StageRun) -> dict[str, Any]:
    """Time the first steps of the LAPT run and fix its minutes budget as steps (``budget.json``)."""
    from focusflow.training.lapt_budget import plan_lapt_budget

    split_dir = run.input("split", SplitOutput)
    work = Path(run.settings.work_root or default_work_root()) / "lapt-budget"
    work.mkdir(parents=True, exist_ok=True)
    plan = plan_lapt_budget(run.inputs["model"], split_dir.train, split_dir.heldout,
                            run.settings.lapt, work_dir=work,
                            source_dir=run.inputs["source"] if "source" in run.artifacts else None,
                            progress=run.progress)
    return write_plan(run, plan, "LAPT")


# version 2: a CPU's steps are timed in the process's CPU time over its threads (a CPU-minute), not wall time. A
# distillation's plan comes before its teacher's states (they are stored for the steps it plans): it times its steps on
# states of its own texts
LAPT_BUDGET = register(Stage(BUDGET_STAGE, 2, ("model", "split"), _lapt_budget,
                             "a LAPT minutes budget fixed as a step count, timed on the machine that trains",
                             optional=("source",), key_params=budget_key_params, uses_model=True,
                             settings=LaptBudgetSettings, hints=RunHints(timeout_s=3600, gpu=True), record=BudgetRecord))


LAPT = register(Stage(LAPT_STAGE, LAPT_VERSION, ("model", "split"), _lapt, optional=("budget", "source", "teacher"),
                      description="language-adaptive pretraining, resumable, every checkpoint stored", uses_model=True,
                      work=("tokens", "tokens"), work_folder=True, settings=LaptSettings, key_params=lapt_key_params,
                      hints=RunHints(timeout_s=72 * 3600, gpu=True, checkpoints=True), record=LaptRecord))
