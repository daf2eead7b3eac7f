"""``fit``: the training loop of the short in-memory runs (downstream fine-tuning, the source's MLM head).

Each step computes the recipe's loss, refuses a non-finite one in one clear line, and steps through the
shared :class:`~focusflow.training.optimization.Optimization` (scaler, clipping, schedule); every ``eval_every``
steps and at the last one the dev evaluation runs, and the state of the best evaluation is kept in memory for
the caller to restore. The long runs that checkpoint to the store (LAPT, align) are ``training.loop.TrainingRun``:
both loops share every piece but the checkpoints — the optimizer step (``Optimization``), the divergence check
(``require_finite_loss``), the evaluation cadence (``cadence_due``) and the best-state keeping
(``training.selection.BestState``) — and differ in their recipe and data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from focusflow.stopping import check_stop
from focusflow.training.optimization import Optimization, all_finite, cadence_due, diverged, require_finite_loss
from focusflow.training.selection import BestState

State = dict[str, torch.Tensor]


@dataclass
class FitResult:
    """The dev curve ``(step, score)``, the best evaluation's step, score and state, the measured seconds."""

    history: list[tuple[int, float]] = field(default_factory=list)
    best_step: int = 0
    best_score: float = math.nan
    best_state: State | None = None
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    steps: int = 0  # the steps trained: ``total_steps``, or fewer when patience ran out


@dataclass(frozen=True)
class FitRecipe:
    """What a short run trains: ``loss(step)`` (the batch of that step, forward pass included), ``evaluate()`` (the dev
    score) and ``state()`` (a snapshot of what training changes); ``name`` and ``lr`` for its error messages."""

    name: str
    loss: Callable[[int], torch.Tensor]
    evaluate: Callable[[], float]
    state: Callable[[], State]
    lr: float
    higher_is_better: bool = True


def fit(recipe: FitRecipe, optimization: Optimization, parameters: Sequence[nn.Parameter], total_steps: int,
        eval_every: int, *, evaluate_at_start: bool = False, patience: int | None = None,
        on_step: Callable[[int, torch.Tensor, float | None], None] | None = None) -> FitResult:
    """Train for ``total_steps`` and return the dev curve with the best evaluation's state (not restored).

    ``patience``: stop once that many evaluations in a row did not improve on the best (the dev score has stopped
    rising); ``total_steps`` is then a maximum."""
    result = FitResult()
    best: BestState[State] = BestState(recipe.state, recipe.higher_is_better)
    parameters = list(parameters)

    def evaluate(step: int, keep: bool = False) -> None:
        started = time.perf_counter()
        score = float(recipe.evaluate())
        result.eval_seconds += time.perf_counter() - started
        best.offer(step, score, keep=keep)

    if evaluate_at_start:
        evaluate(0, keep=True)  # the starting state is the fallback even when its score is NaN
    for step in range(1, total_steps + 1):
        check_stop(f"in {recipe.name} at step {step}/{total_steps} (a short run: nothing of it is kept)")
        started = time.perf_counter()
        loss = recipe.loss(step)
        require_finite_loss(loss.item(), recipe.name, f" at step {step}/{total_steps}", recipe.lr)
        optimization.backward(loss)
        optimization.step(parameters)
        result.train_seconds += time.perf_counter() - started
        result.steps = step
        if cadence_due(step, eval_every, step == total_steps):
            evaluate(step)
        if on_step is not None:
            on_step(step, loss.detach(), best.history[-1][1] if best.history else None)
        if patience is not None and best.evaluations_since_best() >= patience:
            break
    if not all_finite(parameters):
        raise diverged(recipe.name, "", f"the weights hold non-finite values after {result.steps} steps",
                       recipe.lr)
    result.history, result.best_step, result.best_score, result.best_state = best.history, best.step, best.score, \
        best.state
    return result
