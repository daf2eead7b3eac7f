"""Keeping the best state: one rule for fine-tuning and the MLM head (``fit``) and for align's keep-best
(``TrainingRun``)."""

from __future__ import annotations

import math

import pytest

from focusflow.errors import TrainingDivergedError
from focusflow.training.optimization import cadence_due, require_finite_loss
from focusflow.training.selection import BestState, kept_reason


def test_a_lower_score_is_better_and_only_the_best_is_snapshotted():
    snapshots = iter(range(100))
    best = BestState(lambda: next(snapshots))
    assert [best.offer(step, score) for step, score in ((0, 5.0), (10, 4.0), (20, 4.5), (30, 3.0))] == \
        [True, True, False, True]
    assert (best.step, best.score, best.state) == (30, 3.0, 2)  # three snapshots taken, the third kept
    assert best.history == [(0, 5.0), (10, 4.0), (20, 4.5), (30, 3.0)]


def test_a_higher_score_is_better_when_asked():
    best = BestState(lambda: "state", higher_is_better=True)
    best.offer(1, 0.2)
    best.offer(2, 0.1)
    assert (best.step, best.score) == (1, 0.2)


def test_a_start_kept_as_the_fallback_even_when_its_score_is_nan():
    best = BestState(lambda: "start")
    assert best.offer(0, math.nan, keep=True) and best.state == "start"
    unkept = BestState(lambda: "start")
    assert not unkept.offer(5, math.nan) and unkept.state is None


def test_a_checkpoint_record_restores_the_same_best():
    best = BestState(lambda: "params")
    best.offer(0, 2.0, keep=True)
    best.offer(4, 1.5)
    again = BestState(lambda: "unused")
    again.restore(best.to_record(), "params")
    assert (again.history, again.step, again.score, again.state) == (best.history, 4, 1.5, "params")
    assert best.to_record() == {"selection": [[0, 2.0], [4, 1.5]], "best": {"step": 4, "score": 1.5}}


def test_the_reason_names_the_step_kept():
    best = BestState(lambda: None)
    for step, score in ((0, 2.0), (4, 2.5), (8, 2.6)):
        best.offer(step, score, keep=True)
    reason = kept_reason(best, "dev loss", last_step=8)
    assert reason["kept_step"] == 0 and reason["at_start"] == 2.0 and reason["at_end"] == 2.6
    assert reason["why"].startswith("no step improved on the start (2.0000; 2.6000 at step 8)")


def test_evaluations_fall_every_n_steps_at_marks_and_at_the_last():
    assert [d for d in range(1, 11) if cadence_due(d, 4, d == 10, marks={3})] == [3, 4, 8, 10]


def test_a_non_finite_loss_is_one_line_naming_the_learning_rate():
    require_finite_loss(1.5, "LAPT", " at step 3", 1e-4)
    with pytest.raises(TrainingDivergedError, match=r"LAPT diverged at step 3: the training loss became inf "
                                                    r"\(learning rate 0.0001\); lower the learning rate"):
        require_finite_loss(math.inf, "LAPT", " at step 3", 1e-4)


def test_evaluations_since_the_best_count_what_patience_waits_for():
    from focusflow.training.selection import BestState

    best = BestState(lambda: None, higher_is_better=True)
    for step, score in [(1, 0.2), (2, 0.5), (3, 0.4), (4, 0.5)]:
        best.offer(step, score)
    assert best.step == 2 and best.evaluations_since_best() == 2
    best.offer(5, 0.6)
    assert best.evaluations_since_best() == 0
