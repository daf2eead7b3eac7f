"""The loop's small parts: the trainable stages, the loss window between logged rows, the summary's loss figures."""

from __future__ import annotations

import pytest
import torch

from focusflow.training.monitor import LossWindow, loss_summary
from focusflow.training.optimization import decay_groups
from focusflow.training.recipe import Trainable, TrainingStage


def _trainable(stages: tuple[TrainingStage, ...]) -> Trainable:
    layer = torch.nn.Linear(2, 2)
    parameters = list(layer.parameters())
    return Trainable(layer, None, layer, parameters, decay_groups(parameters, 0.01), stages, "mlm")


def test_the_stage_of_a_step_is_the_last_one_begun():
    head, everything = TrainingStage("embeddings", 0, frozenset({1})), TrainingStage("full", 3, frozenset({1, 2}))
    trainable = _trainable((head, everything))
    assert [trainable.stage_at(step).name for step in range(5)] == ["embeddings"] * 3 + ["full"] * 2
    no_warm_up = _trainable((head, TrainingStage("full", 0, frozenset({1, 2}))))  # embeddings_only_fraction=0
    assert no_warm_up.stage_at(0).name == "full"
    with pytest.raises(ValueError, match="start at step 0"):
        _trainable((everything,))


def test_weight_decay_goes_to_matrices_only():
    layer = torch.nn.Linear(3, 2)
    groups = decay_groups(list(layer.parameters()), 0.1)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert groups[0]["params"][0] is layer.weight and groups[1]["params"][0] is layer.bias


def test_the_loss_window_averages_over_every_ranks_predictions_and_starts_afresh():
    window = LossWindow()
    window.add(seconds=0.5, loss=6.0, predicted=3.0, tokens=100)
    window.add(seconds=1.5, loss=2.0, predicted=1.0, tokens=300)

    def two_ranks(values: list[float]) -> list[float]:  # the other rank saw the same
        return [2 * v for v in values]

    assert window.close(two_ranks) == (pytest.approx(2.0), pytest.approx(200.0))  # 16 / 8; 400 tokens in 2 s
    assert window == LossWindow()


def test_the_loss_summary_reads_the_first_and_last_held_out_loss_and_the_last_train_loss():
    history = [{"step": 0, "heldout_loss": 7.0}, {"step": 4, "train_loss": 6.5},
               {"step": 8, "train_loss": 6.0, "heldout_loss": 6.2}, {"step": 10, "train_loss": 5.9}]
    assert loss_summary(history) == {"initial_heldout_loss": 7.0, "final_heldout_loss": 6.2, "final_train_loss": 5.9}
    assert loss_summary([]) == {"initial_heldout_loss": None, "final_heldout_loss": None, "final_train_loss": None}
