"""A LAPT (or align) budget in minutes, fixed as a step count by timing the first steps on the machine that will train.

Stopping on a wall clock would make a model depend on how busy the machine was; instead the budget is
planned once: one warm-up step, then ``budget_probe_steps`` timed optimizer steps of the real run (same
model, data, batch, precision; per stage when LAPT is two-stage), and ``steps = minutes / seconds per step``.
On a CPU the steps are timed in the process's own CPU time over its threads (``machine.StepClock``): a CPU-minute of
a 2-thread run is a minute of both its cores, whatever else the machine runs meanwhile (a probe on a busy machine
once planned 104 steps for 20 minutes that then trained in 9.8); on an accelerator, in wall time.
The plan is stored (the ``lapt-budget`` stage) and the LAPT key depends on it, so a rerun trains exactly the
planned steps. The minutes count optimizer steps only: held-out evaluations and checkpoint writes come on top
(the run's summary reports the seconds it really trained).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from focusflow.config import ConfigError, LaptSpec
from focusflow.errors import InputError
from focusflow.logs import ProgressBar
from focusflow.training.loop import TrainingRun
from focusflow.training.machine import StepClock, machine_fingerprint
from focusflow.training.records import BudgetPlan

PROBE_STEPS_CEILING = 1_000_000  # the probe run's nominal length: long enough that both stages of a two-stage run exist


@dataclass(frozen=True)
class LaptBudget:
    """How a minutes budget became steps: what the LAPT run trains, and the measurement behind it."""

    minutes: float
    steps: int
    checkpoint_minutes: list[float]
    checkpoint_steps: list[int]
    seconds_per_step: float  # weighted over the stages
    stage_seconds_per_step: dict[str, float]
    tokens_per_step: int
    probe_steps: int
    clock: str = "cpu"  # what a second is: "cpu" (the process's CPU time over its threads) or "wall"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def steps_for_minutes(minutes: float, seconds_per_step: float) -> int:
    """Whole steps that fit in ``minutes`` (at least one)."""
    return max(1, math.floor(minutes * 60.0 / seconds_per_step + 1e-9))


def step_at_minutes(minutes: float, first_steps: int, first_seconds: float, then_seconds: float) -> int:
    """The step a run reaches after ``minutes``: ``first_steps`` at ``first_seconds`` each (a two-stage LAPT's
    embeddings-only stage), then ``then_seconds`` each; an average of the two put a 10-minute checkpoint of a
    two-stage run at 5 minutes of its training."""
    seconds = minutes * 60.0
    if first_steps and seconds <= first_steps * first_seconds:
        return steps_for_minutes(minutes, first_seconds)
    return max(1, first_steps + math.floor((seconds - first_steps * first_seconds) / then_seconds + 1e-9))


def plan_lapt_budget(model_dir: Path, train: Path, heldout: Path, spec: LaptSpec, *,
                     work_dir: Path | None = None, source_dir: Path | None = None, teacher_dir: Path | None = None,
                     progress: bool = False) -> LaptBudget:
    """Time the first steps of this LAPT run and fix ``spec.minutes`` (and ``checkpoint_minutes``) as steps. A
    distillation is timed as it trains, reading stored teacher states: ``teacher_dir``'s, else those of the probe's
    own texts, stored for it first. ``progress``: bars of the run's reading of its texts and of the timed steps (a
    distillation's take a minute or more)."""
    from focusflow.methods import learns_from_source
    from focusflow.training.lapt import lapt_run, with_objective_resolved
    from focusflow.training.teacher import store_teacher_states

    if not spec.needs_plan:
        raise InputError("plan_lapt_budget needs a minutes budget (lapt.minutes)")
    probe = spec.model_copy(update={"minutes": None, "checkpoint_minutes": [], "checkpoint_steps": [],
                                    "steps": PROBE_STEPS_CEILING})
    with tempfile.TemporaryDirectory(prefix="focusflow-lapt-budget-", dir=work_dir) as folder:
        distills = learns_from_source(with_objective_resolved(spec, model_dir).objective)
        if distills and teacher_dir is None and source_dir is not None:  # the states of what the timed steps read
            teacher_dir = Path(folder) / "teacher"
            store_teacher_states(source_dir, model_dir, train, heldout, teacher_dir,
                                 steps=spec.budget_probe_steps + 1, batch_size=spec.batch_size,  # one stage
                                 seq_len=spec.seq_len, eval_sequences=spec.eval_sequences, layers=spec.distill_layers,
                                 precision=spec.precision)
        run = lapt_run(model_dir, train, heldout, probe, Path(folder) / "run", resume=False, on_checkpoint=None,
                       progress=progress, source_dir=source_dir, teacher_dir=teacher_dir)
        # each training stage that trains at least one step (one starting where the next does never does)
        starts = {stage.first_step: stage.name for stage in run.trainable.stages}
        stages = {name: first for first, name in starts.items()}
        clock = StepClock(run.dist.device)
        steps = len(stages) * (spec.budget_probe_steps + 1)
        with ProgressBar("LAPT budget: timing the first steps", steps) if progress else contextlib.nullcontext() as bar:
            timed = {name: time_steps(run, first, spec.budget_probe_steps, clock, bar) for name, first in stages.items()}
    fraction = spec.embeddings_only_fraction if len(timed) == 2 else 0.0
    per_step = fraction * timed.get("embeddings", 0.0) + (1 - fraction) * timed["full"]
    steps = steps_for_minutes(spec.minutes, per_step)
    marks = sorted(set(spec.checkpoint_minutes))
    stage1 = round(fraction * steps)  # the run's cheaper embeddings-only steps come first (training.lapt)
    return LaptBudget(minutes=spec.minutes, steps=steps, checkpoint_minutes=marks,
                      checkpoint_steps=[min(steps, step_at_minutes(m, stage1, timed.get("embeddings", 0.0),
                                                                   timed["full"])) for m in marks],
                      seconds_per_step=per_step, stage_seconds_per_step=timed,
                      tokens_per_step=spec.batch_size * spec.seq_len, probe_steps=spec.budget_probe_steps,
                      clock=clock.kind)


def planned_spec(spec: LaptSpec, plan: BudgetPlan) -> LaptSpec:
    """``spec`` with its minutes budget replaced by the step count it was fixed at (a ``lapt-budget`` plan of the
    same minutes); checkpoint steps of the user's that the planned count does not reach are an error, as for a step
    budget."""
    if plan.minutes != spec.minutes or plan.checkpoint_minutes != sorted(set(spec.checkpoint_minutes)):
        raise InputError(f"the lapt-budget input plans {plan.minutes} minutes (checkpoints at "
                         f"{plan.checkpoint_minutes}), but lapt.minutes is {spec.minutes} "
                         f"({sorted(set(spec.checkpoint_minutes))}); plan the budget with the same settings")
    steps = plan.steps
    past = sorted(step for step in set(spec.checkpoint_steps) if step > steps)
    if past:
        raise ConfigError(f"lapt.checkpoint_steps {past} lie past the {steps} steps that lapt.minutes="
                          f"{spec.minutes:g} buys on this machine: they could never be written; give steps "
                          "within the budget, or checkpoint_minutes")
    return spec.model_copy(update={"minutes": None, "checkpoint_minutes": [], "steps": steps,
                                   "checkpoint_steps": sorted(set(spec.checkpoint_steps) | set(plan.checkpoint_steps))})


def time_steps(run: TrainingRun, first_step: int, count: int, clock: StepClock,
                bar: ProgressBar | None = None) -> float:
    """Median seconds (of ``clock``) of ``count`` optimizer steps from ``first_step``, after one untimed warm-up step
    (each counted on ``bar``, which goes on from where it is)."""
    batches = run.step_batches(first_step)
    seconds = []
    try:
        for index in range(count + 1):
            began = clock.now()
            run.step(first_step + index, next(batches))
            if index:
                seconds.append(clock.now() - began)
            if bar is not None:
                bar.update(bar.completed + 1)
    finally:
        batches.close()
    return float(sorted(seconds)[len(seconds) // 2])


__all__ = ["LaptBudget", "machine_fingerprint", "plan_lapt_budget", "planned_spec", "steps_for_minutes", "time_steps"]
