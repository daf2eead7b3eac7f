"""``fit``: the short in-memory runs (downstream fine-tuning, the source's MLM head) through the one training loop.

A short run hands the loop (``training.loop.TrainingRun``) a :class:`FitRecipe`: the step's loss (the batch of that
step, forward pass included), the dev evaluation it selects on, higher or lower being better. The loop's settings
for it have no checkpoints (a stop keeps nothing, nothing is written), a dev evaluation every ``eval_every`` steps
and at the last, optional patience, and the caller's own optimizer (``Optimization``); on return the parameters hold
the best evaluation's state. Every step, divergence check, evaluation cadence and keep-best is the loop's, the same as
LAPT's and align's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from focusflow.training.distributed import Distributed
from focusflow.training.loop import TrainingRun
from focusflow.training.optimization import Optimization
from focusflow.training.recipe import LoopSettings, RunRecipe, RunTotals, Trainable, TrainingStage


@dataclass
class FitResult:
    """The dev curve ``(step, score)``, the best evaluation's step and score, the measured seconds."""

    history: list[tuple[int, float]] = field(default_factory=list)
    best_step: int = 0
    best_score: float = math.nan
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    steps: int = 0  # the steps trained: ``total_steps``, or fewer when patience ran out


@dataclass(frozen=True)
class FitRecipe:
    """What a short run trains: ``loss(step)`` (the batch of that step, forward pass included) and ``evaluate()``
    (the dev score it keeps its best state by); ``name`` and ``lr`` for its error messages."""

    name: str
    loss: Callable[[int], torch.Tensor]
    evaluate: Callable[[], float]
    lr: float
    higher_is_better: bool = True


@dataclass(frozen=True)
class _Step:
    """A short run's one micro-batch: its step number (the recipe's ``loss`` fetches the batch); one "predicted"
    unit, so the loop's normalization leaves the recipe's mean loss as it is."""

    step: int
    predicted: int = 1


class ShortRun(RunRecipe):
    """A :class:`FitRecipe` as the loop's recipe: no checkpoints, the caller's optimizer, selection on the dev
    score."""

    def __init__(self, fit_recipe: FitRecipe, optimization: Optimization, parameters: Sequence[nn.Parameter],
                 total_steps: int, eval_every: int, evaluate_at_start: bool, patience: int | None,
                 on_step: Callable[[int, float, float | None], None] | None):
        self.spec, self.out_dir, self.progress = None, None, False
        self.fit_recipe, self.given, self.on_step = fit_recipe, optimization, on_step
        self.parameters = list(parameters)
        self.name, self.total_steps = fit_recipe.name, total_steps
        self.dist = Distributed(device=self.parameters[0].device)
        self.selection, self.selection_name = fit_recipe.evaluate, "dev score"
        self._settings = LoopSettings(lr=fit_recipe.lr, eval_every=eval_every, log_every=eval_every,
                                      evaluate_at_start=evaluate_at_start, patience=patience,
                                      higher_is_better=fit_recipe.higher_is_better)

    @property
    def settings(self) -> LoopSettings:
        return self._settings

    def build(self) -> Trainable:
        holder = nn.ParameterList(self.parameters)  # the same tensors, for the loop's view of "the model"
        trained = frozenset(id(p) for p in self.parameters if p.requires_grad)
        return Trainable(holder, None, holder, self.parameters, [], (TrainingStage("full", 0, trained),),
                         self.fit_recipe.name)

    def optimization(self, param_groups: list[dict[str, Any]], device: torch.device,
                     needs_scaler: bool) -> Optimization:
        return self.given

    def step_batches(self, start_step: int) -> Iterator[list[_Step]]:
        return ([_Step(step)] for step in range(start_step + 1, self.total_steps + 1))

    def micro_loss(self, module: nn.Module, batch: _Step) -> torch.Tensor:
        return self.fit_recipe.loss(batch.step)

    def step_size(self, micro_batches: list[_Step]) -> tuple[int, int]:
        return len(micro_batches), 0

    def evaluate(self) -> None:
        return None  # the dev score is the selection's

    def after_step(self, done: int, loss: float, last_score: float | None) -> None:
        if self.on_step is not None:
            self.on_step(done, loss, last_score)

    def summary(self, totals: RunTotals) -> dict[str, Any]:
        return {"steps": totals.state["step"], "train_seconds": totals.train_time}


def fit(recipe: FitRecipe, optimization: Optimization, parameters: Sequence[nn.Parameter], total_steps: int,
        eval_every: int, *, evaluate_at_start: bool = False, patience: int | None = None,
        on_step: Callable[[int, float, float | None], None] | None = None) -> FitResult:
    """Train for ``total_steps`` (fewer once ``patience`` evaluations in a row did not improve on the best) and return
    the dev curve; ``parameters`` then hold the best evaluation's state. ``on_step(step, loss, last_score)`` after
    every step."""
    run = TrainingRun(ShortRun(recipe, optimization, parameters, total_steps, eval_every, evaluate_at_start,
                               patience, on_step), resume=False)
    summary = run.train()
    best = run.best
    return FitResult(history=best.history, best_step=best.step, best_score=best.score,
                     train_seconds=summary["train_seconds"], eval_seconds=run.evaluations.seconds, steps=summary["steps"])
