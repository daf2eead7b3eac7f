"""``fit``, the short in-memory runs (fine-tuning, the MLM head) through the one training loop: the parameters end
holding the best evaluation's state, a non-finite loss stops the run with the recipe's name, patience ends a run
whose dev score stopped rising, and a stop keeps nothing."""

from __future__ import annotations

import signal

import pytest
import torch

from focusflow import stopping
from focusflow.errors import TrainingDivergedError
from focusflow.stopping import StopRequested, request_stop
from focusflow.training.fit import FitRecipe, fit
from focusflow.training.optimization import Optimization


def _setup(lr: float = 0.1):
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([weight], lr=lr)
    return weight, Optimization(optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0))


def test_a_lower_is_better_run_ends_holding_the_state_of_its_lowest_evaluation_step_zero_included():
    weight, optimization = _setup()
    scores = iter([5.0, 3.0, 4.0, 6.0])
    recipe = FitRecipe("toy", lambda step: ((weight - 1.0) ** 2).sum(), lambda: next(scores), lr=0.1,
                       higher_is_better=False)
    seen: list[tuple[int, float | None]] = []
    states: dict[int, torch.Tensor] = {}

    def on_step(step: int, loss: float, last: float | None) -> None:
        seen.append((step, last))
        states[step] = weight.detach().clone()

    result = fit(recipe, optimization, [weight], total_steps=6, eval_every=2, evaluate_at_start=True, on_step=on_step)
    assert [step for step, _ in result.history] == [0, 2, 4, 6]
    assert (result.best_step, result.best_score) == (2, 3.0)
    assert torch.equal(weight.detach(), states[2])  # put back: the weights trained on to step 6, then step 2's
    assert 0.0 < float(states[2][0]) < float(states[6][0]) < 1.0
    assert seen == [(1, 5.0), (2, 3.0), (3, 3.0), (4, 4.0), (5, 4.0), (6, 6.0)]
    assert result.steps == 6 and result.train_seconds > 0 and result.eval_seconds >= 0


def test_a_non_finite_loss_stops_the_run_in_one_line_naming_the_run():
    weight, optimization = _setup()
    recipe = FitRecipe("fine-tuning", lambda step: weight.sum() * (float("inf") if step == 3 else 1.0),
                       lambda: 0.0, lr=0.1)
    with pytest.raises(TrainingDivergedError, match=r"fine-tuning diverged at step 3/5: .* lower the learning rate$"):
        fit(recipe, optimization, [weight], total_steps=5, eval_every=5)


def test_weights_that_end_non_finite_are_an_error_not_a_result():
    weight, optimization = _setup(lr=float("inf"))
    recipe = FitRecipe("MLM head training", lambda step: weight.sum(), lambda: 0.0, lr=float("inf"))
    with pytest.raises(TrainingDivergedError, match="MLM head training diverged: the weights hold non-finite values"):
        fit(recipe, optimization, [weight], total_steps=1, eval_every=1)


def test_a_non_finite_loss_never_reaches_the_callers_weights():
    weight, optimization = _setup()
    recipe = FitRecipe("fine-tuning", lambda step: weight.sum() * (float("nan") if step == 2 else 1.0), lambda: 0.0,
                       lr=0.1)
    with pytest.raises(TrainingDivergedError, match="at step 2/3"):
        fit(recipe, optimization, [weight], total_steps=3, eval_every=3)
    assert torch.isfinite(weight).all() and torch.allclose(weight.detach(), torch.full((3,), -0.1))  # step 1's


def test_weights_that_blew_up_are_an_error_even_when_an_earlier_evaluation_was_better():
    """Keeping the best state must not hide a run whose last update made its weights non-finite."""
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    optimization = Optimization(optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0))
    blow = {"up": False}  # the fourth step's gradient is infinite; its loss is finite
    weight.register_hook(lambda grad: grad * float("inf") if blow["up"] else grad)

    def loss(step: int) -> torch.Tensor:
        blow["up"] = step == 4
        return weight.sum()

    scores = iter([0.5, 0.1])
    recipe = FitRecipe("fine-tuning", loss, lambda: next(scores), lr=0.1)
    with pytest.raises(TrainingDivergedError, match="the weights hold non-finite values after 4 steps"):
        fit(recipe, optimization, [weight], total_steps=4, eval_every=2)


def test_a_stop_asked_before_a_short_run_starts_ends_it_before_its_first_step():
    weight, optimization = _setup()
    request_stop(signal.SIGTERM)
    try:
        with pytest.raises(StopRequested, match=r"at step 1/1 \(a short run"):
            fit(FitRecipe("MLM head training", lambda step: weight.sum(), lambda: 1.0, lr=0.1), optimization,
                [weight], total_steps=1, eval_every=1)
        assert torch.equal(weight.detach(), torch.zeros(3))
    finally:
        stopping.reset()


def test_a_run_evaluated_at_start_keeps_its_starting_state_even_when_no_score_is_a_number():
    weight, optimization = _setup()
    recipe = FitRecipe("toy", lambda step: weight.sum(), lambda: float("nan"), lr=0.1, higher_is_better=False)
    result = fit(recipe, optimization, [weight], total_steps=2, eval_every=1, evaluate_at_start=True)
    assert result.best_step == 0 and torch.equal(weight.detach(), torch.zeros(3))


def test_patience_stops_a_run_once_its_dev_score_stopped_rising():
    weight, optimization = _setup()
    scores = iter([0.3, 0.5, 0.6, 0.55, 0.6, 0.58, 0.7, 0.9])
    recipe = FitRecipe("fine-tuning", lambda step: weight.sum(), lambda: next(scores), lr=0.1)
    result = fit(recipe, optimization, [weight], total_steps=16, eval_every=2, patience=3)
    assert [step for step, _ in result.history] == [2, 4, 6, 8, 10, 12]  # 0.6 at step 6, then three without a new best
    assert (result.best_step, result.best_score, result.steps) == (6, 0.6, 12)
    unlimited = fit(FitRecipe("fine-tuning", lambda step: weight.sum(), lambda: 1.0, lr=0.1), optimization,
                    [weight], total_steps=16, eval_every=2)
    assert unlimited.steps == 16 and len(unlimited.history) == 8


def test_a_stop_ends_a_short_run_keeping_nothing():
    weight, optimization = _setup()

    def loss(step: int) -> torch.Tensor:
        if step == 2:
            request_stop(signal.SIGTERM)
        return weight.sum()

    try:
        with pytest.raises(StopRequested, match=r"in fine-tuning at step 2/9 \(a short run: nothing of it is kept\)"):
            fit(FitRecipe("fine-tuning", loss, lambda: 1.0, lr=0.1), optimization, [weight], total_steps=9,
                eval_every=3)
        assert stopping._kept == []  # no checkpoint named as kept
    finally:
        stopping.reset()


def test_a_run_is_converged_when_its_best_dev_step_came_before_its_last_tenth():
    from focusflow.evaluation.downstream.finetune import converged

    assert converged(60, 100) and converged(90, 100)
    assert not converged(91, 100) and not converged(132, 132) and not converged(0, 0)
