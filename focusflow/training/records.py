"""The records of the stages whose builds train or convert a model: the source, an initialized or aligned model,
LAPT, its checkpoints and its minutes budget (``storage.records``: read them, never the metadata dict)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from focusflow.storage.records import StageRecord


class SourceRecord(StageRecord):
    """The source stage: the converted source model's size."""

    stages = ("source",)
    n_params: int | None = None
    vocab_size: int | None = None


class AlignSummary(BaseModel):
    """What the align refinement recorded (``init.refine``): its budget, cost and the state it kept."""

    model_config = ConfigDict(extra="allow", frozen=True)
    steps: int | None = None
    tokens: int | None = None
    layer: int | None = None
    layers: list[int] | None = None  # the layers compared (loss=layers: several)
    loss: str | None = None  # cosine, mse, layers or kl
    depth: int | None = None  # the model's layers
    trainable_rows: int | None = None
    initial_heldout_loss: float | None = None
    final_heldout_loss: float | None = None
    train_seconds: float | None = None
    work_seconds: float | None = None  # on a minutes budget's clock: CPU time over the threads on a CPU (RunTotals)
    tokens_per_s: float | None = None
    selection: dict[str, Any] | None = None  # keep-best: measure, kept_step, why … (``TrainingRun``)
    weights_check: dict[str, Any] | None = None


class ModelRecord(StageRecord):
    """A model artifact's record: its size and the weight check of its last training (none for a plain init)."""

    stages = ("init", "align", "lapt", "lapt-checkpoint")
    n_params: int | None = None
    weights_check: dict[str, Any] | None = None
    align: AlignSummary | None = None
    added: int | None = None  # extend mode: the tokens added to the source's vocabulary, and their fates
    added_fates: dict[str, int] | None = None
    # a vocabulary from the source's (prune): how much of the held-out split it cuts as the source does
    reads_as_source: dict[str, float | int | None] | None = None
    prune_budget: float | None = None  # a pruned source's: the share of the source's parameters it was given
    within_budget: bool | None = None  # and whether it stayed within it (a decoder's body may exceed it alone)

    @property
    def recorded_weights_check(self) -> dict[str, Any] | None:
        """The check written with the model: its own training's, else its align refinement's."""
        return self.weights_check or (self.align.weights_check if self.align is not None else None)


class BudgetPlan(BaseModel):
    """A LAPT minutes budget fixed as steps (``budget.json`` of a ``lapt-budget`` artifact, and the LAPT record's
    ``budget``): the planned minutes and steps, and the steps of the minute marks to keep."""

    model_config = ConfigDict(extra="allow", frozen=True)
    minutes: float
    steps: int
    checkpoint_minutes: list[float] = []
    checkpoint_steps: list[int] = []
    train_seconds: float | None = None  # in the LAPT record's copy: the seconds it really trained, on the plan's clock
    #  (wall seconds of its last session before 29 Nov 2026)
    clock: str | None = None  # what the plan's seconds were: "cpu" (CPU time over threads) or "wall"


class BudgetRecord(StageRecord):
    """The lapt-budget and align-budget stages: the plan and the measurement behind it
    (``training.lapt_budget.LaptBudget``)."""

    stages = ("lapt-budget", "align-budget")
    minutes: float | None = None
    steps: int | None = None
    seconds_per_step: float | None = None
    tokens_per_step: int | None = None
    machine: dict[str, Any] | None = None
    clock: str | None = None  # "cpu": seconds are the process's CPU time over its threads; "wall" (or an older plan)


class LaptRecord(ModelRecord):
    """A finished LAPT run's summary (``TrainingRun``'s) and, for a minutes budget, its plan."""

    stages = ("lapt",)
    objective: str | None = None  # lapt.objective: mlm, distill, mlm+distill (before 29 Nov 2026 an MLM run wrote
    #  its LM loss here: mlm or clm)
    lm_loss: str | None = None  # the loss the model's head supports: mlm or clm
    steps: int | None = None
    tokens: int | None = None
    initial_heldout_loss: float | None = None
    final_heldout_loss: float | None = None
    final_train_loss: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    precision: str | None = None
    device: str | None = None
    world_size: int | None = None
    resumed_from: str | None = None
    trainable_parameters: int | None = None
    train_seconds_this_session: float | None = None
    work_seconds: float | None = None  # every session's, on a minutes budget's clock (RunTotals.work_seconds)
    peak_source: str | None = None  # what the MFU is measured against (``training.flops.Peak``)
    peak_gpu_memory_bytes: int | None = None
    budget: BudgetPlan | None = None

    @property
    def planned_minutes(self) -> float | None:
        """The minutes budget the run was planned with (None: a step budget)."""
        return self.budget.minutes if self.budget is not None and self.budget.minutes else None


class CheckpointRecord(ModelRecord):
    """One committed LAPT checkpoint: its run, step, the metrics of that step and, for a kept minute mark, its
    minutes."""

    stages = ("lapt-checkpoint",)
    run_key: str | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: dict[str, Any] = {}
    milestone: bool = False
    lapt_minutes: float | None = None

    @property
    def planned_minutes(self) -> float | None:
        return self.lapt_minutes or None
