"""The contract between the training loop and what it trains: a :class:`RunRecipe` (a loss with its data, its
settings) hands the loop (``training.loop.TrainingRun``) a :class:`Trainable` (model, trained parameters, stages);
the loop reads its cadences, checkpoints and patience as :class:`LoopSettings` and hands the recipe's summary its
:class:`RunTotals`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from focusflow.errors import InputError
from focusflow.precision import Precision
from focusflow.training.distributed import setup_distributed
from focusflow.training.optimization import Optimization


@dataclass(frozen=True)
class TrainingStage:
    """From optimizer step ``first_step`` on, exactly ``parameters`` (their ``id``s) receive gradients."""

    name: str
    first_step: int
    parameters: frozenset[int]


@dataclass
class Trainable:
    """What a recipe's ``build`` hands the loop: the whole of what it trains and how."""

    model: nn.Module  # the Hugging Face model being trained: saved with ``save_pretrained``
    tokenizer: Any  # saved beside it
    loss_model: nn.Module  # forward(micro-batch …) -> summed loss; the module DDP wraps
    parameters: list[nn.Parameter]  # every parameter the optimizer steps, in model order (clipped together)
    param_groups: list[dict[str, Any]]  # AdamW groups over ``parameters`` ("params", "weight_decay")
    stages: tuple[TrainingStage, ...]  # by ``first_step``; the first starts at step 0
    loss: str  # what the loop minimizes ("mlm", "clm", "distill", "align"): in checkpoints and the loss-curve title
    flops_per_token: float | None = None  # training FLOPs per token, for MFU (None: not reported)

    def __post_init__(self) -> None:
        starts = [stage.first_step for stage in self.stages]
        if not starts or starts[0] != 0 or starts != sorted(starts):
            raise ValueError(f"training stages must start at step 0 and be in step order, not {starts}")

    def stage_at(self, step: int) -> TrainingStage:
        return [stage for stage in self.stages if stage.first_step <= step][-1]


@dataclass(frozen=True)
class LoopSettings:
    """What the loop reads of a run's settings: a long run's spec gives them (``from_spec``: LAPT, align), a short
    run states them (``training.fit``)."""

    lr: float  # named in a diverged run's message
    eval_every: int
    log_every: int
    checkpoint_every: int | None = None  # None: the run is never checkpointed (it resumes from nothing, keeps nothing)
    keep_last: int = 0
    milestones: frozenset[int] = frozenset()  # steps checkpointed and evaluated besides every ``checkpoint_every``
    seed: int | None = None  # torch's seed before the model is built; None: the caller seeded
    precision: str = "fp32"
    evaluate_at_start: bool = True  # measure the start (the held-out loss, the selection's fallback)
    patience: int | None = None  # stop once that many evaluations in a row did not improve on the best
    higher_is_better: bool = False  # of the selection's measure

    @property
    def checkpointed(self) -> bool:
        return self.checkpoint_every is not None

    @classmethod
    def from_spec(cls, spec: Any) -> LoopSettings:
        """A long run's: checkpoints every ``checkpoint_every`` steps and at ``checkpoint_steps``, seeded by its spec."""
        return cls(lr=spec.lr, eval_every=spec.eval_every, log_every=spec.log_every,
                   checkpoint_every=spec.checkpoint_every, keep_last=spec.keep_last,
                   milestones=frozenset(getattr(spec, "checkpoint_steps", None) or ()), seed=spec.seed,
                   precision=spec.precision)


@dataclass(frozen=True)
class RunTotals:
    """What the loop hands a recipe's ``summary``: its counters and history (``state``), the training seconds of this
    session, where the session started and from which checkpoint, and the ceiling MFU is measured against."""

    state: dict[str, Any]
    train_time: float
    start_step: int
    start_tokens: int
    resumed_from: str | None
    peak_flops: float | None

    @property
    def tokens_per_s(self) -> float | None:
        """The tokens this session trained per second of its training time."""
        trained = self.state["tokens"] - self.start_tokens
        return trained / self.train_time if self.train_time > 0 else None

    @property
    def work_seconds(self) -> float | None:
        """The run's seconds of work over all its sessions, on the clock a minutes budget counts
        (``machine.StepClock``: CPU time over the threads on a CPU, wall time on an accelerator)."""
        worked = self.state.get("work_seconds")
        return round(float(worked), 3) if worked is not None else None


class RunRecipe:
    """What a run trains, handed to the loop (:class:`TrainingRun`): a loss with its data (LAPT's ``LaptRecipe``,
    the distillation's ``DistillRecipe``, align's ``AlignRecipe``). Its constructor prepares the data and sets
    ``total_steps``; the loop then calls, in this order,

    - ``begin(checkpoint, precision)`` once the resume point is known, which calls ``build() -> Trainable``,
    - ``restore_extras(checkpoint)`` when it resumes,
    - ``step_batches(start_step)``: each optimizer step's micro-batches (each with ``predicted``, the loss's
      normalizer), ``micro_loss(module, batch)``: a micro-batch's summed loss, ``step_size(batches)``: (samples,
      tokens) of a step; ``evaluate()``: the held-out loss, at the run's cadence,
    - ``write_model(folder)`` and ``write_extras(folder)`` for every checkpoint (``write_model`` for ``final/``),
    - ``summary(totals)``: the run's summary.

    ``settings`` (``LoopSettings``: cadences, checkpoints or none, patience), ``optimization(...)`` and
    ``after_step(...)`` have defaults a recipe may replace.
    """

    name = "training"
    # Spec fields that may change between a run and its resumption without changing the trajectory.
    resumable_changes: frozenset[str] = frozenset({"steps", "checkpoint_every", "keep_last", "eval_every", "log_every"})
    time_limit_s: float | None = None  # stop once this much work (StepClock seconds, all sessions) is spent
    total_steps: int
    # the measure a run keeps its best state by (which way is better: ``LoopSettings.higher_is_better``; its start
    # included where ``evaluate_at_start``), set by a recipe whose own loss is only a proxy (align) or that selects on
    # a dev score (``training.fit``); None: the last state is the result
    selection: Callable[[], float] | None = None
    selection_name: str = ""
    checkpoint: Path | None  # the checkpoint the run resumes from (``begin``)
    precision: Precision
    trainable: Trainable

    def __init__(self, spec: Any, out_dir: Path, progress: bool):
        self.spec, self.out_dir, self.progress = spec, Path(out_dir), progress
        self.dist = setup_distributed()

    def require_one_process(self, what: str) -> None:
        """Refuse a ``torchrun`` launch of a recipe that trains in one process."""
        if self.dist.world_size > 1:
            raise InputError(f"{what} runs in one process; launch it without torchrun")

    @staticmethod
    def require_model_folders(*folders: Path) -> None:
        """Refuse a folder that is not a saved Hugging Face model."""
        for folder in folders:
            if not (Path(folder) / "config.json").is_file():
                raise InputError(f"{folder} is not a Hugging Face model folder (no config.json); pass the output of "
                                 "save_pretrained")

    def begin(self, checkpoint: Path | None, precision: Precision) -> Trainable:
        """The model to train, built once the resume point and the precision are known."""
        self.checkpoint, self.precision = checkpoint, precision
        self.trainable = self.build()
        return self.trainable

    @property
    def hf_model(self) -> nn.Module:
        return self.trainable.model

    @property
    def loss_model(self) -> nn.Module:
        return self.trainable.loss_model

    def build(self) -> Trainable:
        raise NotImplementedError

    def step_batches(self, start_step: int) -> Iterator[list[Any]]:
        """Each optimizer step's micro-batches from ``start_step`` on (a function of the step: resume needs no state)."""
        raise NotImplementedError

    def micro_loss(self, module: nn.Module, batch: Any) -> torch.Tensor:
        """The summed loss of one micro-batch (normalized by the step's total ``predicted``)."""
        raise NotImplementedError

    def step_size(self, micro_batches: list[Any]) -> tuple[int, int]:
        """(samples, tokens) one step consumed, for the budget counters."""
        raise NotImplementedError

    def evaluate(self) -> float | None:
        """The held-out loss (None: the run has none; a short run measures only its ``selection``)."""
        raise NotImplementedError

    @property
    def settings(self) -> LoopSettings:
        return LoopSettings.from_spec(self.spec)

    def optimization(self, param_groups: list[dict[str, Any]], device: torch.device,
                     needs_scaler: bool) -> Optimization:
        """AdamW over the groups with the spec's rates and schedule (``Optimization.from_spec``)."""
        return Optimization.from_spec(param_groups, self.spec, self.total_steps, device, needs_scaler)

    def after_step(self, done: int, loss: float, last_score: float | None) -> None:
        """Called after every optimizer step with its summed loss and the last evaluation's score (none by default)."""

    def summary(self, totals: RunTotals) -> dict[str, Any]:
        raise NotImplementedError

    def write_model(self, folder: Path) -> None:
        """The model folder of a checkpoint and of ``final/``."""
        self.trainable.model.save_pretrained(folder)
        self.trainable.tokenizer.save_pretrained(folder)

    def write_extras(self, folder: Path) -> None:
        """Trained state a checkpoint needs that its model folder does not hold (none by default)."""

    def restore_extras(self, folder: Path) -> None:
        """Read back what ``write_extras`` wrote."""
